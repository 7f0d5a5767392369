/*
 * trace.h: time stamps at each hand-off of one request's path through the
 * daemon (read, decode, dispatch, admission, the scheduler's queue, the
 * worker, the inbox back to the loop, packing and sending the reply), for
 * finding where a small request's microseconds go. Built only with
 * GEMMD_TRACE (cmake -DGEMM_TRACE=ON); otherwise every macro is empty
 * (the fields that hold the stamps stay, unwritten). The loop thread keeps the
 * last TRACE_KEEP answered requests and logs each stage's p50 and mean per
 * request kind at exit (trace_report).
 */
#ifndef GEMMD_TRACE_H
#define GEMMD_TRACE_H

#include <stdint.h>

/* The points, in the order a GEMM passes them. A request that does not
 * pass one (a Hello answered on the loop) leaves it 0. */
enum trace_point {
    TR_IO,       /* the loop's read callback began (socket readable) */
    TR_READ,     /* the message is whole */
    TR_DECODED,  /* protobuf decoded */
    TR_HANDLER,  /* envelope checked, its handler called */
    TR_ADMITTED, /* validated, job made, admitted */
    TR_QUEUED,   /* on the scheduler's queue */
    TR_STARTED,  /* a worker took it */
    TR_COMPUTED, /* the backend returned */
    TR_PUSHED,   /* about to be handed to the loop's inbox */
    TR_INBOX,    /* the loop took it from the inbox */
    TR_PACKED,   /* reply packed */
    TR_SENT,     /* reply written to the socket (or queued) */
    TR_NPOINTS
};

#ifdef GEMMD_TRACE
uint64_t gemmd_now_ns(void);
#define TRACE_AT(arr, i) ((arr)[i] = gemmd_now_ns())
#define TRACE_SET(lv, v) ((lv) = (v))

/* Keeps one answered request's stamps (kind: its metrics kind). Loop
 * thread. */
void trace_keep(int kind, const uint64_t *t);
/* Logs each stage's p50 and mean, per request kind. Loop or main thread,
 * after the last trace_keep. */
void trace_report(void);
#else
#define TRACE_AT(arr, i)    ((void)0)
#define TRACE_SET(lv, v)    ((void)0)
#define trace_keep(kind, t) ((void)0)
#define trace_report()      ((void)0)
#endif

#endif
