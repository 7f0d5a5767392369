/*
 * offload_gemm.c: a gemm through gemmd (gb_offload): the size policy
 * (GEMMBLAS_MIN_FLOPS), then panels (panels.c) when they are on, else one
 * request on offload.c's connection with the thread's staging buffer:
 * operands in place (zero-copy) or packed into the buffer, C in place as
 * D, D copied back. Whatever fails, the caller's C is untouched and the
 * CPU computes (offload.c's rules).
 */
#include "gemmblas.h"

#include <gemm/gemm.h>

#include <stdio.h>

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
    gb_opnd op[GB_NOPND];
} gemm_call;

/* Which operands of the GEMM are in place (zerocopy.c), the staging
 * bytes of the others. */
static void gemm_prepare(gemm_client *c, uint64_t gen, gb_call *call)
{
    gemm_call *gc = call->arg;
    call->need = gb_zc_plan(c, gen, gc->op, gb_esize(gc->g->t),
                            !gb_is_zero(gc->g->t, gc->g->beta));
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
    op.a = place(&gc->op[GB_OPND_A], buf, true, es);
    op.b = place(&gc->op[GB_OPND_B], buf, true, es);
    op.d = place(&gc->op[GB_OPND_OUT], buf, !beta0, es);
    if (!beta0)
        op.c = op.d; /* in place: C is where D goes */
    op.timeout_ms = (uint32_t)cfg->queue_ms;
    if (g->t == GB_S)
        op.precision = cfg->tf32 ? GEMM_PRECISION_TF32 : GEMM_PRECISION_FP32;
    gemm_timings tm;
    int rv = gemm_run(c, &op, &tm);
    if (rv != GEMM_OK)
        return rv;
    if (!gc->op[GB_OPND_OUT].in_place)
        gb_copy2d(g->c, (size_t)g->ldc,
                  (char *)gemm_buffer_data(buf) + gc->op[GB_OPND_OUT].off,
                  (size_t)g->n, (size_t)g->m, (size_t)g->n, es);
    if (cfg->verbose >= 2) {
        char zc[16];
        in_place_names(gc->op, "ABD", zc, sizeof(zc));
        gb_log(2,
               "%cgemm %lldx%lldx%lld op %c%c: gemmd %s, %.3f ms (daemon "
               "%.3f); in place: %s",
               "sdcz"[g->t], (long long)g -> m, (long long)g -> n,
               (long long)g -> k, g -> opa, g -> opb, tm.kernel,
               (double)tm.round_trip_us / 1e3, (double)tm.total_us / 1e3, zc);
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
    snprintf(call.what, sizeof(call.what), "%cgemm %lldx%lldx%lld",
             "sdcz"[g->t], (long long)g -> m, (long long)g -> n,
             (long long)g -> k);
    return gb_offload_call(&call);
}
