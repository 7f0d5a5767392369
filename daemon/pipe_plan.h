/*
 * pipe_plan.h: how a large staged GEMM is cut so that its copies overlap
 * its kernels (the CUDA backend's pipeline.c runs the plan). D is cut into
 * nr x nc blocks: op(A) comes in as nr panels of rows, op(B) as nc panels
 * of columns, in an order that keeps the work ready to run growing as the
 * bytes arrive (pipe_order); a block's kernel runs once its row panel,
 * its column panel and its part of C are in, and its part of D goes out
 * as soon as it is done. K is never cut: each element of D is summed by
 * one kernel call, as unpanelled. nc = 1 is the old "panels of rows" (B
 * whole first), nr = 1 "panels of columns".
 *
 * The plan is the one a model of the copies and kernels predicts to end
 * first (pipe_choose): copies at the link's measured rate, one after
 * another in the plan's order, every kernel at the measured rate of its
 * type, derated by its last partial wave of tiles, plus a fixed cost per
 * block. The rates are measured on the device from the pipelined GEMMs
 * it ran (pipe_rates.h). Pure computation: any thread, no CUDA.
 */
#ifndef GEMMD_PIPE_PLAN_H
#define GEMMD_PIPE_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#define PIPE_ALIGN      128 /* a cut's rows or columns: TMA alignment, tiles */
#define PIPE_MAX_BLOCKS 64  /* blocks of one GEMM (events per worker) */
#define PIPE_MAX_STEPS  (2 * PIPE_MAX_BLOCKS)
/* The plain cut, kept unless another is predicted PIPE_MIN_GAIN faster:
 * on the H100 eight panels of rows (B whole first) or of columns ran the
 * 16-bit shapes within 3% of every other cut tried, where the model's own
 * error is about as large; on the H200 sixteen ran 8192^3 3-4% faster
 * than eight (fp64 29.3 against 30.2 ms, bf16 5.8 against 6.0) and
 * 4096^3 as fast (docs/e2e-bench.md): the first panel in and the last out
 * are half as long. */
#define PIPE_PLAIN_PANELS 16
#define PIPE_MIN_GAIN     0.05

typedef struct pipe_plan pipe_plan;

/* One GEMM as the planner sees it. */
typedef struct pipe_shape {
    uint64_t m, n, k;
    double flops;             /* the whole GEMM's (complex: 4x) */
    double a_bytes, b_bytes;  /* of op(A), op(B) to copy in (0: resident) */
    double c_bytes;           /* of C to copy in (0: none) */
    double d_bytes;           /* of D to copy out */
    bool cut_rows, cut_cols;  /* which of D's dimensions may be cut */
    unsigned max_panels;      /* panels a dimension at most */
    uint64_t max_block_flops; /* a block's flops at most (0: any) */
    unsigned sms;             /* the GPU's SMs and its kernels' tile, */
    unsigned tile_m, tile_n;  /* for the partial-wave derating */
    /* a panel of op(A)'s rows (B's columns) is a strided copy: A stored
     * transposed (B not); D's and C's blocks are when columns are cut.
     * Such a copy moves rows narrower than the matrix, slower. */
    bool a_strided, b_strided;
    /* what a block of plan p costs beyond its kernel's flops, in ns (a
     * kernel's pre-pass of an operand that several blocks share is paid
     * once a block), or < 0 when p may not run; NULL: nothing */
    double (*block_cost)(void *arg, const struct pipe_plan *p);
    void *arg;
} pipe_shape;

/* What a plan costs: bytes per ns of the link (each direction, whole
 * rows), the share of that rate a strided copy gets, flops per ns of the
 * kernels in full waves, ns a block adds (launch, events). */
typedef struct pipe_rates {
    double in_bpns, out_bpns, strided, flops_pns, block_ns;
} pipe_rates;

struct pipe_plan {
    unsigned nr, nc;     /* panels of rows, of columns (1 x 1: whole) */
    uint64_t rlen, clen; /* rows (columns) a panel; the last may be less */
    double extra_ns;     /* block_cost's, for each block */
    double predicted_ns;
};

/* A step of the copies in: row panel i of op(A) (b false) or column
 * panel i of op(B). */
typedef struct pipe_step {
    bool b;
    unsigned i;
} pipe_step;

/* The plan predicted to end first, among cuts of up to max_panels panels
 * a dimension (multiples of PIPE_ALIGN, at least two of them, blocks
 * within max_block_flops), unless the plain cut (PIPE_PLAIN_PANELS
 * panels of rows or of columns, the faster) is predicted within
 * PIPE_MIN_GAIN of it; 1 x 1 when no cut beats running whole. */
pipe_plan pipe_choose(const pipe_shape *s, const pipe_rates *r);

/* The model's time for s cut as p (p's nr, nc, rlen, clen). */
double pipe_predict(const pipe_shape *s, const pipe_rates *r,
                    const pipe_plan *p);

/* The copies in of p in order, into steps (nr + nc of them): an operand
 * that is not copied (bytes 0) first, then whichever operand has the
 * smaller share of its bytes in, the one of fewer panels on a tie (so
 * with nc = 1 all of B comes first). Returns the count. */
unsigned pipe_order(const pipe_plan *p, double a_bytes, double b_bytes,
                    pipe_step *steps);

/* The blocks (row panel, column panel) that step `at` of steps makes
 * ready, in the order they run: with the step's panel, each panel of the
 * other operand that came before it. Writes them to ri, ci; returns how
 * many. */
unsigned pipe_ready(const pipe_step *steps, unsigned at, unsigned *ri,
                    unsigned *ci);

/* Rows (or columns) of panel i of a dimension of length dim cut in len. */
uint64_t pipe_len(uint64_t dim, uint64_t len, unsigned i);

/* The share of the SMs busy over the waves of a rows x cols block. */
double pipe_wave_eff(const pipe_shape *s, uint64_t rows, uint64_t cols);

#endif
