/*
 * plan.cu: the shape heuristic. A cost model (waves of work units over
 * the co-resident CTAs, each bounded by the tensor rate or L2 bandwidth,
 * never faster than reading A and B once from DRAM, plus split-K traffic)
 * picks tile width, cluster and split-K among what a row's tiling allows;
 * "auto" then prefers the TMA-store epilogue for 128 x 256 tiles (one partial
 * wave included: 2048^3 measured 1.07x cuBLAS with it, 0.92x with the
 * ping-pong kernel, which stays by name), with a stream-K tail where the
 * last wave is mostly empty. The measurements behind the rules are
 * in docs/kernel-notes.md.
 */
#include "gemm_sm90.cuh"
#include "plan.h"

namespace gemmk
{
namespace
{

constexpr double kL2Bytes = 40e6; /* of the H100's and H200's 50 MB */

/* Estimated seconds for a (bn, cluster, splits) choice. The rates are
 * rough H100 numbers; only their ratios matter. */
double estimate(const gemmk_ctx *ctx, const gemmk_problem *p, int bn, int cl,
                int splits, int *kbps_out, int *splits_out)
{
    int64_t nkb = cdiv(p->k, BK);
    int64_t kbps = cdiv(nkb, splits);
    int64_t real = cdiv(nkb, kbps);
    int64_t units = cdiv(cdiv(p->m, BM), cl) * cdiv(p->n, bn) * real;
    int64_t slots = cl == 2 ? ctx->max_clusters2 : ctx->num_sms;
    if (slots < 1)
        return 1e30;
    int64_t waves = cdiv(units, slots);
    int64_t active = (units < slots ? units : slots) * cl;
    /* 16-bit 128 x 256 without a cluster or split and M >= 512 gets the
     * TMA-store epilogue (plan()), measured ~10% faster (3072x2048x1024:
     * 0.92 of cuBLAS against 0.79 with 128 x 128 tiles) */
    const bool epi = p->ab_type != GEMM_FP32 && p->m >= 512 && real == 1;
    double eff = bn == 256   ? (cl == 2 ? 1.05
                                : epi   ? 1.1
                                        : 1.0)
                 : bn == 192 ? 1.0
                 : bn == 128 ? 0.88
                             : 0.75;
    double flop = 2.0 * BM * bn * kbps * BK;
    double t_mma = flop / (660e12 * eff / ctx->num_sms);
    double rows = (double)(p->m < BM ? p->m : BM) + bn / cl;
    double t_l2 = rows * kbps * BK * 2.0 / (8e12 / active);
    double t = waves * (t_mma > t_l2 ? t_mma : t_l2);
    double t_dram = operand_bytes(p) / 3.0e12;
    if (t < t_dram)
        t = t_dram;
    if (real > 1)
        t += 3.0e-6 + 3.0 * real * p->m * p->n * 4.0 / 3.0e12;
    *kbps_out = (int)kbps;
    *splits_out = (int)real;
    return t;
}

} // namespace

double operand_bytes(const gemmk_problem *p)
{
    return 2.0 * (double)(p->m * p->k + p->k * p->n);
}

/* Whether reading p's operands once from DRAM takes longer than its
 * tensor work (the rates of estimate()). */
static bool dram_bound(const gemmk_problem *p)
{
    return operand_bytes(p) / 3.0e12 > 2.0 * p->m * p->n * p->k / 660e12;
}

/* Whether the TMA-store kernel's last partial wave runs stream-K, and
 * from which unit: always when the row says so (forced), else where
 * sk_split's model gains 5%. Measured on the H200 (v14, stream-K against
 * the plain tail): 256 and 384 x 28672 x 8192 (DRAM 0.87 and 0.58 of the
 * tiles' time) -25% and -10%; 512, 640 and 768 x 28672, 768 x 12288, 640
 * x 16384 (0.29-0.45) +1% to +22%. v15, once the fix-up cost 7 us
 * instead of 15: 2560^3 on 128 x 256 tiles (0.96 -> 1.01 bf16, 0.93 ->
 * 0.95 fp16) and 1536x3072x2048 on 128 x 192 ones (0.89-0.91 -> 0.93-0.94). */
void plan_sk(const gemmk_ctx *ctx, const gemmk_problem *p, bool forced,
             Plan *out)
{
    const int64_t t = cdiv(p->m, BM) * cdiv(p->n, out->bn);
    const double operands = operand_bytes(p);
    const double flops = 2.0 * p->m * p->n * p->k;
    const int64_t dp =
        sk_split(ctx, t, cdiv(p->k, BK), out->bn, operands, flops, forced);
    out->sk = dp >= 0;
    out->sk_dp = dp >= 0 ? (int)dp : 0;
}

/* The model: whole waves but one run as they are (a whole unit per CTA is
 * the cheapest), the last one and a half (or the only partial wave, by name)
 * are split. Not one partial wave by `auto`: spread over every SM, its
 * k-blocks load L2 harder than the tiles alone did (v14: 1470 cycles a
 * k-block against 1150 at 1536^3), which the model does not see (v15:
 * 1536x1536x4096 on 128 x 192 tiles 0.98 of cuBLAS split, 1.01 not; 1536^3
 * 0.84-0.90 split). The fix-up costs what moving every CTA's 128 KB of
 * partials through L2 costs: 11-13 us on the H100 with the partials read
 * back through registers (v8), 6-7 us on the H200 through shared memory by
 * cp.async (v15: 64 x 512^3 and 16 x 2048^3 strided, against the same launch
 * with the partials' stores and loads left out). And only where A and B fit
 * in L2 together, or the tiles' work outweighs reading the operands from
 * DRAM by kSkDram: the split tail reads each tile's operands at other
 * k-offsets than its neighbours do, so operands that stream from DRAM are
 * read again. */
constexpr double kSkDram = 0.45;
constexpr double kSkFixup = 7e-6;

int64_t sk_split(const gemmk_ctx *ctx, int64_t t, int64_t nkb, int bn,
                 double operands, double flops, bool forced)
{
    const int64_t s = ctx->num_sms;
    const double dram = operands / 3.0e12;
    const double work = flops / 660e12;
    if (s < 1 || t < 1 || nkb < 2 ||
        (!forced && (t <= s || (operands > kL2Bytes && dram > kSkDram * work))))
        return -1;
    const int64_t whole = t / s >= 2 ? t / s - 1 : 0;
    const double unit = nkb * (2.0 * BM * bn * BK) / (660e12 / s);
    const double dp = cdiv(t, s) * unit;
    const double sk = (whole + (double)(t - whole * s) / s) * unit + kSkFixup;
    if (!forced && sk > 0.95 * dp)
        return -1;
    return whole * s;
}

/* Whether auto weighs 128 x 192 tiles (the TMA-store kernel only) for p:
 * 16-bit problems whose epilogue is the TMA store's (16-bit D, beta 0, N
 * a multiple of 8), of M >= 512 whose operands fit in L2 together, or of
 * M >= 384 whose operands stream from DRAM; the wave model then takes
 * them where fewer rounds of narrower tiles win. Measured on the H200:
 * in L2 (v14) 1536^3, 1536x1536x4096, 3072^3 and 3072x2048x1024 +12-19%
 * (2048^3, 2560^3 and 4096^3, which need more rounds of them, 10-22%
 * slower: the model keeps 256 there); past L2 (v27) the 28 shapes of M =
 * 384..3072, N = 2048..16384, K = 2048..16384 where the model moved to
 * them +1% to +34% (56 rows, bf16 and fp16: 0.89 -> 1.02 of cuBLAS),
 * except where 256-wide tiles' stream-K tail is faster (sk256_beats).
 * M = 256 stays on 256-wide tiles (256 x 16384 x 8192: 128 x 192 28%
 * slower). */
static bool auto_192(const gemmk_problem *p)
{
    const bool streams = operand_bytes(p) > kL2Bytes;
    return p->ab_type != GEMM_FP32 && p->n % 8 == 0 && p->beta == 0.f &&
           (p->cd_type == GEMM_BF16 || p->cd_type == GEMM_FP16) &&
           (streams ? p->m >= 384 : p->m >= 512);
}

/* Past L2, the stream-K tail's split part costs kSkStreamed times what
 * sk_split's model says (each split unit reads its operands from DRAM
 * again): fitted to 640 x 8192 x 8192 (256-wide tiles with the tail 3-4.5%
 * ahead of 128 x 192 ones) and 768 x 8192 x 8192 (13-16% behind), both
 * 1.26 (v27). */
constexpr double kSkStreamed = 1.25;

/* Whether p's 128 x 256 tiles with a stream-K tail beat the 128 x 192
 * tiles that took t192 in the wave model. The tail is weighed past
 * plan_sk's limit on streamed operands (kSkDram), which weighs it against
 * no tail on the same tiles, not against narrower ones: 384 x 12288 x 8192
 * and x 4096 with the tail 0.92-0.98 of cuBLAS, on 128 x 192 tiles
 * 0.81-0.87 (v27). Not over one partial wave of 128 x 256 tiles (as
 * sk_split): there the tail against 128 x 192 tiles measured -7% to +5%,
 * +0.4% in the mean over 16 rows (v27). */
static bool sk256_beats(const gemmk_ctx *ctx, const gemmk_problem *p,
                        double t192)
{
    int kbps = 0, real = 1;
    const double t256 = estimate(ctx, p, 256, 1, 1, &kbps, &real);
    const int64_t s = ctx->num_sms, t = cdiv(p->m, BM) * cdiv(p->n, 256);
    if (s < 1 || t <= s)
        return false;
    /* the units sk_split runs whole; the rest are the split tail */
    const int64_t dp = sk_split(ctx, t, cdiv(p->k, BK), 256, operand_bytes(p),
                                2.0 * p->m * p->n * p->k, true);
    if (dp < 0)
        return false;
    const double wave = t256 / (double)cdiv(t, s);
    const double tail = (double)(t - dp) / s * kSkStreamed;
    return ((double)(dp / s) + tail) * wave + kSkFixup < t192;
}

/* Why fewer CTAs: a strided batch of 16 x 2048^3 is 2048 tiles of 128 x
 * 256, 128 a matrix: on 132 CTAs (68 of them 16 tiles, 64 of them 15) the
 * rounds drift across the matrices and the L2 holds two matrices'
 * operands, on 128 (16 each) each round is one matrix, in the same time
 * by the rounds: 0.989 -> 1.000-1.002 of cuBLAS on one device, no change
 * on another; 64 x 512^3 +1-2% on both (v15). Pairs of small matrices
 * (1024 x 64^3) lost 1%, and single GEMMs moved within their run-to-run
 * spread (+3% to -6%): not by default. */
int even_grid(const gemmk_ctx *ctx, int64_t units, int slots, bool strided)
{
    if (units <= slots)
        return (int)units;
    const int knob = ctx_knob(ctx, KNOB_EVEN_GRID);
    if (knob == 0 || (knob < 0 && !strided))
        return slots;
    return (int)cdiv(units, cdiv(units, slots));
}

void plan(const gemmk_ctx *ctx, const gemmk_problem *p, const Tiling &c,
          bool is_auto, Plan *out, int max_bn)
{
    int64_t nkb = cdiv(p->k, BK);
    double best = 1e30;
    out->pp = c.pp;
    out->epi = c.epi;
    out->sk = 0;
    out->sk_dp = 0;
    /* candidates in order of preference on near-ties */
    static const int cand[5][2] = {
        {256, 2}, {256, 1}, {192, 1}, {128, 1}, {64, 1}};
    for (int ci = 0; ci < 5; ci++) {
        int bn = cand[ci][0], cl = cand[ci][1];
        if ((c.bn && c.bn != bn) || (c.cluster && c.cluster != cl))
            continue;
        /* 128 x 192 tiles (the TMA-store kernel only): by name, and by
         * `auto` for 16-bit problems of M >= 512 whose operands fit in L2
         * together and whose epilogue is the TMA store's (16-bit D, beta
         * 0, N a multiple of 8), where the wave model says fewer rounds
         * of narrower tiles win (v14: 1536^3, 1536x1536x4096, 3072^3 and
         * 3072x2048x1024 +12-19%; 2048^3, 2560^3 and 4096^3, which need
         * more rounds of them, 10-22% slower) */
        if (bn == 192 && c.bn != 192 && !(is_auto && auto_192(p)))
            continue;
        if (bn > max_bn)
            continue;
        /* The 2-CTA cluster kernel runs at the plain one's speed but has
         * not measured faster: by name only. */
        if (cl == 2 && c.cluster != 2)
            continue;
        /* 128x64 tiles with M < 64: A's TMA box is mostly out-of-bounds
         * fill, which measured slower than split-K on wider tiles. */
        if (bn == 64 && p->m < 64 && c.bn != 64)
            continue;
        int max_split = (c.split == 1 || bn == 64 || bn == 192) ? 1 : 32;
        int min_split = c.split == -1 ? 2 : 1;
        for (int s = min_split; s <= max_split && s <= nkb; s++) {
            int kbps = 0, real = 1;
            double t = estimate(ctx, p, bn, cl, s, &kbps, &real);
            if (c.split == -1 && real < 2)
                continue;
            if (t < best * 0.97) { /* prefer earlier, fewer splits on ties */
                best = t;
                out->bn = bn;
                out->cluster = cl;
                out->splits = real;
                out->kbps = kbps;
            }
        }
    }
    bool sk_forced = c.sk != 0;
    if (best < 1e30 && out->bn == 192 && c.bn != 192 && max_bn >= 256 &&
        operand_bytes(p) > kL2Bytes && sk256_beats(ctx, p, best)) {
        sk_forced = true;
        out->bn = 256;
        out->cluster = 1;
        out->splits = 1;
        out->kbps = (int)nkb;
    }
    if (best < 1e30 && out->bn == 192) /* one kernel: its row's */
        out->epi = 3;
    /* 128 x 256 tiles without split-K: the TMA-store epilogue, so the
     * consumers start the next tile while the stores drain (and, in one
     * wave, store faster than from registers): measured 1.10x over 26
     * shapes of M >= 512 (v7) and 1.02-1.06x at M = 80..256 x 28672 x
     * 8192 (v14) */
    if (is_auto && best < 1e30 && !out->pp && out->bn == 256 &&
        out->cluster == 1 && out->splits == 1)
        out->epi = 2;
    /* (128 x 192 tiles past L2 keep no tail by `auto`: 512 x 11008 x 4096
     * and 640 x 14336 x 8192 with one 18-20% slower than without, v27) */
    if ((is_auto || c.sk) && best < 1e30 && out->epi && !out->pp &&
        (out->bn == 256 ||
         (out->bn == 192 && (c.sk || operand_bytes(p) <= kL2Bytes))) &&
        out->cluster == 1 && out->splits == 1)
        plan_sk(ctx, p, sk_forced, out);
    /* Whole-block stores (ws128x256e3: each consumer's 64 x 256 block in
     * one step, a ring of 3 stages) where K is short enough for what a
     * tile pays once to weigh, over 8 waves or more: measured 0.4-3%
     * faster there (8192x6144x4096, 16384x8192x1024), 1-3% slower over
     * 1.5-4 waves (4096^3, 2560^3) and at K = 8192 (docs/kernel-notes.md
     * v11). And where reading the operands takes longer than the tensor
     * work (dram_bound): the shallower ring keeps fewer bytes in flight,
     * which streams B faster (128 x 28672 x 8192: 3.79-3.84 -> 4.03 TB/s,
     * 0.96 -> 1.015 of cuBLAS; 256 x 28672, not bound so, 2% slower: v23). */
    if (is_auto && out->epi == 2 && !out->sk &&
        ((p->k <= ctx_knob(ctx, KNOB_WHOLE_K) &&
          cdiv(p->m, BM) * cdiv(p->n, 256) >= 8LL * ctx->num_sms) ||
         dram_bound(p)))
        out->epi = 4;
    if (best == 1e30) { /* K too small to split, or no cluster fits */
        out->bn = c.bn ? c.bn : (max_bn < 128 ? max_bn : 128);
        out->cluster = 1;
        out->splits = 1;
        out->kbps = (int)nkb;
    }
}

const Row *plan_row(const Plan &pl)
{
    return row_tiled(pl.bn, pl.cluster, pl.splits > 1, pl.pp, pl.epi, pl.sk);
}

} // namespace gemmk
