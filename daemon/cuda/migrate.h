/*
 * migrate.h: resident tensors of the CUDA backend across its devices. A
 * tensor lives on the device that uploaded it (its home); a GEMM placed on
 * another device uses that device's copy, made on first use by a
 * device-to-device copy (peer to peer where the GPUs allow it, through
 * the host otherwise: cudaMemcpyPeerAsync chooses) and kept, so a tensor
 * used on two devices stays on both, while the device's memory cap
 * allows; past the cap the copy is made for the one GEMM and freed after.
 */
#ifndef GEMMD_CUDA_MIGRATE_H
#define GEMMD_CUDA_MIGRATE_H

#include "config.h"
#include "cuda/device.h"
#include "job.h"

#include <pthread.h>
#include <stdatomic.h>

/* A resident tensor: on the device with a row pitch of 8 elements (what
 * the kernels read), at home on one device, copied to others. */
typedef struct cuda_tensor {
    cuda_device *owner;            /* home: whose memory dev is */
    void *dev;                     /* device memory on the home device */
    size_t bytes;                  /* counted against --max-device-bytes */
    pthread_mutex_t mu;            /* guards copy */
    void *copy[GEMMD_MAX_DEVICES]; /* by device index; NULL: none */
    cuda_device *copy_dev[GEMMD_MAX_DEVICES];
    atomic_uint on; /* bit i: device i holds it (home included) */
} cuda_tensor;

/* Operands of a job moved to its device for the time of one run. */
typedef struct cuda_local {
    const void *a, *b, *c; /* the job's own pointers, put back after */
    void *temp[3];         /* copies made for this run only */
    size_t temp_bytes[3];
} cuda_local;

/* Points job j's resident operands at worker w's device's copies, making
 * those that are missing (on w's stream, waited for). Returns a gemm_error
 * with j->msg; *l is what cuda_local_end takes in every case. Worker
 * thread (w's). */
int cuda_local_begin(cuda_worker *w, gemmd_job *j, cuda_local *l);

/* Puts j's pointers back and frees the copies made for this run only
 * (after w's stream is done with them). Worker thread (w's). */
void cuda_local_end(cuda_worker *w, gemmd_job *j, cuda_local *l);

/* Makes the tensor object for an upload to w's device: its home copy
 * is dev (bytes). Returns NULL without memory. Worker thread. */
cuda_tensor *cuda_tensor_new(cuda_worker *w, void *dev, size_t bytes);

/* The devices holding t (bit i: device index i). Any thread. */
uint32_t cuda_tensor_devices(const cuda_tensor *t);

/* Frees a resident tensor and its copies (each device forgets its tensor
 * maps first). Loop thread, no job using it. */
void cuda_tensor_release(void *handle);

#endif
