/*
 * staging.h: how a job's matrices reach a device and come back
 * (staging.c): the one GEMM path for every type (operands staged in,
 * the kernel library's multiply, D copied out, each stage timed) and
 * resident tensors (upload, free).
 */
#ifndef GEMMD_CUDA_STAGING_H
#define GEMMD_CUDA_STAGING_H

#include "cuda/device.h"
#include "job.h"

/*
 * Runs GEMM job j on worker w: A, B and C staged to w's device with a
 * pitch of 8 elements unless resident (or, for tiny GEMMs on pinned
 * buffers, read in place over PCIe), the multiply on w's stream, D copied
 * back into the client's layout; sets j->ran and the stage times, or
 * j->msg. Returns a gemm_error. Worker thread (w's).
 */
int cuda_stage_gemm(cuda_worker *w, gemmd_job *j);

/* The problem of gemmd job j with no operands yet, for gemmk_check. Any
 * thread. */
gemmk_problem cuda_job_problem(const gemmd_job *j);

/* The leading dimension, in elements, of a staged matrix of cols
 * es-byte elements: 8 elements and 16 bytes at least (a multiple of
 * both). Any thread. */
uint64_t cuda_pitch_elems(uint64_t cols, size_t es);

/* `bytes` of device memory from w's device's pool, on w's stream, counted
 * against the daemon's device-memory limit: GEMM_ERR_DEVICE_MEMORY past
 * it or when the pool has none (msg says which). cuda_dev_free gives it
 * back (NULL: nothing). Worker thread (w's). */
int cuda_dev_alloc(cuda_worker *w, size_t bytes, void **out, char *msg,
                   size_t len);
void cuda_dev_free(cuda_worker *w, void *p, size_t bytes);

/* Whether every buffer job j holds is pinned (copies from it then queue
 * without the host, and kernels may read it in place). Any thread. */
bool cuda_job_pinned(const gemmd_job *j);

/* Sets j's stage times from w->ev[0..3] (start, copies in done, kernels
 * done, copies out done), which have all completed. */
int cuda_stage_times(cuda_worker *w, gemmd_job *j);

/*
 * JOB_UPLOAD: copies j's matrix into device memory of w's device with a
 * pitch of 8 elements and fills j->tensor (its pin handle, a
 * cuda_tensor at home on w's device, is what cuda_tensor_release takes).
 * Returns a gemm_error with j->msg. Worker thread.
 */
int cuda_stage_upload(cuda_worker *w, gemmd_job *j);

#endif
