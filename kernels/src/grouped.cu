/*
 * grouped.cu: gemmk_gemm_grouped, many problems in as few launches as
 * their types allow. Every problem is validated as gemmk_gemm validates
 * one; then the 16-bit ones (bf16/fp16 inputs, device operands) are
 * sorted into classes by input type and transposes (what the kernel
 * instantiates on), and each class runs as one launch of the grouped
 * kernel (gemm_grouped.cuh). Their tensor maps are encoded here (through
 * the context's cache while it can hold them; straight from the encoder
 * when a batch has more maps than the cache, which would only evict
 * itself) and, with the problem table, reach the device in one
 * cudaMemcpyAsync on the caller's stream before the launches. The wide
 * types go to cuBLAS's batched calls (grouped_wide.cu); the rest (fp32,
 * int8, host-mapped operands) run one by one through gemmk_gemm on the
 * same stream, with no synchronisation between them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "ctx_internal.h"
#include "grouped.h"
#include "grouped_wide.h"
#include "plan.h"
#include "tiled.h"

namespace gemmk
{
namespace
{

/* The catalog names of the grouped kernel's tile widths. */
const char *grouped_name(int bn)
{
    return bn == 256 ? "grouped128x256" : "grouped128x128";
}

/* Whether p is q but for its operands (a, b, c, d): then the types
 * were judged against the row with q, and only check_shape's part of
 * the validation can come out otherwise. */
bool same_but_operands(const gemmk_problem *p, const gemmk_problem *q)
{
    gemmk_problem x = *p;
    x.a = q->a, x.b = q->b, x.c = q->c, x.d = q->d;
    return memcmp(&x, q, sizeof(x)) == 0;
}

/* Whether validated problem p runs in the grouped kernel. */
bool groupable(const gemmk_problem *p)
{
    return (p->ab_type == GEMM_BF16 || p->ab_type == GEMM_FP16) &&
           !p->host_mapped;
}

/* The class of a groupable problem: input type and transposes. */
int group_class(const gemmk_problem *p)
{
    return (p->ab_type == GEMM_FP16 ? 4 : 0) | (p->trans_a ? 2 : 0) |
           (p->trans_b ? 1 : 0);
}

/* The tensor map of key into *out: from the cache when `cached`, else
 * straight from the encoder. */
gemm_error encode_map(gemmk_ctx *ctx, const gemmk_tmap_key *key, bool cached,
                      CUtensorMap *out)
{
    if (cached)
        return ctx_map(ctx, key, out);
    gemmk_tmap m;
    if (ctx->cache.encode(ctx->cache.user, key, &m) != 0) {
        ctx_say(ctx, "cuTensorMapEncodeTiled failed for a grouped operand");
        return GEMM_ERR_INVALID;
    }
    memcpy(out, &m, sizeof(*out));
    return GEMM_OK;
}

/*
 * Whether the n problems at idx (one class) are a strided batch: one
 * shape, leading dimensions, output type, alpha and beta, with A, B, D
 * (and C when read) at constant strides, multiples of 16 bytes (what a
 * 3-D tensor map needs), D's positive (A, B or C may be shared: 0). On
 * success st holds the byte strides of A, B, C, D.
 */
bool strided_batch(const gemmk_problem *probs, const int *idx, int n,
                   long long st[4])
{
    if (n < 2)
        return false;
    const gemmk_problem *p0 = &probs[idx[0]];
    const bool usec = p0->beta != 0.f;
    auto at = [](const void *x) { return (long long)(uintptr_t)x; };
    const gemmk_problem *p1 = &probs[idx[1]];
    st[0] = at(p1->a) - at(p0->a);
    st[1] = at(p1->b) - at(p0->b);
    st[2] = usec ? at(p1->c) - at(p0->c) : 0;
    st[3] = at(p1->d) - at(p0->d);
    for (int t = 0; t < 4; t++)
        if (st[t] % 16 != 0 || st[t] < 0 || (t == 3 && st[t] == 0))
            return false;
    for (int i = 1; i < n; i++) {
        const gemmk_problem *p = &probs[idx[i]];
        if (p->m != p0->m || p->n != p0->n || p->k != p0->k ||
            p->lda != p0->lda || p->ldb != p0->ldb || p->ldd != p0->ldd ||
            p->cd_type != p0->cd_type || p->alpha != p0->alpha ||
            p->beta != p0->beta || (usec && p->ldc != p0->ldc))
            return false;
        if (at(p->a) != at(p0->a) + i * st[0] ||
            at(p->b) != at(p0->b) + i * st[1] ||
            at(p->d) != at(p0->d) + i * st[3] ||
            (usec && at(p->c) != at(p0->c) + i * st[2]))
            return false;
    }
    return true;
}

