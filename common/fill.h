/*
 * fill.h: the order in which a client fills a GEMM or level-3 request's
 * staged operands while gemmd already works on it (GemmRequest.fill and
 * Blas3Request.fill, see proto/gemm.proto). libgemmblas fills in this
 * order and gemmd reads a part only once the client's counter says it is
 * there, so both cut with these functions. Header only: each user
 * compiles its own copy.
 *
 * The counter: 0 nothing is final; 1 every operand not filled by parts
 * (and the output's old value where it is not one of them) is final;
 * 1 + p + 1 parts 0..p of the operands filled by parts are final too;
 * parts + 1 everything. The operands filled by parts are cut along one
 * axis (rows or columns as stored, row-major as on the wire) into ranges
 * of equal size (the last may be less), numbered in the order gemmd
 * takes them: GEMM cuts B along K in the first parts / 2 parts (rows of
 * B as stored, or columns when transposed), then A along op(A)'s rows in
 * the rest (rows of A, or columns when transposed), each from the first;
 * trsm and trmm cut B along A's dimension in the order op(A)'s triangle
 * solves or multiplies it, the rank updates cut A (and B) along op(A)'s
 * rows from the top (lower) or the bottom (upper), symm and hemm cut B
 * and C along the dimension A does not touch, from the first.
 */
#ifndef GEMM_FILL_H
#define GEMM_FILL_H

#include <stdbool.h>
#include <stdint.h>

enum { GEMM_FILL_A = 1, GEMM_FILL_B = 2, GEMM_FILL_C = 4 };

#define GEMM_FILL_MAX_PARTS 64

/* One cut: parts [first, first + parts) of the request's fill. */
typedef struct gemm_fill_cut {
    unsigned operands; /* GEMM_FILL_* bits: the operands it cuts (0: none) */
    bool cols;         /* the parts are column ranges (else row ranges) */
    bool fwd;          /* part 0 is the first range (else the last) */
    uint64_t extent;   /* the rows or columns cut */
    uint64_t size;     /* rows or columns a part (the last may be less) */
    unsigned first;    /* the request's part number of this cut's part 0 */
    unsigned parts;    /* this cut's parts */
} gemm_fill_cut;

/* A cut of extent into parts ranges from part number first. */
static inline gemm_fill_cut gemm_fill_cut_make(unsigned operands, bool cols,
                                               bool fwd, uint64_t extent,
                                               unsigned first, unsigned parts)
{
    gemm_fill_cut c = {operands, cols, fwd, extent, 1, first, parts};
    if (parts > 0)
        c.size = (extent + parts - 1) / parts;
    if (c.size < 1)
        c.size = 1;
    if (parts == 0)
        c.operands = 0;
    return c;
}

/* The cut of a request: routine, flags and dimensions as on the wire
 * (routine 0 gemm, 1 symm .. 8 trsm; trans 0 N, 1 T, 2 C: TRANS or TRANSA,
 * and a GEMM's trans_a); parts 1 .. GEMM_FILL_MAX_PARTS. A GEMM's is A's
 * (its last parts - parts / 2 parts); gemm_fill_cut_gemm_b gives B's. */
static inline gemm_fill_cut gemm_fill_cut_of(int routine, bool right,
                                             bool lower, int trans, uint64_t m,
                                             uint64_t n, unsigned parts)
{
    if (parts < 1)
        parts = 1;
    if (routine == 0) /* gemm: A by op(A)'s rows, after B's parts */
        return gemm_fill_cut_make(GEMM_FILL_A, trans != 0, true, m, parts / 2,
                                  parts - parts / 2);
    if (routine == 7 || routine == 8) { /* trmm, trsm */
        bool opl = lower == (trans == 0);
        return gemm_fill_cut_make(GEMM_FILL_B, right, right ? !opl : opl,
                                  right ? n : m, 0, parts);
    }
    if (routine >= 3 && routine <= 6) /* syrk .. her2k */
        return gemm_fill_cut_make(GEMM_FILL_A |
                                      (routine >= 5 ? GEMM_FILL_B : 0),
                                  trans != 0, lower, n, 0, parts);
    /* symm, hemm */
    return gemm_fill_cut_make(GEMM_FILL_B | GEMM_FILL_C, !right, true,
                              right ? m : n, 0, parts);
}

/* A GEMM's cut of B along K (trans_b: B stored n x k, its columns) in
 * its first parts / 2 parts (none for one part). */
static inline gemm_fill_cut gemm_fill_cut_gemm_b(bool trans_b, uint64_t k,
                                                 unsigned parts)
{
    return gemm_fill_cut_make(GEMM_FILL_B, trans_b, true, k, 0, parts / 2);
}

/* The fill bit of a request's operand `which`: 0 A, 1 B (an input:
 * gemm, symm, hemm, syr2k, her2k), 2 the output's old value (C, or B of
 * trmm/trsm). */
static inline unsigned gemm_fill_bit(int routine, int which)
{
    if (which == 0)
        return GEMM_FILL_A;
    if (which == 1)
        return GEMM_FILL_B;
    return routine == 7 || routine == 8 ? GEMM_FILL_B : GEMM_FILL_C;
}

/* The rows or columns [*lo, *hi) of the cut's part p (0 .. parts - 1,
 * in fill order: the request's part first + p). */
static inline void gemm_fill_range(const gemm_fill_cut *c, unsigned p,
                                   uint64_t *lo, uint64_t *hi)
{
    uint64_t a = (uint64_t)p * c->size, b = a + c->size;
    a = a < c->extent ? a : c->extent;
    b = b < c->extent ? b : c->extent;
    *lo = c->fwd ? a : c->extent - b;
    *hi = c->fwd ? b : c->extent - a;
}

/* The counter value after which rows or columns [lo, hi) (lo < hi) of an
 * operand cut by c are final. */
static inline uint64_t gemm_fill_need(const gemm_fill_cut *c, uint64_t lo,
                                      uint64_t hi)
{
    uint64_t last =
        c->fwd ? (hi - 1) / c->size : (c->extent - 1 - lo) / c->size;
    return 2 + c->first + last;
}

#endif
