/*
 * ladder.h: the teaching ladder of the seed notes (003, 000 v1, 000 v2) and
 * cuBLAS as the reference, as the catalog's rows (catalog.cu) call them.
 *
 * gemmk_gemm has validated the problem and checked it against the row
 * before any of these runs. Each launches on `s` and returns the launch
 * error (cudaGetLastError after every launch).
 */
#pragma once

#include <cuda_runtime_api.h>

#include "gemm_kernels.h"

namespace gemmk
{
namespace ladder
{

/* The rungs, 1 to 5. */
cudaError_t run_naive(const gemmk_problem &p, cudaStream_t s);
cudaError_t run_smem_tiled(const gemmk_problem &p, cudaStream_t s);
cudaError_t run_reg_tiled_2d(const gemmk_problem &p, cudaStream_t s);
cudaError_t run_warp_tiled(const gemmk_problem &p, cudaStream_t s);
cudaError_t run_wgmma_basic(const gemmk_problem &p, cudaStream_t s);

/* cuBLAS (cublasLt with its heuristic) for bf16, fp16 and fp32 inputs:
 * state is created on first use in *st (one per gemmk_ctx, used by one
 * thread at a time) and freed with cublas_free. Serves every such type,
 * precision and transpose. */
struct CublasState;
gemm_error cublas_run(CublasState **st, const gemmk_problem &p, cudaStream_t s);
void cublas_free(CublasState *st);

} // namespace ladder
} // namespace gemmk
