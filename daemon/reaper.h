/*
 * reaper.h: unmaps large client buffers off the loop thread. Unmapping the
 * last mapping of a memfd frees its pages, about 50 ms for 200 MB here;
 * done on the loop thread when a client leaves, that delayed every other
 * client's next request by as much. Thread-safe.
 */
#ifndef GEMMD_REAPER_H
#define GEMMD_REAPER_H

#include <stddef.h>

/* Unmaps [base, base + len): at once when it is small (under 8 MiB) or no
 * thread can take it, else on the reaper thread (started on first use),
 * soon after. The range must not be used after this call. */
void reaper_unmap(void *base, size_t len);

#endif
