/*
 * batch.c: the Batch request kind, from the body to a queued job (see
 * batch.h). It follows do_gemm in dispatch.c for every problem (describe,
 * validate, fill a job, the backend's kernel check), gathers the bad
 * problems instead of stopping at the first, checks the overlaps across
 * problems and the batch's limits, then admits, holds and submits the
 * batch as one job.
 */
#include "batch.h"
#include "admit.h"
#include "complete.h"
#include "log.h"
#include "placement.h"
#include "request.h"
#include "slice.h"
#include "validate_batch.h"

#include <gemm/types.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One bad problem as the reply lists it. */
typedef struct batch_bad {
    uint64_t index;
    int status;
    char msg[256]; /* "problem I: ..." */
} batch_bad;

/* The bad problems of a batch being checked: the BATCH_ERRORS_MAX lowest
 * indices in order, each problem once, and how many in all. */
typedef struct batch_errs {
    batch_bad list[BATCH_ERRORS_MAX];
    size_t n;
    uint64_t total;
    uint8_t *seen; /* per problem: already counted */
} batch_errs;

static void bad(batch_errs *e, uint64_t i, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Records problem i as bad (once; later reasons for it are dropped). */
static void bad(batch_errs *e, uint64_t i, int status, const char *fmt, ...)
{
    if (e->seen[i])
        return;
    e->seen[i] = 1;
    e->total++;
    size_t at = e->n;
    while (at > 0 && e->list[at - 1].index > i)
        at--;
    if (at == BATCH_ERRORS_MAX)
        return; /* past the lowest ones kept */
    size_t keep = e->n < BATCH_ERRORS_MAX ? e->n : BATCH_ERRORS_MAX - 1;
    memmove(&e->list[at + 1], &e->list[at], (keep - at) * sizeof(e->list[0]));
    if (e->n < BATCH_ERRORS_MAX)
        e->n++;
    batch_bad *b = &e->list[at];
    b->index = i;
    b->status = status;
    int off = snprintf(b->msg, sizeof(b->msg),
                       "problem %llu: ", (unsigned long long)i);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->msg + off, sizeof(b->msg) - (size_t)off, fmt, ap);
    va_end(ap);
}

/* Answers q with the bad problems of e (n problems in the batch): the
 * first one's status and message, every one listed. */
static void reply_bad(gemmd *d, sp_req *q, const batch_errs *e, uint64_t n)
{
    Gemm__BatchError items[BATCH_ERRORS_MAX];
    Gemm__BatchError *ptrs[BATCH_ERRORS_MAX];
    for (size_t i = 0; i < e->n; i++) {
        gemm__batch_error__init(&items[i]);
        items[i].has_index = items[i].has_status = true;
        items[i].index = e->list[i].index;
        items[i].status = e->list[i].status;
        items[i].message = (char *)e->list[i].msg;
        ptrs[i] = &items[i];
    }
    Gemm__Reply r;
    Gemm__BatchReply br = GEMM__BATCH_REPLY__INIT;
    complete_reply_init(&r, q->id);
    r.status = e->list[0].status;
    r.message = (char *)e->list[0].msg;
    br.has_problems = br.has_ran = br.has_bad_problems = true;
    br.problems = n;
    br.ran = 0;
    br.bad_problems = e->total;
    br.n_errors = e->n;
    br.errors = ptrs;
    r.body_case = GEMM__REPLY__BODY_BATCH;
    r.batch = &br;
    gemmd_log(LOG_DEBUG,
              "request %llu on connection %u: batch of %llu refused, %llu "
              "bad problems, first: %s",
              (unsigned long long)q->id, q->conn->id, (unsigned long long)n,
              (unsigned long long)e->total, e->list[0].msg);
    complete_reply(d, q, &r);
}

/* What the problems share, checked once: the types, the precision, no
 * moduli (the emulation's count is for single GEMMs), no fill or drain
 * (nor are those) and the kernel name's form (so a batch of empty
 * problems is held to them too). */
static int shared_check(const val_gemm *t, char *msg, size_t len)
{
    int rv = val_dtypes_check(t->ab_type, t->cd_type, msg, len);
    if (rv == GEMM_OK)
        rv = val_precision(t->ab_type, t->precision, msg, len);
    if (rv == GEMM_OK && t->moduli != 0) {
        snprintf(msg, len,
                 "moduli (%u) applies to single fp64 requests, not to "
                 "batches: leave the batch op's moduli 0 (the daemon "
                 "picks), or send the problems as single GEMMs",
                 t->moduli);
        rv = GEMM_ERR_INVALID;
    }
    if (rv == GEMM_OK && (t->fill.present || t->drain.present)) {
        snprintf(msg, len, "%s applies to single requests, not to batches: %s",
                 t->fill.present ? "fill (operands filled by parts)"
                                 : "drain (D copied out early)",
                 t->fill.present ? "fill the batch's operands before "
                                   "sending it"
                                 : "copy D out after the reply");
        rv = GEMM_ERR_INVALID;
    }
    if (rv == GEMM_OK)
        rv = val_kernel_name(t->kernel, msg, len);
    return rv;
}

