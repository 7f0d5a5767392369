/*
 * level3_offload.c: a level-3 call (symm .. trsm) through gemmd. The
 * column-major call is restated row-major for the wire as reference CBLAS
 * does the other way round (a column-major X is the row-major X^T): symm,
 * hemm, trmm and trsm flip SIDE and UPLO and swap m and n; the rank
 * updates flip UPLO and TRANS (N <-> T, or C for herk/her2k), and her2k
 * takes conj(alpha). No data moves for that. Staging: A (only its
 * referenced triangle for symm, hemm, trmm and trsm), B (when used) and
 * the output (when its old value is read: beta != 0, and trmm/trsm) are
 * packed tightly into the thread's buffer (offload.c's), the request runs
 * in place, and the output is copied back: all of it for symm/hemm and
 * trmm/trsm, only the referenced triangle for the rank updates (in and
 * out), so the caller's other triangle is never written, as the
 * reference promises. Large copies are shared over the copy threads.
 * An operand in a zero-copy region (zerocopy.c) is named in place
 * instead, with its leading dimension: gemmd then reads only what the
 * routine references and writes the output in the caller's memory; an
 * output read and written there is backed up (its referenced part copied
 * into the buffer, restore3 puts it back after a failure).
 */
#include "gemmblas.h"

#include <fill.h>
#include <gemm/gemm.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

/* The row-major request of a checked call, in the caller's memory. */
typedef struct wire3 {
    const gb_l3 *p;
    gemm_blas3_op op3;
    size_t ar, ac;        /* A as stored (row-major rows x cols) */
    size_t br, bc;        /* B, when used (else 0) */
    size_t cr, cc;        /* the output */
    bool read_out;        /* the output's old value goes to gemmd */
    gb_opnd op[GB_NOPND]; /* A, B (p NULL when unused), the output */
    unsigned fill_parts;  /* > 1: filled by parts while gemmd works */
    size_t fill_off;      /* the fill counter's offset in the buffer */
    gemm_fill_cut cut;    /* common/fill.h */
} wire3;

static bool rank_update(int r)
{
    return r == GB_SYRK || r == GB_HERK || r == GB_SYR2K || r == GB_HER2K;
}

/* Real scalar s of t's part type as a double. */
static double part(gb_type t, const void *s)
{
    return t == GB_S || t == GB_C ? *(const float *)s : *(const double *)s;
}

/* Restates p row-major into w (op without buffers). */
static void restate(const gb_l3 *p, wire3 *w)
{
    static const gemm_routine rt[GB_NROUTINES] = {
        GEMM_ROUTINE_GEMM,  GEMM_ROUTINE_SYMM, GEMM_ROUTINE_HEMM,
        GEMM_ROUTINE_SYRK,  GEMM_ROUTINE_HERK, GEMM_ROUTINE_SYR2K,
        GEMM_ROUTINE_HER2K, GEMM_ROUTINE_TRMM, GEMM_ROUTINE_TRSM};
    gemm_blas3_op *op = &w->op3;
    memset(w, 0, sizeof(*w));
    w->p = p;
    gemm_blas3_init(op, rt[p->r], gb_wire_type(p->t));
    op->lower = p->uplo == 'U'; /* the row-major view flips the triangle */
    double al[2], be[2] = {0, 0};
    bool her = p->r == GB_HERK || p->r == GB_HER2K;
    if (p->r == GB_HERK)
        al[0] = part(p->t, p->alpha), al[1] = 0;
    else
        gb_scalar(p->t, p->alpha, al);
    if (p->beta != NULL) {
        if (her)
            be[0] = part(p->t, p->beta);
        else
            gb_scalar(p->t, p->beta, be);
    }
    if (p->r == GB_HER2K)
        al[1] = -al[1]; /* C^T = conj(alpha) A'^H B' + alpha B'^H A' */
    op->alpha_re = al[0];
    op->alpha_im = al[1];
    op->beta_re = be[0];
    op->beta_im = be[1];
    if (rank_update(p->r)) {
        bool nt = p->trans == 'N';
        op->trans = nt ? (her ? 'C' : 'T') : 'N';
        op->n = (uint64_t)p->n;
        op->k = (uint64_t)p->k;
        /* row-major A: n x k for wire 'N', else k x n */
        w->ar = (size_t)(op->trans == 'N' ? p->n : p->k);
        w->ac = (size_t)(op->trans == 'N' ? p->k : p->n);
        if (p->r == GB_SYR2K || p->r == GB_HER2K)
            w->br = w->ar, w->bc = w->ac;
        w->cr = w->cc = (size_t)p->n;
        w->read_out = be[0] != 0 || be[1] != 0;
        return;
    }
    op->right = p->side == 'L';
    op->m = (uint64_t)p->n;
    op->n = (uint64_t)p->m;
    w->ar = w->ac = (size_t)(p->side == 'L' ? p->m : p->n);
    w->cr = (size_t)p->n;
    w->cc = (size_t)p->m;
    if (p->r == GB_TRMM || p->r == GB_TRSM) {
        op->trans = p->trans == 'C' && p->t <= GB_D ? 'T' : p->trans;
        op->unit_diag = p->diag == 'U';
        w->read_out = true;
        return;
    }
    w->br = w->cr, w->bc = w->cc;
    w->read_out = be[0] != 0 || be[1] != 0;
}

