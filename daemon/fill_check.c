/*
 * fill_check.c: see fill_check.h. A step's fingerprint is a 64-bit hash
 * of the bytes it makes final: step 1 the operands not cut into parts
 * (the output's old value among them when it is read), step 2 + p the
 * request's part p of each operand whose cut has it (common/fill.h's
 * ranges of rows or columns).
 */
#include "fill_check.h"
#include "log.h"

#include <fill.h>
#include <gemm/types.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool check_on;
static pthread_once_t check_once = PTHREAD_ONCE_INIT;

static void check_read(void)
{
    const char *e = getenv("GEMMD_TEST_FILL_ORDER");
    check_on = e != NULL && strcmp(e, "1") == 0;
    if (check_on)
        gemmd_log(LOG_NOTICE, "GEMMD_TEST_FILL_ORDER=1: the CPU backend "
                              "checks that clients fill GEMM and level-3 "
                              "operands in "
                              "order");
}

bool fill_check_on(void)
{
    pthread_once(&check_once, check_read);
    return check_on;
}

/* One operand of the job as stored: where, and its cut. */
typedef struct fopnd {
    const char *p;
    uint64_t rows, cols, ld;
    size_t es;
    const gemm_fill_cut *cut; /* NULL: not cut (final at step 1) */
    bool out; /* the output (its old value read), written by the job */
} fopnd;

/* FNV-1a over rows [r0, r1) x columns [c0, c1) of o, into h. */
static uint64_t hash_rect(uint64_t h, const fopnd *o, uint64_t r0, uint64_t r1,
                          uint64_t c0, uint64_t c1)
{
    for (uint64_t r = r0; r < r1; r++) {
        const unsigned char *x =
            (const unsigned char *)o->p + (r * o->ld + c0) * o->es;
        for (size_t i = 0; i < (c1 - c0) * o->es; i++)
            h = (h ^ x[i]) * 0x100000001b3ull;
    }
    return h;
}

/* The fingerprint of step v (1 .. parts + 1) over the n operands, the
 * output's old value only when out. */
static uint64_t step_hash(const fopnd *ops, int n, bool out, unsigned v)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++) {
        const fopnd *o = &ops[i];
        if (o->out && !out)
            continue;
        const gemm_fill_cut *cut = o->cut;
        if (v == 1) {
            if (cut == NULL)
                h = hash_rect(h, o, 0, o->rows, 0, o->cols);
            continue;
        }
        /* the request's part v - 2: this cut's? */
        if (cut == NULL || v - 2 < cut->first ||
            v - 2 >= cut->first + cut->parts)
            continue;
        uint64_t lo, hi;
        gemm_fill_range(cut, v - 2 - cut->first, &lo, &hi);
        h = cut->cols ? hash_rect(h, o, 0, o->rows, lo, hi)
                      : hash_rect(h, o, lo, hi, 0, o->cols);
    }
    return h;
}

/* The cut of j's operand `which` (gemm_fill_bit's), NULL when it is not
 * cut. */
static const gemm_fill_cut *cut_of(const gemmd_job *j, int which)
{
    unsigned bit = gemm_fill_bit(j->kind == JOB_GEMM ? 0 : j->routine, which);
    if (j->fill_cut.operands & bit)
        return &j->fill_cut;
    if (j->fill_cut_b.operands & bit)
        return &j->fill_cut_b;
    return NULL;
}

/* The operands of j as stored (n of them). */
static int job_ops(const gemmd_job *j, fopnd *ops)
{
    const val_resolved *s = &j->shape;
    int n = 0;
    size_t es = gemm_dtype_size(j->ab_type), cs = gemm_dtype_size(j->cd_type);
    ops[n++] =
        (fopnd){j->a, s->a.rows, s->a.cols, j->lda, es, cut_of(j, 0), false};
    if (j->b != NULL) /* an input B (trmm/trsm's B is the output, d) */
        ops[n++] = (fopnd){j->b, s->b.rows,    s->b.cols, j->ldb,
                           es,   cut_of(j, 1), false};
    if (j->has_c && j->kind == JOB_GEMM) /* C, written when it is D */
        ops[n++] = (fopnd){j->c, s->c.rows,    s->c.cols,   j->ldc,
                           cs,   cut_of(j, 2), j->c == j->d};
    else if (j->has_c)
        ops[n++] =
            (fopnd){j->d, s->d.rows, s->d.cols, j->ldd, es, cut_of(j, 2), true};
    if (j->a_dev) /* a resident A is not filled */
        ops[0].rows = 0;
    if (j->b_dev && j->b != NULL)
        ops[1].rows = 0;
    return n;
}

int fill_check_wait(gemmd_job *j, fill_check *c)
{
    fopnd ops[3];
    int n = job_ops(j, ops);
    memset(c, 0, sizeof(*c));
    for (unsigned v = 1; v <= j->fill_parts + 1; v++) {
        int rv = job_fill_wait(j, v);
        if (rv != GEMM_OK)
            return rv;
        c->seen[v] = step_hash(ops, n, true, v);
        c->seen_in[v] = step_hash(ops, n, false, v);
    }
    return GEMM_OK;
}

int fill_check_done(gemmd_job *j, const fill_check *c, bool out)
{
    fopnd ops[3];
    int n = job_ops(j, ops);
    for (unsigned v = 1; v <= j->fill_parts + 1; v++) {
        if (step_hash(ops, n, out, v) == (out ? c->seen[v] : c->seen_in[v]))
            continue;
        if (v == 1)
            snprintf(j->msg, sizeof(j->msg),
                     "fill order: an operand not cut into parts changed "
                     "after the counter said 1");
        else
            snprintf(j->msg, sizeof(j->msg),
                     "fill order: part %u changed after the counter said %u",
                     v - 2, v);
        return GEMM_ERR_INVALID;
    }
    return GEMM_OK;
}

int fill_wait_whole(gemmd_job *j, fill_check *c)
{
    c->on = j->fill != NULL && fill_check_on();
    if (j->fill == NULL)
        return GEMM_OK;
    if (!c->on)
        return job_fill_wait(j, j->fill_parts + 1u);
    int rv = fill_check_wait(j, c);
    c->on = true; /* fill_check_wait cleared it */
    return rv == GEMM_OK ? fill_check_done(j, c, true) : rv;
}

int fill_check_after(gemmd_job *j, const fill_check *c)
{
    return c->on ? fill_check_done(j, c, false) : GEMM_OK;
}
