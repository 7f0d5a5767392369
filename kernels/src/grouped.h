/*
 * grouped.h: what grouped.cu (the entry point gemmk_gemm_grouped: which
 * problems run grouped, their tables and tensor maps) hands to
 * kern_grouped.cu (the grouped kernel's instantiations and launch).
 */
#pragma once

#include <cuda_runtime_api.h>

#include "gemm_grouped.cuh"

namespace gemmk
{

/* The tile width of the grouped kernel. */
constexpr int GROUP_BN = 128;

struct GroupLaunch {
    GroupParams g;
    int grid;     /* CTAs: at most one per SM, at most g.units */
    bool f16;     /* fp16 inputs (else bf16) */
    int amn, bmn; /* trans_a, !trans_b */
    cudaStream_t stream;
};

/* Launches gemm_grouped_kernel for l on l.stream; returns the launch's
 * error (cudaGetLastError after it). */
cudaError_t launch_grouped(const GroupLaunch &l);

} // namespace gemmk