/* A problem with m or n 0: its dimensions in range and its scalars'
 * form; its operands are not looked at. */
static int empty_check(const val_gemm *v, uint64_t max_dim, char *msg,
                       size_t len)
{
    if (v->m > max_dim || v->n > max_dim || v->k > max_dim) {
        snprintf(msg, len,
                 "dimensions m=%llu n=%llu k=%llu: each must be at most "
                 "%llu",
                 (unsigned long long)v->m, (unsigned long long)v->n,
                 (unsigned long long)v->k, (unsigned long long)max_dim);
        return GEMM_ERR_DIMS;
    }
    return val_ops_scalars(v, msg, len);
}

/* Adds problem i's buffer operands to spans (a C that is its own D is
 * judged by val_gemm_check and left out). */
static size_t add_spans(val_span *s, const val_resolved *res, uint64_t i)
{
    const val_matrix *ms[4] = {&res->a, &res->b, &res->d,
                               res->has_c ? &res->c : NULL};
    static const char names[4] = {'A', 'B', 'D', 'C'};
    size_t n = 0;
    for (int x = 0; x < 4; x++) {
        const val_matrix *m = ms[x];
        if (m == NULL || m->tensor)
            continue;
        if (x == 3 && m->object == res->d.object && m->offset == res->d.offset)
            continue;
        s[n++] = (val_span){.object = m->object,
                            .lo = m->offset,
                            .hi = m->offset + m->extent,
                            .problem = i,
                            .what = names[x]};
    }
    return n;
}

static void on_conflict(void *arg, const val_conflict *c)
{
    batch_errs *e = arg;
    if (c->what == 'D')
        bad(e, c->bad, GEMM_ERR_INVALID,
            "operand D overlaps problem %llu's D: each problem needs its "
            "own D (a stride_d of 0 shares it)",
            (unsigned long long)c->other);
    else
        bad(e, c->bad, GEMM_ERR_INVALID,
            "operand D overlaps problem %llu's %c: a D may not be another "
            "problem's input",
            (unsigned long long)c->other, c->what);
}

/* The checks of every problem of r (n of them, template t) into probs
 * (zeroed), gathering the bad ones in e, and the batch's work and
 * memory. */
typedef struct batch_sum {
    uint64_t flops; /* real flops, saturating */
    double work_flops, work_bytes;
    uint64_t mem; /* the largest problem's scratch */
} batch_sum;

static void check_problems(gemmd *d, sp_req *q, const Gemm__BatchRequest *r,
                           const val_gemm *t, uint64_t n, gemmd_job *probs,
                           val_span *spans, size_t *nspans, batch_errs *e,
                           batch_sum *sum)
{
    val_limits lim = {.max_dim = d->cfg.max_dim,
                      .tensor_lookup = reg_scope_tensor};
    reg_scope la = {&d->reg, q->conn->id};
    char msg[256];
    bool over = false; /* the flop cap was passed */
    for (uint64_t i = 0; i < n; i++) {
        gemmd_job *p = &probs[i];
        val_gemm v;
        val_resolved res;
        int rv = req_batch_problem(r, t, i, &v, msg, sizeof(msg));
        if (rv == GEMM_OK && (v.m == 0 || v.n == 0)) {
            if ((rv = empty_check(&v, d->cfg.max_dim, msg, sizeof(msg))))
                bad(e, i, rv, "%s", msg);
            p->kind = JOB_GEMM; /* not run */
            continue;
        }
        if (rv == GEMM_OK)
            rv = val_gemm_check(&v, &lim, reg_scope_buffer, &la, &res, msg,
                                sizeof(msg));
        if (rv == GEMM_OK && (rv = job_fill_gemm(p, &v, &res)) != GEMM_OK)
            snprintf(msg, sizeof(msg), "%s", p->msg);
        if (rv == GEMM_OK && d->be.ops->kernel_check != NULL)
            rv = d->be.ops->kernel_check(&d->be, p, msg, sizeof(msg));
        if (rv != GEMM_OK) {
            bad(e, i, rv, "%s", msg);
            p->m = p->n = 0; /* nothing to hold or run */
            continue;
        }
        if (__builtin_add_overflow(sum->flops, slice_flops(p), &sum->flops))
            sum->flops = UINT64_MAX;
        if (!over && sum->flops > d->cfg.max_gemm_flops) {
            over = true;
            bad(e, i, GEMM_ERR_LIMIT,
                "the batch's flops up to this problem, %.3g, pass "
                "--max-gemm-flops %.3g: send fewer problems in a batch, or "
                "start gemmd with a larger --max-gemm-flops",
                (double)sum->flops, (double)d->cfg.max_gemm_flops);
        }
        *nspans += add_spans(spans + *nspans, &res, i);
        double pf, pb;
        place_work(p, &pf, &pb);
        sum->work_flops += pf;
        sum->work_bytes += pb;
        uint64_t m = d->be.ops->job_memory != NULL
                         ? d->be.ops->job_memory(&d->be, p)
                         : 0;
        if (m > sum->mem)
            sum->mem = m;
    }
}

