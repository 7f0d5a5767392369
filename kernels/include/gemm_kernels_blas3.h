/*
 * gemm_kernels_blas3.h: the kernel library's other level-3 routines
 * (symm, hemm, syrk, herk, syr2k, her2k, trmm, trsm) on the device, with
 * the meaning of CBLAS's row-major interface: matrices row-major as
 * stored, the flags and dimensions as in proto/gemm.proto's Blas3Request.
 * cuBLAS computes them (through the context's cuBLAS handle of the wide
 * types), on exactly the triangles the reference BLAS reads and writes.
 * A header of its own beside gemm_kernels.h, so adding it recompiles no
 * kernel. Thread-safety as gemm_kernels.h: the context's thread only.
 */
#ifndef GEMM_KERNELS_BLAS3_H
#define GEMM_KERNELS_BLAS3_H

#include "gemm_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Routine numbers: the wire's Routine (1 symm .. 8 trsm). */
enum {
    GEMMK_GEMM3 = 0, /* C = alpha op(A) op_b(B) + beta C: the blocks of
                        a rank update cut into panels (trans_b is op_b) */
    GEMMK_SYMM = 1,
    GEMMK_HEMM = 2,
    GEMMK_SYRK = 3,
    GEMMK_HERK = 4,
    GEMMK_SYR2K = 5,
    GEMMK_HER2K = 6,
    GEMMK_TRMM = 7,
    GEMMK_TRSM = 8,
};

typedef struct gemmk_blas3_problem {
    int routine;           /* GEMMK_SYMM .. GEMMK_TRSM */
    gemm_dtype dtype;      /* fp32, fp64, complex64, complex128 */
    int right;             /* SIDE: 1 right (symm, hemm, trmm, trsm) */
    int lower;             /* UPLO: 1 the lower triangle */
    int trans;             /* 0 N, 1 T, 2 C: TRANS (rank updates), TRANSA */
    int unit_diag;         /* DIAG: 1 unit (trmm, trsm) */
    int trans_b;           /* GEMMK_GEMM3 only: 0 N, 1 T, 2 C */
    int64_t m, n, k;       /* as the wire: m, n (symm, trmm, trsm); n, k;
                              GEMMK_GEMM3: C m x n, inner k */
    double alpha[2];       /* (re, im); herk: real */
    double beta[2];        /* unused by trmm/trsm; herk, her2k: real */
    const void *a, *b;     /* device pointers; b NULL when unused (trmm:
                              B when not in place, else NULL) */
    void *c;               /* the output: C, or B of trmm/trsm (in place) */
    int64_t lda, ldb, ldc; /* elements, row-major */
} gemmk_blas3_problem;

/*
 * Enqueues p on stream. Returns GEMM_OK, GEMM_ERR_INVALID (a routine,
 * type or flag the wire would not carry), GEMM_ERR_DEVICE or
 * GEMM_ERR_DEVICE_MEMORY on cuBLAS failures, with res->msg saying why
 * and res->kernel naming what ran ("cublas-dsyrk", ...).
 */
gemm_error gemmk_blas3(gemmk_ctx *ctx, const gemmk_blas3_problem *p,
                       cudaStream_t stream, gemmk_result *res);

/*
 * Whether symm or hemm (p->routine) of p->dtype runs faster as GEMMs
 * (GEMMK_GEMM3) on A made whole by gemmk_blas3_whole than as cuBLAS's
 * routine: in fp32 and complex64, where our GEMMs (3xTF32, the fp32
 * emulation) outrun cuBLAS's SIMT symm and hemm (the knob
 * GEMMK_BLAS3_WHOLE: 1 every type, 0 never). Never for alpha = 0, which
 * the reference answers without reading A or B.
 */
int gemmk_blas3_whole_pays(const gemmk_ctx *ctx, const gemmk_blas3_problem *p);

/*
 * Writes into dst (ld ldd) the whole square matrix that p's symm or hemm
 * reads from the triangle p->lower of p->a (ld p->lda; order m when A is
 * on the left, n on the right): the other triangle mirrored (symm) or
 * conjugated with the diagonal's imaginary parts zero (hemm). dst may be
 * p->a (then only what changes is written). Reads only the referenced
 * triangle. GEMM_ERR_INVALID for another routine or type.
 */
gemm_error gemmk_blas3_whole(gemmk_ctx *ctx, const gemmk_blas3_problem *p,
                             void *dst, int64_t ldd, cudaStream_t stream,
                             gemmk_result *res);

#ifdef __cplusplus
}
#endif

#endif /* GEMM_KERNELS_BLAS3_H */
