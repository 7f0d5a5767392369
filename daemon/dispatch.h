/*
 * dispatch.h: the request handler table's entry point, installed as the
 * SP layer's on_request callback. Loop thread only.
 */
#ifndef GEMMD_DISPATCH_H
#define GEMMD_DISPATCH_H

#include "sp.h"

/* Answers request q (arg is the gemmd): decode errors, the envelope, the
 * drain, then the handler of its kind; afterwards the loop spins on its
 * inbox for a job that may finish soon. See sp_request_fn. */
void dispatch_request(void *arg, sp_req *q);

#endif
