/*
 * swap.cu: decode shapes (few rows of A, N and K in the thousands) as
 * their transpose, D^T = B^T A^T. N then runs on the kernel's 128-row
 * tiles and A's few rows on wgmma's N (a 64- or 128-wide tile), so no
 * tile multiplies 128 rows of which most are padding; K is split so that
 * every SM streams its share of B. The kernel writes fp32 partials of
 * D^T (N x M, one plane a split) and a second pass sums them in split
 * order (the same bits run to run) and writes D, transposed back through
 * shared memory, with alpha, beta and C. The second pass is a
 * programmatic dependent launch: its CTAs take the SMs as the first
 * kernel's leave and wait (griddepcontrol.wait) for all of its writes,
 * so the launch gap between the two is hidden.
 *
 * Up to 128 rows of an untransposed A take the decode kernel instead
 * (gemm_decode.cuh): no K split and nothing to sum, one read of B.
 */
#include <string.h>

#include "decode.h"
#include "knobs.h"
#include "tiled.h"

namespace gemmk
{
namespace
{

/* D (m x n) = alpha * sum_s ws[s]^T + beta * C, where ws[s] is n x ldw
 * (plane s of the transposed product's split partials). 32 x 32 blocks
 * through shared memory: read along ws's rows, written along D's. */
template <typename T>
__global__ void __launch_bounds__(256)
    reduce_t_kernel(const float *ws, long long ldw, int splits, int m, int n,
                    float alpha, float beta, const T *c, long long ldc, T *d,
                    long long ldd)
{
    __shared__ float tile[32][33];
    asm volatile("griddepcontrol.wait;" ::: "memory");
    const long long plane = (long long)n * ldw;
    const int tm = (m + 31) / 32;
    const long long blocks = (long long)tm * ((n + 31) / 32);
    const int x = threadIdx.x, y = threadIdx.y;
    for (long long b = blockIdx.x; b < blocks; b += gridDim.x) {
        const int r0 = (int)(b % tm) * 32, c0 = (int)(b / tm) * 32;
        for (int j = y; j < 32; j += 8) {
            const int col = c0 + j, r = r0 + x;
            float acc = 0.f;
            if (col < n && r < m)
                for (int s = 0; s < splits; s++)
                    acc += ws[s * plane + (long long)col * ldw + r];
            tile[j][x] = acc;
        }
        __syncthreads();
        for (int j = y; j < 32; j += 8) {
            const int r = r0 + j, col = c0 + x;
            if (r < m && col < n) {
                float v = alpha * tile[x][j];
                if (beta != 0.f)
                    v += beta * to_f32(c[r * ldc + col]);
                d[r * ldd + col] = from_f32<T>(v);
            }
        }
        __syncthreads();
    }
}

template <typename T>
cudaError_t reduce_t(const gemmk_problem *p, const KParams &kp, int splits,
                     cudaStream_t stream, int sms)
{
    long long blocks = cdiv(p->m, 32) * cdiv(p->n, 32);
    if (blocks > sms * 8LL)
        blocks = sms * 8LL;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)blocks, 1, 1);
    cfg.blockDim = dim3(32, 8, 1);
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    const float *ws = kp.ws;
    const long long ldw = kp.ldw;
    const int m = (int)p->m, n = (int)p->n;
    const T *c = static_cast<const T *>(p->beta != 0.f ? p->c : nullptr);
    T *d = static_cast<T *>(p->d);
    const long long ldc = p->ldc, ldd = p->ldd;
    cudaError_t e =
        cudaLaunchKernelEx(&cfg, reduce_t_kernel<T>, ws, ldw, splits, m, n,
                           p->alpha, p->beta, c, ldc, d, ldd);
    if (e != cudaSuccess)
        return e;
    return cudaGetLastError();
}

