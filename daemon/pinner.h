/*
 * pinner.h: pins large client buffers off the loop thread. Pinning
 * (cudaHostRegister) faults in and locks every page, about a second per
 * few GB; done on the loop thread at registration it stalled every client
 * that long, and the buffer's first GEMM waited for the whole of it. A
 * buffer of at least PIN_ASYNC_MIN bytes is registered at once, its pinned
 * bytes reserved (the limit still answers at registration), and pinned
 * here; GEMMs run on it meanwhile from pageable memory (slower copies,
 * same results). The CUDA backend's pin makes the pages first and
 * registers them after, because the registration itself stops every GPU
 * copy of the process while it runs (cuda/device.c). The pinner publishes
 * the handle into the buffer's atomic pin; a failed pin is logged and
 * leaves the buffer usable unpinned.
 */
#ifndef GEMMD_PINNER_H
#define GEMMD_PINNER_H

#include "registry.h"

#include <stdbool.h>
#include <stdint.h>

#define PIN_ASYNC_MIN ((size_t)32 << 20) /* smaller: pinned synchronously */

/* A buffer's pin, reg_buffer.pin_state. */
enum pin_state {
    PIN_NONE,    /* no pin asked for (no pin hook, or cancelled) */
    PIN_QUEUED,  /* reserved, waiting for the pinner */
    PIN_RUNNING, /* the pinner registers it now */
    PIN_DONE,    /* pinned: pin holds the handle */
    PIN_FAILED,  /* the pin failed: usable unpinned, reservation released */
};

/* Counters of background pins (Status, metrics). */
typedef struct pinner_stats {
    uint32_t pending; /* queued or running */
    uint64_t done;    /* pinned in the background */
    uint64_t failed;  /* failed in the background */
    double seconds;   /* time the pins done took, summed */
    uint64_t bytes;   /* bytes the pins done covered */
} pinner_stats;

/* Queues b (state PIN_QUEUED, its bytes already reserved) to be pinned
 * with hooks; starts the thread on first use. false when no thread can
 * run (the caller then pins synchronously). Loop thread. */
bool pinner_queue(reg_buffer *b, const reg_hooks *hooks);

/*
 * Called when b's last reference goes: a queued pin is cancelled (its
 * reservation released; returns false: the caller unmaps b, unpinned); a
 * running one hands b to the pinner, which unpins (or releases the
 * reservation), unmaps and frees b when the pin returns (returns true:
 * the caller must not touch b again). Otherwise false. Loop thread.
 */
bool pinner_release(reg_buffer *b);

/* Waits until no pin is queued or running (call after releasing every
 * buffer: at shutdown, before the backend goes). Loop or main thread. */
void pinner_drain(void);

/* The counters. Any thread. */
void pinner_stats_get(pinner_stats *out);

#endif
