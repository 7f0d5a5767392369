/*
 * catalog.h: the kernel catalog as the library sees it: one table of rows
 * (catalog.cu), one row per kernel, in listing order. A row is the
 * descriptor clients see (name, summary, types, precisions, transposes)
 * and what runs it: the path function gemmk_gemm calls, and the tiling
 * and launch (or the ladder rung, or the variant) that path uses. Adding
 * a kernel is adding a row.
 */
#pragma once

#include <cuda_runtime_api.h>

#include "gemm_kernels.h"

namespace gemmk
{

struct Launch;
struct Row;

/* A production tiling: what the shape heuristic (plan.cu) may choose. */
struct Tiling {
    int bn;      /* 0: any */
    int cluster; /* 0: any, else 1 or 2 */
    int split;   /* 0: heuristic, 1: never, -1: heuristic but at least 2 */
    int pp;      /* 1: ping-pong consumers, 128 x 128 per warpgroup */
    int epi;     /* TMA-store epilogue: 64 x 64 output buffers per consumer,
                    2 (4 stages) or 4 (3 stages) at bn 256, 3 (4 stages) at
                    bn 192; 0: stores from registers */
    int sk;      /* with epi: 1, a stream-K tail always (auto: where the
                    plan's model says it pays) */
};

/* gemmk_gemm's path for a row: validated p, the row asked for (or "auto"),
 * res to name what ran. Context's thread. */
typedef gemm_error (*RunFn)(gemmk_ctx *ctx, const gemmk_problem *p,
                            cudaStream_t s, const Row &row, gemmk_result *res);
/* A tiled kernel's launch (launch.h). */
typedef cudaError_t (*LaunchFn)(const Launch &l);
/* A ladder rung's launch (ladder/ladder.h). */
typedef cudaError_t (*RungFn)(const gemmk_problem &p, cudaStream_t s);

enum RowFlags {
    ROW_AUTO = 1u << 0,   /* the automatic choice */
    ROW_HIDDEN = 1u << 1, /* for measurements: callable by name, never
                             listed */
    ROW_MAPPED = 1u << 2, /* what "auto" runs on host-mapped operands */
    ROW_CONJ = 1u << 3,   /* serves conjugate transposes */
    ROW_TILED = 1u << 4,  /* a production 16-bit tiling (plan.cu may
                             resolve "auto" to it) */
};

/* fp32 rows' variant */
enum {
    F32_TF32 = 1,
    F32_3X = 2,
    F32_RUNG6 = 3,
    F32_OZ = 4,
    F32_DECODE = 5,
    F32_DECODE_X3 = 6
};
/* int8 rows' variant: 0 the default (knob), 1 cooperative 128 x 128, 2
 * ping-pong, 3 cooperative 128 x 256 */
/* fp64 rows' variant */
enum { F64_NATIVE = 1, F64_BYTES, F64_UNFUSED, F64_PREP };

struct Row {
    gemmk_kernel_desc d; /* what the catalog lists */
    unsigned flags;      /* RowFlags */
    RunFn run;           /* gemmk_gemm's path; NULL: another entry point */
    Tiling tiling;       /* tiled and fp32 rows */
    LaunchFn launch;     /* tiled rows: the kernel of this tiling */
    RungFn rung;         /* ladder rows */
    int variant;         /* fp32, int8 and fp64 rows, see above */
};

/* The row named `name`, hidden rows included; NULL if none. */
const Row *row_find(const char *name);
/* The auto row; the row of host-mapped "auto". */
const Row &row_auto();
const Row *row_mapped();
/* The reference row (cuBLAS). */
const Row &row_reference();
/* The int8 row of variant v (1..3, kern_s8.cu's numbering); NULL if none. */
const Row *row_s8(int v);
/* The tiled row whose tiling is (bn, cluster, splits > 1, pp, epi): what
 * a plan resolves to; NULL if none. */
const Row *row_tiled(int bn, int cluster, bool split, int pp, int epi,
                     int sk = 0);

/* gemmk_check against a row (NULL: unknown kernel). */
gemm_error row_check(const Row *r, const gemmk_problem *p, const char **why);

/* gemmk_gemm's one validation of p for kernel `name` (NULL: auto): dims,
 * types, leading dimensions, alignment, then row_check; on success *row
 * is the row to run (api.cu). */
gemm_error check_problem(const gemmk_problem *p, const char *name,
                         const Row **row, const char **why);
/* check_problem's first part alone: dims, leading dimensions, operands
 * and their alignment, not the types against a row (api.cu). */
gemm_error check_shape(const gemmk_problem *p, const char **why);

/* The paths (one file each). */
gemm_error run_auto(gemmk_ctx *, const gemmk_problem *, cudaStream_t,
                    const Row &, gemmk_result *);
gemm_error run_ladder(gemmk_ctx *, const gemmk_problem *, cudaStream_t,
                      const Row &, gemmk_result *);
gemm_error run_tiled16(gemmk_ctx *, const gemmk_problem *, cudaStream_t,
                       const Row &, gemmk_result *);
gemm_error run_fp32(gemmk_ctx *, const gemmk_problem *, cudaStream_t,
                    const Row &, gemmk_result *);
gemm_error run_reference(gemmk_ctx *, const gemmk_problem *, cudaStream_t,
                         const Row &, gemmk_result *);
gemm_error run_f64(gemmk_ctx *, const gemmk_problem *, cudaStream_t,
                   const Row &, gemmk_result *);
/* int8 A/B, int32 C/D through gemmk_gemm_s8 (kern_s8.cu); "auto" and
 * ws-s8 run the variant of the context's GEMMK_S8_KERNEL knob. */
gemm_error run_s8(gemmk_ctx *, const gemmk_problem *, cudaStream_t, const Row &,
                  gemmk_result *);
/* A 16-bit problem as its transpose D^T = B^T A^T, K split, the
 * reduction transposing back (swap.cu): decode shapes, M <= 128. */
gemm_error run_decode(gemmk_ctx *, const gemmk_problem *, cudaStream_t,
                      const Row &, gemmk_result *);
/* Whether run_decode serves p and `auto` may take it (swap.cu). */
bool decode_fits(const gemmk_ctx *ctx, const gemmk_problem *p);
/* fp32 inputs on the decode kernel (swap.cu, gemm_decode_tf32.cuh), as
 * tf32 or (x3) as 3xTF32; run_fp32 takes it by name or where
 * decode_fp32_auto names it. */
gemm_error run_decode_tf32(gemmk_ctx *, const gemmk_problem *, cudaStream_t,
                           bool x3);
/* The decode kernel `auto` runs for fp32 inputs p (swap.cu), or nullptr:
 * on decode shapes (M <= 128, N and K >= 1024, A untransposed, device
 * memory), "ws-decode-tf32" at tf32 precision, "ws-decode-3xtf32" at fp32
 * precision unless a modulus count asks for the emulation. */
const char *decode_fp32_auto(const gemmk_problem *p);
/* 3xTF32's promotion chunk in k-blocks of 32 for K = k (run_fp32.cu). */
int x3_promo(const gemmk_ctx *ctx, int64_t k);
gemm_error run_swapped(gemmk_ctx *, const gemmk_problem *, cudaStream_t,
                       const Row &, gemmk_result *);
/* The grouped kernel on one problem (grouped.cu; gemmk_gemm_grouped runs
 * many). */
gemm_error run_grouped(gemmk_ctx *, const gemmk_problem *, cudaStream_t,
                       const Row &, gemmk_result *);
/* complex128 as one real emulated product (oz_complex.cu), and whether
 * ctx's cost model says it beats ZGEMM for p. */
gemm_error run_zemul(gemmk_ctx *, const gemmk_problem *, cudaStream_t,
                     const Row &, gemmk_result *);
bool z_emulation_pays(gemmk_ctx *ctx, const gemmk_problem *p);
/* fp32 A/B and C/D as the Ozaki-II emulation (ozaki.cu), for run_fp32:
 * GEMM_OK with *declined NULL when it ran, or a static reason why not (the
 * caller runs 3xTF32; nothing was written). by_model: decline where ctx's
 * cost model says 3xTF32 is faster; prep_only: the preparation alone
 * (calibration). */
/* Whether r says the fp32 emulation of m x n x k beats cuBLAS SGEMM (true
 * fp32: complex64's CGEMM runs at its rate) by 5%. */
bool f32_emulation_beats_sgemm(const gemmk_f64_rates *r, int64_t m, int64_t n,
                               int64_t k);
gemm_error oz_f32(gemmk_ctx *ctx, const gemmk_problem *p, cudaStream_t s,
                  bool by_model, bool prep_only, gemmk_result *res,
                  const char **declined);
/* cuBLAS DGEMM, CGEMM or ZGEMM of a wide problem (wide.cu). */
gemm_error wide_blas(gemmk_ctx *ctx, const gemmk_problem *p, cudaStream_t s);

} // namespace gemmk
