/*
 * batch_ranges_test.c: the staging plan of a batch (daemon/batch_ranges.c):
 * a strided batch's operands become one range per operand kind, ranges
 * never join across more than a page of bytes no operand touches, a D
 * copied back whole is dense and touches only Ds, operands the kernels
 * cannot read in place are pitched, and every operand's device address
 * is its host offset within its range, all inside the block.
 */
#include "batch_ranges.h"

#include <criterion/criterion.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A fake host address space: only addresses are used, never bytes. */
#define HOST ((uintptr_t)1 << 32)

static const void *at(uintptr_t off)
{
    return (const void *)(HOST + off);
}

/* Checks the plan's invariants: each ranged operand inside its range,
 * ranges disjoint and inside the block, pitched ones inside it too. */
static void check_plan(const brange_op *ops, size_t n, const brange *r,
                       size_t nr, size_t bytes)
{
    for (size_t i = 0; i < nr; i++) {
        cr_assert_lt(r[i].lo, r[i].hi, "range %zu empty", i);
        cr_assert_leq(r[i].off + (r[i].hi - r[i].lo), bytes);
        cr_assert_eq(r[i].off % BRANGE_ALIGN, 0);
        for (size_t j = 0; j < i; j++)
            cr_assert(r[i].off + (r[i].hi - r[i].lo) <= r[j].off ||
                          r[j].off + (r[j].hi - r[j].lo) <= r[i].off,
                      "ranges %zu and %zu overlap in the block", i, j);
    }
    void *base = (void *)(uintptr_t)0x10000;
    for (size_t i = 0; i < n; i++) {
        const brange_op *o = &ops[i];
        uintptr_t dev = (uintptr_t)brange_dev(o, base) - 0x10000;
        if (o->ranged) {
            cr_assert_eq(o->dld, o->ld);
            cr_assert_geq(o->lo, o->range_lo);
            cr_assert_leq(dev + (o->hi - o->lo), bytes, "operand %zu", i);
            cr_assert_eq(dev % 16, 0, "operand %zu misaligned", i);
        } else {
            cr_assert_eq(o->dld % 8, 0);
            cr_assert_geq(o->dld, o->cols);
            cr_assert_leq(dev + o->rows * o->dld * o->es, bytes);
            cr_assert_eq(dev % BRANGE_ALIGN, 0);
        }
    }
}

Test(batch_ranges, strided_batch_is_one_range_per_operand)
{
    /* 100 problems of 64 x 64 bf16: A, B and D each packed back to back
     * in buffers of their own */
    enum { P = 100, M = 64 };
    const size_t mat = M * M * 2;
    brange_op ops[3 * P];
    for (int i = 0; i < P; i++) {
        brange_op_set(&ops[3 * i], i, BRANGE_A, at(0x0000000 + i * mat), M, M,
                      M, 2);
        brange_op_set(&ops[3 * i + 1], i, BRANGE_B, at(0x1000000 + i * mat), M,
                      M, M, 2);
        brange_op_set(&ops[3 * i + 2], i, BRANGE_D, at(0x2000000 + i * mat), M,
                      M, M, 2);
    }
    brange_op *scratch[3 * P];
    brange r[3 * P];
    size_t nin, nout;
    size_t bytes = brange_plan(ops, 3 * P, scratch, r, &nin, &nout);
    cr_assert_eq(nin, 2, "A and B: one range each, got %zu", nin);
    cr_assert_eq(nout, 1, "the Ds: one range, got %zu", nout);
    cr_assert_eq(r[0].hi - r[0].lo, P * mat);
    cr_assert_eq(r[2].hi - r[2].lo, P * mat);
    cr_assert_eq(bytes, 3 * P * mat);
    check_plan(ops, 3 * P, r, nin + nout, bytes);
    /* device strides equal the host's: the library sees a strided batch */
    uintptr_t a0 = (uintptr_t)brange_dev(&ops[0], NULL);
    uintptr_t a1 = (uintptr_t)brange_dev(&ops[3], NULL);
    cr_assert_eq(a1 - a0, mat);
}

Test(batch_ranges, far_operands_are_separate_ranges)
{
    brange_op ops[3];
    /* two As a page apart join (the bytes between lie in touched pages);
     * a third 3 pages further on does not */
    brange_op_set(&ops[0], 0, BRANGE_A, at(0), 8, 8, 8, 2);
    brange_op_set(&ops[1], 1, BRANGE_A, at(BRANGE_PAGE + 512), 8, 8, 8, 2);
    brange_op_set(&ops[2], 2, BRANGE_A, at(5 * BRANGE_PAGE), 8, 8, 8, 2);
    brange_op *scratch[3];
    brange r[3];
    size_t nin, nout;
    size_t bytes = brange_plan(ops, 3, scratch, r, &nin, &nout);
    cr_assert_eq(nin, 2);
    cr_assert_eq(nout, 0);
    cr_assert_eq(ops[0].range_lo, ops[1].range_lo);
    cr_assert_neq(ops[2].range_lo, ops[0].range_lo);
    check_plan(ops, 3, r, nin + nout, bytes);
}

