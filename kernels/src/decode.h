/*
 * decode.h: the decode kernel's parameters and launch (kern_decode.cu;
 * the kernel is gemm_decode.cuh), apart from launch.h so that the other
 * kernels' units do not depend on it.
 */
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

namespace gemmk
{

struct DecodeParams {
    int rows;    /* A' rows: the problem's N */
    int cols;    /* B' rows: the problem's M */
    int nkb;     /* k-blocks of BK */
    int stages;  /* the ring's depth */
    int cd_type; /* gemm_dtype of C and D */
    int hint;    /* L2 policies on the loads (gemm_decode.cuh) */
    int kseg;    /* 3xTF32 decode: A's big part starts kseg further along */
    int promo;   /* 3xTF32 decode: a consumer's k-blocks a promotion */
    float alpha, beta;
    void *d;
    const void *c;
    long long ldd, ldc;
};

/* The decode kernel (kern_decode.cu, gemm_decode.cuh): ta the problem's B
 * read as N x K (amn: MN-major, box 64 x 64), tb its A (K-major, box 64
 * x bn); one CTA per 64 of N (128 for the pair, 256 for the quad; grid)
 * and bn of M (grid_y). */
struct DecodeLaunch {
    CUtensorMap ta, tb;
    DecodeParams p;
    int grid, grid_y, bn; /* bn: 8 to 128, a multiple of 8 */
    bool f16;
    int rows;  /* 16-bit: B^T rows a tile: 64 (one consumer), 128 (the pair,
                  a consumer on each 64) or 256 (the quad, on each 128);
                  past 64 for bn <= 64 */
    bool tf32; /* fp32 inputs as tf32 (gemm_decode_tf32.cuh): bn 8, 16, 32,
                 64 or 128 */
    bool rs;   /* tf32: 128-row tiles, a consumer on each 64 */
    bool x3;   /* tf32: 3xTF32, B split in registers, A's parts in tb */
    int amn;   /* B^T MN-major: 1 (tf32: transposed in smem), 2 (tf32: to
                  registers) */
    cudaStream_t stream;
};
cudaError_t launch_decode(const DecodeLaunch &l);
/* launch_decode's 16-bit quad (kern_decode_quad.cu) */
cudaError_t launch_decode_quad(const DecodeLaunch &l);
/* The tf32 kernel's ring depth for `tiles` CTAs of width bn and `rows`
 * rows (64 or 128) on `sms` SMs: decode_stages's rule with its transposed
 * tiles beside the ring, or `forced` (GEMMK_DECODE_STAGES, >= 2) where
 * that fits; even where rows is 64. x3: two tiles of A a stage, no
 * transposed tiles. */
int decode_tf32_stages(int bn, int rows, long long tiles, int sms, int forced,
                       bool x3);
/* The ring's depth for `tiles` CTAs of tile width bn and `rows` rows of
 * B^T (64, 128 for the pair, 256 for the quad) on `sms` SMs: as deep as
 * lets all of them be resident at once (up to 8 an SM) and keeps about 12
 * MiB of B in flight, 2 to 16. */
int decode_stages(int bn, long long tiles, int sms, int rows = 64);

} // namespace gemmk