/* The output's referenced part from src (lds) to dst (ldd), rows of the
 * row-major view: in before the call, out after it; the triangle of a
 * rank update, all of it otherwise. */
static void copy_ref(const wire3 *w, void *dst, size_t ldd, const void *src,
                     size_t lds, size_t es)
{
    if (!rank_update(w->p->r))
        gb_copy2d(dst, ldd, src, lds, w->cr, w->cc, es);
    else
        gb_copy_tri(dst, ldd, src, lds, w->cr, w->op3.lower, es);
}

/* Whether operand o (GB_OPND_*, common/fill.h's `which`) is cut into
 * parts by w's fill. */
static bool by_parts(const wire3 *w, int o)
{
    return w->fill_parts > 1 &&
           (w->cut.operands & gemm_fill_bit((int)w->op3.routine, o));
}

/* Whether gemmd reads operand o from the buffer. */
static bool staged(const wire3 *w, int o)
{
    const gb_opnd *x = &w->op[o];
    return x->p != NULL && !x->in_place && (o != GB_OPND_OUT || w->read_out);
}

/* Fill by parts while gemmd works (proto's Fill) when the daemon takes
 * it, the staged bytes are many and every operand cut into parts is
 * staged: the counter goes after the staged operands. */
static void plan_fill(gemm_client *c, wire3 *w, gb_call *call)
{
    const gb_config *cfg = gb_cfg();
    w->fill_parts = 0;
    if (cfg->fill_parts < 2 || (double)call->need < cfg->fill_min_bytes ||
        !(gemm_server_features(c) & GEMM_FEATURE_FILL))
        return;
    const gemm_blas3_op *op = &w->op3;
    int trans = op->trans == 'T' ? 1 : op->trans == 'C' ? 2 : 0;
    w->cut = gemm_fill_cut_of((int)op->routine, op->right, op->lower, trans,
                              op->m, op->n, (unsigned)cfg->fill_parts);
    w->fill_parts = (unsigned)cfg->fill_parts;
    bool any = false;
    for (int o = 0; o < GB_NOPND; o++) {
        if (!by_parts(w, o))
            continue;
        if (w->op[o].p != NULL && w->op[o].in_place) {
            w->fill_parts = 0; /* in the caller's memory: nothing to fill */
            return;
        }
        any = any || staged(w, o);
    }
    if (!any) {
        w->fill_parts = 0;
        return;
    }
    w->fill_off = call->need;
    call->need += 64;
}

/* Which operands are in place (zerocopy.c), the staging bytes of the
 * others. */
static void prepare3(gemm_client *c, uint64_t gen, gb_call *call)
{
    wire3 *w = call->arg;
    call->need = gb_zc_plan(c, gen, w->op, gb_esize(w->p->t), w->read_out);
    plan_fill(c, w, call);
}