/* The swapped problem's plan: the narrowest tile holding its N (A's
 * rows), and the k-splits (at least 2: the partials are how D gets
 * transposed) that stream B fastest. The model: B's bytes over the SMs
 * that hold a unit, each at most kSmRate, all of them at most kHbmRate;
 * plus the partials written and read once. */
Plan swap_plan(const gemmk_ctx *ctx, const gemmk_problem *q)
{
    constexpr double kHbmRate = 3.0e12, kSmRate = 40e9;
    Plan pl = {};
    pl.bn = q->n <= 64 ? 64 : q->n <= 128 ? 128 : 256;
    pl.cluster = 1;
    const int64_t nkb = cdiv(q->k, BK), sms = ctx->num_sms;
    const int64_t tiles = cdiv(q->m, BM) * cdiv(q->n, pl.bn);
    const int forced = ctx_knob(ctx, KNOB_SWAP_SPLITS);
    double best = 1e30;
    for (int64_t s = 2; s <= 64 && s <= nkb; s++) {
        const int64_t kbps = cdiv(nkb, s), real = cdiv(nkb, kbps);
        if (real < 2 || (forced && real != forced))
            continue;
        const int64_t units = tiles * real, active = units < sms ? units : sms;
        const double rate =
            kHbmRate / active < kSmRate ? kHbmRate / active : kSmRate;
        const double t = cdiv(units, sms) * kbps * (BM * BK * 2.0) / rate +
                         2.0 * real * q->m * cdiv(q->n, 8) * 8 * 4.0 / kHbmRate;
        if (t < best * 0.98) {
            best = t;
            pl.splits = (int)real;
            pl.kbps = (int)kbps;
        }
    }
    if (best == 1e30) { /* one k-block, or a forced count that K lacks */
        pl.splits = nkb >= 2 ? 2 : 1;
        pl.kbps = (int)cdiv(nkb, pl.splits);
        pl.splits = (int)cdiv(nkb, pl.kbps);
    }
    return pl;
}

} // namespace

bool swap_fits(const gemmk_ctx *ctx, const gemmk_problem *p, const Plan &pl)
{
    /* up to KNOB_SWAP_ANY_M whatever the plain plan: at N = 28672 (the
     * plain plan one partial wave of 128 x 256 tiles) M = 1 .. 32 ran
     * 9-18% faster swapped, M = 64 4-5% slower (kernel-notes v11) */
    return (p->ab_type == GEMM_BF16 || p->ab_type == GEMM_FP16) &&
           !p->host_mapped && p->m <= ctx_knob(ctx, KNOB_SWAP_M) &&
           p->n >= 1024 && p->k >= 1024 &&
           (pl.splits > 1 || pl.bn == 64 ||
            p->m <= ctx_knob(ctx, KNOB_SWAP_ANY_M));
}

bool decode_fits(const gemmk_ctx *ctx, const gemmk_problem *p)
{
    /* past 64 rows of A only where every tile has an SM of its own: the
     * 96- and 128-wide stages need a deep ring (kernel-notes v13: 80 x
     * 8192 x 8192 0.78 -> 0.95, 80 x 28672 x 8192 0.98 -> 0.51) */
    return (p->ab_type == GEMM_BF16 || p->ab_type == GEMM_FP16) &&
           !p->host_mapped && !p->trans_a && p->m >= 1 &&
           p->m <= ctx_knob(ctx, KNOB_DECODE_M) && p->m <= 128 &&
           p->n >= 1024 && p->k >= 1024 &&
           (p->m <= 64 || cdiv(p->n, 64) <= ctx->num_sms);
}

/* What both decode kernels take from p (stages left to the caller):
 * kvals values of K a k-block. */
