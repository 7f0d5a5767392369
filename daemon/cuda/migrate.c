/*
 * migrate.c: resident tensors copied between the CUDA backend's devices
 * (migrate.h). A copy is made by the worker of the device that needs it,
 * on its stream, and published only once the copy is complete, so every
 * worker of the device may read it at once.
 */
#include "cuda/migrate.h"
#include "log.h"

#include <gemm/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cuda_tensor *cuda_tensor_new(cuda_worker *w, void *dev, size_t bytes)
{
    cuda_tensor *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    pthread_mutex_init(&t->mu, NULL);
    t->owner = w->dev;
    t->dev = dev;
    t->bytes = bytes;
    atomic_init(&t->on, 1u << w->dev->index);
    atomic_fetch_add(&w->dev->tensors, 1);
    return t;
}

uint32_t cuda_tensor_devices(const cuda_tensor *t)
{
    return atomic_load(&((cuda_tensor *)t)->on);
}

/* The tensor of j that ptr points into, or NULL. */
static cuda_tensor *tensor_of(const gemmd_job *j, const void *ptr)
{
    for (int i = 0; i < j->nbufs; i++) {
        const reg_buffer *b = j->bufs[i];
        if (b->kind != REG_TENSOR || b->pin == NULL || !b->on_device)
            continue;
        cuda_tensor *t = b->pin;
        const char *c = ptr, *base = t->dev;
        if (c >= base && c < base + t->bytes)
            return t;
    }
    return NULL;
}

/* Copies t to w's device: into *out, cached in t unless the cap is
 * reached (then *temp says the copy is the caller's). Returns a
 * gemm_error with msg. Worker thread (w's). */
static int copy_here(cuda_worker *w, cuda_tensor *t, void **out, bool *temp,
                     char *msg, size_t len)
{
    cuda_device *d = w->dev;
    unsigned i = d->index;
    int rv = GEMM_OK;
    void *p = NULL;
    *temp = false;
    pthread_mutex_lock(&t->mu);
    if (t->copy[i] != NULL) {
        *out = t->copy[i];
        pthread_mutex_unlock(&t->mu);
        return GEMM_OK;
    }
    unsigned long long now = atomic_fetch_add(d->mem, t->bytes);
    bool over = d->max_device != 0 && now + t->bytes > d->max_device;
    CK(cudaMallocAsync(&p, t->bytes, w->stream), msg, len);
    CK(cudaMemcpyPeerAsync(p, d->ordinal, t->dev, t->owner->ordinal, t->bytes,
                           w->stream),
       msg, len);
    CK(cudaStreamSynchronize(w->stream), msg, len);
    atomic_fetch_add(&d->migrations, 1);
    if (over) { /* this run only */
        *temp = true;
    } else {
        t->copy[i] = p;
        t->copy_dev[i] = d;
        atomic_fetch_or(&t->on, 1u << i);
        atomic_fetch_add(&d->tensors, 1);
    }
    *out = p;
    pthread_mutex_unlock(&t->mu);
    return GEMM_OK;
fail:
    if (p != NULL)
        cudaFreeAsync(p, w->stream);
    atomic_fetch_sub(d->mem, t->bytes);
    pthread_mutex_unlock(&t->mu);
    return rv;
}

int cuda_local_begin(cuda_worker *w, gemmd_job *j, cuda_local *l)
{
    memset(l, 0, sizeof(*l));
    l->a = j->a;
    l->b = j->b;
    l->c = j->c;
    const void **ops[3] = {&j->a, &j->b, &j->c};
    bool dev[3] = {j->a_dev, j->b_dev, j->c_dev && j->has_c};
    for (int k = 0; k < 3; k++) {
        if (!dev[k] || *ops[k] == NULL)
            continue;
        cuda_tensor *t = tensor_of(j, *ops[k]);
        if (t == NULL || t->owner == w->dev)
            continue;
        void *here = NULL;
        bool temp = false;
        int rv = copy_here(w, t, &here, &temp, j->msg, sizeof(j->msg));
        if (rv != GEMM_OK)
            return rv;
        if (temp) {
            l->temp[k] = here;
            l->temp_bytes[k] = t->bytes;
        }
        *ops[k] = (const char *)here + ((const char *)*ops[k] - (char *)t->dev);
    }
    return GEMM_OK;
}

void cuda_local_end(cuda_worker *w, gemmd_job *j, cuda_local *l)
{
    j->a = l->a;
    j->b = l->b;
    j->c = l->c;
    for (int k = 0; k < 3; k++) {
        if (l->temp[k] == NULL)
            continue;
        cuda_device_forget(w->dev, l->temp[k], l->temp_bytes[k]);
        cudaFreeAsync(l->temp[k], w->stream);
        atomic_fetch_sub(w->dev->mem, l->temp_bytes[k]);
    }
}

/* Frees device memory p of device d (d's ordinal made current). */
static void free_on(cuda_device *d, void *p, size_t bytes)
{
    cuda_device_forget(d, p, bytes);
    cudaError_t e = cudaSetDevice(d->ordinal);
    if (e == cudaSuccess)
        e = cudaFree(p); /* waits for work using it */
    if (e != cudaSuccess)
        gemmd_log(LOG_WARNING, "cudaFree of a tensor on device %u: %s",
                  d->index, cudaGetErrorString(e));
    atomic_fetch_sub(d->mem, bytes);
    atomic_fetch_sub(&d->tensors, 1);
}

void cuda_tensor_release(void *handle)
{
    cuda_tensor *t = handle;
    for (unsigned i = 0; i < GEMMD_MAX_DEVICES; i++)
        if (t->copy[i] != NULL)
            free_on(t->copy_dev[i], t->copy[i], t->bytes);
    if (t->dev != NULL)
        free_on(t->owner, t->dev, t->bytes);
    pthread_mutex_destroy(&t->mu);
    free(t);
}
