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
#include "cuda/calibrate.h"
#include "cuda/device.h"
#include "cuda/migrate.h"
#include "cuda/pipeline.h"
#include "cuda/slices.h"
#include "cuda/staging.h"
#include "cuda/staging_batch.h"
#include "cuda/staging_blas3.h"
#include "log.h"

#include <gemm/types.h>
#include <gemm_kernels.h>

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CUDA_MAX_DEVICES GEMMD_MAX_DEVICES

typedef struct cuda_priv {
    cuda_device *devs[CUDA_MAX_DEVICES]; /* the GPUs this daemon serves */
    unsigned ndevs;
    cuda_calibration *cal; /* the fp64 cost model's measurement */
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

/* The CUDA ordinals cfg lists, or every Hopper GPU; returns how many
 * (0: none, msg says why). */
static unsigned cuda_ordinals(const gemmd_config *cfg, int *out, char *msg,
                              size_t len)
{
    if (cfg->ndevices > 0) {
        memcpy(out, cfg->devices, cfg->ndevices * sizeof(int));
        return cfg->ndevices;
    }
    int n = 0;
    unsigned k = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess)
        n = 0;
    for (int i = 0; i < n && k < CUDA_MAX_DEVICES; i++) {
        struct cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, i) == cudaSuccess && p.major == 9)
            out[k++] = i;
    }
    cudaGetLastError();
    if (k == 0)
        snprintf(msg, len,
                 "no Hopper (sm_90) GPU found (%d CUDA devices); name one "
                 "with --devices or use --backend cpu",
                 n);
    return k;
}

static int cuda_init(gemmd_backend *be, const gemmd_config *cfg, char *msg,
                     size_t len)
{
    cuda_priv *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return GEMM_ERR_NOMEM;
    int ordinals[CUDA_MAX_DEVICES];
    unsigned n = cuda_ordinals(cfg, ordinals, msg, len);
    be->priv = p;
    if (n == 0) {
        cuda_fini(be);
        return GEMM_ERR_DEVICE;
    }
    for (unsigned i = 0; i < n; i++) {
        int rv = cuda_device_create(&p->devs[p->ndevs], i, ordinals[i], cfg,
                                    msg, len);
        if (rv != GEMM_OK) {
            cuda_fini(be);
            return rv;
        }
        /* objects of one GPU: one memory count, one split group */
        be->group[i] = i;
        for (unsigned k = 0; k < i; k++) {
            if (p->devs[k]->ordinal == ordinals[i]) {
                cuda_device_share_memory(p->devs[i], p->devs[k]);
                be->group[i] = be->group[k];
                break;
            }
        }
        p->ndevs++;
    }
    cuda_devices_peer(p->devs, p->ndevs);
    be->ndevices = p->ndevs;
    be->dev_workers = p->devs[0]->nworkers;
    be->workers = be->ndevices * be->dev_workers;
    be->split_align = 128; /* the kernels' tile height */
    be->flops_rate = 600e12;
    be->copy_rate = 25e9;
    be->peer_rate = 100e9;
    if (p->ndevs == 1)
        snprintf(be->device, sizeof(be->device), "%s", p->devs[0]->name);
    else
        snprintf(be->device, sizeof(be->device), "%u x %.100s", p->ndevs,
                 p->devs[0]->name);
    be->threads = be->workers;
    be->pins = true;
    cuda_slices_init(cfg->slice_ms);
    cuda_pipeline_init(cfg->gemm_panels);
    if (cfg->f64_calibrate)
        p->cal = cuda_calibrate_start(p->devs, p->ndevs, cfg->max_device_bytes);
    return GEMM_OK;
}

/* Frees the devices made so far and the backend state (init's failure
 * path too). Main thread, the workers joined. */
static void cuda_fini(gemmd_backend *be)
{
    cuda_priv *p = be->priv;
    if (p == NULL)
        return;
    cuda_calibrate_join(p->cal);
    for (unsigned i = 0; i < p->ndevs; i++)
        cuda_device_destroy(p->devs[i]);
    free(p);
    be->priv = NULL;
}

/* Client buffers are registered portable: every device reads them; the
 * first device counts them. */
static int cuda_pin_reserve(gemmd_backend *be, size_t size, char *msg,
                            size_t len)
{
    cuda_priv *p = be->priv;
    return cuda_device_reserve(p->devs[0], size, msg, len);
}

static void cuda_pin_unreserve(gemmd_backend *be, size_t size)
{
    cuda_priv *p = be->priv;
    cuda_device_unreserve(p->devs[0], size);
}

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

/* The calling worker thread's worker on device dev: claimed on its first
 * call (the scheduler runs each thread for one device). */
static int cuda_worker_of(cuda_priv *p, unsigned dev, cuda_worker **out,
                          char *msg, size_t len)
{
    if (dev >= p->ndevs) {
        snprintf(msg, len, "no device %u", dev);
        return GEMM_ERR_INTERNAL;
    }
    int rv = cuda_device_claim(p->devs[dev], out, msg, len);
    if (rv == GEMM_OK && (*out)->dev != p->devs[dev]) {
        snprintf(msg, len, "worker thread of device %u ran a job of %u",
                 (*out)->dev->index, dev);
        return GEMM_ERR_INTERNAL;
    }
    return rv;
}