/* The 3-D map of a strided batch's operand: key's matrix, count of them
 * zstride bytes apart (0: one matrix shared by all, a map of one).
 * Straight from the encoder (not cached). */
gemm_error encode_3d(gemmk_ctx *ctx, const gemmk_tmap_key *key, int count,
                     long long zstride, CUtensorMap *out)
{
    if (zstride == 0) {
        count = 1;
        zstride = (long long)(key->stride1 * key->dim1);
    }
    cuuint64_t dims[3] = {key->dim0, key->dim1, (cuuint64_t)count};
    cuuint64_t strides[2] = {key->stride1, (cuuint64_t)zstride};
    cuuint32_t box[3] = {key->box0, key->box1, 1};
    cuuint32_t estr[3] = {1, 1, 1};
    CUtensorMapDataType dt = key->dtype == GEMM_BF16
                                 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    CUresult r = ctx->encode(
        out, dt, 3, reinterpret_cast<void *>(key->addr), dims, strides, box,
        estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? GEMM_OK : GEMM_ERR_INVALID;
}

/* D's tensor map key of p for the TMA-store epilogue (64 x 64 boxes), or
 * false when p's epilogue is not a plain conversion (tstore_ok). */
bool d_key(const gemmk_problem *p, gemmk_tmap_key *kd)
{
    KParams kp = {};
    kp.splits = 1;
    kp.beta = p->beta;
    kp.cd_type = p->cd_type;
    kp.n = (int)p->n;
    if (!tstore_ok(kp))
        return false;
    memset(kd, 0, sizeof(*kd));
    kd->addr = (uint64_t)(uintptr_t)p->d;
    kd->dtype = p->cd_type;
    kd->swizzle = GEMMK_SWIZZLE_128B;
    kd->stride1 = (uint64_t)p->ldd * 2;
    kd->dim0 = p->n, kd->dim1 = p->m, kd->box0 = 64, kd->box1 = 64;
    return true;
}

/* Problem p's table entry, its units from unit0 on. */
void fill_entry(const gemmk_problem *p, int64_t unit0, GroupProblem *q)
{
    q->m = (int)p->m, q->n = (int)p->n;
    q->nkb = (int)cdiv(p->k, BK);
    q->num_m = (int)cdiv(p->m, BM);
    q->unit0 = (int)unit0;
    q->cd_type = p->cd_type;
    q->d = p->d;
    q->c = p->beta != 0.f ? p->c : nullptr;
    q->ldd = p->ldd, q->ldc = p->ldc;
    q->alpha = p->alpha, q->beta = p->beta;
}

int64_t tiles(const gemmk_problem *p, int bn)
{
    return cdiv(p->m, BM) * cdiv(p->n, bn);
}

/* The tile width of the n problems at idx (one class): 256 when every
 * problem is at least 256 wide and their 128 x 256 tiles give each SM
 * one at least (the 128 x 256 kernel's rate, a full wave); else 128. */
int class_bn(const gemmk_problem *probs, const int *idx, int n, int num_sms)
{
    int64_t t = 0;
    for (int i = 0; i < n; i++) {
        if (probs[idx[i]].n < 256)
            return 128;
        t += tiles(&probs[idx[i]], 256);
    }
    return t >= num_sms ? 256 : 128;
}

/* Where a strided batch of count matrices shaped as p0, units 128 x 256
 * tiles in all, splits its last waves stream-K (sk_split; -1: none), by
 * the GEMMK_GROUPED_SK knob: -1 the model, 1 always, 0 never. */
int64_t strided_sk(const gemmk_ctx *ctx, const gemmk_problem *p0, int count,
                   int64_t units)
{
    const int knob = ctx_knob(ctx, KNOB_GROUPED_SK);
    if (knob == 0)
        return -1;
    const double operands = count * operand_bytes(p0);
    const double flops = 2.0 * count * (double)p0->m * p0->n * p0->k;
    return sk_split(ctx, units, cdiv(p0->k, BK), 256, operands, flops,
                    knob == 1);
}

size_t round_up(size_t x, size_t to)
{
    return (x + to - 1) / to * to;
}

/*
 * Runs the groupable problems listed in idx (n of them, in class order:
 * cls[i] is idx[i]'s class) as one launch per class. A class that is a
 * strided batch launches with two 3-D maps (three when D takes TMA
 * stores) and no table; the others' maps and tables go in one host
 * buffer, one copy to the context's workspace, before the launches. *fail: the
 * problem a failure is about
 * (-1: none).
 */
gemm_error run_groups(gemmk_ctx *ctx, const gemmk_problem *probs,
                      const int *idx, const int *cls, int n, int force_bn,
                      cudaStream_t stream, int *fail, int *max_bn)
{
    /* classes: [i0, i1) of idx, strided or not */
    struct Class {
        int i0, i1;
        bool strided;
        bool tstore; /* strided, D through a 3-D map */
        bool pair;   /* strided, two matrices of <= 64 x 64 per unit */
        int cl;      /* cluster size: 2 for strided 128 x 256 tiles */
        long long st[4];
        int t0; /* first table entry (not strided) */
        int bn; /* tile width */
    };
    Class cl[8];
    int ncl = 0, nt = 0;
    GroupLaunch *ls = static_cast<GroupLaunch *>(
        aligned_alloc(64, round_up(sizeof(GroupLaunch) * 8, 64)));
    if (!ls) {
        ctx_say(ctx, "out of host memory for %d grouped problems", n);
        return GEMM_ERR_NOMEM;
    }
    for (int i0 = 0; i0 < n;) {
        int i1 = i0 + 1;
        while (i1 < n && cls[i1] == cls[i0])
            i1++;
        Class &c = cl[ncl];
        GroupLaunch &l = ls[ncl++];
        memset(&l, 0, sizeof(l));
        c.i0 = i0, c.i1 = i1;
        c.bn = force_bn ? force_bn
                        : class_bn(probs, idx + i0, i1 - i0, ctx->num_sms);
        if (c.bn > *max_bn)
            *max_bn = c.bn;
        c.strided = strided_batch(probs, idx + i0, i1 - i0, c.st);
        const gemmk_problem *p0 = &probs[idx[i0]];
        c.pair = c.strided && c.bn == 128 && p0->m <= 64 && p0->n <= 64 &&
                 ctx_knob(ctx, KNOB_GROUPED_PAIR);
        c.cl = c.strided && c.bn == 256 && cdiv(p0->m, BM) % 2 == 0 &&
                       ctx->max_clusters2 > 0 &&
                       ctx_knob(ctx, KNOB_GROUPED_CLUSTER)
                   ? 2
                   : 1;
        if (c.strided) { /* the 3-D maps, or (refused) a table after all */
            gemmk_tmap_key ka, kb;
            tiled16_keys(p0, c.bn, c.cl, &ka, &kb);
            if (c.pair) { /* 64-row boxes: one matrix per slab */
                if (!p0->trans_a)
                    ka.box1 = 64;
                if (p0->trans_b)
                    kb.box1 = 64;
            }
            c.strided =
                encode_3d(ctx, &ka, i1 - i0, c.st[0], &l.ta3) == GEMM_OK &&
                encode_3d(ctx, &kb, i1 - i0, c.st[1], &l.tb3) == GEMM_OK;
        }
        c.pair = c.pair && c.strided;
        if (!c.strided)
            c.cl = 1;
        gemmk_tmap_key kd;
        c.tstore = c.strided && d_key(p0, &kd) &&
                   encode_3d(ctx, &kd, i1 - i0, c.st[3], &l.td3) == GEMM_OK;
        c.t0 = nt;
        if (!c.strided)
            nt += i1 - i0;
        i0 = i1;
    }

    const size_t maps_bytes = (size_t)nt * 2 * sizeof(CUtensorMap);
    const size_t bytes = maps_bytes + (size_t)nt * sizeof(GroupProblem);
    uint8_t *host =
        nt ? static_cast<uint8_t *>(aligned_alloc(128, round_up(bytes, 128)))
           : nullptr;
    void *dev = nullptr;
    gemm_error e = GEMM_OK;
    if (nt && !host) {
        ctx_say(ctx, "out of host memory for %d grouped problems", n);
        e = GEMM_ERR_NOMEM;
        goto out;
    }
    if (nt &&
        (e = ctx_workspace(ctx, SLOT_GROUP, bytes, &dev, stream)) != GEMM_OK)
        goto out;
    for (int ci = 0; ci < ncl; ci++) {
        Class &c = cl[ci];
        GroupLaunch &l = ls[ci];
        const gemmk_problem *p0 = &probs[idx[c.i0]];
        l.f16 = (cls[c.i0] & 4) != 0;
        l.amn = (cls[c.i0] & 2) != 0;
        l.bmn = (cls[c.i0] & 1) == 0;
        l.stream = stream;
        l.bn = c.bn;
        l.cl = c.cl;
        if (c.strided) {
            const int count = c.i1 - c.i0;
            const int64_t units = tiles(p0, c.bn) * count;
            if (units > 0x7fffffff) {
                ctx_say(ctx, "a grouped launch of more than 2^31 tiles");
                *fail = idx[c.i0];
                e = GEMM_ERR_INVALID;
                goto out;
            }
            l.g.strided = 1;
            l.g.tstore = c.tstore;
            /* whole-block stores: fewer waits in each epilogue, one ring
             * stage less; worth it from K = 2048 (16 x 2048^3 +2%; 64 x
             * 512^3 -5%, docs/batch.md) */
            const int whole = ctx_knob(ctx, KNOB_GROUPED_WHOLE);
            l.whole = c.tstore && c.bn == 256 && c.cl == 1 && !c.pair &&
                      (whole == 1 || (whole < 0 && p0->k >= 2048));
            l.g.pair = c.pair;
            l.g.a_shared = c.st[0] == 0;
            l.g.b_shared = c.st[1] == 0;
            l.g.count = count;
            l.g.per = (int)tiles(p0, c.bn) / c.cl;
            l.g.units = c.pair ? (count + 1) / 2 : (int)(units / c.cl);
            l.g.sd = c.st[3];
            l.g.sc = c.st[2];
            fill_entry(p0, 0, &l.g.p0);
            const int64_t dp = c.cl == 1 && !c.pair && c.bn == 256
                                   ? strided_sk(ctx, p0, count, l.g.units)
                                   : -1;
            if (dp >= 0 && (e = sk_setup(ctx, (int)dp, l.g.units - (int)dp,
                                         stream, &l.g.sk)) != GEMM_OK) {
                *fail = idx[c.i0];
                goto out;
            }
            continue;
        }
        CUtensorMap *maps = reinterpret_cast<CUtensorMap *>(host);
        GroupProblem *tab = reinterpret_cast<GroupProblem *>(host + maps_bytes);
        int64_t unit = 0;
        for (int i = c.i0; i < c.i1; i++) {
            const gemmk_problem *p = &probs[idx[i]];
            const int t = c.t0 + (i - c.i0);
            gemmk_tmap_key ka, kb;
            tiled16_keys(p, c.bn, 1, &ka, &kb);
            const bool cached = 2 * nt <= GEMMK_TMAP_CACHE_CAP / 2;
            if ((e = encode_map(ctx, &ka, cached, &maps[2 * t])) != GEMM_OK ||
                (e = encode_map(ctx, &kb, cached, &maps[2 * t + 1])) !=
                    GEMM_OK) {
                *fail = idx[i];
                goto out;
            }
            fill_entry(p, unit, &tab[t]);
            unit += tiles(p, c.bn);
            if (unit > 0x7fffffff) {
                ctx_say(ctx, "a grouped launch of more than 2^31 tiles");
                e = GEMM_ERR_INVALID;
                *fail = idx[i];
                goto out;
            }
        }
        l.g.maps = static_cast<const CUtensorMap *>(dev) + 2 * c.t0;
        l.g.probs = reinterpret_cast<const GroupProblem *>(
                        static_cast<const uint8_t *>(dev) + maps_bytes) +
                    c.t0;
        l.g.count = c.i1 - c.i0;
        l.g.units = (int)unit;
    }
    if (nt) {
        cudaError_t ce =
            cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, stream);
        if (ce != cudaSuccess) {
            e = ctx_fail(ctx, ce, "cudaMemcpyAsync(grouped table)", __FILE__,
                         __LINE__);
            goto out;
        }
    }
    for (int ci = 0; ci < ncl; ci++) {
        GroupLaunch &l = ls[ci];
        const int slots = l.cl == 2 ? ctx->max_clusters2 : ctx->num_sms;
        l.grid = l.g.sk.units ? ctx->num_sms
                              : even_grid(ctx, l.g.units, slots,
                                          l.g.strided && !l.g.pair) *
                                    l.cl;
        cudaError_t ce = launch_grouped(l);
        if (ce != cudaSuccess) {
            e = ctx_fail(ctx, ce, "launch_grouped", __FILE__, __LINE__);
            *fail = idx[cl[ci].i0];
            goto out;
        }
    }
out:
    free(host);
    free(ls);
    return e;
}

} // namespace