static DecodeParams decode_params(const gemmk_ctx *ctx, const gemmk_problem *p,
                                  int kvals)
{
    DecodeParams dp = {};
    dp.rows = (int)p->n, dp.cols = (int)p->m;
    dp.nkb = (int)cdiv(p->k, kvals);
    dp.cd_type = p->cd_type;
    dp.hint = ctx_knob(ctx, KNOB_DECODE_HINT) > 0;
    dp.alpha = p->alpha, dp.beta = p->beta;
    dp.d = p->d;
    dp.c = p->beta != 0.f ? p->c : nullptr;
    dp.ldd = p->ldd, dp.ldc = p->ldc;
    return dp;
}

/* The rows of B^T a ws-decode tile takes: 128 (the pair, two consumers
 * on 64 rows each) for variant 2, 256 (the quad, two consumers on 128
 * each) for variant 3, 64 (one consumer) for variant 1 or M > 64; auto's
 * (variant 0) the pair where the 64-row tiles would be more than two an
 * SM (GEMMK_DECODE_PAIR), the quad there when B is row-major
 * (GEMMK_DECODE_QUAD: 1-3% faster at N = 20480 and 28672, 2% slower with
 * B transposed, kernel-notes v23). */
static int decode_rows(const gemmk_ctx *ctx, const gemmk_problem *p,
                       int variant)
{
    if (p->m > 64 || variant == 1)
        return 64;
    if (variant == 2 || variant == 3)
        return variant == 2 ? 128 : 256;
    if (!ctx_knob(ctx, KNOB_DECODE_PAIR) ||
        cdiv(p->n, 64) <= 2ll * ctx->num_sms)
        return 64;
    return ctx_knob(ctx, KNOB_DECODE_QUAD) && !p->trans_b ? 256 : 128;
}

gemm_error run_decode(gemmk_ctx *ctx, const gemmk_problem *p,
                      cudaStream_t stream, const Row &row, gemmk_result *res)
{
    res->kernel = row.d.name;
    if (p->host_mapped || p->trans_a) {
        ctx_say(ctx, "%s reads an untransposed A in device memory only",
                row.d.name);
        return GEMM_ERR_UNSUPPORTED;
    }
    DecodeLaunch l = {};
    l.bn = p->m < 128 ? (int)cdiv(p->m, 8) * 8 : 128; /* 8 .. 128 */
    gemmk_tmap_key ka = {}, kb = {};
    ka.addr = (uint64_t)(uintptr_t)p->b;
    ka.dtype = kb.dtype = p->ab_type;
    ka.swizzle = kb.swizzle = GEMMK_SWIZZLE_128B;
    ka.stride1 = (uint64_t)p->ldb * 2;
    ka.dim0 = p->trans_b ? p->k : p->n;
    ka.dim1 = p->trans_b ? p->n : p->k;
    ka.box0 = 64, ka.box1 = 64;
    kb.addr = (uint64_t)(uintptr_t)p->a;
    kb.stride1 = (uint64_t)p->lda * 2;
    kb.dim0 = p->k, kb.dim1 = p->m, kb.box0 = 64, kb.box1 = (uint32_t)l.bn;
    gemm_error e = ctx_map(ctx, &ka, &l.ta);
    if (e == GEMM_OK)
        e = ctx_map(ctx, &kb, &l.tb);
    if (e != GEMM_OK)
        return e;
    l.p = decode_params(ctx, p, BK);
    l.rows = decode_rows(ctx, p, row.variant);
    const int rows = l.rows;
    l.grid = (int)cdiv(p->n, rows);
    l.grid_y = (int)cdiv(p->m, l.bn);
    const int forced = ctx_knob(ctx, KNOB_DECODE_STAGES);
    const int most = decode_stages(l.bn, 1, 1, rows); /* one CTA an SM */
    l.p.stages = forced >= 2 ? (forced < most ? forced : most)
                             : decode_stages(l.bn, (long long)l.grid * l.grid_y,
                                             ctx->num_sms, rows);
    l.f16 = p->ab_type == GEMM_FP16;
    l.amn = p->trans_b ? 0 : 1;
    l.stream = stream;
    GEMMK_CK(ctx, launch_decode(l));
    return GEMM_OK;
}

