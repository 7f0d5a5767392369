/*
 * split.h: one large GEMM on several devices at once. A GEMM of at least
 * --split-volume (m*n*k) becomes panels of D's rows, one per GPU (or CPU
 * device) in placement, on its least loaded device object: each panel job reads
 * its rows of A (its columns when A is transposed), all of B, its rows of C and
 * writes its rows of D, and runs as any job does (staged and overlapped on its
 * device). Every panel runs the kernel the whole would have (the backend's
 * split_kernel hook), so the result is the one-device result, bit for bit,
 * where the kernel is deterministic. The whole goes back to the loop when its
 * last panel has finished, with the first failure's status if any failed.
 * The scheduler queues the panels and finishes the whole: split.c only
 * cuts and gathers.
 */
#ifndef GEMMD_SPLIT_H
#define GEMMD_SPLIT_H

#include "scheduler.h"

#include <stdatomic.h>

enum split_fate { SPLIT_UNDECIDED, SPLIT_RUN, SPLIT_EXPIRED };

/* A split GEMM: the client's job and its panels. */
typedef struct split_parent {
    gemmd_job *whole;
    gemmd_job *parts; /* nparts jobs */
    unsigned nparts;
    unsigned left;   /* panels not finished yet; under sched.mu */
    atomic_int fate; /* SPLIT_UNDECIDED, then for every panel alike:
                        SPLIT_RUN or SPLIT_EXPIRED */
} split_parent;

/* Whether j is to be split across the devices now. Under s->mu. */
bool split_wanted(sched *s, const gemmd_job *j);

/* Cuts j into panels (j->split->parts), each with the device in placement
 * it is to run on (its `device`) and its cost there; the caller queues
 * them. Returns GEMM_OK, GEMM_ERR_UNSUPPORTED or GEMM_ERR_NOMEM (j is then
 * placed whole by the caller). Under s->mu. */
int split_submit(sched *s, gemmd_job *j);

/* Whether panel j runs (true) or is dropped for its deadline: the first
 * panel to start decides for all of them, so they run all or none. Worker
 * thread. */
bool split_part_runs(gemmd_job *j, uint64_t now_ns);

/* A panel finished: when it is the last, fills the whole's outcome, frees
 * the panels and returns the whole, for the caller to finish; NULL while
 * panels remain. Worker thread, not under s->mu. */
gemmd_job *split_part_done(sched *s, gemmd_job *part);

#endif