gemm_error run_grouped(gemmk_ctx *ctx, const gemmk_problem *p, cudaStream_t s,
                       const Row &row, gemmk_result *res)
{
    res->kernel = row.d.name;
    if (p->host_mapped) {
        ctx_say(ctx, "the grouped kernel reads device memory only");
        return GEMM_ERR_UNSUPPORTED;
    }
    int idx = 0, cls = group_class(p), fail = -1, bn = 0;
    return run_groups(ctx, p, &idx, &cls, 1, row.tiling.bn, s, &fail, &bn);
}

} // namespace gemmk

using namespace gemmk;

extern "C" gemm_error gemmk_gemm_grouped(gemmk_ctx *ctx,
                                         const gemmk_problem *probs, int count,
                                         cudaStream_t stream, gemmk_result *res)
{
    gemmk_result dummy;
    if (!res)
        res = &dummy;
    res->kernel = nullptr;
    res->msg[0] = '\0';
    res->moduli = 0;
    if (!ctx || count < 0 || (count > 0 && !probs)) {
        snprintf(res->msg, sizeof(res->msg), "grouped: %s",
                 !ctx ? "no kernel context" : "no problems given");
        return GEMM_ERR_INVALID;
    }
    ctx->msg[0] = '\0';
    int *idx = static_cast<int *>(malloc(sizeof(int) * 2 * (count + 1)));
    if (!idx) {
        snprintf(res->msg, sizeof(res->msg), "grouped: out of host memory");
        return GEMM_ERR_NOMEM;
    }
    int *cls = idx + count + 1;
    int ng = 0, fail = -1;
    gemm_error e = GEMM_OK;
    /* validate everything before anything runs (a problem that is the
     * last one wholly checked but for its operands: its shape only, not
     * again the catalog's row) */
    const gemmk_problem *last = nullptr;
    for (int i = 0; i < count && e == GEMM_OK; i++) {
        const gemmk_problem *p = &probs[i];
        if (p->m == 0 || p->n == 0)
            continue;
        const Row *row;
        const char *why = nullptr;
        if (last && same_but_operands(p, last))
            e = check_shape(p, &why);
        else if ((e = check_problem(p, nullptr, &row, &why)) == GEMM_OK)
            last = p;
        if (e != GEMM_OK) {
            snprintf(res->msg, sizeof(res->msg), "problem %d: %.200s", i,
                     why ? why : "invalid");
            break;
        }
    }
    if (e == GEMM_OK) {
        for (int c = 0; c < 8; c++) /* groupable ones, by class */
            for (int i = 0; i < count; i++)
                if (probs[i].m && probs[i].n && groupable(&probs[i]) &&
                    group_class(&probs[i]) == c) {
                    idx[ng] = i;
                    cls[ng++] = c;
                }
        if (ng > 0) {
            int bn = 0;
            e = run_groups(ctx, probs, idx, cls, ng, 0, stream, &fail, &bn);
            res->kernel = grouped_name(bn ? bn : 128);
            if (e != GEMM_OK)
                snprintf(res->msg, sizeof(res->msg), "problem %d: %.200s", fail,
                         ctx->msg[0] ? ctx->msg
                                     : "failed without a CUDA error");
        }
    }
    if (e == GEMM_OK) { /* the wide ones: cuBLAS's batched calls */
        const char *k = nullptr;
        e = wide_batch(ctx, probs, count, stream, &fail, &k);
        if (!res->kernel)
            res->kernel = k;
        if (e != GEMM_OK)
            snprintf(res->msg, sizeof(res->msg), "problem %d: %.200s", fail,
                     ctx->msg[0] ? ctx->msg : "failed without a CUDA error");
    }
    for (int i = 0; i < count && e == GEMM_OK; i++) { /* the others */
        const gemmk_problem *p = &probs[i];
        if (p->m == 0 || p->n == 0 || groupable(p) || wide_batched(p))
            continue;
        gemmk_result r;
        e = gemmk_gemm(ctx, p, stream, nullptr, &r);
        if (!res->kernel)
            res->kernel = r.kernel;
        if (e != GEMM_OK)
            snprintf(res->msg, sizeof(res->msg), "problem %d: %.200s", i,
                     r.msg);
    }
    free(idx);
    return e;
}
