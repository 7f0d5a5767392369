/*
 * fill_test.c: operands filled by parts (proto's Fill). The cut
 * (common/fill.h: which operands, which axis, which order, the counter a
 * range needs), the daemon's waits on the client's counter (job.c: done,
 * late, stopped) and the CPU backend's order check (fill_check.c: a part
 * written after the counter passed it is named).
 */
#include "fill_check.h"
#include "validate_blas3.h"

#include <fill.h>
#include <gemm/types.h>

#include <criterion/criterion.h>

#include <string.h>

Test(fill, cut_of_each_routine)
{
    /* trsm, left, lower, N: B's rows from the top */
    gemm_fill_cut c =
        gemm_fill_cut_of(VAL_TRSM, false, true, VAL_OP_N, 10, 7, 4);
    cr_assert_eq(c.operands, GEMM_FILL_B);
    cr_assert(!c.cols && c.fwd);
    cr_assert_eq(c.extent, 10);
    cr_assert_eq(c.size, 3);
    /* op(A) upper on the left (lower, T): from the last */
    c = gemm_fill_cut_of(VAL_TRSM, false, true, VAL_OP_T, 10, 7, 4);
    cr_assert(!c.fwd);
    /* right side: B's columns; op(A) lower on the right: from the last */
    c = gemm_fill_cut_of(VAL_TRMM, true, true, VAL_OP_N, 10, 7, 4);
    cr_assert(c.cols && !c.fwd);
    cr_assert_eq(c.extent, 7);
    /* rank updates: A and B along op(A)'s rows, upper from the bottom */
    c = gemm_fill_cut_of(VAL_SYR2K, false, false, VAL_OP_T, 0, 9, 3);
    cr_assert_eq(c.operands, GEMM_FILL_A | GEMM_FILL_B);
    cr_assert(c.cols && !c.fwd);
    c = gemm_fill_cut_of(VAL_HERK, false, true, VAL_OP_N, 0, 9, 3);
    cr_assert_eq(c.operands, GEMM_FILL_A);
    cr_assert(!c.cols && c.fwd);
    /* symm: B and C along the dimension A does not touch */
    c = gemm_fill_cut_of(VAL_SYMM, false, true, VAL_OP_N, 10, 7, 2);
    cr_assert_eq(c.operands, GEMM_FILL_B | GEMM_FILL_C);
    cr_assert(c.cols && c.fwd);
    cr_assert_eq(c.extent, 7);
    c = gemm_fill_cut_of(VAL_HEMM, true, true, VAL_OP_N, 10, 7, 2);
    cr_assert(!c.cols);
    cr_assert_eq(c.extent, 10);
}

Test(fill, ranges_cover_and_needs_follow_the_order)
{
    for (int fwd = 0; fwd < 2; fwd++) {
        /* 10 rows in 4 parts of 3: part p in fill order */
        gemm_fill_cut c =
            gemm_fill_cut_of(VAL_TRSM, false, fwd != 0, VAL_OP_N, 10, 5, 4);
        int hit[10] = {0};
        for (unsigned p = 0; p < 4; p++) {
            uint64_t lo, hi;
            gemm_fill_range(&c, p, &lo, &hi);
            cr_assert_lt(lo, hi);
            for (uint64_t r = lo; r < hi; r++)
                hit[r]++;
            /* a range inside part p needs exactly its counter */
            cr_assert_eq(gemm_fill_need(&c, lo, hi), 2 + p);
            cr_assert_eq(gemm_fill_need(&c, hi - 1, hi), 2 + p);
        }
        for (int r = 0; r < 10; r++)
            cr_assert_eq(hit[r], 1, "row %d covered %d times", r, hit[r]);
        /* the whole extent needs the last part */
        cr_assert_eq(gemm_fill_need(&c, 0, 10), 5);
    }
    /* more parts than rows: empty parts at the end */
    gemm_fill_cut c =
        gemm_fill_cut_of(VAL_TRSM, false, true, VAL_OP_N, 3, 5, 8);
    uint64_t lo, hi;
    gemm_fill_range(&c, 7, &lo, &hi);
    cr_assert_eq(lo, hi);
    cr_assert_eq(gemm_fill_need(&c, 0, 3), 4);
}

/* A trsm (left, lower, N) job of fp64 on local memory: A 6 x 6, B 6 x 4
 * (the output, read), 3 parts of B's rows, the counter at *ctr. */
