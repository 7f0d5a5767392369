/*
 * bench_util.h: what the C benchmark programs share: a monotonic clock in
 * seconds and a seeded generator (splitmix64) for their random inputs,
 * so that runs with one seed draw the same matrices.
 */
#ifndef GEMMD_BENCH_UTIL_H
#define GEMMD_BENCH_UTIL_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in seconds. */
static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The next value of the splitmix64 sequence in *s. */
static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static inline uint64_t rng_range(uint64_t *s, uint64_t lo, uint64_t hi)
{
    return lo + rng_next(s) % (hi - lo + 1);
}

/* Uniform in [-1, 1), never exactly 0. */
static inline float rng_unit(uint64_t *s)
{
    float x = (float)((rng_next(s) >> 40) * (1.0 / (1ull << 24))) * 2 - 1;
    return x == 0.0f ? 0.5f : x;
}

#endif
