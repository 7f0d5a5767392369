/*
 * staging_blas3.h: the CUDA backend's Blas3 jobs (symm .. trsm):
 * staging_blas3.c. Called by backend_cuda.c's gemm hook for JOB_BLAS3.
 */
#ifndef GEMMD_CUDA_STAGING_BLAS3_H
#define GEMMD_CUDA_STAGING_BLAS3_H

#include "cuda/device.h"
#include "job.h"

/*
 * Runs Blas3 job j on worker w: A and B staged (unless resident), the
 * output staged in when its old value matters, the kernel library's
 * gemmk_blas3 on w's stream, the output copied back into the client's
 * layout; sets j->ran and the stage times, or j->msg. Returns a
 * gemm_error. Worker thread (w's).
 */
int cuda_stage_blas3(cuda_worker *w, gemmd_job *j);

#endif
