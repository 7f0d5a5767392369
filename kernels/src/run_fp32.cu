/*
 * run_fp32.cu: fp32 A/B on the tf32 tensor cores: "ws-tf32", "ws-3xtf32",
 * the ladder's rung 6 "wgmma-ws-tf32", and "auto" for fp32 inputs (tf32
 * or 3xTF32 by the precision asked for, or at fp32 precision the Ozaki-II
 * emulation "oz2-f32" where the cost model says it is faster: ozaki.cu).
 *
 * tf32: K-major operands are read in place, rounded to tf32 by the TMA
 * unit as it loads them (a TFLOAT32 tensor map: nearest, ties to even);
 * an MN-major one (trans_a, or B not trans_b) is first transposed and
 * rounded (ties away) into the context's pre-pass workspace, except on
 * ws-tf32's 128 x 256 plans where that pre-pass would weigh (rs_pays):
 * there an MN-major A's fragments go to wgmma from registers (read in
 * place, rounded by the TMA unit) and NN runs as D^T = B^T A^T, stored
 * transposed. ws-tf32's 128 x 256 plans store D through TMA under the
 * next tile (ws-tf32r: from registers, every MN-major operand through the
 * pre-pass).
 * 3xTF32: both operands always go through the pre-pass, which splits them
 * into big and small tf32 parts, K-concatenated (kern_tf32.cu); the GEMM
 * then runs over K' = 3 * kseg. Decode shapes (M <= 128) run
 * "ws-decode-tf32" or "ws-decode-3xtf32" instead: B read once, no
 * pre-pass of B (swap.cu, gemm_decode_tf32.cuh).
 */
#include <math.h>

#include "tiled.h"

