/*
 * ladder.cu: the ladder's catalog entries (the descriptors api.cu lists and
 * checks requests against) and the name -> rung dispatch.
 */
#include <string.h>

#include "common.cuh"
#include "ladder.h"

namespace gemmk
{
namespace ladder
{

namespace
{
constexpr unsigned kAll16 = (1u << GEMM_BF16) | (1u << GEMM_FP16);
constexpr unsigned kAllTypes = kAll16 | (1u << GEMM_FP32);
/* True fp32 FMA on the CUDA cores: what DEFAULT and FP32 ask for. */
constexpr unsigned kPrecFp32 =
    (1u << GEMM_PRECISION_DEFAULT) | (1u << GEMM_PRECISION_FP32);
constexpr unsigned kPrecAll = kPrecFp32 | (1u << GEMM_PRECISION_TF32);
} // namespace

const gemmk_kernel_desc kDescs[] = {
    {"naive", 1, 0, "one thread per output, dot product from global memory",
     kAllTypes, kAllTypes, kPrecFp32, GEMMK_TRANS_ALL},
    {"smem-tiled", 2, 0, "32x32 tiles of A and B staged in shared memory",
     kAllTypes, kAllTypes, kPrecFp32, GEMMK_TRANS_ALL},
    {"reg-tiled-2d", 3, 0,
     "64x64 smem tiles, each thread an 8x8 block of C in registers", kAllTypes,
     kAllTypes, kPrecFp32, GEMMK_TRANS_ALL},
    {"warp-tiled", 4, 0,
     "128x128 blocks, 64x64 warp tiles, 8x4 thread tiles (seed 000 v1)",
     kAllTypes, kAllTypes, kPrecFp32, GEMMK_TRANS_ALL},
    {"wgmma-basic", 5, 0,
     "TMA + one warpgroup wgmma m64n64k16, 64x64x64 blocks, no pipeline",
     kAll16, kAllTypes, 0, GEMMK_TRANS_ALL},
    {"cublas", 0, 1, "cuBLASLt (heuristic's first algorithm), the reference",
     kAllTypes, kAllTypes, kPrecAll, GEMMK_TRANS_ALL},
};
const int kNumDescs = sizeof(kDescs) / sizeof(kDescs[0]);

cudaError_t run(const char *name, const gemmk_problem &p, cudaStream_t s)
{
    if (!name)
        return cudaErrorInvalidValue;
    if (strcmp(name, "naive") == 0)
        return run_naive(p, s);
    if (strcmp(name, "smem-tiled") == 0)
        return run_smem_tiled(p, s);
    if (strcmp(name, "reg-tiled-2d") == 0)
        return run_reg_tiled_2d(p, s);
    if (strcmp(name, "warp-tiled") == 0)
        return run_warp_tiled(p, s);
    if (strcmp(name, "wgmma-basic") == 0)
        return run_wgmma_basic(p, s);
    return cudaErrorInvalidValue;
}

} // namespace ladder
} // namespace gemmk
