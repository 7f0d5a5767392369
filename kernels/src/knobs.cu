/*
 * knobs.cu: the table of tuning knobs. Each row: the environment name,
 * the default, what it changes and where it is used, and how a set value
 * is read (atoi, then clamped to what the code accepts; anything else
 * falls back to the default). Production never sets them; they exist to
 * measure alternatives on a device (docs/kernel-notes.md,
 * docs/ozaki-notes.md).
 */
#include <stdio.h>
#include <stdlib.h>

#include "knobs.h"

namespace gemmk
{
namespace
{

struct KnobRow {
    Knob id;
    const char *name;
    int def;
    const char *description; /* what it changes, and where */
    int (*read)(int raw);    /* atoi of the text -> the value used */
};

int read_max_clusters(int x)
{
    return x >= 0 ? x : -1;
}
int read_x3_promo(int x)
{
    return x >= 1 ? x : 0;
}
int read_x3_where(int x)
{
    return x == 2 ? 2 : 1;
}
int read_bool(int x)
{
    return x != 0;
}
int read_x3_bn(int x)
{
    return x == 64 || x == 128 ? x : 256;
}
int read_s8_kernel(int x)
{
    return x >= 1 && x <= 3 ? x : 2;
}
int read_positive(int x)
{
    return x > 0 ? x : 0;
}
int read_tristate(int x)
{
    return x == 0 || x == 1 ? x : -1;
}

const KnobRow kKnobs[KNOB_COUNT] = {
    {KNOB_MAX_CLUSTERS, "GEMMK_MAX_CLUSTERS", -1,
     "co-resident 2-CTA clusters the heuristic assumes (-1: measured by "
     "occupancy; ctx.cu, plan.cu)",
     read_max_clusters},
    {KNOB_X3_PROMO, "GEMMK_X3_PROMO", 0,
     "3xTF32 promotion chunk in k-blocks of 32 (0: from K; run_fp32.cu)",
     read_x3_promo},
    {KNOB_X3_WHERE, "GEMMK_X3_WHERE", 1,
     "3xTF32 promoted accumulator: 1 a global slot (L2), 2 shared memory "
     "(run_fp32.cu)",
     read_x3_where},
    {KNOB_X3_SKEW, "GEMMK_X3_SKEW", 1,
     "3xTF32: skew the two consumers' promotion chunks (run_fp32.cu)",
     read_bool},
    {KNOB_X3_BN, "GEMMK_X3_BN", 256,
     "3xTF32: the widest tile, 64, 128 or 256 (run_fp32.cu)", read_x3_bn},
    {KNOB_S8_KERNEL, "GEMMK_S8_KERNEL", 2,
     "the kernel \"ws-s8\" runs: 1 cooperative 128x128, 2 ping-pong, 3 "
     "cooperative 128x256 (kern_s8.cu)",
     read_s8_kernel},
    {KNOB_S8_MAP16, "GEMMK_S8_MAP16", 0,
     "int8 tensor maps as 16-bit elements where K allows (kern_s8.cu, "
     "ozaki.cu)",
     read_bool},
    {KNOB_OZ_BYTES_TILE, "GEMMK_OZ_BYTES_TILE", 0,
     "oz2-bytes: all moduli of a tile in one cooperative 128x256 CTA "
     "(ozaki.cu)",
     read_bool},
    {KNOB_OZ_PP, "GEMMK_OZ_PP", 1,
     "oz2-bytes, oz2-unfused: 1 the ping-pong int8 kernel, 0 the "
     "cooperative 128x256 one (ozaki.cu)",
     read_bool},
    {KNOB_WARM, "GEMMK_WARM", 1,
     "gemmk_ctx_warm pays first-use costs (0: it does nothing, and a "
     "first request pays them; warm.cu)",
     read_bool},
    {KNOB_GROUPED_PAIR, "GEMMK_GROUPED_PAIR", 1,
     "a strided batch of matrices of at most 64 x 64 runs two to a unit of "
     "the grouped kernel (0: one per 128 x 128 tile; grouped.cu)",
     read_bool},
    {KNOB_GROUPED_CLUSTER, "GEMMK_GROUPED_CLUSTER", 0,
     "1: a strided batch of 128 x 256 tiles with an even number of M-tiles "
     "runs in clusters of two CTAs, B multicast (measured no faster: "
     "16 x 2048^3 the same, 64 x 512^3 7% slower; grouped.cu)",
     read_bool},
    {KNOB_GROUPED_WHOLE, "GEMMK_GROUPED_WHOLE", -1,
     "a strided batch of 128 x 256 tiles with TMA stores stores each "
     "consumer's 64 x 256 block in one step (4 buffers, a ring of 3 "
     "stages): -1 from K = 2048, 1 always, 0 never (grouped.cu)",
     read_tristate},
    {KNOB_GROUPED_SK, "GEMMK_GROUPED_SK", -1,
     "a strided batch of 128 x 256 tiles splits its last waves' k-blocks "
     "over every SM (stream-K): -1 where the model saves 5%, 1 always, 0 "
     "never (grouped.cu)",
     read_tristate},
    {KNOB_EVEN_GRID, "GEMMK_EVEN_GRID", -1,
     "a persistent grid of more units than SMs has as few CTAs as take the "
     "same rounds (2048 tiles: 128 CTAs of 16 each, not 132 of 15 or 16): "
     "-1 for strided batches of whole tiles (64 x 512^3 +1-2%), 1 for every "
     "tiled launch, 0 never (plan.cu, tiled16.cu, grouped.cu)",
     read_tristate},
    {KNOB_WHOLE_K, "GEMMK_WHOLE_K", 4096,
     "auto stores whole 64 x 256 blocks (ws128x256e3, a ring of 3 stages) "
     "for 16-bit problems of K up to this over 8 waves or more of "
     "128 x 256 tiles (0: never; plan.cu)",
     read_positive},
    {KNOB_SWAP_M, "GEMMK_SWAP_M", 96,
     "auto runs 16-bit problems of M up to this (N, K >= 1024, a plan of "
     "split-K or 64-wide tiles) as ws-swap, A and B swapped (0: never; "
     "tiled16.cu, swap.cu)",
     read_positive},
    {KNOB_SWAP_ANY_M, "GEMMK_SWAP_ANY_M", 32,
     "auto runs 16-bit problems of M up to this (N, K >= 1024) as ws-swap "
     "whatever the plain plan, e.g. one partial wave of 128 x 256 tiles at "
     "N = 28672 (0: only where the plain plan splits K or takes 64-wide "
     "tiles; swap.cu)",
     read_positive},
    {KNOB_SWAP_SPLITS, "GEMMK_SWAP_SPLITS", 0,
     "ws-swap: the k-splits (0: by the model; swap.cu)", read_positive},
    {KNOB_DECODE_M, "GEMMK_DECODE_M", 104,
     "auto runs 16-bit problems of M up to this (at most 128; N, K >= "
     "1024; past 64 only with N <= 64 x the SMs) with A not transposed as "
     "ws-decode, whatever the plain plan (0: never; swap.cu)",
     read_positive},
    {KNOB_DECODE_STAGES, "GEMMK_DECODE_STAGES", 0,
     "ws-decode and ws-decode-tf32: the stages of their rings, 2 up to the "
     "deepest that fits (0: by the tile count, kern_decode.cu)",
     read_positive},
    {KNOB_DECODE_HINT, "GEMMK_DECODE_HINT", 1,
     "ws-decode and ws-decode-tf32: B's loads evict first from L2 and A's "
     "last (1) or no policy (0; gemm_decode.cuh, kernel-notes v18)",
     read_positive},
    {KNOB_DECODE_REGS, "GEMMK_DECODE_REGS", 1,
     "ws-decode-tf32 with B row-major: each stage's B^T tile goes to "
     "wgmma's A straight into registers (1; not for 128-wide tiles two an "
     "SM) or through a transposed copy in shared memory (0; "
     "gemm_decode_tf32.cuh, kernel-notes v20)",
     read_bool},
    {KNOB_DECODE_PAIR, "GEMMK_DECODE_PAIR", 1,
     "ws-decode: 128-row tiles with a consumer warpgroup on each 64 rows "
     "where M <= 64 and 64-row tiles would be more than two an SM, e.g. "
     "N = 28672 (1), or 64-row tiles with one consumer always (0; "
     "swap.cu, kernel-notes v22)",
     read_bool},
    {KNOB_DECODE_QUAD, "GEMMK_DECODE_QUAD", 1,
     "ws-decode where it takes the pair and B is row-major: 256-row tiles, "
     "each consumer warpgroup on 128 rows (1), or the pair's 128 (0; "
     "swap.cu, kernel-notes v23)",
     read_bool},
    {KNOB_TF32_RS, "GEMMK_TF32_RS", 2,
     "ws-tf32 where the pre-pass would take at least this percent of the "
     "GEMM: a column-major A (trans_a) goes to wgmma straight into "
     "registers, transposed as it is loaded, and NN runs as D^T = B^T A^T "
     "stored transposed; 0: every MN-major operand is transposed and "
     "rounded by a pre-pass first (run_fp32.cu, gemm_sm90.cuh "
     "consume_tile_rs, kernel-notes v21, v26)",
     read_positive},
    {KNOB_TF32_TAIL, "GEMMK_TF32_TAIL", 1,
     "ws-tf32 on 128 x 256 tiles of at least 12 waves whose last wave is "
     "at most 60% full: a stream-K tail (1), or the tail only where the "
     "model asks for one (0; run_fp32.cu tf32_tail, kernel-notes v25)",
     read_bool},
    {KNOB_BLAS3_WHOLE, "GEMMK_BLAS3_WHOLE", -1,
     "symm and hemm run as GEMMs on A made whole (the other triangle "
     "mirrored or conjugated): -1 in fp32 and complex64, where our GEMMs "
     "beat cuBLAS's SIMT routines, 1 in every type, 0 never "
     "(blas3_whole.cu)",
     read_tristate},
    {KNOB_S8_RASTER, "GEMMK_S8_RASTER", 8,
     "int8 kernels (and the emulation's products): the M-tiles of a raster "
     "group, whose tiles run in consecutive units (kern_s8.cu, ozaki.cu)",
     read_positive},
    {KNOB_RASTER, "GEMMK_RASTER", 0,
     "tiled 16-bit and tf32 kernels: the M-tiles of a raster group, whose "
     "tiles run in consecutive units so that a wave shares their A and B "
     "panels in L2 (0: 16 for 128 x 256 tiles, 8 narrower, 4 pairs in "
     "2-CTA clusters; tiled16.cu)",
     read_positive},
};

} // namespace

void knobs_read(Knobs *k)
{
    for (int i = 0; i < KNOB_COUNT; i++) {
        const KnobRow &r = kKnobs[i];
        const char *e = getenv(r.name);
        k->set[r.id] = e != nullptr;
        k->value[r.id] = e ? r.read(atoi(e)) : r.def;
        snprintf(k->text[r.id], sizeof(k->text[r.id]), "%s", e ? e : "");
    }
}

const char *knob_name(int i)
{
    return i >= 0 && i < KNOB_COUNT ? kKnobs[i].name : nullptr;
}

const char *knob_description(int i)
{
    return i >= 0 && i < KNOB_COUNT ? kKnobs[i].description : nullptr;
}

} // namespace gemmk
