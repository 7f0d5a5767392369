/*
 * ladder.h: the teaching ladder of the seed notes (003, 000 v1, 000 v2) and
 * cuBLAS as the reference, as the kernel catalog (api.cu) calls them.
 *
 * The catalog has checked types, precision and transposes against each
 * entry's gemmk_kernel_desc and validated dims, pointers and leading
 * dimensions before any of these runs. Each launches on `s` and returns
 * the launch error (cudaGetLastError after every launch).
 */
#pragma once

#include <cuda_runtime_api.h>

#include "gemm_kernels.h"

namespace gemmk
{
namespace ladder
{

/* The ladder's descriptors, rungs 1..5 in order, and "cublas" (reference). */
extern const gemmk_kernel_desc kDescs[];
extern const int kNumDescs;

/* Runs ladder kernel `name` (one of kDescs, not "cublas"). */
cudaError_t run(const char *name, const gemmk_problem &p, cudaStream_t s);

/* cuBLAS (cublasLt with its heuristic): state is created on first use in
 * *st (one per gemmk_ctx, used by one thread at a time) and freed with
 * cublas_free. Serves every type, precision and transpose. */
struct CublasState;
gemm_error cublas_run(CublasState **st, const gemmk_problem &p, cudaStream_t s);
void cublas_free(CublasState *st);

} // namespace ladder
} // namespace gemmk