static int cuda_gemm(gemmd_backend *be, gemmd_job *j)
{
    cuda_worker *w;
    int rv = cuda_worker_of(be->priv, j->device, &w, j->msg, sizeof(j->msg));
    if (rv != GEMM_OK)
        return rv;
    cuda_worker_forget(w);
    cuda_local l;
    if ((rv = cuda_local_begin(w, j, &l)) == GEMM_OK)
        rv = j->kind == JOB_BLAS3 ? cuda_stage_blas3(w, j)
                                  : cuda_stage_gemm(w, j);
    cuda_local_end(w, j, &l);
    return rv;
}

static void cuda_after(gemmd_backend *be)
{
    (void)be;
    cuda_pipe_learn();
}

static int cuda_batch(gemmd_backend *be, gemmd_job *j, bool *declined)
{
    cuda_worker *w;
    *declined = false;
    int rv = cuda_worker_of(be->priv, j->device, &w, j->msg, sizeof(j->msg));
    if (rv != GEMM_OK)
        return rv;
    cuda_worker_forget(w);
    return cuda_stage_batch(w, j, declined);
}

static int cuda_upload(gemmd_backend *be, gemmd_job *j)
{
    cuda_worker *w;
    int rv = cuda_worker_of(be->priv, j->device, &w, j->msg, sizeof(j->msg));
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
    for (unsigned i = 0; i < p->ndevs; i++) {
        uint64_t mem = 0;
        cuda_device_stats(p->devs[i], &out->pinned_bytes, &mem, &out->tmap_hits,
                          &out->tmap_misses);
        if (be->group[i] == i) /* each GPU's memory once */
            out->device_bytes += mem;
    }
}

/* Device i: its memory, tensors and caches; the host's pinned client
 * memory (pinned once, every device uses it). */
static void cuda_device_stats_of(gemmd_backend *be, unsigned i,
                                 gemmd_device_stats *out)
{
    cuda_priv *p = be->priv;
    memset(out, 0, sizeof(*out));
    if (i >= p->ndevs)
        return;
    cuda_device *d = p->devs[i];
    snprintf(out->name, sizeof(out->name), "%u: GPU %d %.100s", i, d->ordinal,
             d->name);
    uint64_t pinned = 0;
    cuda_device_stats(d, &pinned, &out->memory_bytes, &out->tmap_hits,
                      &out->tmap_misses);
    out->pinned_bytes = atomic_load(&p->devs[0]->pinned_bytes);
    out->tensors = atomic_load(&d->tensors);
    out->migrations = atomic_load(&d->migrations);
}

static uint32_t cuda_tensor_devs(gemmd_backend *be, const void *handle)
{
    (void)be;
    return cuda_tensor_devices(handle);
}

/* Panels must run the kernel the whole would; split-K kernels cut K by
 * the shape, so a GEMM that gets one is not split. */
static bool cuda_split_kernel(gemmd_backend *be, const gemmd_job *j, char *name,
                              size_t len)
{
    cuda_priv *p = be->priv;
    /* tiny GEMMs run straight from pinned memory (staging.c): not split */
    if ((double)j->m * (double)j->n * (double)j->k <= (double)(1u << 19))
        return false;
    const char *k =
        j->kernel[0] != '\0' && !gemmk_is_auto(j->kernel) ? j->kernel : NULL;
    if (k == NULL) {
        /* the staged layout: aligned pointers, pitched leading dims */
        gemmk_problem kp = cuda_job_problem(j);
        kp.a = kp.b = kp.d = (void *)(uintptr_t)4096;
        kp.c = j->has_c ? kp.d : NULL;
        size_t es = gemm_dtype_size(j->ab_type);
        size_t cs = gemm_dtype_size(j->cd_type);
        kp.lda = (int64_t)cuda_pitch_elems(j->shape.a.cols, es);
        kp.ldb = (int64_t)cuda_pitch_elems(j->shape.b.cols, es);
        kp.ldc = kp.ldd = (int64_t)cuda_pitch_elems(j->n, cs);
        if (gemmk_select(p->devs[0]->workers[0].kctx, &kp, &k) != GEMM_OK ||
            k == NULL)
            return false;
    }
    if (strstr(k, "splitk") != NULL)
        return false;
    if ((GEMMK_WIDE_TYPES & (1u << j->ab_type)) != 0)
        k = ""; /* the reference library's choice, as the whole's */
    snprintf(name, len, "%s", k);
    return true;
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
    /* no operands yet: gemmk_check looks at types, precision, moduli,
     * transposes and conjugations only */
    gemmk_problem kp = cuda_job_problem(j);
    const char *why = NULL;
    if (gemmk_check(name, &kp, &why) != GEMM_OK) {
        if (j->moduli != 0) /* moduli ask for the emulation */
            snprintf(msg, len,
                     "kernel '%s' cannot serve this request with moduli %d: "
                     "%s (moduli run the Ozaki-II emulation of fp64, or of "
                     "fp32 into fp32: name a "
                     "kernel that emulates, see gemmctl kernels, leave the "
                     "kernel auto, or leave moduli 0)",
                     name != NULL ? name : "auto", j->moduli,
                     why != NULL ? why : "unsupported");
        else
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
    .pin_reserve = cuda_pin_reserve,
    .pin_unreserve = cuda_pin_unreserve,
    .pin = cuda_pin,
    .unpin = cuda_unpin,
    .gemm = cuda_gemm,
    .after = cuda_after,
    .batch = cuda_batch,
    .upload = cuda_upload,
    .tensor_free = cuda_tensor_free,
    .stats = cuda_stats,
    .kernel_at = cuda_kernel_at,
    .kernel_check = cuda_kernel_check,
    .device_stats = cuda_device_stats_of,
    .tensor_devices = cuda_tensor_devs,
    .split_kernel = cuda_split_kernel,
};
