/*
 * offload_gemm.c: a gemm through gemmd (gb_offload): the size policy
 * (GEMMBLAS_MIN_FLOPS), then panels (panels.c) when they are on, else one
 * request on offload.c's connection with the thread's staging buffer:
 * operands in place (zero-copy) or packed into the buffer, C in place as
 * D, D copied back. Whatever fails, the caller's C is untouched and the
 * CPU computes (offload.c's rules).
 */
#include "gemmblas.h"

#include <fill.h>
#include <gemm/gemm.h>

#include <stdio.h>
#include <time.h>

/* Stored shape of op(X) = rows x cols (row-major), X stored rows_x x
 * cols_x. */
static void stored(char op, int64_t rows, int64_t cols, size_t *sr, size_t *sc)
{
    *sr = (size_t)(op == 'N' ? rows : cols);
    *sc = (size_t)(op == 'N' ? cols : rows);
}

/* A GEMM through gemmd: its operands (A and B as stored, C/D m x n) and
 * their plan. */
typedef struct gemm_call {
    const gb_gemm *g;
    const gb_call *call; /* whose fresh says the buffer is new */
    gb_opnd op[GB_NOPND];
    unsigned fill_parts; /* > 1: B and A filled by parts beside gemmd */
    size_t fill_off;     /* the fill counter's offset in the buffer */
    gemm_fill_cut cut_a; /* common/fill.h: A's parts, after B's */
    gemm_fill_cut cut_b;
    bool drain;       /* D's rows copied back as gemmd says they land */
    size_t drain_off; /* the drain word's offset in the buffer */
} gemm_call;

/* A GEMM's fill parts are of at least this many bytes (of A and B). */
#define GB_FILL_PART_BYTES (32.0 * 1024 * 1024)

/* Fill by parts (proto's Fill: B along K, then A along op(A)'s rows, in
 * up to twice GEMMBLAS_FILL_PARTS parts of GB_FILL_PART_BYTES or more) when the
 * daemon takes it for GEMMs, the staged bytes are many and A or B is staged;
 * drain D (proto's Drain) when the daemon says its rows as they land, the
 * staged bytes are many, D is staged and not read (beta 0: a late failure
 * leaves nothing the CPU needs). The counters go after the staged operands. */
static void plan_overlap(gemm_client *c, gemm_call *gc, gb_call *call)
{
    const gb_config *cfg = gb_cfg();
    const gb_gemm *g = gc->g;
    uint32_t have = gemm_server_features(c);
    bool big = (double)call->need >= cfg->fill_min_bytes;
    gc->fill_parts = 0;
    gc->drain = false;
    if (cfg->fill_gemm && cfg->fill_parts >= 2 && big &&
        !(gc->op[GB_OPND_A].in_place && gc->op[GB_OPND_B].in_place) &&
        (have & GEMM_FEATURE_FILL_GEMM)) {
        /* parts of GB_FILL_PART_BYTES or more: a smaller copy gets few
         * of the copy threads, and the parts go one after the other */
        size_t es = gb_esize(g->t);
        double ab = ((double)g->m + (double)g->n) * (double)g->k * (double)es;
        unsigned parts = 2 * (unsigned)cfg->fill_parts;
        while (parts > 2 && ab / parts < GB_FILL_PART_BYTES)
            parts -= 2;
        gc->fill_parts =
            parts < GEMM_FILL_MAX_PARTS ? parts : GEMM_FILL_MAX_PARTS;
        gc->cut_a =
            gemm_fill_cut_of(0, false, false, g->opa != 'N', (uint64_t)g->m,
                             (uint64_t)g->n, gc->fill_parts);
        gc->cut_b =
            gemm_fill_cut_gemm_b(g->opb != 'N', (uint64_t)g->k, gc->fill_parts);
    }
    gc->drain = cfg->drain && big && !gc->op[GB_OPND_OUT].in_place &&
                gb_is_zero(g->t, g->beta) && (have & GEMM_FEATURE_DRAIN);
    if (gc->fill_parts > 0 || gc->drain) {
        gc->fill_off = call->need;
        gc->drain_off = call->need + 8;
        call->need += 64;
    }
}

