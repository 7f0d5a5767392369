/*
 * slice.h: large GEMMs in slices of bounded duration. A backend cuts D
 * into tiles of at most a budget of flops (its compute rate times
 * --slice-ms) and runs one tile after another; between two tiles the
 * job's stop flag (its client left, or sent Cancel) and its `between`
 * hook (the scheduler runs small jobs of other clients there) are
 * checked. So a GEMM stops, and a small GEMM of another client starts,
 * within about one slice of a large one, whatever its size. A tile is a
 * block of D's rows and columns; op(A)'s rows and op(B)'s columns follow
 * it, K is never cut (so every element of D is summed in one call, as
 * unsliced). Worker threads.
 */
#ifndef GEMMD_SLICE_H
#define GEMMD_SLICE_H

#include "job.h"

#include <stdbool.h>
#include <stdint.h>

/* A GEMM of at most this many flops may run between the slices of
 * another (it takes milliseconds on the slowest backend). */
#define SLICE_SMALL_FLOPS (1ull << 28)

/* Bytes of a client's buffer faulted in between two yields before a
 * sliced GEMM's first tile (a few ms). */
#define SLICE_FAULT_CHUNK ((size_t)8 << 20)

/* One tile of D: rows r0.. r0+rows-1, columns c0.. c0+cols-1. */
typedef struct slice_tile {
    uint64_t r0, rows, c0, cols;
} slice_tile;

/* Runs tile t of job j; returns a gemm_error (j->msg set). */
typedef int (*slice_fn)(gemmd_job *j, const slice_tile *t, void *arg);

/* The real flops of job j: 2mnk, times 4 for complex types. Any thread. */
uint64_t slice_flops(const gemmd_job *j);

/* Whether j may run between the slices of another job: a GEMM of at most
 * SLICE_SMALL_FLOPS. Any thread. */
bool slice_small(const gemmd_job *j);

/* The tile shape for j under budget flops: *rows x *cols of D, near
 * square, each a multiple of align (elements) unless it is all of m or n
 * (so tiles of 16-byte aligned operands stay aligned);
 * the whole of D when it fits or budget is 0. Any thread. */
void slice_plan(const gemmd_job *j, uint64_t budget, uint64_t align,
                uint64_t *rows, uint64_t *cols);

/* As slice_plan, but panels of whole rows of D when one of at least 64
 * rows fits the budget (a BLAS call then packs op(B) no more often than
 * the whole GEMM would: 3-4% more CPU time than unsliced here, against
 * 6-8% for square tiles). Any thread. */
void slice_plan_panels(const gemmd_job *j, uint64_t budget, uint64_t align,
                       uint64_t *rows, uint64_t *cols);

/* Between two slices of j (done of total run): runs its between hook,
 * then returns whether j must stop; if so sets j->msg (and the caller
 * returns slice_stopped(j)). Worker thread. */
bool slice_yield(gemmd_job *j, uint64_t done, uint64_t total);

/* The status of a job stopped by slice_yield: GEMM_ERR_CLOSED (its
 * client left) or GEMM_ERR_TIMEOUT (canceled while running). */
int slice_stopped(const gemmd_job *j);

/* Runs fn on each tile of j's plan (slice_plan_panels) in order, yielding
 * between tiles; a GEMM of more than one tile has its operands' pages
 * faulted in first, SLICE_FAULT_CHUNK between two yields. Returns GEMM_OK, fn's
 * error, or slice_stopped(j) when it stopped (D then partly written). Worker
 * thread. */
int slice_run(gemmd_job *j, uint64_t budget, uint64_t align, slice_fn fn,
              void *arg);

/* Element offsets, in j's own layouts, of tile t's first row of op(A)
 * (ld lda), first column of op(B) (ld ldb) and first element of D (ld
 * ldd). Any thread. */
uint64_t slice_off_a(const gemmd_job *j, const slice_tile *t, uint64_t lda);
uint64_t slice_off_b(const gemmd_job *j, const slice_tile *t, uint64_t ldb);
uint64_t slice_off_d(const slice_tile *t, uint64_t ldd);

#endif
