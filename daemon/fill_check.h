/*
 * fill_check.h: a test of clients that fill a GEMM or level-3 request by
 * parts (proto's Fill). The CPU backend waits for the whole fill, so a client
 * that writes a part after raising the counter past it goes unnoticed
 * there, while on the GPU gemmd would have read the part too early. With
 * GEMMD_TEST_FILL_ORDER=1 in gemmd's environment (tests only, logged at
 * start) the CPU backend follows the counter step by step instead,
 * fingerprints what each step says is final when it says so, and fails
 * the job if any of it changed by the time the job has run.
 */
#ifndef GEMMD_FILL_CHECK_H
#define GEMMD_FILL_CHECK_H

#include "job.h"

/* Whether GEMMD_TEST_FILL_ORDER is set (read once, logged). */
bool fill_check_on(void);

#include <fill.h>

/* What a check saw of a job: each step's fingerprint. */
typedef struct fill_check {
    bool on;                                   /* checked (fill_wait_whole) */
    uint64_t seen[GEMM_FILL_MAX_PARTS + 2];    /* step v, every operand */
    uint64_t seen_in[GEMM_FILL_MAX_PARTS + 2]; /* step v, the inputs */
} fill_check;

/* Waits for j's whole fill step by step, fingerprinting what each step
 * makes final once the counter says so. GEMM_OK or the wait's error
 * (j->msg). The worker's thread. */
int fill_check_wait(gemmd_job *j, fill_check *c);

/* GEMM_OK when nothing a step made final has changed since, else
 * GEMM_ERR_INVALID naming the first such step (j->msg). out: the
 * output's old value too (before the job writes it); else the inputs
 * only (after the job ran: the longer after the steps, the more a late
 * write shows). */
int fill_check_done(gemmd_job *j, const fill_check *c, bool out);

/* A job that reads its operands all at once (the CPU backend): waits for
 * j's whole fill (nothing when it has none), under GEMMD_TEST_FILL_ORDER
 * step by step with the output's old value checked before the job
 * writes it. GEMM_OK or the error (j->msg). fill_check_after, once the
 * job has run: the inputs checked, when c->on. */
int fill_wait_whole(gemmd_job *j, fill_check *c);
int fill_check_after(gemmd_job *j, const fill_check *c);

#endif
