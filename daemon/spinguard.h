/*
 * spinguard.h: whether gemmd's threads may spin now (the loop after an
 * event, a worker after a job: --spin-us). A spin saves the wake-up of a
 * sleeping thread (5-20 us on a VM) where a core is free; on a host with
 * more runnable threads than cores it takes the core that the client or
 * another of gemmd's threads is waiting for (netlib's xdcblat3 in 3-row
 * panels beside three busy loops on 2 cores: 130 s spinning, 28 s not).
 * So no spin starts while the kernel counts more runnable threads than
 * the CPUs gemmd may use (/proc/loadavg, read at most every 10 ms), and
 * a spinner that finds itself off its core for more than SPIN_GAP_NS
 * during a spin was preempted: every thread's spinning then stops for
 * 10 ms, doubling with each preemption seen in a row up to 1.28 s; a spin
 * that runs undisturbed ends the doubling. Process-wide, any thread.
 */
#ifndef GEMMD_SPINGUARD_H
#define GEMMD_SPINGUARD_H

#include <stdbool.h>
#include <stdint.h>

/* Off the core this long in one spin: preempted. */
#define SPIN_GAP_NS 500000u

/* Whether a spin may start at now (gemmd_now_ns()): a core is free and
 * no back-off runs. */
bool spin_allowed(uint64_t now);

/* A spin saw its thread preempted at now: spinning stops for a while. */
void spin_preempted(uint64_t now);

/* A spin ran undisturbed: the back-off starts again from 10 ms. */
void spin_clean(void);

/* The calling thread's CPU time, ns. */
uint64_t spin_thread_ns(void);

#endif