/* Which operands of the GEMM are in place (zerocopy.c), the staging
 * bytes of the others. */
static void gemm_prepare(gemm_client *c, uint64_t gen, gb_call *call)
{
    gemm_call *gc = call->arg;
    call->need = gb_zc_plan(c, gen, gc->op, gb_esize(gc->g->t),
                            !gb_is_zero(gc->g->t, gc->g->beta));
    plan_overlap(c, gc, call);
}

/* The request's part q (fill order: B's parts, then A's) into its place
 * in base, when its operand is staged. */
static void copy_part(const gemm_call *gc, char *base, unsigned q, size_t es)
{
    bool is_b = q < gc->cut_b.parts;
    const gemm_fill_cut *c = is_b ? &gc->cut_b : &gc->cut_a;
    const gb_opnd *o = &gc->op[is_b ? GB_OPND_B : GB_OPND_A];
    uint64_t lo, hi;
    gemm_fill_range(c, q - c->first, &lo, &hi);
    if (!o->in_place)
        gb_copy_span(base + o->off, o->cols, o->p, o->ld, o->rows, o->cols,
                     c->cols, lo, hi, es);
}

/* Rows [r0, r1) of the staged D (tight) into the caller's C. */
static void copy_rows_out(const gemm_call *gc, const char *base, size_t r0,
                          size_t r1, size_t es)
{
    const gb_gemm *g = gc->g;
    const gb_opnd *o = &gc->op[GB_OPND_OUT];
    if (r1 > r0)
        gb_copy2d((char *)g->c + r0 * (size_t)g->ldc * es, (size_t)g->ldc,
                  base + o->off + r0 * o->cols * es, o->cols, r1 - r0, o->cols,
                  es);
}

/* What gemm_go did beside gemmd: ms from the submit to the last part
 * filled and to the reply, the rows of D copied out before it. */
typedef struct go_stats {
    double fill_ms, reply_ms;
    size_t rows;
} go_stats;

/* Runs op: B and A staged by parts after the request is out when gc says
 * so (C is staged: the counter goes to 1 first), and D's rows copied out
 * as gemmd says they land when gc drains (their count in st->rows). */
