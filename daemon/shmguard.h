/*
 * shmguard.h: survives clients that shrink their shared memory under us.
 * A client may ftruncate its shm object while the daemon reads or writes it;
 * touching the lost pages raises SIGBUS. As libwayland's shm pools do, a
 * SIGBUS handler finds the guarded mapping that holds the faulting address,
 * maps anonymous zero pages over the rest of it, marks it faulted and
 * returns: the access completes on scratch memory, and the request that used
 * the buffer fails with GEMM_ERR_BUFFER_FAULT instead of killing the daemon.
 * A fault anywhere else keeps its default action (a real crash).
 *
 * The slot table is fixed-size and lock-free so the handler may read it.
 * add/remove: loop thread. faulted: any thread.
 */
#ifndef GEMMD_SHMGUARD_H
#define GEMMD_SHMGUARD_H

#include <stdbool.h>
#include <stddef.h>

#define SHMGUARD_SLOTS 8192

/* Installs the SIGBUS handler. Returns 0 or -1 (errno). Main thread. */
int shmguard_install(void);

/* Guards [base, base + size); returns a slot index, or -1 when all slots
 * are taken. */
int shmguard_add(void *base, size_t size);

/* Stops guarding slot (the mapping is about to be unmapped). */
void shmguard_remove(int slot);

/* Marks the slot faulted (its object was found shrunk another way). */
void shmguard_mark_faulted(int slot);

/* Whether a fault has hit the slot's mapping since it was added. */
bool shmguard_faulted(int slot);

#endif
