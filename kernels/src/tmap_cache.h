/*
 * tmap_cache.h: a small cache of TMA tensor maps (CUtensorMap, 128 opaque
 * bytes), keyed by everything that goes into cuTensorMapEncodeTiled:
 * global address, element type, the two dims, the row stride, the box and
 * the swizzle. Plain C with the encoder passed in, so the CPU tests can
 * drive it with a fake encoder and no GPU.
 *
 * Not thread-safe: one cache per gemmk_ctx, used by its owning thread.
 */
#ifndef GEMMK_TMAP_CACHE_H
#define GEMMK_TMAP_CACHE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define GEMMK_ALIGN64 alignas(64)
extern "C" {
#else
#define GEMMK_ALIGN64 _Alignas(64)
#endif

typedef struct gemmk_tmap {
    GEMMK_ALIGN64 uint64_t opaque[16]; /* a CUtensorMap */
} gemmk_tmap;

typedef struct gemmk_tmap_key {
    uint64_t addr;       /* global address */
    uint64_t dim0, dim1; /* elements: inner (contiguous), outer */
    uint64_t stride1;    /* bytes between outer rows */
    uint32_t box0, box1; /* elements */
    uint32_t dtype;      /* gemm_dtype */
    uint32_t swizzle;    /* gemmk_swizzle */
} gemmk_tmap_key;

/* Fills *out for key; returns 0 on success, nonzero on failure. */
typedef int (*gemmk_tmap_encode_fn)(void *user, const gemmk_tmap_key *key,
                                    gemmk_tmap *out);

#define GEMMK_TMAP_CACHE_CAP 256

typedef struct gemmk_tmap_cache {
    gemmk_tmap maps[GEMMK_TMAP_CACHE_CAP];
    gemmk_tmap_key keys[GEMMK_TMAP_CACHE_CAP];
    uint64_t last_use[GEMMK_TMAP_CACHE_CAP]; /* 0: slot empty */
    uint64_t clock;
    uint64_t hits, misses, evictions;
    uint32_t entries;
    gemmk_tmap_encode_fn encode;
    void *user;
} gemmk_tmap_cache;

void gemmk_tmap_cache_init(gemmk_tmap_cache *c, gemmk_tmap_encode_fn encode,
                           void *user);

/*
 * Returns the cached map for key, encoding it on a miss (evicting the least
 * recently used entry when full). The pointer stays valid until the next
 * call on c. NULL when the encoder fails (nothing is cached then).
 */
const gemmk_tmap *gemmk_tmap_cache_get(gemmk_tmap_cache *c,
                                       const gemmk_tmap_key *key);

/* Drops entries whose address lies in [base, base + bytes). */
void gemmk_tmap_cache_forget(gemmk_tmap_cache *c, uint64_t base,
                             uint64_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* GEMMK_TMAP_CACHE_H */
