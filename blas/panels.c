/*
 * panels.c: a large GEMM through gemmd in row panels, so that the staging
 * copies overlap the daemon's work instead of preceding and following it.
 *
 * The row-major problem (gemmblas.h) is cut along its m rows into P
 * panels (GEMMBLAS_PANELS, fewer when a panel would fall below
 * GEMMBLAS_PANEL_MIN_FLOPS). A panel's rows of op(A), C and D are a
 * contiguous block of rows of A (or of columns, when A is transposed)
 * and of C: plain 2-D copies. The shared operand B is staged once and
 * uploaded as a resident tensor, so that the daemon moves it to the GPU
 * once, not once a panel; the upload runs on a helper thread while the
 * first panels are copied in. Where the upload is refused (the daemon's
 * memory cap) every panel reads B from the buffer instead.
 *
 * The thread's buffer holds B, then GEMMBLAS_PANELS_INFLIGHT slots, each
 * a panel's A and its C/D rows. Panel i is copied into slot i mod slots
 * and submitted (gemm_submit) once fewer than that many are in flight;
 * the oldest is waited for (gemm_wait) and its D copied back to the
 * caller's C while the later ones run.
 *
 * Failures (offload.c's rules hold: never an abort, no wait past the
 * timeouts): at the first failed panel no more are submitted; those in
 * flight are waited for (each within the request timeout), and of them
 * only the ones before the failed panel are copied back. C's rows up to
 * the first failed panel are then gemmd's result, the rows from it on
 * are still the caller's: the CPU BLAS computes those (gb_offload_panels)
 * or, when no row was written, the whole call, after offload.c's one
 * retry on a new connection. An ABANDONED panel drops the buffer like any
 * abandoned request (the daemon may still write its slot).
 */
#include "gemmblas.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Offsets in the buffer are kept to this alignment (whole pages: the
 * copies and the daemon's DMA start on a page). */
#define GB_PANEL_ALIGN 4096u
/* A panel of more rows than this has a multiple of them: gemmd's kernels
 * cover D in tiles of 128 rows. */
#define GB_PANEL_ROWS 128u
/* The most slots (GEMMBLAS_PANELS_INFLIGHT's bound). */
#define GB_MAX_SLOTS 16

int gb_panel_count(const gb_gemm *g, double flops)
{
    const gb_config *cfg = gb_cfg();
    if (cfg->panels <= 1)
        return 1;
    size_t min_bytes;
    const char *why_off;
    if (gb_zc_on(&min_bytes, &why_off))
        return 1; /* operands in place need no staging to overlap */
    double p = cfg->panels;
    if (cfg->panel_min_flops > 0 && flops / cfg->panel_min_flops < p)
        p = flops / cfg->panel_min_flops;
    if (p > (double)g->m)
        p = (double)g->m;
    return p < 2 ? 1 : (int)p;
}

/* The call and how it is laid out in the buffer. */
typedef struct panel_call {
    const gb_gemm *g;
    int npanels, slots;
    int64_t rows_per;     /* rows of a panel (the last may have fewer) */
    size_t b_bytes;       /* B staged at offset 0 */
    size_t slot0, a_off;  /* first slot's offset; A's offset in a slot */
    size_t d_off, stride; /* D's offset in a slot; bytes between slots */
    int64_t done_rows;    /* rows of C written with gemmd's result */
    bool tensor;          /* B was uploaded */
    /* where the time went (ms), for GEMMBLAS_VERBOSE=2: B's copy, the
     * first slots' copies, the wait for the upload after them, the
     * later panels' copies in, D's copies out, waits for panels */
    double b_ms, prefill_ms, upload_wait_ms, in_ms, out_ms, wait_ms;
    gb_call *call; /* its partial is set when rows were written */
} panel_call;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Panel i's first row and its row count. */
static void panel_rows(const panel_call *pc, int i, int64_t *r0, int64_t *n)
{
    *r0 = (int64_t)i * pc->rows_per;
    int64_t end = *r0 + pc->rows_per;
    *n = (end > pc->g->m ? pc->g->m : end) - *r0;
}

/* The upload of B, on a helper thread. */
typedef struct upload {
    gemm_client *c;
    gemm_matrix src;
    uint64_t rows, cols;
    gemm_dtype t;
    uint64_t id;
    int rv;
    char msg[256];
} upload;

