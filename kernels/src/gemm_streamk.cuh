/*
 * gemm_streamk.cuh: a stream-K tail for the persistent tiled kernels.
 *
 * A grid of G CTAs runs units [0, dp) whole, round-robin, then splits the
 * k-blocks of units [dp, dp + units) evenly over all G CTAs: laid end to
 * end (unit after unit, k-blocks in order), the span is cut into G
 * contiguous ranges, CTA b taking the b-th. A range covers the end of
 * one unit, whole units, and the start of another, so the last partial
 * wave of tiles costs a fraction of a tile instead of a whole one.
 *
 * Each CTA walks its range backwards, segment by segment (a segment: one
 * unit's k-blocks within the range). The segment holding a unit's last
 * k-block finishes it; segments that end before it are partials. So a
 * CTA's first segment (its range's end) may be a partial, which it
 * publishes: raw fp32 accumulators into its slot of the workspace, and a
 * flag once the stores have drained behind its next segment (before it
 * waits for anything, or at its end). Its last segment (the range's
 * start) may finish a unit whose earlier k-blocks lie in lower CTAs'
 * ranges: it waits for their flags and adds their partials, nearest CTA
 * first, then stores as a whole unit would. A CTA waits only for
 * lower-numbered CTAs, which publish
 * before they wait for anything, so with CTAs dispatched in order no
 * wait can deadlock, whatever else shares the GPU. The sum order is
 * fixed by the ranges: the same bits run to run.
 *
 * Flags hold the launch's epoch (a per-context counter), so nothing is
 * reset between launches and a stale flag never matches.
 */
#pragma once

#include "gemm_sm90.cuh"

namespace gemmk
{

struct SkParams {
    int dp;      /* units [0, dp) run whole */
    int units;   /* units [dp, dp + units) split by k-blocks; 0: none */
    int epoch;   /* this launch's flag value (never 0) */
    float *part; /* G x 2 slots of 64 x BN fp32 (fragment order) */
    int *flag;   /* G x 2 */
};

/* CTA b's k-block range [it0, it1) of the stream-K span. */
__device__ __forceinline__ void sk_range(const SkParams &sk, int nkb, int b,
                                         int g, long long &it0, long long &it1)
{
    const long long total = (long long)sk.units * nkb;
    const long long q = total / g, r = total % g;
    it0 = b * q + (b < r ? b : r);
    it1 = it0 + q + (b < r ? 1 : 0);
}

/* The segment that ends at pos (walking back from it1 to it0): unit u,
 * its k-blocks [kb0, kb1); pos moves to the segment's start. False when
 * the range is done. */
__device__ __forceinline__ bool sk_next(const SkParams &sk, int nkb,
                                        long long it0, long long &pos, int &u,
                                        int &kb0, int &kb1)
{
    if (pos <= it0)
        return false;
    const long long t = (pos - 1) / nkb;
    const long long start = it0 > t * nkb ? it0 : t * nkb;
    u = sk.dp + (int)t;
    kb0 = (int)(start - t * nkb);
    kb1 = (int)(pos - t * nkb);
    pos = start;
    return true;
}

__device__ __forceinline__ void sk_flag_set(int *f, int v)
{
    asm volatile("st.release.gpu.global.b32 [%0], %1;" ::"l"(f), "r"(v)
                 : "memory");
}

__device__ __forceinline__ int sk_flag_get(const int *f)
{
    int v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];"
                 : "=r"(v)
                 : "l"(f)
                 : "memory");
    return v;
}

/* Consumer c of CTA b writes its partial accumulators d (64 x BN) to
 * its slot. No fence: the stores drain while the consumer goes on to its
 * next segment, and sk_signal makes them visible later. */
template <int BN>
__device__ __forceinline__ void sk_publish(const SkParams &sk, int b, int c,
                                           const float (&d)[BN / 2], int tid)
{
    float4 *slot =
        reinterpret_cast<float4 *>(sk.part) + (size_t)(2 * b + c) * 16 * BN;
#pragma unroll
    for (int i = 0; i < BN / 8; i++)
        __stcg(&slot[i * 128 + tid],
               make_float4(d[4 * i], d[4 * i + 1], d[4 * i + 2], d[4 * i + 3]));
}

