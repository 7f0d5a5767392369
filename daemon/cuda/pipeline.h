/*
 * pipeline.h: one large staged GEMM in panels whose transfers overlap
 * its compute (pipeline.c). D is cut into panels of rows (op(A) streams
 * in, B comes whole first) or of columns (op(B) streams in, A first),
 * whichever a model of the link says copies faster; on the worker's copy
 * streams panel i+1 comes in and panel i-1 goes out while panel i
 * computes, so a GEMM costs about the first operand's copy plus the
 * largest of the rest, not the sum of its stages. Every panel is a whole
 * set of rows or columns of D with K uncut: each element of D is
 * computed by one kernel call, as unpanelled.
 */
#ifndef GEMMD_CUDA_PIPELINE_H
#define GEMMD_CUDA_PIPELINE_H

#include "cuda/device.h"
#include "cuda/slices.h"
#include "job.h"

#include <stdbool.h>

/* Sets the number of panels a large GEMM is cut into (--gemm-panels; 0
 * or 1: none). Main thread, before the workers run. */
void cuda_pipeline_init(unsigned panels);

/* Where a pipelined GEMM's operands are on the device, and which the
 * panels copy in from the client (j's host pointers). */
typedef struct cuda_pipe {
    gemmk_problem kp;  /* the whole problem on device operands */
    bool copy_a;       /* A copied from j->a (else resident) */
    bool copy_b;       /* B copied from j->b */
    bool copy_c;       /* C copied from j->c into c_dst */
    void *c_dst;       /* where C goes: its staging, or D's (wide types) */
    uint64_t c_dst_ld; /* elements */
    enum cudaMemcpyKind c_kind; /* host to device, or device to device */
} cuda_pipe;

/* The panels job j (kp: its problem on the device; w the worker that
 * runs it) would run in (0: not
 * pipelined: too small, a slice-sized panel would be thinner than 128
 * rows, or its kernel rewrites both operands where that costs more than
 * the overlap gains). Any thread. */
unsigned cuda_pipe_panels(cuda_worker *w, const gemmd_job *j,
                          const gemmk_problem *kp);

/*
 * Runs job j as set out in p with run on each panel: the copies in on
 * w's in stream, the kernels on w's stream, D out on its out stream, at
 * most two panels' kernels in flight with j's stop flag checked between
 * them. Records w's events: ev[0] at the start, ev[1] after the last
 * copy in, ev[2] after the last kernel, ev[3] after the last copy out.
 * On success w's stream waits for every copy (what the caller frees on
 * it after is freed after them); on failure every stream is synchronized.
 * Returns run's error, slice_stopped(j), or a CUDA failure (j->msg set).
 * Worker thread (w's).
 */
int cuda_pipe_run(cuda_worker *w, gemmd_job *j, const cuda_pipe *p,
                  cuda_run_fn run);

/* The summed kernel time of the panels of w's last cuda_pipe_run, once
 * its stream has been synchronized. Worker thread (w's). */
uint64_t cuda_pipe_kernel_ns(cuda_worker *w, unsigned panels);

#endif
