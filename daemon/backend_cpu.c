/*
 * backend_cpu.c: the CPU backend. OpenBLAS's cblas_sgemm does the work;
 * bf16 and fp16 operands are widened to fp32 first and D is narrowed after,
 * so accumulation is fp32 as on the GPU. Serves hosts without a GPU, and CI.
 * One worker thread runs GEMMs one at a time, each using --threads OpenBLAS
 * threads (concurrent OpenBLAS calls would only fight over the cores).
 */
#include "backend.h"
#include "log.h"

#include <gemm/gemm.h>

#include <cblas.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool cpu_available(void)
{
    return true;
}

static int cpu_init(gemmd_backend *be, const gemmd_config *cfg, char *msg,
                    size_t len)
{
    (void)msg;
    (void)len;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int threads =
        cfg->threads > 0 ? cfg->threads : (int)(cores > 0 ? cores : 1);
    openblas_set_num_threads(threads);
    be->workers = 1;
    be->threads = (unsigned)threads;
    /* The CPU model from /proc/cpuinfo, for Hello and Status. */
    snprintf(be->device, sizeof(be->device), "cpu");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f != NULL) {
        char line[256];
        while (fgets(line, sizeof(line), f) != NULL) {
            char *colon = strchr(line, ':');
            if (strncmp(line, "model name", 10) == 0 && colon != NULL) {
                colon += 1 + strspn(colon + 1, " \t");
                colon[strcspn(colon, "\n")] = '\0';
                snprintf(be->device, sizeof(be->device), "%s", colon);
                break;
            }
        }
        fclose(f);
    }
    gemmd_log(LOG_INFO, "cpu backend: %s, %d OpenBLAS threads", be->device,
              threads);
    return GEMM_OK;
}

static void cpu_fini(gemmd_backend *be)
{
    (void)be;
}

/* Copies a rows x cols matrix of type st with leading dimension ld into a
 * dense fp32 array (widening). */
static void widen(float *dst, const void *src, int st, uint64_t rows,
                  uint64_t cols, uint64_t ld)
{
    size_t es = gemm_dtype_size(st);
    for (uint64_t r = 0; r < rows; r++)
        gemm_convert(dst + r * cols, GEMM_FP32, (const char *)src + r * ld * es,
                     st, cols);
}

static int cpu_gemm(gemmd_backend *be, gemmd_job *j)
{
    (void)be;
    int rv = GEMM_OK;
    float *a32 = NULL, *b32 = NULL, *d32 = NULL;
    if (j->m > INT_MAX || j->n > INT_MAX || j->k > INT_MAX ||
        j->lda > INT_MAX || j->ldb > INT_MAX || j->ldd > INT_MAX) {
        snprintf(j->msg, sizeof(j->msg),
                 "dimensions exceed the CPU backend's 32-bit BLAS");
        return GEMM_ERR_UNSUPPORTED;
    }
    const val_matrix *sa = &j->shape.a, *sb = &j->shape.b;
    const float *A = j->a, *B = j->b;
    int lda = (int)j->lda, ldb = (int)j->ldb;
    if (j->ab_type != GEMM_FP32) {
        a32 = malloc(sa->rows * sa->cols * sizeof(float));
        b32 = malloc(sb->rows * sb->cols * sizeof(float));
        if (a32 == NULL || b32 == NULL)
            goto nomem;
        widen(a32, j->a, j->ab_type, sa->rows, sa->cols, j->lda);
        widen(b32, j->b, j->ab_type, sb->rows, sb->cols, j->ldb);
        A = a32;
        B = b32;
        lda = (int)sa->cols;
        ldb = (int)sb->cols;
    }
    float *D = j->d;
    int ldd = (int)j->ldd;
    if (j->cd_type != GEMM_FP32) {
        if ((d32 = malloc(j->m * j->n * sizeof(float))) == NULL)
            goto nomem;
        if (j->has_c)
            widen(d32, j->c, j->cd_type, j->m, j->n, j->ldc);
        D = d32;
        ldd = (int)j->n;
    } else if (j->has_c && j->c != j->d) {
        for (uint64_t r = 0; r < j->m; r++)
            memcpy((float *)j->d + r * j->ldd, (const float *)j->c + r * j->ldc,
                   j->n * sizeof(float));
    }
    cblas_sgemm(CblasRowMajor, j->trans_a ? CblasTrans : CblasNoTrans,
                j->trans_b ? CblasTrans : CblasNoTrans, (int)j->m, (int)j->n,
                (int)j->k, j->alpha, A, lda, B, ldb, j->has_c ? j->beta : 0.0f,
                D, ldd);
    if (d32 != NULL) {
        size_t es = gemm_dtype_size(j->cd_type);
        for (uint64_t r = 0; r < j->m; r++)
            gemm_convert((char *)j->d + r * j->ldd * es, j->cd_type,
                         d32 + r * j->n, GEMM_FP32, j->n);
    }
    goto done;
nomem:
    snprintf(j->msg, sizeof(j->msg),
             "out of memory for the fp32 copies of a %llux%llux%llu GEMM",
             (unsigned long long)j->m, (unsigned long long)j->n,
             (unsigned long long)j->k);
    rv = GEMM_ERR_NOMEM;
done:
    free(a32);
    free(b32);
    free(d32);
    return rv;
}

/* A resident tensor on the CPU backend: a dense host copy. */
static int cpu_upload(gemmd_backend *be, gemmd_job *j)
{
    (void)be;
    size_t es = gemm_dtype_size(j->dtype);
    reg_buffer *t = j->tensor;
    char *p = malloc(j->rows * j->cols * es);
    if (p == NULL) {
        snprintf(j->msg, sizeof(j->msg), "out of memory for a %llux%llu tensor",
                 (unsigned long long)j->rows, (unsigned long long)j->cols);
        return GEMM_ERR_NOMEM;
    }
    for (uint64_t r = 0; r < j->rows; r++)
        memcpy(p + r * j->cols * es, (const char *)j->a + r * j->lda * es,
               j->cols * es);
    t->pin = p;
    t->data = p;
    t->size = j->rows * j->cols * es;
    t->ld = j->cols;
    t->on_device = false;
    return GEMM_OK;
}

static void cpu_tensor_free(gemmd_backend *be, void *handle)
{
    (void)be;
    free(handle);
}

const gemmd_backend_ops gemmd_backend_cpu = {
    .name = "cpu",
    .available = cpu_available,
    .init = cpu_init,
    .fini = cpu_fini,
    .pin = NULL,
    .unpin = NULL,
    .gemm = cpu_gemm,
    .upload = cpu_upload,
    .tensor_free = cpu_tensor_free,
    .stats = NULL,
};