static bool decode_tf32_fits(const gemmk_problem *p)
{
    /* M <= 128 with N, K in the thousands: reading B once beats the
     * pre-pass's transpose (tf32) or split (3xTF32) of B through memory at
     * every such shape (kernel-notes v19, v20) */
    return p->ab_type == GEMM_FP32 && !p->host_mapped && !p->trans_a &&
           p->m >= 1 && p->m <= 128 && p->n >= 1024 && p->k >= 1024;
}

const char *decode_fp32_auto(const gemmk_problem *p)
{
    if (!decode_tf32_fits(p))
        return nullptr;
    if (p->precision == GEMM_PRECISION_TF32)
        return "ws-decode-tf32";
    return p->moduli == 0 ? "ws-decode-3xtf32" : nullptr;
}

gemm_error run_decode_tf32(gemmk_ctx *ctx, const gemmk_problem *p,
                           cudaStream_t stream, bool x3)
{
    const char *name = x3 ? "ws-decode-3xtf32" : "ws-decode-tf32";
    if (p->host_mapped || p->trans_a) {
        ctx_say(ctx, "%s reads an untransposed A in device memory only", name);
        return GEMM_ERR_UNSUPPORTED;
    }
    DecodeLaunch l = {};
    l.tf32 = true;
    l.x3 = x3;
    /* M rounded up to a wgmma width; rows past M come in as zeros */
    l.bn = p->m <= 8    ? 8
           : p->m <= 16 ? 16
           : p->m <= 32 ? 32
           : p->m <= 64 ? 64
                        : 128;
    /* 128-row tiles where the 64-row ones would outnumber what the SMs
     * hold at once (one CTA an SM at 64 rows, two at 128); for 3xTF32 up
     * to width 16 only: wider, its second accumulators and split words do
     * not fit two CTAs an SM (96 registers) */
    l.rs = cdiv(p->n, 128) >= ctx->num_sms && (!x3 || l.bn <= 16);
    const int rows = l.rs ? 128 : 64;
    /* B read in place: rounded to tf32 by the TMA unit, or (x3) exact, to
     * be split in registers */
    gemmk_tmap_key ka = {}, kb = {};
    ka.addr = (uint64_t)(uintptr_t)p->b;
    ka.dtype = x3 ? GEMM_FP32 : GEMMK_TMAP_TF32;
    ka.swizzle = kb.swizzle = GEMMK_SWIZZLE_128B;
    ka.stride1 = (uint64_t)p->ldb * 4;
    ka.dim0 = p->trans_b ? p->k : p->n;
    ka.dim1 = p->trans_b ? p->n : p->k;
    ka.box0 = 32; /* 128 bytes: 32 k-values, or 32 rows of B^T */
    ka.box1 = p->trans_b ? rows : 32;
    /* A in place (tf32), or (x3) split by the pre-pass into [small | big |
     * big] segments of kseg values, the kernel reading the first two */
    const int64_t kseg = cdiv(p->k, 32) * 32;
    kb.dtype = GEMMK_TMAP_TF32;
    kb.addr = (uint64_t)(uintptr_t)p->a;
    kb.stride1 = (uint64_t)p->lda * 4;
    kb.dim0 = (uint64_t)p->k;
    if (x3) {
        gemm_error e = ctx_grow(ctx, &ctx->prep, &ctx->prep_bytes,
                                (size_t)p->m * 3 * kseg * 4, stream);
        if (e != GEMM_OK)
            return e;
        GEMMK_CK(ctx, tf32_pack(static_cast<const float *>(p->a), p->lda, 0,
                                p->m, p->k, 1, ctx->prep, kseg, stream));
        kb.dtype = GEMM_FP32;
        kb.addr = (uint64_t)(uintptr_t)ctx->prep;
        kb.stride1 = (uint64_t)(3 * kseg) * 4;
        kb.dim0 = (uint64_t)(3 * kseg);
    }
    kb.dim1 = p->m, kb.box0 = 32, kb.box1 = (uint32_t)l.bn;
    gemm_error e = ctx_map(ctx, &ka, &l.ta);
    if (e == GEMM_OK)
        e = ctx_map(ctx, &kb, &l.tb);
    if (e != GEMM_OK)
        return e;
    l.p = decode_params(ctx, p, 32); /* 32 fp32 a k-block */
    l.p.kseg = (int)kseg;
    /* ws-3xtf32's chunk counts k-blocks of its 3K concatenation */
    const int promo = x3 ? x3_promo(ctx, p->k) / 3 : 1;
    l.p.promo = promo > 1 ? promo : 1;
    l.grid = (int)cdiv(p->n, rows);
    l.grid_y = (int)cdiv(p->m, l.bn);
    l.p.stages =
        decode_tf32_stages(l.bn, rows, (long long)l.grid * l.grid_y,
                           ctx->num_sms, ctx_knob(ctx, KNOB_DECODE_STAGES), x3);
    /* B row-major: B^T's tile is MN-major, read into registers (2) or
     * transposed in shared memory (1): the latter where 128-wide
     * accumulators share an SM with a second CTA (128 x 28672 0.49 -> 0.63
     * of cuBLAS, kernel-notes v20); 3xTF32 always splits in registers */
    const bool regs =
        x3 || (ctx_knob(ctx, KNOB_DECODE_REGS) && !(l.rs && l.bn == 128));
    l.amn = p->trans_b ? 0 : regs ? 2 : 1;
    l.stream = stream;
    GEMMK_CK(ctx, launch_decode(l));
    return GEMM_OK;
}