static void *upload_main(void *arg)
{
    upload *u = arg;
    u->rv = gemm_tensor_upload(u->c, &u->src, u->rows, u->cols, u->t, &u->id);
    if (u->rv != GEMM_OK)
        snprintf(u->msg, sizeof(u->msg), "%s", gemm_last_error_message());
    return NULL;
}

/* How bad an error is for what follows: 3 the connection, 2 the buffer,
 * 1 this call only. The worst one is what the call returns. */
static int severity(int rv)
{
    switch (rv) {
    case GEMM_OK:
        return 0;
    case GEMM_ERR_CLOSED:
    case GEMM_ERR_CONNECT:
    case GEMM_ERR_PROTOCOL:
    case GEMM_ERR_VERSION:
    case GEMM_ERR_SHUTDOWN:
        return 3;
    case GEMM_ERR_ABANDONED:
    case GEMM_ERR_BUFFER_FAULT:
    case GEMM_ERR_NO_BUFFER:
        return 2;
    default:
        return 1;
    }
}

static void note(int *err, int rv)
{
    if (severity(rv) > severity(*err))
        *err = rv;
}

/* Copies panel i's A and (beta != 0) C rows into its slot, and fills
 * *op for it. */
static void panel_in(const panel_call *pc, gemm_buffer *buf, int i,
                     uint64_t tensor, gemm_op *op)
{
    const gb_gemm *g = pc->g;
    const gb_config *cfg = gb_cfg();
    size_t es = gb_esize(g->t);
    bool beta0 = gb_is_zero(g->t, g->beta);
    int64_t r0, rows;
    panel_rows(pc, i, &r0, &rows);
    size_t slot = pc->slot0 + (size_t)(i % pc->slots) * pc->stride;
    char *base = gemm_buffer_data(buf);
    if (g->opa == 'N') /* rows r0.. of A (m x k) */
        gb_copy2d(base + slot + pc->a_off, (size_t)g->k,
                  (const char *)g->a + (size_t)r0 * (size_t)g->lda * es,
                  (size_t)g->lda, (size_t)rows, (size_t)g->k, es);
    else /* columns r0.. of A (k x m) */
        gb_copy2d(base + slot + pc->a_off, (size_t)rows,
                  (const char *)g->a + (size_t)r0 * es, (size_t)g->lda,
                  (size_t)g->k, (size_t)rows, es);
    if (!beta0)
        gb_copy2d(base + slot + pc->d_off, (size_t)g->n,
                  (const char *)g->c + (size_t)r0 * (size_t)g->ldc * es,
                  (size_t)g->ldc, (size_t)rows, (size_t)g->n, es);

    gemm_dtype ty = gb_wire_type(g->t);
    gemm_op_init(op, (uint64_t)rows, (uint64_t)g->n, (uint64_t)g->k, ty, ty);
    op->trans_a = g->opa != 'N';
    op->conj_a = g->opa == 'C';
    op->trans_b = g->opb != 'N';
    op->conj_b = g->opb == 'C';
    double al[2], be[2];
    gb_scalar(g->t, g->alpha, al);
    gb_scalar(g->t, g->beta, be);
    gemm_op_set_scalars(op, al[0], al[1], be[0], be[1]);
    op->a = (gemm_matrix){buf, slot + pc->a_off, 0, 0};
    op->b = tensor != 0 ? (gemm_matrix){NULL, 0, 0, tensor}
                        : (gemm_matrix){buf, 0, 0, 0};
    op->d = (gemm_matrix){buf, slot + pc->d_off, 0, 0};
    if (!beta0)
        op->c = op->d; /* in place: C is where D goes */
    op->timeout_ms = (uint32_t)cfg->queue_ms;
    if (g->t == GB_S)
        op->precision = cfg->tf32 ? GEMM_PRECISION_TF32 : GEMM_PRECISION_FP32;
}

/* Copies panel i's D from its slot to the caller's C. */
static void panel_out(const panel_call *pc, gemm_buffer *buf, int i)
{
    const gb_gemm *g = pc->g;
    size_t es = gb_esize(g->t);
    int64_t r0, rows;
    panel_rows(pc, i, &r0, &rows);
    size_t slot = pc->slot0 + (size_t)(i % pc->slots) * pc->stride;
    gb_copy2d((char *)g->c + (size_t)r0 * (size_t)g->ldc * es, (size_t)g->ldc,
              (char *)gemm_buffer_data(buf) + slot + pc->d_off, (size_t)g->n,
              (size_t)rows, (size_t)g->n, es);
}

