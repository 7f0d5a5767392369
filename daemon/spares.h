/*
 * spares.h: memfds gemmd makes and pins ahead of time, lent whole to a
 * client's new buffer (LEND on the descriptor channel, fdchan.h), so that
 * a fresh process's first GEMM waits for no pin: gemmd maps, populates
 * and registers its buffers with the GPU driver itself (cuda: 0.2 s a GB
 * on the device, docs/e2e-bench.md), and a buffer made by the client pays
 * that on its first request.
 *
 * A spare is a memfd sealed against shrinking and growing, mapped in the
 * daemon and pinned through the registry's hooks (so it counts against
 * --max-pinned-bytes). Lent, it goes to exactly one client, once: the
 * client maps it and registers it under the ticket that came with it;
 * the registry then seals it as it seals every client memfd (no new
 * writable mapping, no hole punching) and keeps the mapping and the pin
 * (reg_register_fd). It is never lent again: released, it is unpinned and
 * unmapped like any buffer. So no page one client wrote reaches another.
 *
 * Which sizes are kept (--spare-bytes B in all): at start a ladder of
 * powers of two from the largest at most B / 2 (512 MiB at most) down to
 * 32 MiB (1 GiB: 512, 256, 128, 64 and 32 MiB); a lent spare is made
 * again at its size;
 * a request nothing fits (a spare fits when it holds the size and at
 * most twice it) is answered "none" (the client makes its own memfd)
 * and its size is wanted from then on, the oldest sizes giving way while
 * the total would pass B. One thread makes them, one at a time.
 *
 * Thread-safe (one mutex) unless said otherwise.
 */
#ifndef GEMMD_SPARES_H
#define GEMMD_SPARES_H

#include "registry.h"

#include <stddef.h>
#include <stdint.h>

#define SPARE_MIN      ((size_t)32 << 20) /* smaller requests are not lent */
#define SPARE_SLOTS    8                  /* sizes wanted at once */
#define SPARE_QUIET_MS 30                 /* idle this long before making one */
#define SPARE_WAIT_MS  2000               /* made anyway after this long */

typedef struct spare {
    int fd;     /* the memfd (sealed SHRINK | GROW) */
    void *base; /* the daemon's mapping of all of it */
    size_t size;
    void *pin; /* the pin hook's handle; NULL when nothing pins */
} spare;

typedef struct spare_stats {
    uint64_t ready;       /* spares made and not lent */
    uint64_t ready_bytes; /* their bytes */
    uint64_t lent;        /* spares lent since start */
    uint64_t none;        /* requests answered "none" */
    uint64_t made;        /* spares made since start */
    uint64_t failed;      /* spares that could not be made */
} spare_stats;

/* Whether the daemon runs no GEMM now (spares_start's idle). Any thread. */
typedef bool (*spares_idle_fn)(void *arg);

/* Starts keeping `bytes` of spares, pinned with hooks (copied; may be
 * NULL: mapped only). 0: off. Each spare is made once idle(arg) has held
 * for SPARE_QUIET_MS (a pin's registration stops every GPU copy of the
 * daemon while it runs: 10-20 ms for 256-512 MiB), or after SPARE_WAIT_MS
 * of waiting for that. idle may be NULL (no wait). Main thread, once. */
void spares_start(uint64_t bytes, const reg_hooks *hooks, spares_idle_fn idle,
                  void *arg);

/* Whether spares are kept (spares_start had bytes > 0). */
bool spares_on(void);

/* A ready spare that fits size bytes, the caller's from now on (its slot
 * is made again); NULL when none does (the size is wanted from now on). */
spare *spares_take(size_t size);

/* Unpins, unmaps and closes s (a loan never registered). Any thread. */
void spares_free(spare *s);

/* Lets s go once its mapping and pin belong to someone else (the
 * registry's reg_register_lent, which unpins and unmaps them in its
 * time): closes its descriptor, frees the record. Any thread. */
void spares_disown(spare *s);

/* Frees the ready spares and stops the maker (waits for a spare being
 * made). Main thread, at shutdown, before the backend goes. */
void spares_stop(void);

void spares_stats_get(spare_stats *out);

#endif
