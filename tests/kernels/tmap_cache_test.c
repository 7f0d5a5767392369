/*
 * tmap_cache_test.c: the tensor-map cache (kernels/src/tmap_cache.c) with a
 * fake encoder: keying on every field, hit/miss/eviction counters, LRU
 * order, encoder failure, forget. Runs on any CPU.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tmap_cache.h"

static int encodes;
static int fail_next;

static int fake_encode(void *user, const gemmk_tmap_key *key, gemmk_tmap *out)
{
    (void)user;
    if (fail_next) {
        fail_next = 0;
        return 1;
    }
    encodes++;
    memset(out, 0, sizeof(*out));
    out->opaque[0] = key->addr;
    out->opaque[1] = key->dim0 ^ (key->dim1 << 20) ^ key->stride1;
    out->opaque[2] = (uint64_t)encodes;
    return 0;
}

static gemmk_tmap_cache cache;

static gemmk_tmap_key key(uint64_t addr)
{
    gemmk_tmap_key k;
    memset(&k, 0, sizeof(k));
    k.addr = addr;
    k.dim0 = 4096, k.dim1 = 1024, k.stride1 = 8192;
    k.box0 = 64, k.box1 = 128, k.dtype = 1, k.swizzle = 1;
    return k;
}

static void setup(void)
{
    encodes = 0;
    fail_next = 0;
    gemmk_tmap_cache_init(&cache, fake_encode, NULL);
}

TestSuite(tmap_cache, .init = setup);

Test(tmap_cache, hit_after_miss)
{
    gemmk_tmap_key k = key(0x1000);
    const gemmk_tmap *a = gemmk_tmap_cache_get(&cache, &k);
    cr_assert_not_null(a);
    cr_expect_eq(cache.misses, 1);
    cr_expect_eq(cache.hits, 0);
    const gemmk_tmap *b = gemmk_tmap_cache_get(&cache, &k);
    cr_expect_eq(a, b);
    cr_expect_eq(cache.hits, 1);
    cr_expect_eq(encodes, 1, "encoded once");
    cr_expect_eq(cache.entries, 1);
}

Test(tmap_cache, every_field_is_key)
{
    gemmk_tmap_key base = key(0x2000);
    gemmk_tmap_cache_get(&cache, &base);
    gemmk_tmap_key v[8];
    for (int i = 0; i < 8; i++)
        v[i] = base;
    v[0].addr += 16;
    v[1].dim0 += 1;
    v[2].dim1 += 1;
    v[3].stride1 += 16;
    v[4].box0 = 32;
    v[5].box1 = 256;
    v[6].dtype = 2;
    v[7].swizzle = 2;
    for (int i = 0; i < 8; i++) {
        cr_assert_not_null(gemmk_tmap_cache_get(&cache, &v[i]));
        cr_expect_eq(cache.misses, (uint64_t)(i + 2), "field %d", i);
    }
    cr_expect_eq(cache.hits, 0);
    gemmk_tmap_cache_get(&cache, &base);
    cr_expect_eq(cache.hits, 1);
}

Test(tmap_cache, lru_eviction)
{
    for (int i = 0; i < GEMMK_TMAP_CACHE_CAP; i++) {
        gemmk_tmap_key k = key(0x10000 + 256 * (uint64_t)i);
        gemmk_tmap_cache_get(&cache, &k);
    }
    cr_expect_eq(cache.entries, GEMMK_TMAP_CACHE_CAP);
    gemmk_tmap_key first = key(0x10000);
    gemmk_tmap_cache_get(&cache, &first); /* touch: now most recent */
    cr_expect_eq(cache.hits, 1);
    gemmk_tmap_key extra = key(0x900000);
    gemmk_tmap_cache_get(&cache, &extra);
    cr_expect_eq(cache.evictions, 1);
    cr_expect_eq(cache.entries, GEMMK_TMAP_CACHE_CAP);
    gemmk_tmap_cache_get(&cache, &first);
    cr_expect_eq(cache.hits, 2, "touched entry survived");
    gemmk_tmap_key second = key(0x10000 + 256);
    uint64_t m = cache.misses;
    gemmk_tmap_cache_get(&cache, &second);
    cr_expect_eq(cache.misses, m + 1, "least recently used was evicted");
}

Test(tmap_cache, encoder_failure_caches_nothing)
{
    gemmk_tmap_key k = key(0x3000);
    fail_next = 1;
    cr_expect_null(gemmk_tmap_cache_get(&cache, &k));
    cr_expect_eq(cache.entries, 0);
    cr_expect_not_null(gemmk_tmap_cache_get(&cache, &k));
    cr_expect_eq(cache.entries, 1);
}

Test(tmap_cache, forget_range)
{
    gemmk_tmap_key a = key(0x4000), b = key(0x8000);
    gemmk_tmap_cache_get(&cache, &a);
    gemmk_tmap_cache_get(&cache, &b);
    gemmk_tmap_cache_forget(&cache, 0x4000, 0x1000);
    cr_expect_eq(cache.entries, 1);
    gemmk_tmap_cache_get(&cache, &b);
    cr_expect_eq(cache.hits, 1);
    gemmk_tmap_cache_get(&cache, &a);
    cr_expect_eq(cache.misses, 3);
}
