/*
 * knobs.h: the kernels' tuning knobs, one table (knobs.cu): measurement
 * switches read from the environment once, when a context is made, and
 * kept in the context. Each knob has a default that is what production
 * runs; gemmk_ctx_knob() lists the ones set so the caller can log them.
 */
#pragma once

#include "gemm_kernels.h"

namespace gemmk
{

enum Knob {
    KNOB_MAX_CLUSTERS,    /* co-resident 2-CTA clusters (-1: occupancy) */
    KNOB_X3_PROMO,        /* 3xTF32 promotion chunk in k-blocks (0: by K) */
    KNOB_X3_WHERE,        /* 3xTF32 promoted accumulator: 1 global, 2 smem */
    KNOB_X3_SKEW,         /* 3xTF32: skew the consumers' chunks */
    KNOB_X3_BN,           /* 3xTF32: the widest tile */
    KNOB_S8_KERNEL,       /* int8 default kernel: 1 coop128, 2 pp, 3 coop256 */
    KNOB_S8_MAP16,        /* int8 tensor maps as 16-bit elements */
    KNOB_OZ_BYTES_TILE,   /* oz2-bytes: all moduli of a tile in one CTA */
    KNOB_OZ_PP,           /* oz2-bytes/unfused: ping-pong (1), coop (0) */
    KNOB_WARM,            /* gemmk_ctx_warm runs (0: returns at once) */
    KNOB_GROUPED_PAIR,    /* grouped: two matrices <= 64 x 64 per unit */
    KNOB_GROUPED_CLUSTER, /* grouped: strided 128 x 256 tiles in pairs */
    KNOB_GROUPED_WHOLE,   /* grouped: strided 128 x 256, one store step
                             (-1: from K = 2048) */
    KNOB_GROUPED_SK,      /* grouped: strided, stream-K last waves
                             (-1: by the model) */
    KNOB_EVEN_GRID,       /* persistent grids: as few CTAs as keep the
                             rounds (-1: strided batches only) */
    KNOB_WHOLE_K,         /* auto: whole-block stores up to this K */
    KNOB_SWAP_M,          /* auto: M up to this runs ws-swap (0: never) */
    KNOB_SWAP_ANY_M,      /* auto: M up to this runs ws-swap whatever
                             the plain plan (0: only by the plan) */
    KNOB_SWAP_SPLITS,     /* ws-swap: k-splits (0: by the model) */
    KNOB_DECODE_M,        /* auto: M up to this runs ws-decode (0:
                             never; at most 128) */
    KNOB_DECODE_STAGES,   /* ws-decode, ws-decode-tf32: ring depth (0: model) */
    KNOB_DECODE_HINT,     /* ws-decode(-tf32): L2 policies on loads */
    KNOB_DECODE_REGS,     /* ws-decode-tf32: MN-major B^T into registers */
    KNOB_DECODE_PAIR,     /* ws-decode: two consumers on 128-row tiles */
    KNOB_DECODE_QUAD,     /* ws-decode: two consumers on 256-row tiles */
    KNOB_TF32_RS,         /* ws-tf32: MN-major A into registers */
    KNOB_TF32_TAIL,       /* ws-tf32: stream-K tail over many waves */
    KNOB_BLAS3_WHOLE,     /* symm, hemm as one GEMM on A made whole
                             (-1: fp32 and complex64) */
    KNOB_S8_RASTER,       /* int8 kernels: M-tiles a raster group */
    KNOB_RASTER,          /* tiled: M-tiles a raster group (0: by the
                             tile, tiled16.cu) */
    KNOB_COUNT
};

/* The knobs' values and which were set, as read at context creation. */
struct Knobs {
    int value[KNOB_COUNT];
    bool set[KNOB_COUNT];
    char text[KNOB_COUNT][24]; /* the environment's text, cut to fit */
};

/* Reads every knob of the table from the environment (defaults where
 * unset). Any thread; getenv must not race with setenv. */
void knobs_read(Knobs *k);

/* Name, default and description of knob i (static strings). */
const char *knob_name(int i);
const char *knob_description(int i);

} // namespace gemmk
