/*
 * calibrate.c: the start-up measurement of the fp64 cost model
 * (calibrate.h).
 */
#include "cuda/calibrate.h"
#include "log.h"

#include <gemm_kernels.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cuda_calibration {
    pthread_t thread;
    cuda_device *devs[GEMMD_MAX_DEVICES];
    unsigned n;
    size_t max_bytes;
    int stop; /* set by cuda_calibrate_join: stop after the run in flight */
};

/* Where the emulation pays, for the log: "from about N^3". */
static void crossover_text(int64_t x, char *buf, size_t len)
{
    if (x)
        snprintf(buf, len, "from about %lld^3", (long long)x);
    else
        snprintf(buf, len, "not below 32768^3");
}

/* Measures GPU `ordinal` and hands the rates to every worker of its
 * objects. */
static void calibrate_gpu(cuda_calibration *c, int ordinal)
{
    char msg[256] = "";
    gemmk_ctx *ctx = NULL;
    cudaStream_t stream = NULL;
    gemmk_f64_rates r;
    int rv = GEMM_OK;
    if (cudaSetDevice(ordinal) != cudaSuccess ||
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) !=
            cudaSuccess) {
        cudaGetLastError();
        snprintf(msg, sizeof(msg), "cannot make a stream");
        rv = GEMM_ERR_DEVICE;
    }
    if (rv == GEMM_OK && (rv = gemmk_ctx_create(&ctx, ordinal)) != GEMM_OK)
        snprintf(msg, sizeof(msg), "cannot make a kernel context");
    if (rv == GEMM_OK)
        rv = gemmk_f64_calibrate(ctx, stream, c->max_bytes, &c->stop, &r, msg,
                                 sizeof(msg));
    gemmk_ctx_destroy(ctx);
    if (stream != NULL)
        cudaStreamDestroy(stream);
    if (rv == GEMM_ERR_SHUTDOWN)
        return;
    if (rv != GEMM_OK) {
        gemmd_log(LOG_WARNING,
                  "cuda backend: GPU %d: fp64 calibration failed (%s: %s); "
                  "fp64 runs on DGEMM unless a request names moduli",
                  ordinal, gemm_strerror(rv), msg);
        return;
    }
    for (unsigned i = 0; i < c->n; i++) {
        if (c->devs[i]->ordinal != ordinal)
            continue;
        for (unsigned w = 0; w < c->devs[i]->nworkers; w++)
            gemmk_ctx_set_f64_rates(c->devs[i]->workers[w].kctx, &r);
    }
    char from[64];
    crossover_text(gemmk_f64_crossover(&r), from, sizeof(from));
    gemmd_log(LOG_NOTICE,
              "cuda backend: GPU %d: fp64 calibrated in %.0f ms at %d^3: DGEMM "
              "%.1f TFLOP/s (+%.0f us); Ozaki-II with %d moduli: int8 %.0f "
              "TOPS, %.2f TB/s of preparation, +%.0f us; emulation pays %s",
              ordinal, r.ms, r.size, r.native_flops / 1e12, r.native_s * 1e6,
              r.moduli, r.int8_ops / 1e12, r.emul_bandwidth / 1e12,
              r.emul_s * 1e6, from);
    if (r.moduli_f32 == 0) {
        gemmd_log(LOG_NOTICE,
                  "cuda backend: GPU %d: fp32 emulation not calibrated; fp32 "
                  "at fp32 precision runs 3xTF32 unless a request names "
                  "moduli",
                  ordinal);
        return;
    }
    crossover_text(gemmk_f32_crossover(&r), from, sizeof(from));
    gemmd_log(LOG_NOTICE,
              "cuda backend: GPU %d: fp32 calibrated: 3xTF32 %.1f TFLOP/s "
              "(+%.0f us); Ozaki-II with %d moduli: %.2f TB/s of preparation, "
              "+%.0f us; emulation pays %s",
              ordinal, r.x3_flops / 1e12, r.x3_s * 1e6, r.moduli_f32,
              r.emul32_bandwidth / 1e12, r.emul32_s * 1e6, from);
}

static void *calibrate_main(void *arg)
{
    cuda_calibration *c = arg;
    for (unsigned i = 0; i < c->n; i++) {
        bool seen = false;
        for (unsigned k = 0; k < i; k++)
            seen = seen || c->devs[k]->ordinal == c->devs[i]->ordinal;
        if (!seen && !__atomic_load_n(&c->stop, __ATOMIC_RELAXED))
            calibrate_gpu(c, c->devs[i]->ordinal);
    }
    return NULL;
}

cuda_calibration *cuda_calibrate_start(cuda_device *const *devs, unsigned n,
                                       size_t max_bytes)
{
    cuda_calibration *c = calloc(1, sizeof(*c));
    if (c == NULL || n > GEMMD_MAX_DEVICES) {
        free(c);
        gemmd_log(LOG_WARNING, "cuda backend: no fp64 calibration: out of "
                               "memory");
        return NULL;
    }
    for (unsigned i = 0; i < n; i++)
        c->devs[i] = devs[i];
    c->n = n;
    c->max_bytes = max_bytes;
    int e = pthread_create(&c->thread, NULL, calibrate_main, c);
    if (e != 0) {
        gemmd_log(LOG_WARNING,
                  "cuda backend: no fp64 calibration: pthread_create: %s",
                  strerror(e));
        free(c);
        return NULL;
    }
    return c;
}

void cuda_calibrate_join(cuda_calibration *c)
{
    if (c == NULL)
        return;
    __atomic_store_n(&c->stop, 1, __ATOMIC_RELAXED);
    pthread_join(c->thread, NULL);
    free(c);
}
