/*
 * grouped.h: what grouped.cu (the entry point gemmk_gemm_grouped: which
 * problems run grouped, their tables and tensor maps) hands to the
 * grouped kernel's launch units (kern_grouped128.cu, kern_grouped256.cu,
 * kern_grouped256c2.cu: one tile width or cluster size each, compiled in
 * parallel).
 */
#pragma once

#include <cuda_runtime_api.h>

#include "gemm_grouped.cuh"
#include "smem_opt_in.h"

namespace gemmk
{

struct GroupLaunch {
    GroupParams g;
    CUtensorMap ta3, tb3; /* g.strided: A's and B's 3-D maps */
    CUtensorMap td3;      /* g.tstore: D's */
    int bn;               /* tile width: 128 or 256 */
    int cl;               /* cluster size: 1, or 2 (strided, bn 256) */
    bool whole;           /* strided, TMA stores, bn 256, cl 1: a consumer
                             stores its whole block at once (NB = 4) */
    int grid;             /* CTAs: at most one per SM, cl per unit */
    bool f16;             /* fp16 inputs (else bf16) */
    int amn, bmn;         /* trans_a, !trans_b */
    cudaStream_t stream;
};

/* Launches gemm_grouped_kernel<l.bn, ..> for l on l.stream; returns the
 * launch's error (cudaGetLastError after it). */
cudaError_t launch_grouped(const GroupLaunch &l);
cudaError_t launch_grouped128(const GroupLaunch &l);
cudaError_t launch_grouped256(const GroupLaunch &l);
cudaError_t launch_grouped256c2(const GroupLaunch &l);
cudaError_t launch_grouped256w(const GroupLaunch &l);

template <int BN, int AB, int AMN, int BMN, int CL, int NB>
cudaError_t launch_grouped_one(const GroupLaunch &l)
{
    static SmemOptIn opt_in; /* this kernel's (smem_opt_in.h) */
    auto kern = gemm_grouped_kernel<BN, AB, AMN, BMN, CL, NB>;
    constexpr int smem = GroupCfg<BN, NB>::SMEM;
    cudaError_t e = opt_in.ensure(kern, smem);
    if (e != cudaSuccess)
        return e;
    return launch_clusters(kern, l.grid, smem, CL, l.stream, l.g, l.ta3, l.tb3,
                           l.td3);
}

/* The 8 instantiations of tile width BN, cluster size CL and store
 * buffers NB: input type x transposes. */
template <int BN, int CL = 1, int NB = 2>
cudaError_t launch_grouped_bn(const GroupLaunch &l)
{
    int sel = (l.f16 ? 4 : 0) | (l.amn ? 2 : 0) | (l.bmn ? 1 : 0);
    switch (sel) {
    case 0:
        return launch_grouped_one<BN, 0, 0, 0, CL, NB>(l);
    case 1:
        return launch_grouped_one<BN, 0, 0, 1, CL, NB>(l);
    case 2:
        return launch_grouped_one<BN, 0, 1, 0, CL, NB>(l);
    case 3:
        return launch_grouped_one<BN, 0, 1, 1, CL, NB>(l);
    case 4:
        return launch_grouped_one<BN, 1, 0, 0, CL, NB>(l);
    case 5:
        return launch_grouped_one<BN, 1, 0, 1, CL, NB>(l);
    case 6:
        return launch_grouped_one<BN, 1, 1, 0, CL, NB>(l);
    default:
        return launch_grouped_one<BN, 1, 1, 1, CL, NB>(l);
    }
}

} // namespace gemmk
