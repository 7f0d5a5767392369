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
 * cudaMemcpyAsync on the caller's stream before the launches. The rest
 * (other types, host-mapped operands) run one by one through gemmk_gemm
 * on the same stream, with no synchronisation between them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "ctx_internal.h"
#include "grouped.h"
#include "plan.h"

namespace gemmk
{
namespace
{

const char *const kGroupedName = "grouped128x128";

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

/* A's and B's tensor map keys of p, as tiled16.cu makes them for a
 * 128 x 128 tile without a cluster. */
void map_keys(const gemmk_problem *p, gemmk_tmap_key *ka, gemmk_tmap_key *kb)
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
        kb->dim0 = p->k, kb->dim1 = p->n, kb->box0 = 64, kb->box1 = GROUP_BN;
    }
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
 * Runs the groupable problems listed in idx (n of them, in class order:
 * cls[i] is idx[i]'s class) as one launch per class: their maps and
 * table in one host buffer, one copy to the context's workspace, then the
 * launches. *fail: the problem a failure is about (-1: none).
 */
gemm_error run_groups(gemmk_ctx *ctx, const gemmk_problem *probs,
                      const int *idx, const int *cls, int n,
                      cudaStream_t stream, int *fail)
{
    const size_t maps_bytes = (size_t)n * 2 * sizeof(CUtensorMap);
    const size_t bytes = maps_bytes + (size_t)n * sizeof(GroupProblem);
    uint8_t *host =
        static_cast<uint8_t *>(aligned_alloc(128, (bytes + 127) / 128 * 128));
    if (!host) {
        ctx_say(ctx, "out of host memory for %d grouped problems", n);
        return GEMM_ERR_NOMEM;
    }
    CUtensorMap *maps = reinterpret_cast<CUtensorMap *>(host);
    GroupProblem *tab = reinterpret_cast<GroupProblem *>(host + maps_bytes);
    const bool cached = 2 * n <= GEMMK_TMAP_CACHE_CAP / 2;
    gemm_error e = GEMM_OK;
    int64_t unit = 0;
    for (int i = 0; i < n; i++) {
        const gemmk_problem *p = &probs[idx[i]];
        if (i > 0 && cls[i] != cls[i - 1])
            unit = 0; /* units count from 0 in each launch */
        gemmk_tmap_key ka, kb;
        map_keys(p, &ka, &kb);
        if ((e = encode_map(ctx, &ka, cached, &maps[2 * i])) != GEMM_OK ||
            (e = encode_map(ctx, &kb, cached, &maps[2 * i + 1])) != GEMM_OK) {
            *fail = idx[i];
            goto out;
        }
        GroupProblem &q = tab[i];
        q.m = (int)p->m, q.n = (int)p->n;
        q.nkb = (int)cdiv(p->k, BK);
        q.num_m = (int)cdiv(p->m, BM);
        q.unit0 = (int)unit;
        q.cd_type = p->cd_type;
        q.d = p->d;
        q.c = p->beta != 0.f ? p->c : nullptr;
        q.ldd = p->ldd, q.ldc = p->ldc;
        q.alpha = p->alpha, q.beta = p->beta;
        unit += cdiv(p->m, BM) * cdiv(p->n, GROUP_BN);
        if (unit > 0x7fffffff) {
            ctx_say(ctx, "a grouped launch of more than 2^31 tiles");
            e = GEMM_ERR_INVALID;
            *fail = idx[i];
            goto out;
        }
    }
    {
        void *dev = nullptr;
        if ((e = ctx_workspace(ctx, SLOT_GROUP, bytes, &dev)) != GEMM_OK)
            goto out;
        cudaError_t ce =
            cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, stream);
        if (ce != cudaSuccess) {
            e = ctx_fail(ctx, ce, "cudaMemcpyAsync(grouped table)", __FILE__,
                         __LINE__);
            goto out;
        }
        const CUtensorMap *dmaps = static_cast<const CUtensorMap *>(dev);
        const GroupProblem *dtab = reinterpret_cast<const GroupProblem *>(
            static_cast<const uint8_t *>(dev) + maps_bytes);
        for (int i0 = 0; i0 < n;) {
            int i1 = i0 + 1;
            while (i1 < n && cls[i1] == cls[i0])
                i1++;
            const GroupProblem &last = tab[i1 - 1];
            GroupLaunch l;
            l.g.maps = dmaps + 2 * i0;
            l.g.probs = dtab + i0;
            l.g.count = i1 - i0;
            l.g.units = last.unit0 + last.num_m * (int)cdiv(last.n, GROUP_BN);
            l.grid = l.g.units < ctx->num_sms ? l.g.units : ctx->num_sms;
            l.f16 = (cls[i0] & 4) != 0;
            l.amn = (cls[i0] & 2) != 0;
            l.bmn = (cls[i0] & 1) == 0;
            l.stream = stream;
            ce = launch_grouped(l);
            if (ce != cudaSuccess) {
                e = ctx_fail(ctx, ce, "launch_grouped", __FILE__, __LINE__);
                *fail = idx[i0];
                goto out;
            }
            i0 = i1;
        }
    }
out:
    free(host);
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
    int idx = 0, cls = group_class(p), fail = -1;
    return run_groups(ctx, p, &idx, &cls, 1, s, &fail);
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
    /* validate everything before anything runs */
    for (int i = 0; i < count && e == GEMM_OK; i++) {
        const gemmk_problem *p = &probs[i];
        if (p->m == 0 || p->n == 0)
            continue;
        const Row *row;
        const char *why = nullptr;
        if ((e = check_problem(p, nullptr, &row, &why)) != GEMM_OK) {
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
            res->kernel = kGroupedName;
            e = run_groups(ctx, probs, idx, cls, ng, stream, &fail);
            if (e != GEMM_OK)
                snprintf(res->msg, sizeof(res->msg), "problem %d: %.200s", fail,
                         ctx->msg[0] ? ctx->msg
                                     : "failed without a CUDA error");
        }
    }
    for (int i = 0; i < count && e == GEMM_OK; i++) { /* the others */
        const gemmk_problem *p = &probs[i];
        if (p->m == 0 || p->n == 0 || groupable(p))
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
