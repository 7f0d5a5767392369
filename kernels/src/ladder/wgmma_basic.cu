/*
 * wgmma_basic.cu: rung 5 of the ladder (seed 000 version 2): the tensor
 * cores through TMA and one warpgroup's wgmma. A block of 128 threads (one
 * warpgroup) computes a 64 x 64 tile of D; per K step of 64 one thread
 * issues two TMA loads (cp.async.bulk.tensor, 128B swizzle) of the 64 x 64
 * tiles of op(A) and op(B), whose completion the block awaits on a
 * cuda::barrier with expect_tx; then four wgmma.mma_async m64n64k16 (fp32
 * accumulators, 32 registers a thread) consume the tiles, and the block
 * waits for them before the next load overwrites shared memory. No
 * pipelining: load and compute alternate, which is what rung 6 and the
 * production kernels fix.
 *
 * Layouts: op(A) is K-major when A is stored M x K (trans_a = 0) and
 * MN-major when stored K x M; op(B) is K-major when B is stored N x K
 * (trans_b = 1) and MN-major when stored K x N. Each tile is one TMA box
 * of 64 x 128 bytes along the contiguous dimension; the MN-major cases set
 * wgmma's transpose bit (16-bit types only, hence bf16/fp16 inputs only).
 * Out-of-range box elements are zero-filled by TMA, so any M, N, K works;
 * the epilogue stores only in-range elements.
 *
 * cuTensorMapEncodeTiled comes from the driver through
 * cudaGetDriverEntryPointByVersion (libcuda is never linked).
 */
#include <cuda.h>
#include <cuda/barrier>
#include <utility>

#include "common.cuh"

namespace gemmk
{
namespace ladder
{
namespace
{

using barrier = cuda::barrier<cuda::thread_scope_block>;
namespace cde = cuda::device::experimental;

constexpr int BM = 64, BN = 64, BK = 64, WGMMA_K = 16;
constexpr int kThreads = 128;
/* 128B swizzle: 8 rows of 128 bytes repeat every 1024 bytes. */
constexpr uint32_t kSbo = 1024;

/*
 * The shared-memory matrix descriptor of a 128B-swizzled tile at `addr`
 * (PTX "Matrix Descriptor Format"): start >> 4 in bits 0-13, leading byte
 * offset >> 4 in 16-29, stride byte offset >> 4 in 32-45, swizzle mode in
 * 62-63 (1 = 128B). K-major: rows of 64 K-elements, LBO unused (16), SBO =
 * 8 rows. MN-major: rows of 64 MN-elements, one per k; LBO would be the
 * distance to the next 64-wide MN slab (a single slab here), SBO = 8 rows
 * of k.
 */
__device__ __forceinline__ uint64_t make_desc(uint32_t addr, uint32_t lbo)
{
    uint64_t d = 0;
    d |= static_cast<uint64_t>((addr & 0x3FFFF) >> 4);
    d |= static_cast<uint64_t>((lbo & 0x3FFFF) >> 4) << 16;
    d |= static_cast<uint64_t>((kSbo & 0x3FFFF) >> 4) << 32;
    d |= 1ull << 62;
    return d;
}

/* Descriptor of the k-th 16-wide K slice of a tile: K-major tiles advance
 * 16 elements (32 bytes) along the row, MN-major tiles 16 rows. */
template <bool MN_MAJOR>
__device__ __forceinline__ uint64_t slice_desc(const void *tile, int kk)
{
    uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
    if (MN_MAJOR)
        return make_desc(base + kk * WGMMA_K * 128, BK * 128);
    return make_desc(base + kk * WGMMA_K * 2, 16);
}

__device__ __forceinline__ void warpgroup_arrive()
{
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void warpgroup_commit_batch()
{
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void warpgroup_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

/* d += A(desc_a) * B(desc_b), m64n64k16, fp32 accumulators. TA/TB: the
 * transpose immediates (1 = MN-major). */
#define GEMMK_WGMMA_64x64(TYPE)                                                \
    asm volatile(                                                              \
        "{\n"                                                                  \
        "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " "        \
        "{%0,  %1,  %2,  %3,  %4,  %5,  %6,  %7,  "                            \
        " %8,  %9,  %10, %11, %12, %13, %14, %15, "                            \
        " %16, %17, %18, %19, %20, %21, %22, %23, "                            \
        " %24, %25, %26, %27, %28, %29, %30, %31},"                            \
        " %32, %33, 1, 1, 1, %34, %35;\n"                                      \
        "}\n"                                                                  \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]),          \
          "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]),          \
          "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),     \
          "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),     \
          "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),     \
          "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),     \
          "+f"(d[30]), "+f"(d[31])                                             \
        : "l"(desc_a), "l"(desc_b), "n"(TA), "n"(TB))

