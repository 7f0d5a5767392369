/*
 * tiled.h: what the tiled paths (tiled16.cu for bf16/fp16 inputs,
 * run_fp32.cu for fp32) share: the tensor maps of A and B, the kernel
 * parameters and grid of a plan, and the split-K reduction after it.
 */
#pragma once

#include "launch.h"
#include "plan.h"

namespace gemmk
{

/* A's and B's tensor maps (from ctx's cache) into l. */
gemm_error set_maps(gemmk_ctx *ctx, const gemmk_tmap_key *ka,
                    const gemmk_tmap_key *kb, Launch *l);

/* The keys of A's and B's tensor maps of 16-bit problem p for 128 x bn
 * tiles in clusters of cl (each CTA loads 1 / cl of B's tile). */
void tiled16_keys(const gemmk_problem *p, int bn, int cl, gemmk_tmap_key *ka,
                  gemmk_tmap_key *kb);

/* A's and B's tensor maps of 16-bit problem p under plan pl into l, and
 * its type and transposes (l's f16, amn, bmn). */
gemm_error tiled16_maps(gemmk_ctx *ctx, const gemmk_problem *p, const Plan &pl,
                        Launch *l);

/* The kernel parameters and grid of plan pl for p, whose K (keff elements,
 * after any pre-pass) runs in k-blocks of kbe elements; grows the split-K
 * workspace (stream ordered on stream). */
gemm_error fill_params(gemmk_ctx *ctx, const gemmk_problem *p, const Plan &pl,
                       int64_t keff, int kbe, Launch *l, cudaStream_t stream);

/* A stream-K tail over units [dp, dp + units) on a grid of every SM
 * (gemm_streamk.cuh): the workspace of partials and flags, this launch's
 * epoch. */
gemm_error sk_setup(gemmk_ctx *ctx, int dp, int units, cudaStream_t stream,
                    SkParams *sk);

/* The stream-K tail of plan pl (pl.sk): the workspace of partials and
 * flags, this launch's epoch, a grid of every SM. */
gemm_error sk_params(gemmk_ctx *ctx, const Plan &pl, cudaStream_t stream,
                     Launch *l);

/* D's tensor map into l->td where plan pl stores through TMA and p's
 * epilogue allows it (16-bit D: 64 x 64 boxes; fp32 D of the tf32 kernel,
 * l->tf32: 64 x 32, also for D^T stored transposed, l->p.d_trans, where p
 * is the problem as the caller asked it); zeroed otherwise, so the kernel
 * stores from registers. */
gemm_error tstore_map(gemmk_ctx *ctx, const gemmk_problem *p, const Plan &pl,
                      Launch *l);

/* The split-K reduction after a split plan's kernel (nothing otherwise). */
gemm_error finish_splits(gemmk_ctx *ctx, const gemmk_problem *p, const Plan &pl,
                         const KParams &kp, cudaStream_t stream);

} // namespace gemmk
