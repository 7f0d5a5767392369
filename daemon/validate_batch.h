/*
 * validate_batch.h: the rule a batch adds to the GEMM's own (validate.h):
 * no problem's D may share bytes with another problem's A, B, C or D. Each
 * problem is checked alone by val_gemm_check() (which already refuses D
 * overlapping its own A or B, and a C that partly overlaps its D); what is
 * left is across problems, found here by sorting the operands' byte
 * ranges once (O(P log P)) instead of comparing every pair. Pure
 * functions; thread-safe.
 */
#ifndef GEMMD_VALIDATE_BATCH_H
#define GEMMD_VALIDATE_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One operand of one problem as bytes of a memory object: [lo, hi). */
typedef struct val_span {
    uint64_t object;  /* the memory object (val_matrix.object) */
    uint64_t lo, hi;  /* byte range, lo < hi */
    uint64_t problem; /* the problem's index in the batch */
    char what;        /* 'A', 'B', 'C' or 'D' */
} val_span;

/* A conflict found: problem `bad` (whose D overlaps) and the other. */
typedef struct val_conflict {
    uint64_t bad;   /* the problem refused */
    uint64_t other; /* the problem whose operand it overlaps */
    char what;      /* that operand: 'A', 'B', 'C' or 'D' */
} val_conflict;

/*
 * Sorts spans[0..n) (in place) and reports conflicts: a D span
 * overlapping any span of another problem ('A', 'B', 'C' or 'D'). Spans
 * of one problem never conflict with each other here (val_gemm_check
 * judges those; a C that is its own problem's D should be left out of
 * the spans). Each conflict is reported once per span that reveals it,
 * naming as bad the problem of the D (of two Ds, the later index); at
 * least one conflict of every overlapping group is found, and none is
 * reported that is not real. Calls fn(arg, &c) for each, in no
 * particular order; returns how many were reported. Any thread.
 */
size_t val_spans_conflicts(val_span *spans, size_t n,
                           void (*fn)(void *arg, const val_conflict *c),
                           void *arg);

#endif
