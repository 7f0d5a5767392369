/*
 * slice_test.c: the slicing of large GEMMs (daemon/slice.c): the tiles
 * cover D exactly once, each within the budget and aligned, the operand
 * offsets follow the transposes, and the stop flag ends a run between
 * tiles with the status that says why.
 */
#include "slice.h"

#include <gemm/types.h>

#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

static gemmd_job job(uint64_t m, uint64_t n, uint64_t k, int type)
{
    gemmd_job j;
    memset(&j, 0, sizeof(j));
    j.kind = JOB_GEMM;
    j.m = m;
    j.n = n;
    j.k = k;
    j.ab_type = j.cd_type = type;
    return j;
}

typedef struct cover {
    unsigned char *hit; /* m x n: times each element was in a tile */
    uint64_t budget, align, tiles;
    bool over; /* a tile past the budget (beyond the align x align floor) */
} cover;

static int mark(gemmd_job *j, const slice_tile *t, void *arg)
{
    cover *c = arg;
    for (uint64_t r = t->r0; r < t->r0 + t->rows; r++)
        for (uint64_t q = t->c0; q < t->c0 + t->cols; q++)
            c->hit[r * j->n + q]++;
    uint64_t per = slice_flops(j) / (j->m * j->n);
    if (t->rows * t->cols * per > c->budget &&
        (t->rows > c->align || t->cols > c->align))
        c->over = true;
    if ((t->r0 % c->align) != 0 || (t->c0 % c->align) != 0)
        c->over = true;
    c->tiles++;
    return GEMM_OK;
}

Test(slice, tiles_cover_d_once_within_the_budget)
{
    static const uint64_t shapes[][3] = {
        {1000, 700, 300}, {8192, 128, 64},    {1, 5000, 4000},
        {777, 1, 9000},   {4096, 4096, 4096},
    };
    static const int types[] = {GEMM_FP32, GEMM_COMPLEX128};
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        for (size_t t = 0; t < 2; t++) {
            for (uint64_t align = 1; align <= 128; align *= 16) {
                gemmd_job j =
                    job(shapes[s][0], shapes[s][1], shapes[s][2], types[t]);
                cover c = {.hit = calloc(j.m * j.n, 1),
                           .budget = slice_flops(&j) / 7 + 1,
                           .align = align};
                cr_assert_eq(slice_run(&j, c.budget, align, mark, &c), GEMM_OK);
                for (uint64_t i = 0; i < j.m * j.n; i++)
                    cr_assert_eq(c.hit[i], 1, "%llux%llu: element %llu",
                                 (unsigned long long)j.m,
                                 (unsigned long long)j.n,
                                 (unsigned long long)i);
                cr_expect(!c.over, "a tile past the budget or unaligned");
                cr_expect_gt(c.tiles, 1, "not cut");
                free(c.hit);
            }
        }
    }
}

Test(slice, whole_when_it_fits_or_off)
{
    gemmd_job j = job(100, 100, 100, GEMM_FP32);
    uint64_t r, c;
    slice_plan(&j, slice_flops(&j), 16, &r, &c);
    cr_expect(r == 100 && c == 100);
    slice_plan(&j, 0, 16, &r, &c);
    cr_expect(r == 100 && c == 100);
    cr_expect(slice_small(&j));
    gemmd_job big = job(1024, 1024, 1024, GEMM_FP32);
    cr_expect(!slice_small(&big));
}

Test(slice, offsets_follow_the_transposes)
{
    gemmd_job j = job(64, 48, 32, GEMM_FP32);
    slice_tile t = {.r0 = 16, .rows = 16, .c0 = 32, .cols = 16};
    cr_expect_eq(slice_off_a(&j, &t, 40), 16 * 40);
    cr_expect_eq(slice_off_b(&j, &t, 50), 32);
    cr_expect_eq(slice_off_d(&t, 60), 16 * 60 + 32);
    j.trans_a = j.trans_b = true; /* A is k x m, B is n x k */
    cr_expect_eq(slice_off_a(&j, &t, 70), 16);
    cr_expect_eq(slice_off_b(&j, &t, 40), 32 * 40);
}

static int stop_after_two(gemmd_job *j, const slice_tile *t, void *arg)
{
    (void)t;
    if (++*(int *)arg == 2)
        atomic_store(&j->stop, JOB_CANCELED);
    return GEMM_OK;
}

Test(slice, stop_ends_the_run_between_tiles)
{
    gemmd_job j = job(512, 512, 512, GEMM_FP32);
    int ran = 0;
    cr_expect_eq(slice_run(&j, slice_flops(&j) / 16, 16, stop_after_two, &ran),
                 GEMM_ERR_TIMEOUT);
    cr_expect_eq(ran, 2);
    cr_expect(strstr(j.msg, "after 2 of") != NULL, "%s", j.msg);
    j = job(512, 512, 512, GEMM_FP32);
    atomic_store(&j.stop, JOB_CLOSED);
    ran = 0;
    cr_expect_eq(slice_run(&j, slice_flops(&j) / 16, 16, stop_after_two, &ran),
                 GEMM_ERR_CLOSED);
    cr_expect_eq(ran, 1, "the first tile runs, the stop is read after it");
}
