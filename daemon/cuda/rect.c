/*
 * rect.c: one block of a matrix copied between host and device (rect.h).
 */
#include "cuda/rect.h"

cudaError_t cuda_copy_rect(cudaStream_t s, void *dst, uint64_t dld,
                           const void *src, uint64_t sld, cuda_rect x,
                           size_t es, enum cudaMemcpyKind kind)
{
    if (x.rows == 0 || x.cols == 0)
        return cudaSuccess;
    return cudaMemcpy2DAsync((char *)dst + (x.r * dld + x.c) * es, dld * es,
                             (const char *)src + (x.r * sld + x.c) * es,
                             sld * es, x.cols * es, x.rows, kind, s);
}