/* Stages B, uploads it (helper thread) while the first slots fill, then
 * keeps up to pc->slots panels in flight. */
static int panels_run(gemm_client *c, gemm_buffer *buf, const void *arg)
{
    panel_call *pc = (panel_call *)arg;
    const gb_gemm *g = pc->g;
    size_t es = gb_esize(g->t);
    bool transb = g->opb != 'N';
    size_t br = (size_t)(transb ? g->n : g->k);
    size_t bc = (size_t)(transb ? g->k : g->n);
    double t0 = now_ms();
    gb_copy2d(gemm_buffer_data(buf), bc, g->b, (size_t)g->ldb, br, bc, es);
    double t1 = now_ms();
    pc->b_ms = t1 - t0;

    upload up = {.c = c,
                 .src = {buf, 0, 0, 0},
                 .rows = br,
                 .cols = bc,
                 .t = gb_wire_type(g->t)};
    /* the helper takes none of the program's signals (it inherits the
     * mask) */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t helper;
    bool threaded = pthread_create(&helper, NULL, upload_main, &up) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!threaded)
        upload_main(&up);

    gemm_request *req[GB_MAX_SLOTS];
    gemm_op ops[GB_MAX_SLOTS];
    int next = 0, head = 0, err = GEMM_OK, failed_at = pc->npanels;
    /* the first slots fill while B uploads */
    int prefill = pc->slots < pc->npanels ? pc->slots : pc->npanels;
    for (int i = 0; i < prefill; i++)
        panel_in(pc, buf, i, 0, &ops[i]);
    double t2 = now_ms();
    pc->prefill_ms = t2 - t1;
    if (threaded)
        pthread_join(helper, NULL);
    pc->upload_wait_ms = now_ms() - t2;
    if (up.rv == GEMM_OK) {
        pc->tensor = true;
    } else if (up.rv == GEMM_ERR_DEVICE_MEMORY || up.rv == GEMM_ERR_LIMIT ||
               up.rv == GEMM_ERR_BUSY || up.rv == GEMM_ERR_UNSUPPORTED ||
               up.rv == GEMM_ERR_TOO_LARGE) {
        gb_log(2, "%cgemm: B stays in the buffer (its upload: %s: %s)",
               "sdcz"[g->t], gemm_strerror(up.rv), up.msg);
    } else { /* a daemon that does not answer, or is gone: no panels */
        gb_log(1, "%cgemm: upload of B: %s: %s", "sdcz"[g->t],
               gemm_strerror(up.rv), up.msg);
        return up.rv; /* nothing written */
    }
    for (int i = 0; i < prefill; i++)
        if (pc->tensor)
            ops[i].b = (gemm_matrix){NULL, 0, 0, up.id};

    while (head < next || (next < pc->npanels && next < failed_at)) {
        while (next < failed_at && next < pc->npanels &&
               next - head < pc->slots) {
            int s = next % pc->slots;
            if (next >= prefill) {
                double ti = now_ms();
                panel_in(pc, buf, next, pc->tensor ? up.id : 0, &ops[s]);
                pc->in_ms += now_ms() - ti;
            }
            int rv = gemm_submit(c, &ops[s], &req[s]);
            if (rv != GEMM_OK) {
                note(&err, rv);
                failed_at = next;
                gb_log(1, "%cgemm panel %d of %d: gemmd: %s: %s", "sdcz"[g->t],
                       next + 1, pc->npanels, gemm_strerror(rv),
                       gemm_last_error_message());
                break;
            }
            next++;
        }
        if (head == next)
            break;
        double tw = now_ms();
        int rv = gemm_wait(req[head % pc->slots], NULL);
        double to = now_ms();
        pc->wait_ms += to - tw;
        if (rv == GEMM_OK && head < failed_at) {
            panel_out(pc, buf, head);
            pc->out_ms += now_ms() - to;
            int64_t r0, rows;
            panel_rows(pc, head, &r0, &rows);
            pc->done_rows = r0 + rows;
        } else if (rv != GEMM_OK) {
            note(&err, rv);
            if (head < failed_at) {
                failed_at = head;
                gb_log(1, "%cgemm panel %d of %d: gemmd: %s: %s", "sdcz"[g->t],
                       head + 1, pc->npanels, gemm_strerror(rv),
                       gemm_last_error_message());
            }
        }
        head++;
    }
    /* a lost connection took the tensor along; a daemon that did not
     * answer in time would make the free wait as long again: the tensor
     * then stays until the connection closes */
    bool unanswered = err == GEMM_ERR_TIMEOUT || err == GEMM_ERR_ABANDONED ||
                      err == GEMM_ERR_NOT_ANSWERING;
    if (pc->tensor && severity(err) < 3 && !unanswered)
        gemm_tensor_free(c, up.id);
    else if (pc->tensor && severity(err) < 3)
        gb_log(1,
               "%cgemm: B's tensor on gemmd stays until the connection "
               "closes (gemmd did not answer in time)",
               "sdcz"[g->t]);
    if (err != GEMM_OK && pc->done_rows > 0)
        pc->call->partial = true;
    return err;
}

