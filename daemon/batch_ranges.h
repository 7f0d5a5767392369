/*
 * batch_ranges.h: which host bytes a batch's staging copies, and where
 * they land in one device block (batch_ranges.c; the CUDA backend's
 * batch hook, cuda/staging_batch.c, stages by this plan). Inputs the
 * kernels can read where they lie are merged into ranges copied whole
 * (a strided batch's As: one range); dense Ds that touch are merged
 * into ranges copied back whole; the rest are staged one by one with a
 * pitch of 8 elements. Plain C with no CUDA, so the unit tests check it
 * on any host. Any thread (no state).
 */
#ifndef GEMMD_BATCH_RANGES_H
#define GEMMD_BATCH_RANGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Input operands within the same or the next page share one copy (the
 * bytes between them then lie in pages the operands touch, so mapped). */
#define BRANGE_PAGE 4096
/* Slack allowed in an operand's span over its elements (bytes). */
#define BRANGE_SLACK 4096
/* Device placement granularity (cudaMalloc's alignment). */
#define BRANGE_ALIGN 256

enum { BRANGE_A, BRANGE_B, BRANGE_C, BRANGE_D };

/* One operand of one problem, host side and device side. */
typedef struct brange_op {
    int problem;         /* index in the batch */
    int which;           /* BRANGE_A .. BRANGE_D */
    uintptr_t lo, hi;    /* host bytes it spans */
    const void *src;     /* host address of element (0, 0) */
    uint64_t rows, cols; /* as stored */
    uint64_t ld;         /* host leading dimension, elements */
    size_t es;           /* element bytes */
    bool ranged;         /* copied with its range, else pitched */
    size_t off;          /* in the device block: its range's or its own */
    uint64_t dld;        /* device leading dimension (ld when ranged) */
    uintptr_t range_lo;  /* ranged: its range's first host byte */
    uintptr_t region;    /* the mapping it lies in (0 by brange_op_set):
                            operands of different ones never share a
                            range, even when their addresses touch */
} brange_op;

/* A merged host range and its place in the device block. */
typedef struct brange {
    uintptr_t region;
    uintptr_t lo, hi;
    size_t off;
} brange;

/* Fills *o for a rows x cols matrix (es-byte elements, ld elements
 * apart) at src: its span, and whether it is ranged (16-byte aligned,
 * ld a multiple of 8, its span at most twice its elements plus
 * BRANGE_SLACK; a D only when dense, ld == cols). */
void brange_op_set(brange_op *o, int problem, int which, const void *src,
                   uint64_t rows, uint64_t cols, uint64_t ld, size_t es);

/*
 * Plans the device block for ops (n): the ranged inputs of one region
 * merged into ranges when they overlap, touch or start in the page after
 * a range's last one; the ranged Ds merged only when they touch; then each
 * other operand on its own with a pitch of 8 elements (16 for 1-byte ones).
 * Writes the input ranges then the output ranges to out (room for n),
 * their counts to *nin and *nout, each operand's off, range_lo and dld;
 * scratch holds n pointers. Returns the block's bytes (every range and
 * operand BRANGE_ALIGN-aligned in it).
 */
size_t brange_plan(brange_op *ops, size_t n, brange_op **scratch, brange *out,
                   size_t *nin, size_t *nout);

/* Where operand o's element (0, 0) lands in a block at base. */
void *brange_dev(const brange_op *o, void *base);

#endif
