/*
 * batch.h: the Batch request kind: many GEMMs (a strided batch or a group
 * of different shapes) in one request and one reply. Every problem is
 * validated as a single GEMM is (validate.c, over the registry's scope),
 * then across problems (validate_batch.c: no D overlaps another problem's
 * operand), and the batch is admitted whole: --max-batch problems, the
 * sum of their flops against --max-gemm-flops, its memory against the
 * budget, one place in the queues. When any problem is bad nothing runs
 * and the reply lists the bad ones. A valid batch becomes one JOB_BATCH
 * job holding a JOB_GEMM job per problem; gemmd_batch_run (batch_run.c)
 * runs them on a worker and complete.c answers once. Loop thread only.
 */
#ifndef GEMMD_BATCH_H
#define GEMMD_BATCH_H

#include "gemmd.h"

#include "gemm.pb-c.h"

/* Bad problems a reply lists (the lowest indices); the rest are counted. */
#define BATCH_ERRORS_MAX 64

/* The handler: validate, admit, enqueue; or reply with the errors. */
void batch_handle(gemmd *d, sp_req *q, const Gemm__Request *req);

#endif
