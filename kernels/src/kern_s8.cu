/*
 * kern_s8.cu: the int8 GEMM of the catalog (gemmk_gemm_s8) and the
 * launches of gemm_s8.cuh's kernel for it and for the Ozaki-II products
 * (ozaki.cu): validation, the byte transpose that makes MN-major int8
 * operands K-major (int8 wgmma reads K-major only), tensor maps, tile
 * choice.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "ctx_internal.h"
#include "gemm_s8.cuh"
#include "kern_s8.h"
#include "smem_opt_in.h"

namespace gemmk
{

namespace
{

template <int BN, int OZ>
cudaError_t launch_one_s8(const CUtensorMap &ta, const CUtensorMap &tb,
                          const S8Params &p, int grid, cudaStream_t st)
{
    static SmemOptIn opt_in; /* this kernel's (smem_opt_in.h) */
    auto kern = gemm_s8_kernel<BN, OZ>;
    constexpr int smem = S8Cfg<BN>::SMEM;
    cudaError_t e = opt_in.ensure(kern, smem);
    if (e != cudaSuccess)
        return e;
    kern<<<grid, 384, smem, st>>>(ta, tb, p);
    return cudaGetLastError();
}

/* out (cols x rows, pitch ldo) = transpose of in (rows x cols, pitch ldi),
 * bytes, through 64 x 64 shared-memory tiles; columns of out up to ldo are
 * zero-filled past rows (K padding). */
__global__ void __launch_bounds__(256)
    transpose_u8_kernel(const uint8_t *__restrict__ in, long long ldi,
                        long long rows, long long cols, uint8_t *out,
                        long long ldo)
{
    __shared__ uint8_t t[64][65];
    const long long r0 = (long long)blockIdx.y * 64,
                    c0 = (long long)blockIdx.x * 64;
    for (int i = threadIdx.x; i < 64 * 64; i += 256) {
        int a = i / 64, b = i % 64;
        long long r = r0 + a, c = c0 + b;
        t[a][b] = (r < rows && c < cols) ? in[r * ldi + c] : 0;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < 64 * 64; i += 256) {
        int a = i / 64, b = i % 64; /* out row c0 + a, column r0 + b */
        long long orow = c0 + a, ocol = r0 + b;
        if (orow < cols && ocol < ldo)
            out[orow * ldo + ocol] = t[b][a];
    }
}

template <int OZ>
cudaError_t launch_pp_s8(const CUtensorMap &ta, const CUtensorMap &tb,
                         const S8Params &p, int grid, cudaStream_t st)
{
    static SmemOptIn opt_in; /* this kernel's (smem_opt_in.h) */
    auto kern = gemm_s8_pp_kernel<OZ>;
    constexpr int smem = S8Cfg<128>::SMEM;
    cudaError_t e = opt_in.ensure(kern, smem);
    if (e != cudaSuccess)
        return e;
    kern<<<grid, 384, smem, st>>>(ta, tb, p);
    return cudaGetLastError();
}

} // namespace

cudaError_t launch_s8_pp(int oz, const CUtensorMap &ta, const CUtensorMap &tb,
                         const S8Params &p, int grid, cudaStream_t st)
{
    if (oz == 0)
        return launch_pp_s8<0>(ta, tb, p, grid, st);
    if (oz == 2)
        return launch_pp_s8<2>(ta, tb, p, grid, st);
    return cudaErrorInvalidValue;
}

cudaError_t launch_s8(int bn, int oz, const CUtensorMap &ta,
                      const CUtensorMap &tb, const S8Params &p, int grid,
                      cudaStream_t st)
{
    if (bn == 256 && oz == 0)
        return launch_one_s8<256, 0>(ta, tb, p, grid, st);
    if (bn == 128 && oz == 0)
        return launch_one_s8<128, 0>(ta, tb, p, grid, st);
    if (bn == 256 && oz == 2)
        return launch_one_s8<256, 2>(ta, tb, p, grid, st);
    return cudaErrorInvalidValue;
}

void s8_tiles(S8Params &p, int m, int n, int bn, int group_m)
{
    p.kunit = 1;
    p.m = m;
    p.n = n;
    p.num_m = (m + BM - 1) / BM;
    p.num_n = (n + bn - 1) / bn;
    p.units = p.num_m * p.num_n;
    p.group_m = group_m > 0 ? group_m : 8;
}

