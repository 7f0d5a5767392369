/*
 * calibrate.h: the fp64 cost model of each GPU, measured once at start-up
 * on a thread of its own (gemmk_f64_calibrate: DGEMM against the Ozaki-II
 * emulation, ~0.3 s a GPU), then given to every worker's kernel context
 * of that GPU; until then fp64 "auto" runs DGEMM. Off the readiness path:
 * requests are served while it runs.
 */
#ifndef GEMMD_CUDA_CALIBRATE_H
#define GEMMD_CUDA_CALIBRATE_H

#include "cuda/device.h"

typedef struct cuda_calibration cuda_calibration;

/*
 * Starts the thread for devs[0..n) (one measurement per CUDA ordinal,
 * shared by the objects of that GPU), using at most max_bytes of device
 * memory while it runs (0: as the GPU's free memory allows). Returns
 * NULL (logged) when the thread cannot start. Main thread.
 */
cuda_calibration *cuda_calibrate_start(cuda_device *const *devs, unsigned n,
                                       size_t max_bytes);

/* Stops the thread after the measurement in flight (tens of ms), waits
 * for it and frees c (NULL: no-op). Main thread, before the devices are
 * destroyed. */
void cuda_calibrate_join(cuda_calibration *c);

#endif
