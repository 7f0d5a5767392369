/*
 * batch_ranges.c: the staging plan of a batch (batch_ranges.h): operand
 * spans, sorted and merged into ranges, and their places in one device
 * block.
 */
#include "batch_ranges.h"

#include <stdlib.h>
#include <string.h>

static size_t round_up(size_t x, size_t to)
{
    return (x + to - 1) / to * to;
}

void brange_op_set(brange_op *o, int problem, int which, const void *src,
                   uint64_t rows, uint64_t cols, uint64_t ld, size_t es)
{
    memset(o, 0, sizeof(*o));
    o->problem = problem;
    o->which = which;
    o->src = src;
    o->rows = rows;
    o->cols = cols;
    o->ld = ld;
    o->es = es;
    o->region = 0;
    o->lo = (uintptr_t)src;
    o->hi = o->lo + ((rows - 1) * ld + cols) * es;
    /* read in place: aligned as the kernels need, and not mostly bytes
     * of others (a narrow slice of a wide matrix is staged pitched) */
    bool fits = ((uintptr_t)src & 15) == 0 && ld % 8 == 0 &&
                o->hi - o->lo <= 2 * rows * cols * es + BRANGE_SLACK;
    /* a D is ranged only when it is dense: its copy back then writes
     * exactly its elements, never bytes another request may be writing */
    o->ranged = which == BRANGE_D ? fits && ld == cols : fits;
}

static int by_lo(const void *x, const void *y)
{
    const brange_op *a = *(const brange_op *const *)x;
    const brange_op *b = *(const brange_op *const *)y;
    if (a->region != b->region)
        return a->region < b->region ? -1 : 1;
    return a->lo < b->lo ? -1 : a->lo > b->lo ? 1 : 0;
}

/* Whether o joins range r: of r's region, it overlaps or touches r, or
 * (near) it starts at most one page past r's last page. */
static bool joins(const brange_op *o, const brange *r, bool near)
{
    if (o->region != r->region)
        return false;
    if (o->lo <= r->hi)
        return true;
    return near && o->lo / BRANGE_PAGE <= (r->hi - 1) / BRANGE_PAGE + 1;
}

/* Merges ops (n, sorted by region, then lo) into ranges at out, placed from
 * *off on; writes each operand's range_lo, off and dld. Returns the ranges. */
static size_t merge(brange_op **ops, size_t n, bool near, brange *out,
                    size_t *off)
{
    size_t nr = 0;
    for (size_t i = 0; i < n; i++) {
        brange_op *o = ops[i];
        if (nr == 0 || !joins(o, &out[nr - 1], near)) {
            if (nr > 0)
                *off += round_up(out[nr - 1].hi - out[nr - 1].lo, BRANGE_ALIGN);
            out[nr].region = o->region;
            out[nr].lo = o->lo;
            out[nr].hi = o->hi;
            out[nr].off = *off;
            nr++;
        } else if (o->hi > out[nr - 1].hi) {
            out[nr - 1].hi = o->hi;
        }
    }
    if (nr > 0)
        *off += round_up(out[nr - 1].hi - out[nr - 1].lo, BRANGE_ALIGN);
    /* every operand's range: the last one starting at or below it */
    size_t r = 0;
    for (size_t i = 0; i < n; i++) {
        while (r + 1 < nr && (out[r + 1].region < ops[i]->region ||
                              (out[r + 1].region == ops[i]->region &&
                               out[r + 1].lo <= ops[i]->lo)))
            r++;
        ops[i]->range_lo = out[r].lo;
        ops[i]->off = out[r].off;
        ops[i]->dld = ops[i]->ld;
    }
    return nr;
}

size_t brange_plan(brange_op *ops, size_t n, brange_op **scratch, brange *out,
                   size_t *nin, size_t *nout)
{
    size_t bytes = 0, k = 0;
    for (size_t i = 0; i < n; i++)
        if (ops[i].ranged && ops[i].which != BRANGE_D)
            scratch[k++] = &ops[i];
    qsort(scratch, k, sizeof(*scratch), by_lo);
    *nin = merge(scratch, k, true, out, &bytes);
    k = 0;
    for (size_t i = 0; i < n; i++)
        if (ops[i].ranged && ops[i].which == BRANGE_D)
            scratch[k++] = &ops[i];
    qsort(scratch, k, sizeof(*scratch), by_lo);
    *nout = merge(scratch, k, false, out + *nin, &bytes);
    for (size_t i = 0; i < n; i++) {
        brange_op *o = &ops[i];
        if (o->ranged)
            continue;
        uint64_t unit = o->es == 1 ? 16 : 8;
        o->dld = (o->cols + unit - 1) / unit * unit;
        o->off = bytes;
        bytes += round_up(o->rows * o->dld * o->es, BRANGE_ALIGN);
    }
    return bytes;
}

void *brange_dev(const brange_op *o, void *base)
{
    uint8_t *b = base;
    if (o->ranged)
        return b + o->off + (o->lo - o->range_lo);
    return b + o->off;
}
