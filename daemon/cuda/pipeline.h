/*
 * pipeline.h: one large staged GEMM in blocks whose transfers overlap
 * its compute (pipeline.c). The cut is pipe_plan's: D in nr x nc blocks,
 * op(A) coming in as row panels and op(B) as column panels in the order
 * that readies work soonest, by a model of the link and the kernels whose
 * rates this device measured. Every copy in runs back to back on the
 * worker's in stream; a block's kernel starts on the worker's stream once
 * its panels (and its part of C) are in, and its part of D goes out on
 * the out stream as soon as it is done. So a GEMM costs about its copies
 * in plus the last blocks' kernels and copies out, not the sum of its
 * stages. K is never cut: each element of D is computed by one kernel
 * call, as unpanelled.
 */
#ifndef GEMMD_CUDA_PIPELINE_H
#define GEMMD_CUDA_PIPELINE_H

#include "cuda/device.h"
#include "cuda/slices.h"
#include "job.h"
#include "pipe_plan.h"

#include <stdbool.h>

/* Sets the most panels a dimension of a large GEMM is cut into
 * (--gemm-panels; 0 or 1: none). Main thread, before the workers run. */
void cuda_pipeline_init(unsigned panels);

/* Where a pipelined GEMM's operands are on the device, which the panels
 * copy in from the client (j's host pointers), and the plan. */
typedef struct cuda_pipe {
    gemmk_problem kp;  /* the whole problem on device operands */
    bool copy_a;       /* A copied from j->a (else resident) */
    bool copy_b;       /* B copied from j->b */
    bool copy_c;       /* C copied from j->c into c_dst */
    void *c_dst;       /* where C goes: its staging, or D's (wide types) */
    uint64_t c_dst_ld; /* elements */
    enum cudaMemcpyKind c_kind; /* host to device, or device to device */
    pipe_plan plan;             /* cuda_pipe_plan's */
    bool measure;               /* every copy timed for cuda_pipe_learn */
    bool gated; /* j is filled by parts, followed by w's fill (fill.h):
                   each copy in waits for its part */
    bool drain; /* j's drain word (at drain_dev on the device) says D's
                   rows as they land (cuda_drain_post) */
    uint64_t drain_dev;
} cuda_pipe;

/* The plan for job j (kp: its problem on the device; w the worker that
 * runs it) into *plan, from w's cache of plans or pipe_choose, and
 * whether to measure it (pipe_measure) into *measure; returns its
 * block count, 0 when j runs whole (too small, --gemm-panels 0, crowded:
 * more jobs waiting on the device than its workers take, or no cut is
 * predicted to beat running whole). Worker thread (w's). */
unsigned cuda_pipe_plan(cuda_worker *w, const gemmd_job *j,
                        const gemmk_problem *kp, pipe_plan *plan,
                        bool *measure);

/*
 * Runs job j as set out in p with run on each block: the copies in on
 * w's in stream, the kernels on w's stream, D out on its out stream, at
 * most two blocks' kernels in flight with j's stop flag checked between
 * them. Records w's events: ev[0] at the start, ev[1] after the last
 * copy in, ev[2] after the last kernel, ev[3] after the last copy out.
 * Gated: C waits for the fill counter's 1, B's copies for each of its
 * parts along K and each panel of A for its rows' part (common/fill.h's
 * GEMM cuts). Drained: after each copy out
 * that completes a row of blocks (all before it complete), the drain
 * word goes to the rows final. On success w's stream waits for
 * every copy (what the caller frees on it after is freed after them); on
 * failure the fill's waits are released (cuda_fill_end, giving up) and
 * every stream is synchronized.
 * Returns run's error, slice_stopped(j), or a CUDA failure (j->msg set).
 * Worker thread (w's).
 */
int cuda_pipe_run(cuda_worker *w, gemmd_job *j, const cuda_pipe *p,
                  cuda_run_fn run);

/* Once w's stream has been synchronized after cuda_pipe_run of p: the
 * summed kernel time of its blocks in ns; a measured p is kept for
 * cuda_pipe_learn. Worker thread (w's). */
uint64_t cuda_pipe_finish(cuda_worker *w, const gemmd_job *j,
                          const cuda_pipe *p);

/* After the reply of the calling worker's last measured pipelined GEMM
 * (if any, and only once): folds the rates its copies and kernels ran at
 * and the gaps between its blocks into its device's table (the next
 * plans' model) and logs its blocks' timeline at debug level. Worker
 * thread, before its next job. */
void cuda_pipe_learn(void);

#endif