/* Consumer c of CTA b raises the flag of the partial it published: the
 * warpgroup barrier orders every thread's stores before thread 0's
 * release (cumulative at gpu scope). Called before the consumer waits
 * for anything, so no wait can form a cycle; by then the stores have
 * drained behind a main loop and the release costs little.
 * bar: the consumer warpgroup's named barrier. */
__device__ __forceinline__ void sk_signal(const SkParams &sk, int b, int c,
                                          int tid, int bar)
{
    asm volatile("bar.sync %0, 128;" ::"r"(bar) : "memory");
    if (tid == 0)
        sk_flag_set(&sk.flag[2 * b + c], sk.epoch);
}

__device__ __forceinline__ void sk_copy16(uint32_t dst, const float4 *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst),
                 "l"(src)
                 : "memory");
}

/* Group g of Q / 2 of this thread's float4s of slot into half g % 2 of
 * buf (each thread copies and later reads only its own). */
template <int Q>
__device__ __forceinline__ void sk_fetch(const float4 *slot, uint32_t buf,
                                         int g, int tid)
{
#pragma unroll
    for (int j = 0; j < Q / 2; j++)
        sk_copy16(buf + ((g % 2) * (Q / 2) + j) * 2048 + tid * 16,
                  &slot[(g * (Q / 2) + j) * 128 + tid]);
    asm volatile("cp.async.commit_group;" ::: "memory");
}

/* Consumer c of CTA b, finishing the unit whose k-blocks start at
 * iteration ts of the span: adds the partials of the lower CTAs whose
 * ranges reach into it, nearest first. A partial comes through buf (Q
 * float4s a thread: the consumer's store buffers, free by the time the
 * caller's bulk stores were read) by cp.async, two groups in flight, so
 * the reads are not held to the few the accumulators leave registers
 * for. */
template <int BN, int Q>
__device__ __forceinline__ void
sk_collect(const SkParams &sk, int nkb, int b, int g, int c, long long ts,
           float (&d)[BN / 2], uint32_t buf, int tid, int bar)
{
    constexpr int F = BN / 8; /* float4s a thread */
    static_assert(Q % 2 == 0 && F % (Q / 2) == 0, "groups of Q / 2");
    constexpr int G = F / (Q / 2);
    for (int o = b - 1; o >= 0; o--) {
        long long it0, it1;
        sk_range(sk, nkb, o, g, it0, it1);
        if (it1 <= ts)
            break;
        if (tid == 0)
            while (sk_flag_get(&sk.flag[2 * o + c]) != sk.epoch)
                __nanosleep(64);
        asm volatile("bar.sync %0, 128;" ::"r"(bar) : "memory");
        const float4 *slot = reinterpret_cast<const float4 *>(sk.part) +
                             (size_t)(2 * o + c) * 16 * BN;
        sk_fetch<Q>(slot, buf, 0, tid);
#pragma unroll
        for (int gi = 0; gi < G; gi++) {
            if (gi + 1 < G) {
                sk_fetch<Q>(slot, buf, gi + 1, tid);
                asm volatile("cp.async.wait_group 1;" ::: "memory");
            } else {
                asm volatile("cp.async.wait_group 0;" ::: "memory");
            }
#pragma unroll
            for (int j = 0; j < Q / 2; j++) {
                const int i = gi * (Q / 2) + j;
                float4 v;
                asm volatile(
                    "ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                    : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                    : "r"(buf + ((gi % 2) * (Q / 2) + j) * 2048 + tid * 16)
                    : "memory");
                d[4 * i] += v.x;
                d[4 * i + 1] += v.y;
                d[4 * i + 2] += v.z;
                d[4 * i + 3] += v.w;
            }
        }
    }
}

} // namespace gemmk
