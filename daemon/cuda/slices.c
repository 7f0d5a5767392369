/*
 * slices.c: kernel launches per tile of D with a stop check between
 * them; see slices.h. The rates below are what each path sustains on an
 * H100 at the least (docs/kernel-notes.md measures 700-800 TFLOP/s for
 * bf16, 336 for tf32, 97 for 3xTF32 fp32, ~55 for DGEMM); a slice is a
 * quarter of --slice-ms at them, so at the real rates it is shorter
 * still.
 */
#include "cuda/slices.h"
#include "log.h"
#include "slice.h"

#include <gemm/types.h>

#include <stdio.h>

static unsigned slice_ms; /* set once before the workers run */

void cuda_slices_init(unsigned ms)
{
    slice_ms = ms;
}

/* TFLOP/s that j's path sustains at the least. */
static double rate_tflops(const gemmd_job *j)
{
    if (j->kernel[0] != '\0') {
        const gemmk_kernel_desc *k = gemmk_catalog_find(j->kernel);
        if (k != NULL && k->ladder >= 1 && k->ladder <= 2)
            return 0.2; /* one thread per output, smem tiles */
        if (k != NULL && k->ladder >= 3 && k->ladder <= 4)
            return 10;
    }
    switch (j->ab_type) {
    case GEMM_BF16:
    case GEMM_FP16:
        return 300;
    case GEMM_FP32:
        return j->precision == GEMM_PRECISION_TF32 ? 150 : 40;
    case GEMM_COMPLEX64:
        return 40;
    case GEMM_INT8: /* pp-s8: ~1200 TOPS at 4096^3 (ozaki-notes.md) */
        return 500;
    default: /* fp64, complex128 */
        return 25;
    }
}

uint64_t cuda_slice_budget(const gemmd_job *j)
{
    if (slice_ms == 0)
        return 0;
    return (uint64_t)(rate_tflops(j) * 1e12 * (slice_ms / 4.0) / 1e3);
}

gemmk_problem cuda_tile_problem(const gemmd_job *j, const gemmk_problem *kp,
                                const slice_tile *t)
{
    size_t es = gemm_dtype_size(j->ab_type), cs = gemm_dtype_size(j->cd_type);
    gemmk_problem p = *kp;
    p.m = (int64_t)t->rows;
    p.n = (int64_t)t->cols;
    p.a = (const char *)kp->a + slice_off_a(j, t, (uint64_t)kp->lda) * es;
    p.b = (const char *)kp->b + slice_off_b(j, t, (uint64_t)kp->ldb) * es;
    if (kp->c != NULL)
        p.c = (const char *)kp->c + slice_off_d(t, (uint64_t)kp->ldc) * cs;
    p.d = (char *)kp->d + slice_off_d(t, (uint64_t)kp->ldd) * cs;
    return p;
}

int cuda_slices_run(cuda_worker *w, gemmd_job *j, const gemmk_problem *kp,
                    cuda_run_fn run)
{
    uint64_t budget = cuda_slice_budget(j);
    if (budget == 0 || slice_flops(j) <= budget)
        return run(w, j, kp);
    /* an fp64 (or accurate fp32) GEMM "auto" emulates within a slice's
     * time runs whole: each slice would prepare its operands again */
    const double emul_s =
        j->kernel[0] == '\0' ? gemmk_auto_emulation_s(w->kctx, kp) : 0;
    if (emul_s > 0 && emul_s * 1e3 <= slice_ms / 2.0)
        return run(w, j, kp);
    /* 128 elements: keeps every tile's operands 16-byte aligned (TMA) and
     * whole tiles of the kernels */
    uint64_t rows, cols;
    slice_plan(j, budget, 128, &rows, &cols);
    uint64_t nr = (j->m + rows - 1) / rows, nc = (j->n + cols - 1) / cols;
    uint64_t total = nr * nc, done = 0;
    int rv = GEMM_OK;
    cudaEvent_t ev[2] = {NULL, NULL};
    char *m = j->msg;
    size_t ml = sizeof(j->msg);
    /* other clients' small GEMMs reach the device through the other
     * workers: this one runs no job between its slices */
    j->between = NULL;
    for (int i = 0; i < 2; i++)
        CK(cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming), m, ml);
    gemmd_log(LOG_DEBUG,
              "a %llux%llux%llu GEMM runs in %llu slices of %llux%llu",
              (unsigned long long)j->m, (unsigned long long)j->n,
              (unsigned long long)j->k, (unsigned long long)total,
              (unsigned long long)rows, (unsigned long long)cols);
    for (uint64_t r0 = 0; r0 < j->m; r0 += rows) {
        for (uint64_t c0 = 0; c0 < j->n; c0 += cols, done++) {
            if (done >= 2) { /* at most two slices in flight */
                CK(cudaEventSynchronize(ev[done % 2]), m, ml);
                if (slice_yield(j, done - 2, total)) {
                    rv = slice_stopped(j);
                    goto fail;
                }
            }
            slice_tile t = {
                .r0 = r0,
                .rows = j->m - r0 < rows ? j->m - r0 : rows,
                .c0 = c0,
                .cols = j->n - c0 < cols ? j->n - c0 : cols,
            };
            gemmk_problem p = cuda_tile_problem(j, kp, &t);
            if ((rv = run(w, j, &p)) != GEMM_OK)
                goto fail;
            CK(cudaEventRecord(ev[done % 2], w->stream), m, ml);
        }
    }
    rv = GEMM_OK;
fail:
    for (int i = 0; i < 2; i++)
        if (ev[i] != NULL)
            cudaEventDestroy(ev[i]);
    return rv;
}