void batch_handle(gemmd *d, sp_req *q, const Gemm__Request *req)
{
    const Gemm__BatchRequest *r = req->batch;
    conn *c = q->conn;
    char msg[512];
    uint64_t n = 0;
    val_gemm t;
    int rv = req_batch_check(r, &n, msg, sizeof(msg));
    if (rv == GEMM_OK) {
        req_gemm_desc(r->op, &t);
        rv = shared_check(&t, msg, sizeof(msg));
    }
    if (rv != GEMM_OK) {
        complete_error(d, q, rv, "%s", msg);
        return;
    }
    batch_errs *e = calloc(1, sizeof(*e));
    if (e != NULL && n > d->cfg.max_batch) {
        batch_bad *b = &e->list[0];
        e->n = e->total = 1;
        b->index = d->cfg.max_batch; /* the first one too many */
        b->status = GEMM_ERR_LIMIT;
        snprintf(b->msg, sizeof(b->msg),
                 "problem %llu: the batch has %llu problems, more than "
                 "--max-batch %llu allows: send it in parts, or start "
                 "gemmd with a larger --max-batch",
                 (unsigned long long)b->index, (unsigned long long)n,
                 (unsigned long long)d->cfg.max_batch);
        reply_bad(d, q, e, n);
        free(e);
        return;
    }
    /* the problems' records count against the budget: look before
     * making them (admit_work below reserves) */
    if (e != NULL && (rv = admit_work(d, c, n * sizeof(gemmd_job), msg,
                                      sizeof(msg))) != GEMM_OK) {
        complete_error(d, q, rv, "%s", msg);
        free(e);
        return;
    }
    gemmd_job *probs = e != NULL ? calloc(n, sizeof(*probs)) : NULL;
    val_span *spans = probs != NULL ? calloc(4 * n, sizeof(*spans)) : NULL;
    if (e != NULL)
        e->seen = spans != NULL ? calloc(n, 1) : NULL;
    if (e == NULL || e->seen == NULL) {
        complete_error(d, q, GEMM_ERR_NOMEM,
                       "out of memory for a batch of %llu problems",
                       (unsigned long long)n);
        goto done;
    }
    size_t nspans = 0;
    batch_sum sum = {0};
    check_problems(d, q, r, &t, n, probs, spans, &nspans, e, &sum);
    val_spans_conflicts(spans, nspans, on_conflict, e);
    free(spans);
    spans = NULL;
    if (e->total != 0) {
        reply_bad(d, q, e, n);
        goto done;
    }
    uint64_t mem = sum.mem + n * sizeof(gemmd_job);
    if ((rv = admit_work(d, c, mem, msg, sizeof(msg))) != GEMM_OK) {
        complete_error(d, q, rv, "%s", msg);
        goto done;
    }
    gemmd_job *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        complete_error(d, q, GEMM_ERR_NOMEM, "out of memory for a job");
        goto done;
    }
    j->kind = JOB_BATCH;
    j->ab_type = t.ab_type;
    j->cd_type = t.cd_type;
    j->precision = t.precision;
    if (t.kernel != NULL && strcmp(t.kernel, "auto") != 0)
        snprintf(j->kernel, sizeof(j->kernel), "%s", t.kernel);
    j->problems = probs;
    j->nproblems = n;
    j->work_flops = sum.work_flops;
    j->work_bytes = sum.work_bytes;
    probs = NULL; /* the job's now */
    for (uint64_t i = 0; i < n; i++)
        if (j->problems[i].m != 0 && j->problems[i].n != 0)
            job_hold_gemm(&j->problems[i]);
    job_set_timeout(j, q->t_received, r->op->has_timeout_ms, r->op->timeout_ms);
    if (admit_submit(d, q, j, mem) != GEMM_OK)
        complete_error(d, q, GEMM_ERR_NOMEM, "out of memory for a queue");
done:
    if (e != NULL)
        free(e->seen);
    free(e);
    free(spans);
    free(probs);
}