static double A[36], B[24];
static uint64_t ctr;

static gemmd_job trsm_job(void)
{
    gemmd_job j;
    memset(&j, 0, sizeof(j));
    j.kind = JOB_BLAS3;
    j.routine = VAL_TRSM;
    j.lower = true;
    j.op = VAL_OP_N;
    j.ab_type = j.cd_type = GEMM_FP64;
    j.m = 6;
    j.n = 4;
    j.a = A;
    j.lda = 6;
    j.d = B;
    j.ldd = 4;
    j.has_c = true;
    j.shape.a.rows = j.shape.a.cols = 6;
    j.shape.d.rows = 6;
    j.shape.d.cols = 4;
    j.fill = &ctr;
    j.fill_parts = 3;
    j.fill_cut = gemm_fill_cut_of(j.routine, j.right, j.lower, j.op, j.m, j.n,
                                  j.fill_parts);
    j.t_started = gemmd_now_ns();
    return j;
}

/* A GEMM job of fp64 on local memory: A 6 x 5 stored transposed (5 x 6),
 * B 5 x 4, C 6 x 4 apart from D; 4 parts: B's rows (K) in parts 0-1,
 * op(A)'s rows (A's columns) in parts 2-3. */
static double GA[30], GB[20], GC[24], GD[24];

static gemmd_job gemm_job(void)
{
    gemmd_job j;
    memset(&j, 0, sizeof(j));
    j.kind = JOB_GEMM;
    j.ab_type = j.cd_type = GEMM_FP64;
    j.m = 6;
    j.n = 4;
    j.k = 5;
    j.trans_a = true;
    j.a = GA;
    j.lda = 6;
    j.b = GB;
    j.ldb = 4;
    j.c = GC;
    j.ldc = 4;
    j.d = GD;
    j.ldd = 4;
    j.has_c = true;
    j.shape.a.rows = 5;
    j.shape.a.cols = 6;
    j.shape.b.rows = 5;
    j.shape.b.cols = 4;
    j.shape.c.rows = j.shape.d.rows = 6;
    j.shape.c.cols = j.shape.d.cols = 4;
    j.fill = &ctr;
    j.fill_parts = 4;
    j.fill_cut = gemm_fill_cut_of(0, false, false, 1, j.m, j.n, 4);
    j.fill_cut_b = gemm_fill_cut_gemm_b(false, j.k, 4);
    j.t_started = gemmd_now_ns();
    return j;
}

Test(fill, gemm_cuts_b_along_k_then_a_by_rows_of_op_a)
{
    /* 4 parts: A's are the last two (5 of op(A)'s 10 rows each) */
    gemm_fill_cut c = gemm_fill_cut_of(0, false, false, 0, 10, 7, 4);
    cr_assert_eq(c.operands, GEMM_FILL_A);
    cr_assert(!c.cols && c.fwd);
    cr_assert_eq(c.extent, 10);
    cr_assert_eq(c.first, 2);
    cr_assert_eq(c.parts, 2);
    cr_assert_eq(c.size, 5);
    cr_assert_eq(gemm_fill_need(&c, 0, 1), 4);
    cr_assert_eq(gemm_fill_need(&c, 3, 6), 5);
    /* transposed A (k x m as stored): its columns */
    c = gemm_fill_cut_of(0, false, false, 1, 10, 7, 4);
    cr_assert(c.cols && c.fwd);
    /* B along K (7 rows: 4 and 3), the first two parts */
    gemm_fill_cut b = gemm_fill_cut_gemm_b(false, 7, 4);
    cr_assert_eq(b.operands, GEMM_FILL_B);
    cr_assert(!b.cols && b.fwd);
    cr_assert_eq(b.first, 0);
    cr_assert_eq(b.parts, 2);
    cr_assert_eq(gemm_fill_need(&b, 0, 4), 2);
    cr_assert_eq(gemm_fill_need(&b, 4, 7), 3);
    b = gemm_fill_cut_gemm_b(true, 7, 4); /* stored n x k: columns */
    cr_assert(b.cols);
    /* one part: B whole at 1, A in part 0 */
    b = gemm_fill_cut_gemm_b(false, 7, 1);
    cr_assert_eq(b.operands, 0);
    cr_assert_eq(b.parts, 0);
    c = gemm_fill_cut_of(0, false, false, 0, 10, 7, 1);
    cr_assert_eq(c.first, 0);
    cr_assert_eq(gemm_fill_need(&c, 0, 10), 2);
    /* C is not cut */
    cr_assert_eq(gemm_fill_bit(0, 2) & (c.operands | b.operands), 0);
}