template <bool F16, int TA, int TB>
__device__ __forceinline__ void wgmma64(float (&d)[32], uint64_t desc_a,
                                        uint64_t desc_b)
{
    if constexpr (F16)
        GEMMK_WGMMA_64x64("f16");
    else
        GEMMK_WGMMA_64x64("bf16");
}
#undef GEMMK_WGMMA_64x64

template <bool F16, bool TA, bool TB>
__global__ void __launch_bounds__(kThreads)
    wgmma_basic_kernel(const __grid_constant__ CUtensorMap tma_a,
                       const __grid_constant__ CUtensorMap tma_b, Epilogue e,
                       int m, int n, int k)
{
    /* K-major: [mn][k]; MN-major: [k][mn]; 128B-swizzled by TMA. */
    __shared__ __align__(1024) uint16_t sA[BM * BK];
    __shared__ __align__(1024) uint16_t sB[BK * BN];
    /* Raw storage: a __shared__ barrier may not have a constructor run;
     * init() below sets it up. */
    __shared__ alignas(barrier) unsigned char bar_raw[2][sizeof(barrier)];
    barrier &barA = *reinterpret_cast<barrier *>(bar_raw[0]);
    barrier &barB = *reinterpret_cast<barrier *>(bar_raw[1]);
    /* op(A) MN-major when A is stored K x M; op(B) when stored K x N. */
    constexpr bool kAmn = TA, kBmn = !TB;

    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    float d[32] = {};

    if (threadIdx.x == 0) {
        init(&barA, blockDim.x);
        init(&barB, blockDim.x);
        cde::fence_proxy_async_shared_cta();
    }
    __syncthreads();

    for (int k0 = 0; k0 < k; k0 += BK) {
        barrier::arrival_token tok_a, tok_b;
        if (threadIdx.x == 0) {
            /* Tensor maps are {inner, outer}: coordinates likewise. */
            cde::cp_async_bulk_tensor_2d_global_to_shared(
                sA, &tma_a, kAmn ? m0 : k0, kAmn ? k0 : m0, barA);
            tok_a = cuda::device::barrier_arrive_tx(barA, 1, sizeof(sA));
            cde::cp_async_bulk_tensor_2d_global_to_shared(
                sB, &tma_b, kBmn ? n0 : k0, kBmn ? k0 : n0, barB);
            tok_b = cuda::device::barrier_arrive_tx(barB, 1, sizeof(sB));
        } else {
            tok_a = barA.arrive();
            tok_b = barB.arrive();
        }
        barA.wait(std::move(tok_a));
        barB.wait(std::move(tok_b));

        warpgroup_arrive();
#pragma unroll
        for (int kk = 0; kk < BK / WGMMA_K; ++kk)
            wgmma64<F16, kAmn, kBmn>(d, slice_desc<kAmn>(sA, kk),
                                     slice_desc<kBmn>(sB, kk));
        warpgroup_commit_batch();
        warpgroup_wait<0>();
        /* Every warp is done reading sA/sB before thread 0 reloads them. */
        __syncthreads();
    }

    /* Accumulator layout of m64nNk16: warp w owns rows 16w..16w+15; lane
     * l holds rows 16w + l/4 (+8) and, per 8-column group g, columns
     * 8g + 2(l%4) (+1). */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row = m0 + warp * 16 + lane / 4;
#pragma unroll
    for (int g = 0; g < BN / 8; ++g) {
        const int col = n0 + 8 * g + 2 * (lane % 4);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = row + 8 * h;
            if (r >= m)
                continue;
            if (col < n)
                e.store(r, col, d[g * 4 + h * 2]);
            if (col + 1 < n)
                e.store(r, col + 1, d[g * 4 + h * 2 + 1]);
        }
    }
}

