/*
 * slices.h: the CUDA backend's GEMMs in slices (slices.c). A staged GEMM
 * larger than one slice runs as kernel launches on tiles of D (slice.h),
 * each sized from the flops its type runs at on the device so that one
 * stays well under --slice-ms; at most two are in flight, and between
 * them the job's stop flag is checked, so a GEMM whose client left or
 * canceled stops within two slices and the other workers' kernels get the
 * device between them.
 */
#ifndef GEMMD_CUDA_SLICES_H
#define GEMMD_CUDA_SLICES_H

#include "cuda/device.h"
#include "job.h"
#include "slice.h"

/* Runs one problem on w's stream: the staging path's kernel call. */
typedef int (*cuda_run_fn)(cuda_worker *w, gemmd_job *j,
                           const gemmk_problem *kp);

/* Sets the slice bound (--slice-ms; 0 = whole GEMMs). Main thread, before
 * the workers run. */
void cuda_slices_init(unsigned slice_ms);

/* The flops of one slice of j on the device (0 = whole). Any thread. */
uint64_t cuda_slice_budget(const gemmd_job *j);

/* Tile t of kp, job j's problem on device operands: its pointers
 * offset, m and n cut. Any thread. */
gemmk_problem cuda_tile_problem(const gemmd_job *j, const gemmk_problem *kp,
                                const slice_tile *t);

/* Runs kp, job j's problem on device operands, with run: at once when it
 * fits one slice, else tile by tile (its pointers offset, m and n cut),
 * stopping when j is asked to. Returns run's error, or slice_stopped(j)
 * (the stream synchronized; D's device copy partly written). Worker
 * thread (w's). */
int cuda_slices_run(cuda_worker *w, gemmd_job *j, const gemmk_problem *kp,
                    cuda_run_fn run);

#endif
