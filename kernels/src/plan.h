/*
 * plan.h: the shape heuristic of the tiled kernels (plan.cu): for a
 * problem and a row's tiling, the tile width, cluster, split-K and
 * epilogue to run, and the catalog row that runs it.
 */
#pragma once

#include <stdint.h>

#include "catalog.h"
#include "ctx_internal.h"

namespace gemmk
{

struct Plan {
    int bn;
    int cluster;
    int splits; /* actual number of k-splits */
    int kbps;   /* k-blocks per split */
    int pp;     /* ping-pong kernel */
    int epi;    /* TMA-store epilogue buffers (Tiling::epi) */
    int sk;     /* stream-K tail (with epi): units [0, sk_dp) run whole,
                   the rest split by k-blocks over every SM */
    int sk_dp;
};

inline int64_t cdiv(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* The plan for p under tiling t (is_auto: the automatic choice, which may
 * also pick the ping-pong kernel or the TMA-store epilogue), tiles at most
 * max_bn wide. Reads ctx's device facts only. */
void plan(const gemmk_ctx *ctx, const gemmk_problem *p, const Tiling &t,
          bool is_auto, Plan *out, int max_bn = 256);

/* Bytes of p's A and B (16-bit elements). */
double operand_bytes(const gemmk_problem *p);

/* Where a launch of t 128 x bn units of nkb k-blocks each (operands
 * bytes of A and B in all, flops of work) splits its last waves stream-K:
 * units [0, dp) run whole, the rest by k-blocks over every SM. Returns
 * dp, or -1 for no split: the model (plan.cu) must save 5% after the
 * fix-up, and operands past L2 must not take most of the tiles' time to
 * read (forced: split wherever it can). */
int64_t sk_split(const gemmk_ctx *ctx, int64_t t, int64_t nkb, int bn,
                 double operands, double flops, bool forced);

/* Whether out's TMA-store plan (128 x 256 or 128 x 192 tiles, no split)
 * runs its last waves stream-K, and from which unit (out->sk, sk_dp):
 * always when forced, else where sk_split's model says it pays. */
void plan_sk(const gemmk_ctx *ctx, const gemmk_problem *p, bool forced,
             Plan *out);

/* CTAs of a persistent grid over units work units with slots
 * co-resident: one per unit up to slots; past that, slots, or as few as
 * take the same rounds (every CTA the same count), by GEMMK_EVEN_GRID
 * (-1: where strided says the launch is a strided batch of tiles of one
 * matrix a unit, whose matrices then line up with the rounds). */
int even_grid(const gemmk_ctx *ctx, int64_t units, int slots, bool strided);

/* The catalog row that runs plan pl (never NULL for a plan of plan()). */
const Row *plan_row(const Plan &pl);

/* Whether "auto" runs p, planned as pl, through run_swapped: few rows
 * (the GEMMK_SWAP_M knob), N and K of 1024 or more, and a plan that has
 * too few tiles to fill the GPU (split-K or 64-wide tiles) (swap.cu). */
bool swap_fits(const gemmk_ctx *ctx, const gemmk_problem *p, const Plan &pl);

/* The row that runs 16-bit problem p for row `row` (auto: the plan's
 * tiled row, or ws-swap for decode shapes) and its plan (NULL: none;
 * tiled16.cu). */
const Row *tiled16_choice(const gemmk_ctx *ctx, const gemmk_problem *p,
                          const Row &row, Plan *pl);
/* tiled16_choice through the context's memo of recent choices
 * (plan_memo.cu): the same row and plan, without the cost model for a
 * shape seen lately. */
const Row *tiled16_memo(gemmk_ctx *ctx, const gemmk_problem *p, const Row &row,
                        Plan *pl);

} // namespace gemmk
