/*
 * grouped_wide.h: the wide problems of a gemmk_gemm_grouped batch
 * (fp64, complex64, complex128) through cuBLAS's batched calls
 * (grouped_wide.cu), and what it shares with wide.cu.
 */
#pragma once

#include <cublas_v2.h>

#include "ctx_internal.h"

namespace gemmk
{

/* Whether validated problem p (m, n >= 1) runs in wide_batch: a wide
 * type on device operands, which "auto" runs as one cuBLAS call. */
bool wide_batched(const gemmk_problem *p);

/*
 * Runs the wide_batched problems of probs (count, validated; m or n 0
 * skipped) on s as "auto" runs each, in as few cuBLAS calls as their
 * shapes allow: a strided batch (one shape, scalars and leading
 * dimensions, A, B and D at constant strides) as one
 * cublas{D,C,Z}gemmStridedBatched; problems of one shape at other
 * places as one cublas{D,C,Z}gemmBatched over pointer arrays (the
 * context's SLOT_WIDE workspace, one cudaMemcpyAsync); fp64 problems of
 * several shapes as one cublasDgemmGroupedBatched; a lone problem as
 * gemmk_gemm would. C, when read and not D, is copied into D first.
 * *kernel: the catalog name of what ran (NULL when nothing did); on
 * failure *fail is the problem it is about, ctx->msg why. Context's
 * thread.
 */
gemm_error wide_batch(gemmk_ctx *ctx, const gemmk_problem *probs, int count,
                      cudaStream_t s, int *fail, const char **kernel);

/* wide.cu: a failed cuBLAS call said into ctx (what, file:line) as the
 * gemm_error its status maps to; GEMMK_CB returns it from the caller. */
gemm_error blas_fail(gemmk_ctx *ctx, cublasStatus_t s, const char *what,
                     const char *file, int line);
#define GEMMK_CB(ctx, call)                                                    \
    do {                                                                       \
        cublasStatus_t s_ = (call);                                            \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                       \
            return ::gemmk::blas_fail((ctx), s_, #call, __FILE__, __LINE__);   \
    } while (0)

/* wide.cu: the wide types' cuBLAS handle set to s; C into D when C is
 * read and is not D already (es: element bytes). */
gemm_error wide_handle(gemmk_ctx *ctx, cudaStream_t s, cublasHandle_t *out);
gemm_error c_into_d(gemmk_ctx *ctx, const gemmk_problem *p, size_t es,
                    cudaStream_t s);

} // namespace gemmk