/* Where staged operand o comes from: the caller's matrix, its ld, and
 * its rows and columns as stored on the wire. */
typedef struct stage_src {
    const void *src;
    size_t lds, rows, cols;
} stage_src;

static stage_src src_of(const wire3 *w, int o)
{
    const gb_l3 *p = w->p;
    if (o == GB_OPND_A)
        return (stage_src){p->a, (size_t)p->lda, w->ar, w->ac};
    if (o == GB_OPND_B)
        return (stage_src){p->b, (size_t)p->ldb, w->br, w->bc};
    return (stage_src){p->c, (size_t)p->ldc, w->cr, w->cc};
}

/* Part `part` (fill order) of every operand cut into parts, into base. */
static void copy_part(const wire3 *w, char *base, unsigned part, size_t es)
{
    uint64_t lo, hi;
    gemm_fill_range(&w->cut, part, &lo, &hi);
    if (hi <= lo)
        return;
    for (int o = 0; o < GB_NOPND; o++) {
        if (!by_parts(w, o) || !staged(w, o))
            continue;
        stage_src s = src_of(w, o);
        gb_copy_span(base + w->op[o].off, s.cols, s.src, s.lds, s.rows, s.cols,
                     w->cut.cols, lo, hi, es);
    }
}

static int run3(gemm_client *c, gemm_buffer *buf, const void *arg)
{
    double t0 = gb_ms_now();
    const wire3 *w = arg;
    const gb_l3 *p = w->p;
    size_t es = gb_esize(p->t);
    char *base = buf != NULL ? gemm_buffer_data(buf) : NULL;
    bool fill = w->fill_parts > 1 && base != NULL;
    uint64_t *ctr = fill ? (uint64_t *)(void *)(base + w->fill_off) : NULL;
    gemm_blas3_op op = w->op3;
    const gb_opnd *oa = &w->op[GB_OPND_A], *ob = &w->op[GB_OPND_B],
                  *oc = &w->op[GB_OPND_OUT];
    if (fill)
        __atomic_store_n(ctr, 0, __ATOMIC_RELAXED);
    if (oa->in_place)
        op.a = oa->m;
    else if (fill && by_parts(w, GB_OPND_A))
        ;                       /* by parts, below */
    else if (rank_update(p->r)) /* A whole; else only its triangle is read */
        gb_copy2d(base + oa->off, w->ac, p->a, (size_t)p->lda, w->ar, w->ac,
                  es);
    else
        gb_copy_tri(base + oa->off, w->ac, p->a, (size_t)p->lda, w->ar,
                    w->op3.lower, es);
    if (!oa->in_place)
        op.a = (gemm_matrix){buf, oa->off, 0, 0};
    gemm_matrix out = oc->in_place ? oc->m : (gemm_matrix){buf, oc->off, 0, 0};
    if (ob->p != NULL) {
        if (ob->in_place) {
            op.b = ob->m;
        } else {
            if (!(fill && by_parts(w, GB_OPND_B)))
                gb_copy2d(base + ob->off, w->bc, p->b, (size_t)p->ldb, w->br,
                          w->bc, es);
            op.b = (gemm_matrix){buf, ob->off, 0, 0};
        }
    }
    if (w->read_out && (!oc->in_place || oc->backup) &&
        !(fill && by_parts(w, GB_OPND_OUT)))
        copy_ref(w, base + oc->off, w->cc, p->c, (size_t)p->ldc, es);
    if (p->r == GB_TRMM || p->r == GB_TRSM)
        op.b = out;
    else
        op.c = out;
    op.timeout_ms = (uint32_t)gb_cfg()->queue_ms;
    gemm_timings tm;
    int rv;
    double t1;
    if (fill) {
        /* the rest goes in while gemmd takes the first parts */
        __atomic_store_n(ctr, 1, __ATOMIC_RELEASE);
        gemm_request *rq;
        if ((rv = gemm_blas3_submit_filled(c, &op, buf, w->fill_off,
                                           w->fill_parts, &rq)) != GEMM_OK)
            return rv;
        for (unsigned part = 0; part < w->fill_parts; part++) {
            copy_part(w, base, part, es);
            __atomic_store_n(ctr, 2 + (uint64_t)part, __ATOMIC_RELEASE);
        }
        t1 = gb_ms_now();
        rv = gemm_wait(rq, &tm);
    } else {
        t1 = gb_ms_now();
        rv = gemm_blas3_run(c, &op, &tm);
    }
    if (rv != GEMM_OK)
        return rv;
    double t2 = gb_ms_now();
    if (!oc->in_place)
        copy_ref(w, p->c, (size_t)p->ldc, base + oc->off, w->cc, es);
    gb_log(2,
           "%c%s n=%lld: copies in %.3f ms%s, gemmd %s %.3f ms (daemon %.3f, "
           "device %.3f, kernels %.3f), copy out %.3f ms; in place:%s%s%s",
           "sdcz"[p->t], gemm_routine_name(op.routine), (long long)op.n,
           t1 - t0, fill ? " (by parts, beside gemmd)" : "", tm.kernel,
           (double)tm.round_trip_us / 1e3, (double)tm.total_us / 1e3,
           (double)tm.compute_us / 1e3, (double)tm.kernel_ns / 1e6,
           gb_ms_now() - t2, oa->in_place ? " A" : "",
           ob->p != NULL && ob->in_place ? " B" : "",
           oc->in_place ? " out" : "");
    return GEMM_OK;
}

