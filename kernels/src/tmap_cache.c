/*
 * tmap_cache.c: LRU cache of tensor maps (see tmap_cache.h). Linear scan
 * over at most 256 entries: a few hundred nanoseconds, nothing next to a
 * GEMM, and simpler than a hash table that must also evict.
 */
#include "tmap_cache.h"

#include <string.h>

static int key_eq(const gemmk_tmap_key *a, const gemmk_tmap_key *b)
{
    return a->addr == b->addr && a->dim0 == b->dim0 && a->dim1 == b->dim1 &&
           a->stride1 == b->stride1 && a->box0 == b->box0 &&
           a->box1 == b->box1 && a->dtype == b->dtype &&
           a->swizzle == b->swizzle;
}

void gemmk_tmap_cache_init(gemmk_tmap_cache *c, gemmk_tmap_encode_fn encode,
                           void *user)
{
    memset(c, 0, sizeof(*c));
    c->encode = encode;
    c->user = user;
}

const gemmk_tmap *gemmk_tmap_cache_get(gemmk_tmap_cache *c,
                                       const gemmk_tmap_key *key)
{
    int victim = 0;
    uint64_t oldest = UINT64_MAX;
    for (int i = 0; i < GEMMK_TMAP_CACHE_CAP; i++) {
        if (c->last_use[i] == 0) {
            if (oldest != 0) {
                oldest = 0;
                victim = i;
            }
            continue;
        }
        if (key_eq(&c->keys[i], key)) {
            c->last_use[i] = ++c->clock;
            c->hits++;
            return &c->maps[i];
        }
        if (c->last_use[i] < oldest) {
            oldest = c->last_use[i];
            victim = i;
        }
    }
    gemmk_tmap m;
    if (c->encode(c->user, key, &m) != 0)
        return NULL;
    c->misses++;
    if (c->last_use[victim] != 0)
        c->evictions++;
    else
        c->entries++;
    c->keys[victim] = *key;
    c->maps[victim] = m;
    c->last_use[victim] = ++c->clock;
    return &c->maps[victim];
}

void gemmk_tmap_cache_forget(gemmk_tmap_cache *c, uint64_t base, uint64_t bytes)
{
    for (int i = 0; i < GEMMK_TMAP_CACHE_CAP; i++) {
        if (c->last_use[i] != 0 && c->keys[i].addr >= base &&
            c->keys[i].addr - base < bytes) {
            c->last_use[i] = 0;
            c->entries--;
        }
    }
}
