/*
 * rect.h: a block of a matrix and its copy between host and device
 * (rect.c), for the staging paths that move panels (pipeline.c,
 * staging_blas3.c).
 */
#ifndef GEMMD_CUDA_RECT_H
#define GEMMD_CUDA_RECT_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

/* A block of a matrix: rows x cols at row r, column c of its layout. */
typedef struct cuda_rect {
    uint64_t r, c, rows, cols;
} cuda_rect;

/* Copies block x of es-byte elements from src (ld sld) to the same block
 * of dst (ld dld) on stream s; an empty block copies nothing. */
cudaError_t cuda_copy_rect(cudaStream_t s, void *dst, uint64_t dld,
                           const void *src, uint64_t sld, cuda_rect x,
                           size_t es, enum cudaMemcpyKind kind);

#endif