Test(fill, gemm_order_check_names_a_late_part)
{
    gemmd_job j = gemm_job();
    for (int i = 0; i < 30; i++)
        GA[i] = i;
    for (int i = 0; i < 20; i++)
        GB[i] = -i;
    ctr = 5;
    fill_check fc;
    cr_assert_eq(fill_check_wait(&j, &fc), GEMM_OK);
    cr_assert_eq(fill_check_done(&j, &fc, true), GEMM_OK);
    /* op(A)'s row 2 (A's column 2) is A's part 0: the request's part 2 */
    GA[4 * 6 + 2] = 99;
    cr_assert_eq(fill_check_done(&j, &fc, false), GEMM_ERR_INVALID);
    cr_assert(strstr(j.msg, "part 2 changed after the counter said 4") != NULL,
              "%s", j.msg);
    GA[4 * 6 + 2] = 4 * 6 + 2;
    /* B's row 4 (K) is B's part 1 (rows 3..4) */
    GB[4 * 4 + 1] = 99;
    cr_assert_eq(fill_check_done(&j, &fc, false), GEMM_ERR_INVALID);
    cr_assert(strstr(j.msg, "part 1 changed after the counter said 3") != NULL,
              "%s", j.msg);
    GB[4 * 4 + 1] = -(4 * 4 + 1);
    /* C apart from D is an input: checked after the job too */
    GC[5] = 7;
    cr_assert_eq(fill_check_done(&j, &fc, false), GEMM_ERR_INVALID);
    cr_assert(strstr(j.msg, "not cut into parts changed") != NULL, "%s", j.msg);
    GC[5] = 0;
    /* D is not read: written freely */
    GD[0] = 1;
    cr_assert_eq(fill_check_done(&j, &fc, false), GEMM_OK);
}

Test(fill, waits_end_done_late_or_stopped)
{
    gemmd_job j = trsm_job();
    ctr = 4;
    cr_assert_eq(job_fill_wait(&j, 4), GEMM_OK);
    ctr = 2;
    j.deadline_ns = gemmd_now_ns(); /* already past */
    cr_assert_eq(job_fill_wait(&j, 3), GEMM_ERR_TIMEOUT);
    cr_assert(strstr(j.msg, "not filled in time") != NULL, "%s", j.msg);
    cr_assert(strstr(j.msg, "stayed at 2 of 3") != NULL, "%s", j.msg);
    j = trsm_job();
    atomic_store(&j.stop, JOB_CLOSED);
    cr_assert_eq(job_fill_wait(&j, 3), GEMM_ERR_ABANDONED);
    cr_assert(strstr(j.msg, "the client left") != NULL, "%s", j.msg);
    atomic_store(&j.stop, JOB_CANCELED);
    cr_assert_eq(job_fill_wait(&j, 3), GEMM_ERR_TIMEOUT);
    cr_assert(strstr(j.msg, "canceled") != NULL, "%s", j.msg);
}

Test(fill, order_check_names_a_late_part)
{
    gemmd_job j = trsm_job();
    for (int i = 0; i < 36; i++)
        A[i] = i;
    for (int i = 0; i < 24; i++)
        B[i] = -i;
    ctr = 4;
    fill_check fc;
    cr_assert_eq(fill_check_wait(&j, &fc), GEMM_OK);
    cr_assert_eq(fill_check_done(&j, &fc, true), GEMM_OK);
    /* B's row 3 is part 1 (rows 2..3): written after the counter said 3 */
    B[3 * 4 + 1] = 99;
    cr_assert_eq(fill_check_done(&j, &fc, true), GEMM_ERR_INVALID);
    cr_assert(strstr(j.msg, "part 1 changed after the counter said 3") != NULL,
              "%s", j.msg);
    /* the output's change is not looked at after the job */
    cr_assert_eq(fill_check_done(&j, &fc, false), GEMM_OK);
    B[3 * 4 + 1] = -13;
    /* A is not cut: final at 1 */
    A[7] = 1e9;
    cr_assert_eq(fill_check_done(&j, &fc, false), GEMM_ERR_INVALID);
    cr_assert(strstr(j.msg, "not cut into parts changed") != NULL, "%s", j.msg);
}