/* After a failed call: the backed-up output's old value back over what
 * gemmd may have written. */
static void restore3(gemm_buffer *buf, const void *arg)
{
    const wire3 *w = arg;
    const gb_opnd *oc = &w->op[GB_OPND_OUT];
    copy_ref(w, (void *)w->p->c, (size_t)w->p->ldc,
             (const char *)gemm_buffer_data(buf) + oc->off, w->cc,
             gb_esize(w->p->t));
}

/* The work of p in flops (real multiply-adds count 2, complex 8). */
static double flops3(const gb_l3 *p)
{
    double m = (double)p->m, n = (double)p->n, k = (double)p->k;
    double f;
    switch (p->r) {
    case GB_SYMM:
    case GB_HEMM:
        f = 2 * m * n * (p->side == 'L' ? m : n);
        break;
    case GB_SYRK:
    case GB_HERK:
        f = n * (n + 1) * k;
        break;
    case GB_SYR2K:
    case GB_HER2K:
        f = 2 * n * (n + 1) * k;
        break;
    default: /* trmm, trsm */
        f = m * n * (p->side == 'L' ? m : n);
    }
    return p->t >= GB_C ? 4 * f : f;
}

bool gb_offload3(const gb_l3 *p)
{
    const gb_config *cfg = gb_cfg();
    wire3 w;
    restate(p, &w);
    gb_call call = {.ops = w.op,
                    .es = gb_esize(p->t),
                    .prepare = prepare3,
                    .run = run3,
                    .restore = restore3,
                    .arg = &w};
    snprintf(call.what, sizeof(call.what), "%c%s %lldx%lldx%lld", "sdcz"[p->t],
             gemm_routine_name(w.op3.routine), (long long)p -> m,
             (long long)p -> n, (long long)p -> k);
    double f = flops3(p), min = cfg->min_flops3[p->r][p->t];
    if (min < 0 || f < min) {
        gb_log(2, "%s on the CPU: %.3g flops, below its threshold (%.3g)",
               call.what, f, min);
        return false;
    }
    w.op[GB_OPND_A] =
        (gb_opnd){.p = p->a, .rows = w.ar, .cols = w.ac, .ld = (size_t)p->lda};
    if (w.br != 0)
        w.op[GB_OPND_B] = (gb_opnd){
            .p = p->b, .rows = w.br, .cols = w.bc, .ld = (size_t)p->ldb};
    w.op[GB_OPND_OUT] =
        (gb_opnd){.p = p->c, .rows = w.cr, .cols = w.cc, .ld = (size_t)p->ldc};
    return gb_offload_call(&call);
}
