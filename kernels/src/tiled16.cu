/*
 * tiled16.cu: the production path of bf16/fp16 inputs: the plan of the
 * row's tiling (plan.cu), A's and B's tensor maps (and D's for the
 * TMA-store epilogue), the launch of the row the plan resolves to, and
 * the split-K reduction; with the helpers the fp32 path shares (tiled.h).
 */
#include <string.h>

#include "tiled.h"

namespace gemmk
{
namespace
{

template <typename T>
cudaError_t reduce(const gemmk_problem *p, const float *ws, long long ldw,
                   int splits, cudaStream_t stream, int sms)
{
    long long total = p->m * p->n;
    int blocks = (int)cdiv(total, 256);
    if (blocks > sms * 8)
        blocks = sms * 8;
    splitk_reduce_kernel<T><<<blocks, 256, 0, stream>>>(
        ws, ldw, splits, (int)p->m, (int)p->n, p->alpha, p->beta,
        static_cast<const T *>(p->c), p->ldc, static_cast<T *>(p->d), p->ldd);
    return cudaGetLastError();
}

/* The M-tiles of a raster group. Consecutive units share them, so a wave
 * of 132 CTAs covers group_m M-tiles by 132 / group_m N-tiles: with
 * 128 x 256 tiles, 16 makes it square (2048 rows of A by 2112 columns of
 * B), which reads the least from DRAM where the operands outgrow L2
 * (8192^3 tf32 NT: 3.28 -> 3.03 GB, kernel-notes v24); narrower tiles 8;
 * 2-CTA clusters 4 pairs. */
int raster_m(const gemmk_ctx *ctx, const Plan &pl)
{
    const int knob = ctx_knob(ctx, KNOB_RASTER);
    if (knob > 0)
        return knob;
    return pl.cluster == 2 ? 4 : pl.bn == 256 ? 16 : 8;
}

} // namespace

gemm_error set_maps(gemmk_ctx *ctx, const gemmk_tmap_key *ka,
                    const gemmk_tmap_key *kb, Launch *l)
{
    gemm_error e = ctx_map(ctx, ka, &l->ta);
    if (e != GEMM_OK)
        return e;
    return ctx_map(ctx, kb, &l->tb);
}

gemm_error fill_params(gemmk_ctx *ctx, const gemmk_problem *p, const Plan &pl,
                       int64_t keff, int kbe, Launch *l, cudaStream_t stream)
{
    KParams &kp = l->p;
    memset(&kp, 0, sizeof(kp));
    memset(&l->sk, 0, sizeof(l->sk));
    kp.m = (int)p->m, kp.n = (int)p->n, kp.k = (int)keff;
    kp.num_m = (int)cdiv(p->m, BM);
    kp.num_n = (int)cdiv(p->n, pl.bn);
    kp.num_mu = (int)cdiv(kp.num_m, pl.cluster);
    kp.nkb = (int)cdiv(keff, kbe);
    kp.splits = pl.splits;
    kp.kb_per_split = pl.kbps;
    kp.units = kp.num_mu * kp.num_n * kp.splits;
    kp.group_m = raster_m(ctx, pl);
    kp.cd_type = p->cd_type;
    kp.d = p->d;
    kp.c = p->beta != 0.f ? p->c : nullptr;
    kp.ldd = p->ldd, kp.ldc = p->ldc;
    kp.alpha = p->alpha, kp.beta = p->beta;
    kp.ldw = (p->n + 7) / 8 * 8;
    if (pl.splits > 1) {
        size_t need = (size_t)pl.splits * p->m * kp.ldw * sizeof(float);
        gemm_error e = ctx_grow(ctx, &ctx->ws, &ctx->ws_bytes, need, stream);
        if (e != GEMM_OK)
            return e;
        kp.ws = ctx->ws;
    }
    int slots = pl.cluster == 2 ? ctx->max_clusters2 : ctx->num_sms;
    l->grid = even_grid(ctx, kp.units, slots, false) * pl.cluster;
    l->cluster = pl.cluster;
    l->f16 = false;
    l->tf32 = false;
    l->amn = l->bmn = 0;
    return GEMM_OK;
}

gemm_error sk_setup(gemmk_ctx *ctx, int dp, int units, cudaStream_t stream,
                    SkParams *sk)
{
    const int g = ctx->num_sms;
    const size_t part = (size_t)g * 2 * 64 * 256 * sizeof(float);
    const size_t flags = (size_t)g * 2 * sizeof(int);
    void *old = ctx->slot[SLOT_SK], *buf = nullptr;
    gemm_error e = ctx_workspace(ctx, SLOT_SK, part + flags, &buf, stream);
    if (e != GEMM_OK)
        return e;
    int *flag = reinterpret_cast<int *>(static_cast<char *>(buf) + part);
    bool wrap = ++ctx->sk_epoch <= 0;
    if (wrap)
        ctx->sk_epoch = 1;
    if (buf != old || wrap) /* no flag may hold an epoch still to come */
        GEMMK_CK(ctx, cudaMemsetAsync(flag, 0, flags, stream));
    sk->dp = dp;
    sk->units = units;
    sk->epoch = ctx->sk_epoch;
    sk->part = static_cast<float *>(buf);
    sk->flag = flag;
    return GEMM_OK;
}

gemm_error sk_params(gemmk_ctx *ctx, const Plan &pl, cudaStream_t stream,
                     Launch *l)
{
    l->grid = ctx->num_sms;
    return sk_setup(ctx, pl.sk_dp, l->p.units - pl.sk_dp, stream, &l->sk);
}

gemm_error tstore_map(gemmk_ctx *ctx, const gemmk_problem *p, const Plan &pl,
                      Launch *l)
{
    memset(&l->td, 0, sizeof(l->td));
    const bool d32 = l->tf32 && tstore32_applies(l->p);
    const bool d16 = tstore_applies(l->p) && !l->p.d_trans;
    if (!pl.epi || !(d32 || d16))
        return GEMM_OK;
    gemmk_tmap_key kd = {};
    kd.addr = (uint64_t)(uintptr_t)p->d;
    kd.dtype = p->cd_type;
    kd.swizzle = GEMMK_SWIZZLE_128B;
    kd.stride1 = (uint64_t)p->ldd * (d32 ? 4 : 2);
    kd.dim0 = p->n, kd.dim1 = p->m;
    kd.box0 = d32 ? 32 : 64, kd.box1 = 64;
    return ctx_map(ctx, &kd, &l->td);
}

gemm_error finish_splits(gemmk_ctx *ctx, const gemmk_problem *p, const Plan &pl,
                         const KParams &kp, cudaStream_t stream)
{
    if (pl.splits <= 1)
        return GEMM_OK;
    if (p->cd_type == GEMM_FP32)
        GEMMK_CK(ctx, reduce<float>(p, kp.ws, kp.ldw, pl.splits, stream,
                                    ctx->num_sms));
    else if (p->cd_type == GEMM_BF16)
        GEMMK_CK(ctx, reduce<__nv_bfloat16>(p, kp.ws, kp.ldw, pl.splits, stream,
                                            ctx->num_sms));
    else
        GEMMK_CK(ctx, reduce<__half>(p, kp.ws, kp.ldw, pl.splits, stream,
                                     ctx->num_sms));
    return GEMM_OK;
}

void tiled16_keys(const gemmk_problem *p, int bn, int cl, gemmk_tmap_key *ka,
                  gemmk_tmap_key *kb)
{
    memset(ka, 0, sizeof(*ka));
    ka->addr = (uint64_t)(uintptr_t)p->a;
    ka->dtype = p->ab_type;
    ka->swizzle = GEMMK_SWIZZLE_128B;
    ka->stride1 = (uint64_t)p->lda * 2;
    if (p->trans_a) {
        ka->dim0 = p->m, ka->dim1 = p->k, ka->box0 = 64, ka->box1 = 64;
    } else {
        ka->dim0 = p->k, ka->dim1 = p->m, ka->box0 = 64, ka->box1 = BM;
    }
    memset(kb, 0, sizeof(*kb));
    kb->addr = (uint64_t)(uintptr_t)p->b;
    kb->dtype = p->ab_type;
    kb->swizzle = GEMMK_SWIZZLE_128B;
    kb->stride1 = (uint64_t)p->ldb * 2;
    if (!p->trans_b) {
        kb->dim0 = p->n, kb->dim1 = p->k, kb->box0 = 64, kb->box1 = 64;
    } else {
        kb->dim0 = p->k, kb->dim1 = p->n, kb->box0 = 64,
        kb->box1 = (uint32_t)(bn / cl);
    }
}

gemm_error tiled16_maps(gemmk_ctx *ctx, const gemmk_problem *p, const Plan &pl,
                        Launch *l)
{
    gemmk_tmap_key ka, kb;
    tiled16_keys(p, pl.bn, pl.cluster, &ka, &kb);
    l->f16 = p->ab_type == GEMM_FP16;
    l->amn = p->trans_a ? 1 : 0;
    l->bmn = p->trans_b ? 0 : 1;
    return set_maps(ctx, &ka, &kb, l);
}

const Row *tiled16_choice(const gemmk_ctx *ctx, const gemmk_problem *p,
                          const Row &row, Plan *pl)
{
    const bool is_auto = (row.flags & ROW_AUTO) != 0;
    plan(ctx, p, row.tiling, is_auto, pl);
    if (is_auto && decode_fits(ctx, p)) {
        const Row *dr = row_find("ws-decode");
        if (dr)
            return dr;
    }
    if (is_auto && swap_fits(ctx, p, *pl)) {
        const Row *sw = row_find("ws-swap");
        if (sw)
            return sw;
    }
    return plan_row(*pl);
}

gemm_error run_tiled16(gemmk_ctx *ctx, const gemmk_problem *p,
                       cudaStream_t stream, const Row &row, gemmk_result *res)
{
    Plan pl;
    const Row *run = tiled16_memo(ctx, p, row, &pl);
    /* a row with a path of its own (ws-swap, ws-decode) runs it; the
     * path names itself in res */
    if (run && run->run != run_tiled16)
        return run->run(ctx, p, stream, *run, res);
    if (!run) {
        ctx_say(ctx, "no kernel for the plan of %s", row.d.name);
        return GEMM_ERR_INTERNAL;
    }
    /* "auto" names what it resolved to; a named kernel keeps its name
     * (its plan may fall back, e.g. to no split when K is too short) */
    res->kernel = (row.flags & ROW_AUTO) ? run->d.name : row.d.name;

    Launch l;
    gemm_error e = fill_params(ctx, p, pl, p->k, BK, &l, stream);
    if (e == GEMM_OK)
        e = tiled16_maps(ctx, p, pl, &l);
    if (e == GEMM_OK && pl.sk)
        e = sk_params(ctx, pl, stream, &l);
    if (e != GEMM_OK)
        return e;
    e = tstore_map(ctx, p, pl, &l);
    if (e != GEMM_OK)
        return e;
    l.stream = stream;
    GEMMK_CK(ctx, run->launch(l));
    return finish_splits(ctx, p, pl, l.p, stream);
}

} // namespace gemmk