static int gemm_go(gemm_client *c, gemm_buffer *buf, const gemm_call *gc,
                   const gemm_op *op, gemm_timings *tm, go_stats *st)
{
    *st = (go_stats){0, 0, 0};
    if (gc->fill_parts < 2 && !gc->drain)
        return gemm_run(c, op, tm);
    char *base = gemm_buffer_data(buf);
    uint64_t *ctr = (uint64_t *)(void *)(base + gc->fill_off);
    uint64_t *dw = (uint64_t *)(void *)(base + gc->drain_off);
    gemm_overlap ov = {.buf = buf,
                       .fill_parts = gc->fill_parts,
                       .fill_offset = gc->fill_off,
                       .drain = gc->drain,
                       .drain_offset = gc->drain_off};
    __atomic_store_n(ctr, 1, __ATOMIC_RELEASE);
    __atomic_store_n(dw, 0, __ATOMIC_RELEASE);
    gemm_request *rq;
    int rv = gemm_submit_overlapped(c, op, &ov, &rq);
    if (rv != GEMM_OK)
        return rv;
    double t0 = gb_ms_now();
    size_t es = gb_esize(gc->g->t);
    for (unsigned part = 0; part < gc->fill_parts; part++) {
        copy_part(gc, base, part, es);
        __atomic_store_n(ctr, 2 + (uint64_t)part, __ATOMIC_RELEASE);
    }
    st->fill_ms = gb_ms_now() - t0;
    size_t done = 0, m = (size_t)gc->g->m;
    while (gc->drain && !gemm_request_done(rq)) {
        uint64_t v = __atomic_load_n(dw, __ATOMIC_ACQUIRE);
        size_t rows = v < m ? (size_t)v : m;
        if (rows > done) {
            copy_rows_out(gc, base, done, rows, es);
            done = rows;
        } else {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
    rv = gemm_wait(rq, tm);
    st->reply_ms = gb_ms_now() - t0;
    st->rows = done;
    return rv;
}

/* The matrix gemmd is to use for o: in place, or staged at its offset in
 * buf (tight), copied there first when copy_in; a backed-up output is
 * copied there and used in place. */
static gemm_matrix place(gb_opnd *o, gemm_buffer *buf, bool copy_in, size_t es)
{
    if (o->in_place && !o->backup)
        return o->m;
    if (copy_in)
        gb_copy2d((char *)gemm_buffer_data(buf) + o->off, o->cols, o->p, o->ld,
                  o->rows, o->cols, es);
    return o->in_place ? o->m : (gemm_matrix){buf, o->off, 0, 0};
}

/* After a failed call: a backed-up C's old value back over what gemmd
 * may have written. */
static void gemm_restore(gemm_buffer *buf, const void *arg)
{
    const gemm_call *gc = arg;
    const gb_opnd *o = &gc->op[GB_OPND_OUT];
    gb_copy2d((void *)o->p, o->ld, (const char *)gemm_buffer_data(buf) + o->off,
              o->cols, o->rows, o->cols, gb_esize(gc->g->t));
}

/* "A B D" of the operands in place, for messages. */
static void in_place_names(const gb_opnd *op, const char *names, char *out,
                           size_t len)
{
    size_t k = 0;
    for (int i = 0; i < GB_NOPND && k + 3 < len; i++)
        if (op[i].p != NULL && op[i].in_place) {
            if (k > 0)
                out[k++] = ' ';
            out[k++] = names[i];
        }
    out[k] = '\0';
    if (k == 0)
        snprintf(out, len, "none");
}

/* A GEMM with A, B and (beta != 0) C staged into buf, packed tightly,
 * unless in place in a zero-copy region; run with C in place as D; a
 * staged D copied back. */
static int gemm_staged(gemm_client *c, gemm_buffer *buf, const void *arg)
{
    gemm_call *gc = (gemm_call *)arg;
    const gb_gemm *g = gc->g;
    const gb_config *cfg = gb_cfg();
    size_t es = gb_esize(g->t);
    bool beta0 = gb_is_zero(g->t, g->beta);
    double t0 = gb_ms_now();
    if (gc->call->fresh) {
        /* gemmd pins a new buffer in the background (unless it lent a
         * spare, pinned ahead), and until it is pinned a request waits for
         * its whole fill anyway: copied first, the pin runs beside the
         * copies (the first dgemm 4096 of a fresh process 138-149 ms
         * against 160-184 filled, H200) */
        gc->fill_parts = 0;
        gc->drain = false;
    }

    gemm_op op;
    gemm_dtype ty = gb_wire_type(g->t);
    gemm_op_init(&op, (uint64_t)g->m, (uint64_t)g->n, (uint64_t)g->k, ty, ty);
    op.trans_a = g->opa != 'N';
    op.conj_a = g->opa == 'C';
    op.trans_b = g->opb != 'N';
    op.conj_b = g->opb == 'C';
    double al[2] = {0, 0}, be[2] = {0, 0};
    gb_scalar(g->t, g->alpha, al);
    gb_scalar(g->t, g->beta, be);
    gemm_op_set_scalars(&op, al[0], al[1], be[0], be[1]);
    op.a = place(&gc->op[GB_OPND_A], buf, gc->fill_parts < 2, es);
    op.b = place(&gc->op[GB_OPND_B], buf,
                 gc->fill_parts < 2 || gc->cut_b.parts == 0, es);
    op.d = place(&gc->op[GB_OPND_OUT], buf, !beta0, es);
    if (!beta0)
        op.c = op.d; /* in place: C is where D goes */
    op.timeout_ms = (uint32_t)cfg->queue_ms;
    if (g->t == GB_S)
        op.precision = cfg->tf32 ? GEMM_PRECISION_TF32 : GEMM_PRECISION_FP32;
    gemm_timings tm;
    go_stats st;
    double t_go = gb_ms_now();
    int rv = gemm_go(c, buf, gc, &op, &tm, &st);
    if (rv != GEMM_OK)
        return rv;
    double t1 = gb_ms_now();
    if (!gc->op[GB_OPND_OUT].in_place)
        copy_rows_out(gc, gemm_buffer_data(buf), st.rows, (size_t)g->m, es);
    if (cfg->verbose >= 2) {
        char zc[16];
        in_place_names(gc->op, "ABD", zc, sizeof(zc));
        gb_log(2,
               "%cgemm %lldx%lldx%lld op %c%c: gemmd %s, %.3f ms (daemon "
               "%.3f)%s%s; in place: %s; %.3f ms in all",
               "sdcz"[g->t], (long long)g -> m, (long long)g -> n,
               (long long)g -> k, g -> opa, g -> opb, tm.kernel,
               (double)tm.round_trip_us / 1e3, (double)tm.total_us / 1e3,
               gc->fill_parts > 1 ? ", B and A filled by parts beside gemmd"
                                  : "",
               gc->drain ? ", D drained" : "", zc, gb_ms_now() - t0);
        if (gc->fill_parts > 1 || gc->drain)
            gb_log(2,
                   "  beside gemmd: %u parts filled %.3f ms after the submit, "
                   "the reply at %.3f ms (staging before the submit %.3f ms), "
                   "%zu of %lld rows of D out before it, the rest %.3f ms",
                   gc->fill_parts, st.fill_ms, st.reply_ms, t_go - t0, st.rows,
                   (long long)g->m, gb_ms_now() - t1);
    }
    return GEMM_OK;
}

bool gb_offload(const gb_gemm *g)
{
    const gb_config *cfg = gb_cfg();
    double flops =
        (g->t >= GB_C ? 8.0 : 2.0) * (double)g->m * (double)g->n * (double)g->k;
    const double min = cfg->min_flops[g->t];
    if (min < 0 || flops < min) {
        if (min < 0)
            gb_log(2,
                   "%cgemm %lldx%lldx%lld on the CPU: GEMMBLAS_MIN_FLOPS is "
                   "never",
                   "sdcz"[g->t], (long long)g -> m, (long long)g -> n,
                   (long long)g -> k);
        else
            gb_log(2,
                   "%cgemm %lldx%lldx%lld on the CPU: %.3g flops, below "
                   "GEMMBLAS_MIN_FLOPS (%.3g)",
                   "sdcz"[g->t], (long long)g -> m, (long long)g -> n,
                   (long long)g -> k, flops, min);
        return false;
    }
    int npanels = gb_panel_count(g, flops);
    if (npanels > 1)
        return gb_offload_panels(g, npanels);
    size_t ar, ac, br, bc;
    stored(g->opa, g->m, g->k, &ar, &ac);
    stored(g->opb, g->k, g->n, &br, &bc);
    gemm_call gc = {.g = g};
    gc.op[GB_OPND_A] =
        (gb_opnd){.p = g->a, .rows = ar, .cols = ac, .ld = (size_t)g->lda};
    gc.op[GB_OPND_B] =
        (gb_opnd){.p = g->b, .rows = br, .cols = bc, .ld = (size_t)g->ldb};
    gc.op[GB_OPND_OUT] = (gb_opnd){.p = g->c,
                                   .rows = (size_t)g->m,
                                   .cols = (size_t)g->n,
                                   .ld = (size_t)g->ldc};
    gb_call call = {.ops = gc.op,
                    .es = gb_esize(g->t),
                    .prepare = gemm_prepare,
                    .run = gemm_staged,
                    .restore = gemm_restore,
                    .arg = &gc};
    gc.call = &call;
    snprintf(call.what, sizeof(call.what), "%cgemm %lldx%lldx%lld",
             "sdcz"[g->t], (long long)g -> m, (long long)g -> n,
             (long long)g -> k);
    return gb_offload_call(&call);
}