gemm_error run_swapped(gemmk_ctx *ctx, const gemmk_problem *p,
                       cudaStream_t stream, const Row &row, gemmk_result *res)
{
    res->kernel = row.d.name;
    if (p->host_mapped) {
        ctx_say(ctx, "%s reads device memory only", row.d.name);
        return GEMM_ERR_UNSUPPORTED;
    }
    if (cdiv(p->k, BK) < 2) /* one k-block: nothing to split, run as is */
        return run_tiled16(ctx, p, stream, row, res);
    /* D^T = B^T A^T: A' is B read the other way, B' is A */
    gemmk_problem q = *p;
    q.m = p->n, q.n = p->m;
    q.a = p->b, q.lda = p->ldb, q.trans_a = !p->trans_b;
    q.b = p->a, q.ldb = p->lda, q.trans_b = !p->trans_a;
    q.c = nullptr, q.beta = 0.f; /* C is the reduction's */
    const Plan pl = swap_plan(ctx, &q);
    const Row *run = plan_row(pl);
    if (!run || pl.splits < 2) {
        ctx_say(ctx, "no kernel for the plan of %s", row.d.name);
        return GEMM_ERR_INTERNAL;
    }
    Launch l;
    gemm_error e = fill_params(ctx, &q, pl, q.k, BK, &l, stream);
    if (e == GEMM_OK)
        e = tiled16_maps(ctx, &q, pl, &l);
    if (e != GEMM_OK)
        return e;
    memset(&l.td, 0, sizeof(l.td));
    l.stream = stream;
    GEMMK_CK(ctx, run->launch(l));
    if (p->cd_type == GEMM_FP32)
        GEMMK_CK(ctx, reduce_t<float>(p, l.p, pl.splits, stream, ctx->num_sms));
    else if (p->cd_type == GEMM_BF16)
        GEMMK_CK(ctx, reduce_t<__nv_bfloat16>(p, l.p, pl.splits, stream,
                                              ctx->num_sms));
    else
        GEMMK_CK(ctx,
                 reduce_t<__half>(p, l.p, pl.splits, stream, ctx->num_sms));
    return GEMM_OK;
}

} // namespace gemmk