namespace gemmk
{
namespace
{

/* The tiling every fp32 plan uses: one CTA per cluster, split-K by the
 * heuristic. */
const Tiling kTilingTf32 = {0, 1, 0, 0, 0, 0};
/* A from registers: the TMA-store kernel's 128 x 256 tiles only */
const Tiling kTilingTf32Rs = {256, 1, 0, 0, 0, 0};

size_t align256(size_t x)
{
    return (x + 255) & ~(size_t)255;
}

} // namespace

/* 3xTF32 promotion chunk in k-blocks of 32 (kernel PR); the knob
 * GEMMK_X3_PROMO overrides it. Measured error ~3.5e-7 * P / sqrt(K)
 * (random signed data); SGEMM's is ~4e-8..1.4e-7: P = sqrt(K) / 8 in
 * [4, 16] keeps within ~2x, and from K = 4096 on P = 16 (faster at no
 * worse error, docs/kernel-notes.md). */
int x3_promo(const gemmk_ctx *ctx, int64_t k)
{
    int v = ctx_knob(ctx, KNOB_X3_PROMO);
    if (v)
        return v;
    if (k >= 4096)
        return 16;
    int p = (int)(sqrt((double)k) / 8);
    return p < 4 ? 4 : p > 16 ? 16 : p;
}

/* What the pre-pass of an MN-major operand of `rows` rows would take of
 * p's GEMM, at rough rates (the pre-pass moves 8 bytes a value at ~3
 * TB/s; tf32 runs at ~330 TFLOP/s): 440 / M for NN's B, 440 / N for A. */
static double prepass_share(const gemmk_problem *p, int64_t rows)
{
    const double t_pre = 8.0 * (double)rows * (double)p->k / 3.0e12;
    const double t_mma = 2.0 * (double)p->m * p->n * p->k / 330e12;
    return t_pre / t_mma;
}

/* Whether the register path (A from registers, NN swapped) pays: where
 * the pre-pass it saves would take at least GEMMK_TF32_RS percent of the
 * GEMM (0: never). At locked clocks (ncu, H200, kernel-notes v26) the
 * register main loop takes what the descriptor one does at 8192^3
 * (3.13-3.20 against 3.12-3.16 ms) and the pre-pass it saves 0.148 ms
 * (4.7%); in alternating processes at boost the register path ran NN
 * +1.7% and TT +4.0% there. Below ~2% the pre-pass costs less than the
 * spread of the two main loops. */
static bool rs_pays(const gemmk_ctx *ctx, const gemmk_problem *p, int64_t rows)
{
    const int pct = ctx_knob(ctx, KNOB_TF32_RS);
    return pct > 0 && 100.0 * prepass_share(p, rows) >= pct;
}

/* p over k values as the problem its tiled plan is made for: a 16-bit one
 * of 2k, since a tf32 k-block (32 values) moves the bytes of a 16-bit one
 * (64) in the same tensor time at half the rate. */
static gemmk_problem as_16bit(const gemmk_problem *p, int64_t k)
{
    gemmk_problem q = *p;
    q.k = 2 * k;
    q.ab_type = GEMM_BF16;
    return q;
}

/* A stream-K tail for q's 128 x 256 tiles (q as_16bit) beyond what the
 * model asks for: where the tiles make at least 12 waves and the last is
 * at most 60% full. Measured (kernel-notes v25): at 8192^3 (15.5 waves,
 * the last 52% full) ws-tf32sk ahead of ws-tf32 in all ten same-block
 * pairs over four transposes (+0.5% to +11.6%, part of it the blocks'
 * order), this rule on against off in alternating processes +1.4% over
 * eight pairs (-2.1% to +4.2%); 16384^3 NT (62.1 waves, 6%) +1-2%; but
 * 12288^3 NT (34.9 waves, 91%) -3% to -5% and 6144^3 (8.7 waves, 73%)
 * -4% to -7%. The model's 5% rule (plan.cu sk_split) declines all four. */
static bool tf32_tail(const gemmk_ctx *ctx, const gemmk_problem *q, int bn)
{
    if (!ctx_knob(ctx, KNOB_TF32_TAIL) || bn != 256)
        return false;
    const int64_t s = ctx->num_sms;
    const int64_t t = cdiv(q->m, BM) * cdiv(q->n, bn);
    const int64_t last = t % s;
    return t >= 12 * s && last != 0 && 10 * last <= 6 * s;
}

/* The plan of tiled tf32 problem p under row tr (ws-tf32's family), made
 * for as_16bit(p); 128 x 256 tiles only where A goes from registers (rs).
 * On 128 x 256 tiles the row's TMA-store kernel (split plans store their
 * partials from registers), unsplit ones with its stream-K tail by the
 * row, the model or tf32_tail. */
static void plan_tf32(const gemmk_ctx *ctx, const gemmk_problem *p,
                      const Row &tr, bool rs, Plan *pl)
{
    const gemmk_problem q = as_16bit(p, p->k);
    plan(ctx, &q, rs ? kTilingTf32Rs : kTilingTf32, false, pl, 256);
    if (tr.tiling.epi && pl->bn == 256 && pl->cluster == 1) {
        pl->epi = tr.tiling.epi;
        if (pl->epi == 2 && pl->splits == 1)
            plan_sk(ctx, &q, tr.tiling.sk != 0 || tf32_tail(ctx, &q, pl->bn),
                    pl);
    }
}

gemm_error run_fp32(gemmk_ctx *ctx, const gemmk_problem *p, cudaStream_t stream,
                    const Row &row, gemmk_result *res)
{
    const bool rung6 = row.variant == F32_RUNG6;
    const bool autorow = (row.flags & ROW_AUTO) != 0;
    const bool three = row.variant == F32_3X || row.variant == F32_OZ ||
                       row.variant == F32_DECODE_X3 ||
                       (autorow && p->precision != GEMM_PRECISION_TF32);
    /* decode shapes: B read once, as tf32 or split in registers; at fp32
     * precision ahead of the emulation (which pays passes over B) unless
     * a modulus count asks for it */
    const char *dec = row.variant == F32_DECODE      ? "ws-decode-tf32"
                      : row.variant == F32_DECODE_X3 ? "ws-decode-3xtf32"
                      : autorow                      ? decode_fp32_auto(p)
                                                     : nullptr;
    if (dec) {
        res->kernel = row_find(dec)->d.name;
        return run_decode_tf32(ctx, p, stream, three);
    }
    /* fp32 accuracy on the int8 engine: by name, with an explicit modulus
     * count, or where the cost model says it beats 3xTF32; 3xTF32 runs
     * where the inputs do not allow it (inf/NaN, subnormals, a wide
     * spread) */
    if (row.variant == F32_OZ ||
        (autorow && three && p->cd_type == GEMM_FP32 && !p->host_mapped)) {
        const bool by_model = autorow && p->moduli == 0;
        const char *declined = nullptr;
        gemm_error e = oz_f32(ctx, p, stream, by_model, false, res, &declined);
        if (e != GEMM_OK || !declined)
            return e;
    }
    if (autorow || row.variant == F32_OZ)
        res->kernel = row_find(three ? "ws-3xtf32" : "ws-tf32")->d.name;
    else
        res->kernel = row.d.name;
    /* tiled tf32 (auto: ws-tf32's row) with the TMA-store kernel (the
     * row's epi), where the plan takes 128 x 256 tiles (smaller problems
     * keep their narrower or split tiles) and the pre-pass would take a
     * share of the GEMM worth saving (rs_pays): an MN-major A goes to
     * wgmma from registers, transposed as it is loaded (GEMMK_TF32_RS),
     * instead of through the pre-pass; with both operands row-major (NN)
     * and no split-K (whose partials would be D^T's) the kernel computes
     * D^T = B^T A^T, B^T then the MN-major A, and stores it transposed: no
     * pre-pass at all */
    const Row &tr = autorow ? *row_find("ws-tf32") : row;
    const bool ts = !three && !rung6 && tr.tiling.epi;
    const gemmk_problem *orig = p;
    gemmk_problem sw;
    Plan pl;
    bool wide = false;
    if (!three && !rung6) {
        plan_tf32(ctx, p, tr, false, &pl);
        wide = ts && ctx_knob(ctx, KNOB_TF32_RS) > 0 && pl.bn == 256 &&
               pl.cluster == 1;
    }
    if (wide && !p->trans_a && !p->trans_b && pl.splits == 1 &&
        rs_pays(ctx, p, p->n)) {
        sw = *p;
        sw.m = p->n, sw.n = p->m;
        sw.a = p->b, sw.b = p->a;
        sw.lda = p->ldb, sw.ldb = p->lda;
        sw.trans_a = 1, sw.trans_b = 1;
        Plan ps;
        plan_tf32(ctx, &sw, tr, true, &ps);
        if (ps.splits == 1) {
            p = &sw;
            pl = ps;
        }
    }
    const bool d_trans = p != orig;
    const int amn = p->trans_a ? 1 : 0;
    const int bmn = p->trans_b ? 0 : 1;
    const bool rs = wide && amn && (d_trans || rs_pays(ctx, p, p->m));
    const int64_t kseg = cdiv(p->k, 32) * 32;
    const int nseg = three ? 3 : 1;
    const bool pack_a = three || (amn && !rs), pack_b = three || bmn;
    const int64_t keff = three ? 3 * kseg : p->k;
    size_t bytes_a = pack_a ? align256((size_t)p->m * nseg * kseg * 4) : 0;
    size_t bytes_b = pack_b ? align256((size_t)p->n * nseg * kseg * 4) : 0;
    /* 3xTF32: the promoted accumulators, one 128 x 256 fp32 slot per CTA */
    size_t bytes_p =
        three ? (size_t)ctx->num_sms * BM * 256 * sizeof(float) : 0;
    gemm_error e;
    if (pack_a || pack_b) {
        e = ctx_grow(ctx, &ctx->prep, &ctx->prep_bytes,
                     bytes_a + bytes_b + bytes_p, stream);
        if (e != GEMM_OK)
            return e;
    }
    float *pa = ctx->prep;
    float *pb = reinterpret_cast<float *>(reinterpret_cast<char *>(ctx->prep) +
                                          bytes_a);
    if (pack_a)
        GEMMK_CK(ctx, tf32_pack(static_cast<const float *>(p->a), p->lda, amn,
                                p->m, p->k, three ? 1 : 0, pa, kseg, stream));
    if (pack_b)
        GEMMK_CK(ctx, tf32_pack(static_cast<const float *>(p->b), p->ldb, bmn,
                                p->n, p->k, three ? 2 : 0, pb, kseg, stream));

    if (rung6) {
        pl.bn = 128, pl.cluster = 1, pl.splits = 1, pl.pp = 0, pl.epi = 0;
        pl.kbps = (int)cdiv(keff, 32);
    } else if (three) {
        const gemmk_problem q = as_16bit(p, keff);
        plan(ctx, &q, kTilingTf32, false, &pl, ctx_knob(ctx, KNOB_X3_BN));
    }

    /* 3xTF32's parts are exact tf32 values; a tf32 operand read in place
     * is rounded by the TMA unit */
    const uint32_t map_type = three ? GEMM_FP32 : GEMMK_TMAP_TF32;
    gemmk_tmap_key ka = {};
    ka.addr = (uint64_t)(uintptr_t)(pack_a ? (const void *)pa : p->a);
    ka.dtype = map_type;
    ka.swizzle = GEMMK_SWIZZLE_128B;
    ka.dim0 = pack_a ? (uint64_t)(nseg * kseg) : (uint64_t)p->k;
    ka.dim1 = p->m;
    ka.stride1 = pack_a ? (uint64_t)(nseg * kseg) * 4 : (uint64_t)p->lda * 4;
    ka.box0 = 32;
    ka.box1 = rung6 ? 64 : BM;
    if (rs) { /* A stored k x m: boxes of 32 M x 32 k (tf32_frags.cuh) */
        ka.dim0 = (uint64_t)p->m;
        ka.dim1 = (uint64_t)p->k;
        ka.box1 = 32;
    }
    gemmk_tmap_key kb = {};
    kb.addr = (uint64_t)(uintptr_t)(pack_b ? (const void *)pb : p->b);
    kb.dtype = map_type;
    kb.swizzle = GEMMK_SWIZZLE_128B;
    kb.dim0 = pack_b ? (uint64_t)(nseg * kseg) : (uint64_t)p->k;
    kb.dim1 = p->n;
    kb.stride1 = pack_b ? (uint64_t)(nseg * kseg) * 4 : (uint64_t)p->ldb * 4;
    kb.box0 = 32;
    kb.box1 = (uint32_t)pl.bn;

    Launch l;
    e = set_maps(ctx, &ka, &kb, &l);
    if (e != GEMM_OK)
        return e;
    e = fill_params(ctx, p, pl, keff, 32, &l, stream);
    if (e != GEMM_OK)
        return e;
    l.tf32 = true;
    l.amn = rs ? 1 : 0;
    l.p.d_trans = d_trans ? 1 : 0;
    l.stream = stream;
    if (pl.epi) {
        e = pl.sk ? sk_params(ctx, pl, stream, &l) : GEMM_OK;
        if (e == GEMM_OK)
            e = tstore_map(ctx, orig, pl, &l);
        if (e != GEMM_OK)
            return e;
        GEMMK_CK(ctx, launch_tf32_ts(l, pl.epi));
        return finish_splits(ctx, p, pl, l.p, stream);
    }
    if (three) {
        l.p.pws =
            reinterpret_cast<float *>(reinterpret_cast<char *>(pb) + bytes_b);
        l.p.promo_first = (int)(2 * kseg / 32);
        l.p.promo = x3_promo(ctx, p->k);
        l.p.promo_skew = ctx_knob(ctx, KNOB_X3_SKEW);
    }
    if (rung6) {
        l.p.num_m = l.p.num_mu = (int)cdiv(p->m, 64);
        l.p.units = l.p.num_m * l.p.num_n;
        l.grid = l.p.units;
        GEMMK_CK(ctx, launch_tf32_ws64(l));
    } else {
        GEMMK_CK(ctx, launch_tf32(l, pl.bn,
                                  three ? ctx_knob(ctx, KNOB_X3_WHERE) : 0));
    }
    return finish_splits(ctx, p, pl, l.p, stream);
}

} // namespace gemmk