Test(batch_ranges, ds_join_only_when_dense_and_touching)
{
    brange_op ops[4];
    /* dense 4 x 8 fp32 Ds: 0 and 1 touch, 2 leaves a 16-byte gap */
    brange_op_set(&ops[0], 0, BRANGE_D, at(0), 4, 8, 8, 4);
    brange_op_set(&ops[1], 1, BRANGE_D, at(128), 4, 8, 8, 4);
    brange_op_set(&ops[2], 2, BRANGE_D, at(272), 4, 8, 8, 4);
    /* a D with row padding: copied back on its own, pitched */
    brange_op_set(&ops[3], 3, BRANGE_D, at(4096), 4, 8, 16, 4);
    cr_assert(ops[0].ranged && ops[1].ranged && ops[2].ranged);
    cr_assert_not(ops[3].ranged, "a D with ldd > n must not be ranged");
    brange_op *scratch[4];
    brange r[4];
    size_t nin, nout;
    size_t bytes = brange_plan(ops, 4, scratch, r, &nin, &nout);
    cr_assert_eq(nin, 0);
    cr_assert_eq(nout, 2, "got %zu D ranges", nout);
    cr_assert_eq(r[0].hi - r[0].lo, 256, "Ds 0 and 1 are one copy back");
    cr_assert_eq(ops[3].dld, 8);
    check_plan(ops, 4, r, nin + nout, bytes);
}

/* Two buffers whose mappings touch (mmap often places them so): their
 * operands never share a copy, inputs or Ds (one cudaMemcpy may not span
 * two pinned registrations: "invalid argument" on the device). */
Test(batch_ranges, operands_of_two_buffers_never_share_a_range)
{
    brange_op ops[6];
    const uintptr_t buf1 = 1, buf2 = 2;
    /* A of problem 0 ends where buffer 2 (B of problem 0) begins; Ds of
     * both problems touch across the same boundary */
    brange_op_set(&ops[0], 0, BRANGE_A, at(0), 8, 8, 8, 2);
    ops[0].region = buf1;
    brange_op_set(&ops[1], 0, BRANGE_B, at(128), 8, 8, 8, 2);
    ops[1].region = buf2;
    brange_op_set(&ops[2], 1, BRANGE_A, at(256), 8, 8, 8, 2);
    ops[2].region = buf2;
    brange_op_set(&ops[3], 1, BRANGE_B, at(64), 4, 8, 8, 2);
    ops[3].region = buf1;
    brange_op_set(&ops[4], 0, BRANGE_D, at(8192), 4, 8, 8, 4);
    ops[4].region = buf1;
    brange_op_set(&ops[5], 1, BRANGE_D, at(8192 + 128), 4, 8, 8, 4);
    ops[5].region = buf2;
    brange_op *scratch[6];
    brange r[6];
    size_t nin, nout;
    size_t bytes = brange_plan(ops, 6, scratch, r, &nin, &nout);
    cr_assert_eq(nin, 2, "one input range per buffer, got %zu", nin);
    cr_assert_eq(nout, 2, "the Ds of two buffers stay apart, got %zu", nout);
    for (size_t i = 0; i < nin + nout; i++)
        for (int k = 0; k < 6; k++) {
            bool in = ops[k].ranged && ops[k].range_lo == r[i].lo &&
                      (ops[k].which == BRANGE_D) == (i >= nin);
            if (in)
                cr_assert_eq(ops[k].region, r[i].region,
                             "operand %d in another buffer's range", k);
        }
    cr_assert_eq(ops[0].range_lo, ops[3].range_lo);
    cr_assert_eq(ops[1].range_lo, ops[2].range_lo);
    cr_assert_neq(ops[0].range_lo, ops[1].range_lo);
    check_plan(ops, 6, r, nin + nout, bytes);
}

Test(batch_ranges, unreadable_layouts_are_pitched)
{
    brange_op o;
    /* ld not a multiple of 8 */
    brange_op_set(&o, 0, BRANGE_A, at(0), 5, 7, 7, 2);
    cr_assert_not(o.ranged);
    /* misaligned */
    brange_op_set(&o, 0, BRANGE_B, at(8), 5, 8, 8, 2);
    cr_assert_not(o.ranged);
    /* a narrow slice of a wide matrix: mostly others' bytes */
    brange_op_set(&o, 0, BRANGE_A, at(0), 1000, 8, 4096, 2);
    cr_assert_not(o.ranged);
    /* aligned, ld a multiple of 8, a little padding: read in place */
    brange_op_set(&o, 0, BRANGE_A, at(0), 100, 60, 64, 2);
    cr_assert(o.ranged);
    brange_op *scratch[1];
    brange r[1];
    size_t nin, nout;
    brange_op p;
    brange_op_set(&p, 0, BRANGE_A, at(0), 5, 7, 7, 2);
    size_t bytes = brange_plan(&p, 1, scratch, r, &nin, &nout);
    cr_assert_eq(nin + nout, 0);
    cr_assert_eq(p.dld, 8);
    cr_assert_eq(bytes, BRANGE_ALIGN);
    check_plan(&p, 1, r, 0, bytes);
}
