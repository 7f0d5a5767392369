/*
 * gemm_kernels.h: the C API of gemmd's own Hopper (sm_90a) GEMM kernels.
 *
 * D = alpha * op(A) * op(B) + beta * C, all matrices row-major on the device.
 * op(A) is M x K: A is stored M x K (lda >= K), or K x M when trans_a
 * (lda >= M). op(B) is K x N: B is stored K x N (ldb >= N), or N x K when
 * trans_b (ldb >= K). C and D are M x N (ldc, ldd >= N). A and B are bf16
 * or fp16 (the same type); C and D are bf16, fp16 or fp32 (cd_type, one type
 * for both); accumulation is fp32. Leading dimensions are in elements and
 * must be multiples of 8 (16 bytes, what TMA needs); pointers 16-byte
 * aligned. When beta == 0, C is never read and may be NULL.
 *
 * Thread-safety: a gemmk_ctx belongs to one thread at a time (the daemon's
 * GPU worker); distinct contexts may be used from distinct threads. All
 * functions that take no context are thread-safe.
 * No function prints or exits; every fallible call returns a gemm_error.
 */
#ifndef GEMM_KERNELS_H
#define GEMM_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>
#include <gemm/gemm.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gemmk_ctx gemmk_ctx;

typedef struct gemmk_problem {
    int64_t m, n, k;            /* >= 1 each */
    gemm_dtype ab_type;         /* GEMM_BF16 or GEMM_FP16 */
    gemm_dtype cd_type;         /* GEMM_BF16, GEMM_FP16 or GEMM_FP32 */
    int trans_a, trans_b;       /* 0 or 1, see above */
    const void *a, *b, *c;      /* device pointers; c may be NULL if beta==0 */
    void *d;                    /* device pointer; must not alias a or b */
    int64_t lda, ldb, ldc, ldd; /* elements, multiples of 8 */
    float alpha, beta;
} gemmk_problem;

/*
 * Creates a context on CUDA device `device` (makes it current on the calling
 * thread). The context owns the tensor-map cache and a split-K workspace.
 * On success *out must be freed with gemmk_ctx_destroy. Returns
 * GEMM_ERR_UNSUPPORTED when the device is not sm_90, GEMM_ERR_DEVICE when
 * the driver or device is missing, GEMM_ERR_NOMEM.
 */
gemm_error gemmk_ctx_create(gemmk_ctx **out, int device);

/* Frees the context and its workspace (synchronizes the device first).
 * NULL is a no-op. */
void gemmk_ctx_destroy(gemmk_ctx *ctx);

/*
 * Validates p and enqueues the multiply on `stream` (0: the legacy default
 * stream). kernel: NULL picks a configuration by shape; otherwise one of the
 * names gemmk_kernel_name() lists ("auto" too). Returns GEMM_ERR_INVALID for
 * bad dims, leading dims or alignment, GEMM_ERR_DTYPE for unsupported
 * types, GEMM_ERR_UNSUPPORTED for an unknown kernel name, GEMM_ERR_DEVICE
 * or GEMM_ERR_DEVICE_MEMORY on CUDA failures. Asynchronous: the operands
 * must stay valid until the stream reaches the work. Split-K configurations
 * use the context's workspace: do not run one context on two streams at
 * once.
 */
gemm_error gemmk_gemm(gemmk_ctx *ctx, const gemmk_problem *p,
                      cudaStream_t stream, const char *kernel);

/*
 * The configuration gemmk_gemm would pick for p with kernel == NULL:
 * writes its name (static string) into *name. Returns GEMM_ERR_INVALID on
 * a bad problem.
 */
gemm_error gemmk_select(const gemmk_ctx *ctx, const gemmk_problem *p,
                        const char **name);

/*
 * Device facts the heuristic uses: SM count and how many 2-CTA clusters of
 * the 128x256 kernel are co-resident (cudaOccupancyMaxActiveClusters, or
 * $GEMMK_MAX_CLUSTERS when set: an experiment knob). Either out may be NULL.
 */
void gemmk_ctx_info(const gemmk_ctx *ctx, int *num_sms, int *max_clusters2);

/* Number of selectable kernel configurations, and the i-th name (static
 * string; NULL when out of range). Thread-safe. */
int gemmk_kernel_count(void);
const char *gemmk_kernel_name(int i);

typedef struct gemmk_cache_stats {
    uint64_t hits, misses, evictions;
    uint32_t entries, capacity;
} gemmk_cache_stats;

/* Tensor-map cache counters of ctx. */
void gemmk_cache_stats_get(const gemmk_ctx *ctx, gemmk_cache_stats *out);

/* Drops every cached tensor map whose global address lies in
 * [base, base + bytes). Cached maps embed the pointer, so call this after
 * freeing device memory to keep the cache small; correctness does not
 * depend on it (the key holds pointer, shape, strides, type and box). */
void gemmk_cache_forget(gemmk_ctx *ctx, const void *base, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* GEMM_KERNELS_H */
