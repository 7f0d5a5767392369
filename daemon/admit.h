/*
 * admit.h: limits, budgets and accounting. Per connection, per user (uid)
 * and for the whole daemon: registered buffers and bytes (resident tensors
 * count as bytes too), jobs queued or running, and the daemon's memory
 * budget (the scratch a job needs and tensors held in host memory), which
 * is reserved when a job is admitted and given back when it ends. The
 * checks return a gemm_error and a message; the caller replies. Loop
 * thread only.
 */
#ifndef GEMMD_ADMIT_H
#define GEMMD_ADMIT_H

#include "gemmd.h"

#include <stddef.h>
#include <stdint.h>

/* Whether bytes more fit under c's and its user's byte caps: GEMM_OK, or
 * LIMIT with a message naming `what`. */
int admit_bytes(gemmd *d, conn *c, uint64_t bytes, const char *what, char *msg,
                size_t len);

/* Charges bytes (negative: gives back) to c and its user. */
void admit_charge_bytes(conn *c, int64_t bytes);

/* Whether c may register one more buffer: GEMM_OK or LIMIT with a
 * message. */
int admit_buffer(gemmd *d, conn *c, char *msg, size_t len);

/* A buffer of size bytes was registered on c. */
void admit_buffer_added(conn *c, uint64_t size);

/* Whether GEMM job j (filled) is within --max-gemm-flops: GEMM_OK, or
 * LIMIT with a message naming the knob. */
int admit_flops(gemmd *d, const gemmd_job *j, char *msg, size_t len);

/* Admission of work (a GEMM or an upload) from c that needs mem bytes of
 * the memory budget: the queue, the connection's and the user's shares of
 * it, and the budget have room. GEMM_OK, or BUSY / LIMIT with a message. */
int admit_work(gemmd *d, conn *c, uint64_t mem, char *msg, size_t len);

/* Hands job j (its buffers held) of q to the scheduler with mem bytes of
 * the budget and counts it (a batch as one). On failure (GEMM_ERR_NOMEM)
 * drops the references (a batch's problems' too) and frees j (and an
 * upload's tensor, a batch's problems); the caller replies. */
int admit_submit(gemmd *d, sp_req *q, gemmd_job *j, uint64_t mem);

/* Gives back what an admitted job holds (queue places, budget, buffer
 * references, those of a batch's problems too). */
void admit_release_job(gemmd *d, gemmd_job *j);

/* Takes entry id of kind (REG_BUFFER, REG_TENSOR) from c and gives back
 * what it counted. GEMM_OK or GEMM_ERR_NO_BUFFER. */
int admit_release_entry(gemmd *d, conn *c, uint64_t id, int kind);

/* c closed: every buffer and tensor it holds goes, and what they
 * counted. */
void admit_release_owner(gemmd *d, conn *c);

/* An uploaded tensor t of bytes (as admitted) joined the registry on c:
 * it holds its part of the budget (in host memory) and its real size. */
void admit_tensor_added(gemmd *d, conn *c, reg_buffer *t, uint64_t bytes);

#endif