int s8_smem(int bn)
{
    return bn == 256 ? S8Cfg<256>::SMEM : S8Cfg<128>::SMEM;
}

} // namespace gemmk

using namespace gemmk;

namespace
{

bool al16(const void *p)
{
    return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

gemm_error validate_s8(const gemmk_problem_s8 *p)
{
    if (!p)
        return GEMM_ERR_INVALID;
    const int64_t lim = (int64_t)1 << 30;
    if (p->m < 1 || p->n < 1 || p->k < 1 || p->m > lim || p->n > lim ||
        p->k > lim)
        return GEMM_ERR_INVALID;
    if ((p->trans_a != 0 && p->trans_a != 1) ||
        (p->trans_b != 0 && p->trans_b != 1))
        return GEMM_ERR_INVALID;
    if (!p->a || !p->b || !p->d || (p->beta != 0 && !p->c))
        return GEMM_ERR_INVALID;
    if (!al16(p->a) || !al16(p->b) || !al16(p->d) ||
        (p->beta != 0 && !al16(p->c)))
        return GEMM_ERR_INVALID;
    int64_t min_lda = p->trans_a ? p->m : p->k;
    int64_t min_ldb = p->trans_b ? p->k : p->n;
    if (p->lda < min_lda || p->lda % 16 || p->ldb < min_ldb || p->ldb % 16 ||
        p->ldd < p->n || p->ldd % 4)
        return GEMM_ERR_INVALID;
    if (p->beta != 0 && (p->ldc < p->n || p->ldc % 4))
        return GEMM_ERR_INVALID;
    return GEMM_OK;
}

gemm_error cerr(cudaError_t e)
{
    if (e == cudaSuccess)
        return GEMM_OK;
    return e == cudaErrorMemoryAllocation ? GEMM_ERR_DEVICE_MEMORY
                                          : GEMM_ERR_DEVICE;
}

} // namespace

namespace gemmk
{
cudaError_t transpose_u8(const uint8_t *in, long long ldi, long long rows,
                         long long cols, uint8_t *out, long long ldo,
                         cudaStream_t st)
{
    dim3 grid((unsigned)((cols + 63) / 64), (unsigned)((ldo + 63) / 64));
    if ((ldo + 63) / 64 > 65535)
        return cudaErrorInvalidValue;
    transpose_u8_kernel<<<grid, 256, 0, st>>>(in, ldi, rows, cols, out, ldo);
    return cudaGetLastError();
}
} // namespace gemmk

namespace gemmk
{
gemm_error run_s8(gemmk_ctx *ctx, const gemmk_problem *p, cudaStream_t s,
                  const Row &row, gemmk_result *res)
{
    gemmk_problem_s8 q;
    memset(&q, 0, sizeof(q));
    q.m = p->m;
    q.n = p->n;
    q.k = p->k;
    q.trans_a = p->trans_a;
    q.trans_b = p->trans_b;
    q.a = static_cast<const int8_t *>(p->a);
    q.b = static_cast<const int8_t *>(p->b);
    q.alpha = static_cast<int32_t>(p->zalpha[0]); /* validated */
    q.beta = static_cast<int32_t>(p->zbeta[0]);
    q.c = q.beta != 0 ? static_cast<const int32_t *>(p->c) : nullptr;
    q.d = static_cast<int32_t *>(p->d);
    q.lda = p->lda;
    q.ldb = p->ldb;
    q.ldc = q.beta != 0 ? p->ldc : p->ldd;
    q.ldd = p->ldd;
    /* "auto" and ws-s8: the variant the knob picks, named as it ran */
    const Row *r = &row;
    if ((row.flags & ROW_AUTO) || row.variant == 0) {
        r = row_s8(ctx_knob(ctx, KNOB_S8_KERNEL));
        if (!r)
            r = row_s8(2);
    }
    res->kernel = r->d.name;
    gemm_error e = gemmk_gemm_s8(ctx, &q, s, r->d.name);
    if (e != GEMM_OK)
        ctx_say(ctx, "int8 GEMM %lldx%lldx%lld (%s) failed: error %d",
                (long long)p->m, (long long)p->n, (long long)p->k, r->d.name,
                (int)e);
    return e;
}
} // namespace gemmk

extern "C" gemm_error gemmk_gemm_s8(gemmk_ctx *ctx, const gemmk_problem_s8 *p,
                                    cudaStream_t stream, const char *kernel)
{
    if (!ctx)
        return GEMM_ERR_INVALID;
    gemm_error e = validate_s8(p);
    if (e != GEMM_OK)
        return e;
    /* 0: pick, 1: cooperative 128 x 128, 2: ping-pong 128 x 128, 3:
     * cooperative 128 x 256 */
    int which = 0;
    if (!gemmk_is_auto(kernel)) {
        const Row *r = row_find(kernel);
        if (!r || r->d.ab_types != (1u << GEMMK_TYPE_S8))
            return GEMM_ERR_UNSUPPORTED;
        which = r->variant;
    }
    /* K-major copies of MN-major operands: op(A) rows x kp, kp = K
     * rounded up to 16 bytes (TMA rows), zero-padded */
    const int64_t kp = (p->k + 15) / 16 * 16;
    const bool pack_a = p->trans_a, pack_b = !p->trans_b;
    size_t ba = pack_a ? (size_t)(p->m * kp + 255) / 256 * 256 : 0;
    size_t bb = pack_b ? (size_t)(p->n * kp + 255) / 256 * 256 : 0;
    const uint8_t *a = reinterpret_cast<const uint8_t *>(p->a);
    const uint8_t *b = reinterpret_cast<const uint8_t *>(p->b);
    int64_t lda = p->lda, ldb = p->ldb;
    if (pack_a || pack_b) {
        void *ws;
        e = ctx_workspace(ctx, SLOT_S8, ba + bb, &ws, stream);
        if (e != GEMM_OK)
            return e;
        uint8_t *w = static_cast<uint8_t *>(ws);
        cudaError_t ce;
        if (pack_a) { /* stored K x M -> M x kp */
            ce = transpose_u8(a, p->lda, p->k, p->m, w, kp, stream);
            if (ce != cudaSuccess)
                return cerr(ce);
            a = w;
            lda = kp;
        }
        if (pack_b) { /* stored K x N -> N x kp */
            ce = transpose_u8(b, p->ldb, p->k, p->n, w + ba, kp, stream);
            if (ce != cudaSuccess)
                return cerr(ce);
            b = w + ba;
            ldb = kp;
        }
    }
    const int sms = ctx_num_sms(ctx);
    if (which == 0) /* the ping-pong kernel unless asked otherwise */
        which = ctx_knob(ctx, KNOB_S8_KERNEL);
    const int bn = which == 3 ? 256 : 128;
    /* the bytes as 16-bit elements where K allows (measurement knob
     * GEMMK_S8_MAP16; docs/ozaki-notes.md) */
    const int ku = ctx_knob(ctx, KNOB_S8_MAP16) && p->k % 2 == 0 ? 2 : 1;
    gemmk_tmap_key ka = {}, kb = {};
    ka.addr = (uint64_t)(uintptr_t)a;
    ka.dtype = ku == 2 ? GEMM_BF16 : GEMMK_TMAP_U8;
    ka.swizzle = GEMMK_SWIZZLE_128B;
    ka.dim0 = (uint64_t)(p->k / ku);
    ka.dim1 = (uint64_t)p->m;
    ka.stride1 = (uint64_t)lda;
    ka.box0 = S8_BK / ku;
    ka.box1 = BM;
    kb = ka;
    kb.addr = (uint64_t)(uintptr_t)b;
    kb.dim1 = (uint64_t)p->n;
    kb.stride1 = (uint64_t)ldb;
    kb.box1 = (uint32_t)bn;
    CUtensorMap ta, tb;
    e = ctx_map(ctx, &ka, &ta);
    if (e == GEMM_OK)
        e = ctx_map(ctx, &kb, &tb);
    if (e != GEMM_OK)
        return e;
    S8Params sp;
    memset(&sp, 0, sizeof(sp));
    s8_tiles(sp, (int)p->m, (int)p->n, bn, ctx_knob(ctx, KNOB_S8_RASTER));
    sp.nkb = (int)((p->k + S8_BK - 1) / S8_BK);
    sp.kunit = ku;
    sp.nmod = 1;
    sp.d = p->d;
    sp.c = p->beta ? p->c : nullptr;
    sp.ldd = p->ldd;
    sp.ldc = p->ldc;
    sp.alpha = p->alpha;
    sp.beta = p->beta;
    int grid = sp.units < sms ? sp.units : sms;
    if (which == 2)
        return cerr(launch_s8_pp(0, ta, tb, sp, grid, stream));
    return cerr(launch_s8(bn, 0, ta, tb, sp, grid, stream));
}
