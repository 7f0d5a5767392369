/*
 * validate_blas3.h: checks of a Blas3 request (symm, hemm, syrk, herk,
 * syr2k, her2k, trmm, trsm) before any work, by the reference BLAS's
 * argument rules restated for the row-major wire (see proto/gemm.proto):
 * the type each routine takes, its TRANS values, its dimensions, each
 * operand's leading dimension and bounds, and that the output overlaps no
 * input. Errors name the routine and the reference argument ("DSYRK:
 * parameter 2 (TRANS) ...") as xerbla would. Pure functions over a plain
 * description, like validate.h. Thread-safe.
 */
#ifndef GEMMD_VALIDATE_BLAS3_H
#define GEMMD_VALIDATE_BLAS3_H

#include "validate.h"

/* Routine numbers: the wire's Routine (gemm_routine in gemm/gemm.h). */
enum val_routine {
    VAL_SYMM = 1,
    VAL_HEMM = 2,
    VAL_SYRK = 3,
    VAL_HERK = 4,
    VAL_SYR2K = 5,
    VAL_HER2K = 6,
    VAL_TRMM = 7,
    VAL_TRSM = 8,
    VAL_ROUTINES = 9, /* one past the last (0 is GEMM) */
};

/* Op numbers: the wire's Op. */
enum val_op { VAL_OP_N = 0, VAL_OP_T = 1, VAL_OP_C = 2 };

typedef struct val_blas3 {
    int routine; /* enum val_routine */
    int dtype;   /* gemm_dtype number */
    bool right;  /* SIDE */
    bool lower;  /* UPLO */
    int trans;   /* enum val_op: TRANS or TRANSA */
    bool unit;   /* DIAG */
    uint64_t m, n, k;
    double alpha, alpha_im, beta, beta_im;
    val_operand a, b, c;
    val_operand fill;    /* the fill counter (present: filled by parts) */
    uint32_t fill_parts; /* common/fill.h */
} val_blas3;

/* The operands of a valid request: A always; B for symm/hemm and the
 * rank-2k updates (read) and trmm/trsm (read and written); C for
 * symm..her2k (written, read when beta != 0). out is the one written (C,
 * or B for trmm/trsm). */
typedef struct val_blas3_resolved {
    val_matrix a, b, c;
    bool has_b, has_c;
    bool reads_out; /* the output's old value is read (beta != 0, or
                       trmm/trsm) */
    bool has_fill;  /* filled by parts: the counter, 8 bytes at fill */
    val_matrix fill;
} val_blas3_resolved;

/* "symm", "hemm", ... for a routine number; "?" otherwise. */
const char *val_routine_name(int routine);

/* The reference name of routine for dtype, e.g. "DSYRK", "ZHER2K" (a
 * static string per call site is not needed: written into buf). */
void val_blas3_refname(int routine, int dtype, char *buf, size_t len);

/*
 * Checks g against the limits and the caller's buffers. Returns GEMM_OK
 * and fills *out, or a gemm_error (DTYPE, DIMS, INVALID, NO_BUFFER, LD,
 * ALIGN, BOUNDS, UNSUPPORTED for an unknown routine) with a message that
 * names the routine and the reference argument.
 */
int val_blas3_check(const val_blas3 *g, const val_limits *lim,
                    val_lookup_fn lookup, void *arg, val_blas3_resolved *out,
                    char *msg, size_t len);

#endif
