/*
 * cuda_check.h: abort-on-error checks for the kernel test and benchmark
 * programs (tests/kernels, bench). Never for library code, which returns
 * errors: these print file:line, the call and the error, and exit(2).
 */
#pragma once

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

/* A CUDA runtime call that must succeed. */
#define CK(x)                                                                  \
    do {                                                                       \
        cudaError_t e_ = (x);                                                  \
        if (e_ != cudaSuccess) {                                               \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,         \
                    cudaGetErrorString(e_));                                   \
            exit(2);                                                           \
        }                                                                      \
    } while (0)

/* A cuBLAS(Lt) call that must succeed (include cublas_api.h or
 * cublasLt.h before using it). */
#define CB(x)                                                                  \
    do {                                                                       \
        int s_ = (int)(x);                                                     \
        if (s_ != 0) {                                                         \
            fprintf(stderr, "%s:%d: %s: cublas status %d\n", __FILE__,         \
                    __LINE__, #x, s_);                                         \
            exit(2);                                                           \
        }                                                                      \
    } while (0)
