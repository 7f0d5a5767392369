/*
 * kern_s8.h: what kern_s8.cu offers the fp64 emulation (ozaki.cu): the
 * launches of gemm_s8.cuh's kernel and the byte transpose.
 */
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>

namespace gemmk
{

struct S8Params;

/* gemm_s8_kernel<bn, oz> on grid CTAs (bn 256 with oz 0 or 2, bn 128 with
 * oz 0); the launch error. */
cudaError_t launch_s8(int bn, int oz, const CUtensorMap &ta,
                      const CUtensorMap &tb, const S8Params &p, int grid,
                      cudaStream_t st);
/* The ping-pong kernel (128 x 128 tile per consumer warpgroup, units =
 * (tile, product)), oz 0 or 2. */
cudaError_t launch_s8_pp(int oz, const CUtensorMap &ta, const CUtensorMap &tb,
                         const S8Params &p, int grid, cudaStream_t st);
/* Fills p's tile counts for an m x n output in 128 x bn tiles, raster
 * groups of group_m M-tiles (0: 8). */
void s8_tiles(S8Params &p, int m, int n, int bn, int group_m);
int s8_smem(int bn);
/* out (cols x ldo bytes) = in^T (in: rows x cols, pitch ldi), columns of
 * out from rows to ldo zeroed. */
cudaError_t transpose_u8(const uint8_t *in, long long ldi, long long rows,
                         long long cols, uint8_t *out, long long ldo,
                         cudaStream_t st);

} // namespace gemmk
