/*
 * complete.h: how requests end. Every request ends in exactly one reply
 * (a failure is a reply with a gemm_error and a message, never a crash);
 * finished jobs come back from the workers through the loop's inbox and
 * are answered here, a Cancel gets its target's outcome, and a connection
 * that closed has its queued work dropped and its holdings released. The
 * return path of a GEMM: scheduler -> complete_job_done (worker thread)
 * -> the inbox -> complete_event -> sp_reply -> the connection. A GEMM
 * or BLAS3 call that succeeded has its reply written by its worker in
 * complete_job_done (no hop to the loop before the client has it); the
 * loop then only counts it. Loop thread unless noted.
 */
#ifndef GEMMD_COMPLETE_H
#define GEMMD_COMPLETE_H

#include "gemmd.h"

#include "gemm.pb-c.h"

#include <stdbool.h>
#include <stdint.h>

/* Fills r as an OK reply to request id. */
void complete_reply_init(Gemm__Reply *r, uint64_t id);

/* Answers q with r (q is freed; its connection may be gone), counting it
 * in the metrics, the stats and its user's figures. */
void complete_reply(gemmd *d, sp_req *q, Gemm__Reply *r);

/* Answers q with status and a formatted message. */
void complete_error(gemmd *d, sp_req *q, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Answers Cancel q with its target's outcome: not found, canceled before
 * it started, or the reply it got (target, or only its status). */
void complete_cancel_reply(gemmd *d, sp_req *q, bool found, bool canceled,
                           Gemm__Reply *target);

/* Answers the request of finished (or dropped) job j and frees j. */
void complete_job(gemmd *d, gemmd_job *j);

/* An event from the inbox. */
void complete_event(gemmd *d, gemmd_event *ev);

/* Worker thread: the scheduler's done callback (arg is the gemmd); writes
 * a successful GEMM's or BLAS3 call's reply itself when its connection's
 * queue is empty, and hands the finished job back to the loop. */
void complete_job_done(void *arg, gemmd_job *job);

/* The SP layer's closed callback (arg is the gemmd): work not yet started
 * is dropped, its buffers and tensors go; work running is asked to stop
 * (at its next slice) and its replies are dropped; until it ends it
 * counts in its user's share. */
void complete_closed(void *arg, conn *c);

#endif
