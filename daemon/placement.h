/*
 * placement.h: where a job runs. Each device object carries an estimate
 * of the time its queued and running work takes (flops at the backend's
 * rate, staged bytes at its copy rate); a job goes to the device where it
 * would finish first, counting the copies of resident tensors it uses
 * that the device does not hold yet (at the peer rate). Devices that left
 * placement after failures are passed over while another is there.
 */
#ifndef GEMMD_PLACEMENT_H
#define GEMMD_PLACEMENT_H

#include "scheduler.h"

/* Estimated ns job j takes on device dev: its compute, its staged bytes
 * and the resident tensors it would copy there. Under s->mu. */
double place_cost(sched *s, const gemmd_job *j, unsigned dev);

/* The work of GEMM job j for placement: its real flops and the bytes it
 * moves between the host and a device (operands not resident in, D out).
 * A batch sums these over its problems when it is built. Any thread. */
void place_work(const gemmd_job *j, double *flops, double *bytes);

/* The device that would finish j first (ties go round-robin, so an idle
 * host spreads its work); sets j->cost_ns for it. Under s->mu. */
unsigned place_choose(sched *s, gemmd_job *j);

/* Devices in placement (not out), at least 1 counted when all are out. */
unsigned place_healthy(const sched *s);

#endif
