/*
 * rnd.h: a splitmix64 stream that several threads fill in parts. Draw i
 * (from 0) after state s is rnd_at(s, i), the value the (i + 1)-th call
 * of a sequential splitmix64 returns (the generator is a hashed counter),
 * so a part starts anywhere and the values are those of one thread
 * drawing in order, however the work is cut. gemmctl's random inputs and
 * fresh_cublas's (bench/e2e) are made so, by the caller and one thread
 * per idle CPU: 4096^2 16-bit values take ~70 ms on one core. Header
 * only: each user compiles its own copy.
 */
#ifndef GEMM_RND_H
#define GEMM_RND_H

#include <host.h>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define RND_GAMMA       0x9e3779b97f4a7c15ull
#define RND_PART        ((size_t)1 << 20) /* values a thread takes at least */
#define RND_MAX_THREADS 64

static inline uint64_t rnd_at(uint64_t s, uint64_t i)
{
    uint64_t z = s + (i + 1) * RND_GAMMA;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The values gemmctl and fresh_cublas make from a draw z: the q-th
 * (0..3) of four 16-bit values, (u - 32767.5) / 32768 (exact in fp32,
 * for the 16-bit types, which keep at most 11 significant bits), and an
 * fp32 value of 24 random bits, u / 2^23 - 1; both in [-1, 1). */
static inline float rnd_lane16(uint64_t z, unsigned q)
{
    return ((float)((z >> (16 * q)) & 0xffffu) - 32767.5f) * 0x1p-15f;
}

static inline float rnd_f24(uint64_t z)
{
    return (float)(z >> 40) * 0x1p-23f - 1.0f;
}

/* Fills values [lo, hi) of the caller's array. */
typedef void (*rnd_part_fn)(void *arg, size_t lo, size_t hi);

typedef struct rnd_job {
    rnd_part_fn fn;
    void *arg;
    size_t lo, hi;
} rnd_job;

static inline void *rnd_thread(void *p)
{
    rnd_job *j = p;
    j->fn(j->arg, j->lo, j->hi);
    return NULL;
}

/* Runs fn over [0, n) in parts whose bounds are multiples of unit, on at
 * most `threads` threads, the caller one of them (one part of RND_PART
 * values at least a thread); a thread that cannot start leaves its part
 * to the caller. */
static inline void rnd_parallel_on(size_t n, size_t unit, size_t threads,
                                   rnd_part_fn fn, void *arg)
{
    size_t t = threads;
    if (t > n / RND_PART)
        t = n / RND_PART;
    if (t > RND_MAX_THREADS)
        t = RND_MAX_THREADS;
    if (t <= 1) {
        fn(arg, 0, n);
        return;
    }
    rnd_job jobs[RND_MAX_THREADS];
    pthread_t th[RND_MAX_THREADS];
    int started[RND_MAX_THREADS];
    size_t per = ((n + t - 1) / t + unit - 1) / unit * unit;
    for (size_t i = 0; i < t; i++) {
        size_t lo = i * per < n ? i * per : n;
        size_t hi = lo + per < n ? lo + per : n;
        jobs[i] = (rnd_job){fn, arg, lo, hi};
        started[i] =
            i > 0 && pthread_create(&th[i], NULL, rnd_thread, &jobs[i]) == 0;
    }
    for (size_t i = 0; i < t; i++)
        if (!started[i])
            rnd_thread(&jobs[i]);
    for (size_t i = 1; i < t; i++)
        if (started[i])
            pthread_join(th[i], NULL);
}

/* rnd_parallel_on with the caller and one thread per idle CPU. */
static inline void rnd_parallel(size_t n, size_t unit, rnd_part_fn fn,
                                void *arg)
{
    rnd_parallel_on(n, unit, (size_t)host_idle_cpus() + 1, fn, arg);
}

#endif
