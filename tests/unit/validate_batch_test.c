/*
 * validate_batch_test.c: the overlap check across a batch's problems
 * (val_spans_conflicts): which problem is named for each kind of overlap,
 * what is allowed (inputs shared, one problem's own spans, other memory
 * objects), an overlap hidden behind a problem's own larger span, and
 * random batches against a brute-force pairwise check: every conflict
 * reported is real, and every batch with one gets at least one report.
 */
#include "validate_batch.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAXC 4096

typedef struct found {
    val_conflict c[MAXC];
    size_t n;
} found;

static void collect(void *arg, const val_conflict *c)
{
    found *f = arg;
    if (f->n < MAXC)
        f->c[f->n++] = *c;
}

static val_span S(uint64_t obj, uint64_t lo, uint64_t hi, uint64_t p, char w)
{
    return (val_span){
        .object = obj, .lo = lo, .hi = hi, .problem = p, .what = w};
}

static found *run(val_span *s, size_t n)
{
    static found f;
    memset(&f, 0, sizeof(f));
    size_t r = val_spans_conflicts(s, n, collect, &f);
    cr_assert_eq(r, f.n);
    return &f;
}

Test(validate_batch, disjoint_and_shared_inputs_pass)
{
    val_span s[] = {
        S(1, 0, 100, 0, 'A'),   S(1, 0, 100, 1, 'A'),   /* shared A */
        S(1, 100, 200, 0, 'B'), S(1, 150, 250, 1, 'B'), /* inputs overlap */
        S(1, 300, 400, 0, 'D'), S(1, 400, 500, 1, 'D'), /* touching Ds */
        S(2, 300, 400, 2, 'D'), /* same bytes, another object */
        S(1, 500, 600, 2, 'C'),
    };
    cr_assert_eq(run(s, 8)->n, 0);
}

Test(validate_batch, own_spans_are_not_judged_here)
{
    val_span s[] = {S(1, 0, 100, 3, 'A'), S(1, 50, 150, 3, 'D'),
                    S(1, 60, 70, 3, 'B')};
    cr_assert_eq(run(s, 3)->n, 0);
}

Test(validate_batch, d_over_another_input_names_the_d)
{
    /* D of problem 4 sorts after problem 1's A */
    val_span s[] = {S(7, 0, 100, 1, 'A'), S(7, 90, 120, 4, 'D')};
    found *f = run(s, 2);
    cr_assert_eq(f->n, 1);
    cr_assert_eq(f->c[0].bad, 4);
    cr_assert_eq(f->c[0].other, 1);
    cr_assert_eq(f->c[0].what, 'A');
    /* and when the input sorts after the D */
    val_span t[] = {S(7, 0, 100, 5, 'D'), S(7, 99, 120, 2, 'C')};
    f = run(t, 2);
    cr_assert_eq(f->n, 1);
    cr_assert_eq(f->c[0].bad, 5);
    cr_assert_eq(f->c[0].other, 2);
    cr_assert_eq(f->c[0].what, 'C');
}

Test(validate_batch, two_ds_name_the_later)
{
    val_span s[] = {S(1, 0, 64, 9, 'D'), S(1, 0, 64, 2, 'D')};
    found *f = run(s, 2);
    cr_assert_eq(f->n, 1);
    cr_assert_eq(f->c[0].bad, 9);
    cr_assert_eq(f->c[0].other, 2);
    cr_assert_eq(f->c[0].what, 'D');
}

/* Problem 1's own long B reaches furthest, yet problem 2's A under its D
 * is found. */
Test(validate_batch, overlap_behind_an_own_span)
{
    val_span s[] = {S(1, 0, 50, 2, 'A'), S(1, 10, 1000, 1, 'B'),
                    S(1, 20, 30, 1, 'D')};
    found *f = run(s, 3);
    cr_assert_eq(f->n, 1);
    cr_assert_eq(f->c[0].bad, 1);
    cr_assert_eq(f->c[0].other, 2);
    cr_assert_eq(f->c[0].what, 'A');
}

static bool conflicts(const val_span *x, const val_span *y)
{
    return x->object == y->object && x->problem != y->problem &&
           (x->what == 'D' || y->what == 'D') && x->lo < y->hi && y->lo < x->hi;
}

Test(validate_batch, random_against_pairs)
{
    uint64_t st = 88172645463325252ull;
    for (int rep = 0; rep < 2000; rep++) {
        val_span s[24], orig[24];
        size_t n = 2 + (size_t)(rep % 22);
        for (size_t i = 0; i < n; i++) {
            st ^= st << 13, st ^= st >> 7, st ^= st << 17;
            uint64_t lo = st % 400, len = 1 + (st >> 20) % 60;
            s[i] = S(1 + (st >> 40) % 2, lo, lo + len, (st >> 30) % 8,
                     "ABCD"[(st >> 50) % 4]);
        }
        memcpy(orig, s, sizeof(s));
        bool any = false;
        for (size_t i = 0; i < n; i++)
            for (size_t j = i + 1; j < n; j++)
                any |= conflicts(&orig[i], &orig[j]);
        found *f = run(s, n);
        cr_assert_eq(f->n > 0, any, "rep %d: %zu reported, pairwise %d", rep,
                     f->n, any);
        for (size_t r = 0; r < f->n; r++) {
            bool real = false;
            for (size_t i = 0; i < n && !real; i++)
                for (size_t j = 0; j < n && !real; j++)
                    real = orig[i].problem == f->c[r].bad &&
                           orig[i].what == 'D' &&
                           orig[j].problem == f->c[r].other &&
                           orig[j].what == f->c[r].what &&
                           conflicts(&orig[i], &orig[j]);
            cr_assert(real, "rep %d: conflict %llu/%llu%c is not real", rep,
                      (unsigned long long)f->c[r].bad,
                      (unsigned long long)f->c[r].other, f->c[r].what);
        }
    }
}

/* A batch at --max-batch's default: four spans each, all disjoint but for
 * one D placed on the last problem's A; found, and fast (sorting). */
Test(validate_batch, large_batch)
{
    size_t np = 65536, n = 4 * np;
    val_span *s = malloc(n * sizeof(*s));
    cr_assert(s);
    for (size_t i = 0; i < np; i++)
        for (size_t x = 0; x < 4; x++)
            s[4 * i + x] =
                S(1, (4 * i + x) * 64, (4 * i + x) * 64 + 64, i, "ABCD"[x]);
    s[4 * 17 + 3].lo = s[4 * (np - 1)].lo; /* D of 17 on A of the last */
    s[4 * 17 + 3].hi = s[4 * (np - 1)].hi;
    found *f = run(s, n);
    cr_assert_eq(f->n, 1);
    cr_assert_eq(f->c[0].bad, 17);
    cr_assert_eq(f->c[0].other, np - 1);
    free(s);
}
