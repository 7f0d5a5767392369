/*
 * staging_batch.h: a whole batch in one gemmk_gemm_grouped call on the
 * CUDA backend (staging_batch.c), the backend's batch hook.
 */
#ifndef GEMMD_CUDA_STAGING_BATCH_H
#define GEMMD_CUDA_STAGING_BATCH_H

#include "cuda/device.h"
#include "job.h"

#include <stdbool.h>

/*
 * Runs batch job j (JOB_BATCH) on worker w in one gemmk_gemm_grouped
 * call: the inputs staged once per distinct host range, the Ds written
 * on the device and copied back, all on w's stream and waited for. Sets
 * *declined (and runs nothing) for what that call would not run as the
 * problems run one by one: inputs other than bf16/fp16 and the wide
 * types (fp64, complex64, complex128), a kernel named other than "auto",
 * a grouped one (grouped128x128, grouped128x256: 16-bit inputs only) or
 * "cublas" (wide inputs only), resident operands, or more device memory
 * than the limit allows at once; gemmd_batch_run then runs the problems
 * one by one. Otherwise sets j's stage times, nran and ran (the grouped
 * kernel when 16-bit problems ran: its tile width is the library's
 * choice, whichever name was asked for; else "cublas"), and on failure
 * j->failed and j->msg; returns a gemm_error. Worker thread (w's).
 */
int cuda_stage_batch(cuda_worker *w, gemmd_job *j, bool *declined);

#endif
