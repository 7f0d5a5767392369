/*
 * backend_cuda.c: the CUDA backend's ops table. The backend holds its
 * GPUs as a list of device objects (cuda/device.c; today a list of one,
 * the --device given); each scheduler thread claims a worker of one of
 * them (a stream and a kernel context of its own, so one request's copies
 * in, another's kernel and a third's copy out run at once). Client
 * buffers are pinned with cudaHostRegister when they are registered;
 * every GEMM, of any type, takes the one staging path (cuda/staging.c).
 * Every kernel choice is the kernel library's (kernels/): a request may
 * name a kernel of its catalog, checked (gemmk_check) before it is
 * queued; the reply names the kernel that ran. This file names no kernel.
 */
#include "backend.h"
#include "cuda/device.h"
#include "cuda/slices.h"
#include "cuda/staging.h"
#include "log.h"

#include <gemm/types.h>
#include <gemm_kernels.h>

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CUDA_MAX_DEVICES 16

typedef struct cuda_priv {
    cuda_device *devs[CUDA_MAX_DEVICES]; /* the GPUs this daemon serves */
    unsigned ndevs;
} cuda_priv;

static bool cuda_available(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        cudaGetLastError(); /* clear it */
        return false;
    }
    for (int i = 0; i < n; i++) {
        struct cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, i) == cudaSuccess && p.major == 9)
            return true;
    }
    return false;
}

static void cuda_fini(gemmd_backend *be);

/* The devices of cfg: today the one --device names. */
static int cuda_init(gemmd_backend *be, const gemmd_config *cfg, char *msg,
                     size_t len)
{
    cuda_priv *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return GEMM_ERR_NOMEM;
    const int ordinals[] = {cfg->device};
    be->priv = p;
    for (size_t i = 0; i < sizeof(ordinals) / sizeof(ordinals[0]); i++) {
        int rv =
            cuda_device_create(&p->devs[p->ndevs], ordinals[i], cfg, msg, len);
        if (rv != GEMM_OK) {
            cuda_fini(be);
            return rv;
        }
        be->workers += p->devs[p->ndevs]->nworkers;
        p->ndevs++;
    }
    snprintf(be->device, sizeof(be->device), "%s", p->devs[0]->name);
    be->threads = be->workers;
    cuda_slices_init(cfg->slice_ms);
    return GEMM_OK;
}

/* Frees the devices made so far and the backend state (init's failure
 * path too). Main thread, the workers joined. */
static void cuda_fini(gemmd_backend *be)
{
    cuda_priv *p = be->priv;
    if (p == NULL)
        return;
    for (unsigned i = 0; i < p->ndevs; i++)
        cuda_device_destroy(p->devs[i]);
    free(p);
    be->priv = NULL;
}

/* Client buffers are registered portable: every device reads them; the
 * first device counts them. */
static int cuda_pin(gemmd_backend *be, void *base, size_t size, void **handle,
                    char *msg, size_t len)
{
    cuda_priv *p = be->priv;
    return cuda_device_pin(p->devs[0], base, size, handle, msg, len);
}

static void cuda_unpin(gemmd_backend *be, void *base, void *handle)
{
    cuda_priv *p = be->priv;
    cuda_device_unpin(p->devs[0], base, handle);
}

/* The calling worker thread's worker: claimed on its first call from the
 * first device with one left. */
static int cuda_worker_of(cuda_priv *p, cuda_worker **out, char *msg,
                          size_t len)
{
    if ((*out = cuda_worker_current()) != NULL)
        return GEMM_OK;
    int rv = GEMM_ERR_INTERNAL;
    for (unsigned i = 0; i < p->ndevs; i++)
        if ((rv = cuda_device_claim(p->devs[i], out, msg, len)) == GEMM_OK)
            return GEMM_OK;
    return rv;
}

static int cuda_gemm(gemmd_backend *be, gemmd_job *j)
{
    cuda_worker *w;
    int rv = cuda_worker_of(be->priv, &w, j->msg, sizeof(j->msg));
    if (rv != GEMM_OK)
        return rv;
    cuda_worker_forget(w);
    return cuda_stage_gemm(w, j);
}

static int cuda_upload(gemmd_backend *be, gemmd_job *j)
{
    cuda_worker *w;
    int rv = cuda_worker_of(be->priv, &w, j->msg, sizeof(j->msg));
    if (rv != GEMM_OK)
        return rv;
    return cuda_stage_upload(w, j);
}

static void cuda_tensor_free(gemmd_backend *be, void *handle)
{
    (void)be;
    cuda_tensor_release(handle);
}

static void cuda_stats(gemmd_backend *be, gemmd_backend_stats *out)
{
    cuda_priv *p = be->priv;
    for (unsigned i = 0; i < p->ndevs; i++)
        cuda_device_stats(p->devs[i], &out->pinned_bytes, &out->device_bytes,
                          &out->tmap_hits, &out->tmap_misses);
}

static bool cuda_kernel_at(gemmd_backend *be, size_t i, gemmd_kernel *out)
{
    (void)be;
    const gemmk_kernel_desc *k =
        i < (size_t)gemmk_catalog_size() ? gemmk_catalog_entry((int)i) : NULL;
    if (k == NULL)
        return false;
    *out = (gemmd_kernel){
        .name = k->name,
        .summary = k->summary,
        .ladder = k->ladder > 0 ? (unsigned)k->ladder : 0,
        .reference = k->reference != 0,
        .ab_types = k->ab_types,
        .cd_types = k->cd_types,
        .precisions = k->precisions,
        .transposes = k->transposes,
    };
    return true;
}

static int cuda_kernel_check(gemmd_backend *be, const gemmd_job *j, char *msg,
                             size_t len)
{
    (void)be;
    const char *name = j->kernel[0] != '\0' ? j->kernel : NULL;
    if (name != NULL && gemmk_catalog_find(name) == NULL) {
        snprintf(msg, len,
                 "kernel '%s' is not available on the cuda backend "
                 "(gemmctl kernels lists them)",
                 name);
        return GEMM_ERR_UNSUPPORTED;
    }
    /* no operands yet: gemmk_check looks at types, precision, transposes
     * and conjugations only */
    gemmk_problem kp = cuda_job_problem(j);
    const char *why = NULL;
    if (gemmk_check(name, &kp, &why) != GEMM_OK) {
        snprintf(msg, len, "kernel '%s' cannot serve this request: %s",
                 name != NULL ? name : "auto",
                 why != NULL ? why : "unsupported");
        return GEMM_ERR_UNSUPPORTED;
    }
    return GEMM_OK;
}

const gemmd_backend_ops gemmd_backend_cuda = {
    .name = "cuda",
    .available = cuda_available,
    .init = cuda_init,
    .fini = cuda_fini,
    .pin = cuda_pin,
    .unpin = cuda_unpin,
    .gemm = cuda_gemm,
    .upload = cuda_upload,
    .tensor_free = cuda_tensor_free,
    .stats = cuda_stats,
    .kernel_at = cuda_kernel_at,
    .kernel_check = cuda_kernel_check,
};