bool gb_offload_panels(const gb_gemm *g, int npanels)
{
    const gb_config *cfg = gb_cfg();
    size_t es = gb_esize(g->t);
    panel_call pc = {.g = g, .npanels = npanels};
    pc.rows_per = (g->m + npanels - 1) / npanels;
    if (pc.rows_per > GB_PANEL_ROWS) /* whole tiles of gemmd's kernels */
        pc.rows_per = (int64_t)gb_align_up((size_t)pc.rows_per, GB_PANEL_ROWS);
    pc.npanels = (int)((g->m + pc.rows_per - 1) / pc.rows_per);
    pc.slots =
        cfg->panels_inflight < pc.npanels ? cfg->panels_inflight : pc.npanels;
    if (pc.slots > GB_MAX_SLOTS)
        pc.slots = GB_MAX_SLOTS;
    pc.b_bytes = (size_t)g->k * (size_t)g->n * es;
    pc.slot0 = gb_align_up(pc.b_bytes, GB_PANEL_ALIGN);
    pc.a_off = 0;
    pc.d_off =
        gb_align_up((size_t)pc.rows_per * (size_t)g->k * es, GB_PANEL_ALIGN);
    pc.stride = pc.d_off + gb_align_up((size_t)pc.rows_per * (size_t)g->n * es,
                                       GB_PANEL_ALIGN);
    gb_call call = {.need = pc.slot0 + (size_t)pc.slots * pc.stride,
                    .es = es,
                    .run = panels_run,
                    .arg = &pc};
    pc.call = &call;
    snprintf(call.what, sizeof(call.what), "%cgemm %lldx%lldx%lld",
             "sdcz"[g->t], (long long)g -> m, (long long)g -> n,
             (long long)g -> k);
    double t0 = now_ms();
    if (gb_offload_call(&call)) {
        gb_log(2,
               "%s op %c%c: gemmd, %d panels (%d in flight), B %s; %.3f ms: "
               "B copied in %.3f, first panels in %.3f, then the upload "
               "%.3f, later panels in %.3f, out %.3f, waits %.3f",
               call.what, g->opa, g->opb, pc.npanels, pc.slots,
               pc.tensor ? "uploaded once" : "in the buffer", now_ms() - t0,
               pc.b_ms, pc.prefill_ms, pc.upload_wait_ms, pc.in_ms, pc.out_ms,
               pc.wait_ms);
        return true;
    }
    if (pc.done_rows == 0)
        return false; /* C untouched: the CPU computes all of it */
    /* rows done_rows.. on the CPU, from the caller's C rows there */
    gb_gemm rest = *g;
    rest.m = g->m - pc.done_rows;
    rest.a = g->opa == 'N' ? (const char *)g->a +
                                 (size_t)pc.done_rows * (size_t)g->lda * es
                           : (const char *)g->a + (size_t)pc.done_rows * es;
    rest.c = (char *)g->c + (size_t)pc.done_rows * (size_t)g->ldc * es;
    gb_log(1, "%s: rows %lld.. on the CPU (gemmd wrote rows 0..%lld)",
           call.what, (long long)pc.done_rows, (long long)pc.done_rows - 1);
    gb_cpu_gemm(&rest);
    return true;
}