typedef CUresult (*encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType,
                                    cuuint32_t, void *, const cuuint64_t *,
                                    const cuuint64_t *, const cuuint32_t *,
                                    const cuuint32_t *, CUtensorMapInterleave,
                                    CUtensorMapSwizzle, CUtensorMapL2promotion,
                                    CUtensorMapFloatOOBfill);

/* The driver's cuTensorMapEncodeTiled, looked up once; NULL if missing. */
encode_tiled_fn encoder()
{
    static encode_tiled_fn fn = [] {
        void *p = nullptr;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p,
                                             12000, cudaEnableDefault,
                                             &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess)
            return static_cast<encode_tiled_fn>(nullptr);
        return reinterpret_cast<encode_tiled_fn>(p);
    }();
    return fn;
}

/* A 64 x 64 box, 128B-swizzled, over a row-major matrix of `rows` rows of
 * `cols` contiguous 16-bit elements (leading dimension ld). */
cudaError_t encode(CUtensorMap *map, bool f16, const void *ptr, int64_t rows,
                   int64_t cols, int64_t ld)
{
    encode_tiled_fn fn = encoder();
    if (!fn)
        return cudaErrorNotSupported;
    cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols),
                          static_cast<cuuint64_t>(rows)};
    cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * 2};
    cuuint32_t box[2] = {64, 64};
    cuuint32_t elem[2] = {1, 1};
    CUresult r = fn(map,
                    f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                        : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                    2, const_cast<void *>(ptr), dims, strides, box, elem,
                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                    CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

template <bool F16, bool TA, bool TB>
cudaError_t launch(const CUtensorMap &a, const CUtensorMap &b,
                   const gemmk_problem &p, cudaStream_t s)
{
    dim3 grid(cdiv(p.n, BN), cdiv(p.m, BM));
    wgmma_basic_kernel<F16, TA, TB><<<grid, kThreads, 0, s>>>(
        a, b, make_epilogue(p), static_cast<int>(p.m), static_cast<int>(p.n),
        static_cast<int>(p.k));
    return cudaGetLastError();
}

template <bool F16>
cudaError_t launch_trans(const CUtensorMap &a, const CUtensorMap &b,
                         const gemmk_problem &p, cudaStream_t s)
{
    if (p.trans_a)
        return p.trans_b ? launch<F16, true, true>(a, b, p, s)
                         : launch<F16, true, false>(a, b, p, s);
    return p.trans_b ? launch<F16, false, true>(a, b, p, s)
                     : launch<F16, false, false>(a, b, p, s);
}

} // namespace

cudaError_t run_wgmma_basic(const gemmk_problem &p, cudaStream_t s)
{
    if (p.ab_type != GEMM_BF16 && p.ab_type != GEMM_FP16)
        return cudaErrorInvalidValue;
    /* TMA coordinates and grid.y are 32-bit / 65535-bounded. */
    if (p.m > INT32_MAX || p.n > INT32_MAX || p.k > INT32_MAX ||
        cdiv(p.m, BM) > 65535)
        return cudaErrorInvalidConfiguration;
    const bool f16 = p.ab_type == GEMM_FP16;
    CUtensorMap a, b;
    /* Stored A: M x K, or K x M when trans_a; B: K x N, or N x K. */
    cudaError_t e = p.trans_a ? encode(&a, f16, p.a, p.k, p.m, p.lda)
                              : encode(&a, f16, p.a, p.m, p.k, p.lda);
    if (e == cudaSuccess)
        e = p.trans_b ? encode(&b, f16, p.b, p.n, p.k, p.ldb)
                      : encode(&b, f16, p.b, p.k, p.n, p.ldb);
    if (e != cudaSuccess)
        return e;
    return f16 ? launch_trans<true>(a, b, p, s)
               : launch_trans<false>(a, b, p, s);
}

} // namespace ladder
} // namespace gemmk
