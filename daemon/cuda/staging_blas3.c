/*
 * staging_blas3.c: a Blas3 job (symm .. trsm) on a device, with the
 * accounting of staging.c's GEMM path: device memory from the
 * stream-ordered pool (counted against --max-device-bytes), operands
 * staged tightly (cuBLAS takes any leading dimension), resident tensors
 * read where they are.
 *
 * The work is cut into panels that pipeline: copies in on one stream,
 * the kernel library's calls (gemmk_blas3: cuBLAS, and our GEMM for fp32
 * and complex64 updates) on the worker's, copies out on a third, so panel
 * i+1 comes in and panel i-1 goes out while panel i computes; every
 * copy in is queued before the first call. symm and hemm cut the output
 * along the dimension A does not touch (columns when A is on the left,
 * rows on the right): the panels are independent, A (its referenced
 * triangle) comes in first; where the kernel library says GEMMs pay
 * (gemmk_blas3_whole_pays: fp32, complex64), A is made whole on the
 * device and each panel is one GEMM. trsm and trmm are cut along the
 * dimension A touches (run_tri): each block's strip of A and block of B
 * come in in the order the blocks run; a trsm block is solved
 * left-looking (one GEMM as wide as B subtracts what the blocks before
 * it contribute, the routine solves the diagonal block), a trmm block is
 * the routine on the diagonal block plus one GEMM for the rest of its
 * strip (B staged apart from the output); the block goes out (a trsm per
 * independent panel of the other dimension, or right-looking blocks
 * inside such panels, keep the GEMMs as narrow as a panel: no faster
 * than cuBLAS's trsm). The rank updates cut C into block rows of which only the
 * referenced part moves: block row i is its diagonal block (the routine itself)
 * and its off-diagonal rectangle (GEMMK_GEMM3: op(A_i) op(A_j)^T, or two for
 * the 2k forms), and A comes in panel by panel in the order the blocks need it
 * (lower: from the top, upper: from the bottom). C comes in only where it is
 * read (beta != 0) and, always, the diagonal blocks, whose other
 * triangle goes back out as it came in.
 *
 * The reply's stages: copies in (start to the last copy in), kernel (to
 * the last call's end), copy out (to the last copy out's end), so they
 * add up to the job's device time. GEMMD_BLAS3_PANEL (environment, read
 * once, logged) sets the panel size in rows or columns (tests set it
 * small so that every routine runs cut); the default cuts into about 8.
 */
#include "cuda/staging_blas3.h"
#include "cuda/fill.h"
#include "cuda/rect.h"
#include "cuda/staging.h"
#include "log.h"
#include "validate_blas3.h"

#include <fill.h>
#include <gemm/types.h>
#include <gemm_kernels_blas3.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* One staged matrix: rows x cols, tight. */
typedef struct staged3 {
    void *dev;
    size_t bytes;
} staged3;

static int alloc3(cuda_worker *w, staged3 *s, uint64_t rows, uint64_t cols,
                  size_t es, char *msg, size_t len)
{
    s->bytes = rows * cols * es;
    int rv = cuda_dev_alloc(w, s->bytes, &s->dev, msg, len);
    if (rv != GEMM_OK)
        s->bytes = 0;
    return rv;
}

static void free3(cuda_worker *w, staged3 *s)
{
    cuda_dev_free(w, s->dev, s->bytes);
    s->dev = NULL;
}

static long long panel_knob;
static pthread_once_t panel_once = PTHREAD_ONCE_INIT;

static void panel_read(void)
{
    const char *e = getenv("GEMMD_BLAS3_PANEL");
    if (e != NULL && atoll(e) > 0) {
        panel_knob = atoll(e);
        gemmd_log(LOG_NOTICE,
                  "GEMMD_BLAS3_PANEL=%lld: level-3 panels of "
                  "%lld rows or columns",
                  panel_knob, panel_knob);
    }
}

/* Rows or columns per cut of a dimension dim: the knob when set, else
 * `part` rounded up to a multiple of 128 within [lo, hi]; at least so
 * many that there are at most CUDA_PANELS cuts. */
static int64_t cut_size(int64_t dim, int64_t part, int64_t lo, int64_t hi)
{
    pthread_once(&panel_once, panel_read);
    int64_t p = (part + 127) / 128 * 128;
    p = p < lo ? lo : p > hi ? hi : p;
    if (panel_knob > 0)
        p = panel_knob;
    int64_t least = (dim + CUDA_PANELS - 1) / CUDA_PANELS;
    return p < least ? least : p;
}

/* Rows or columns per panel of a dimension dim: about an eighth, at least
 * 512. */
static int64_t panel_size(int64_t dim)
{
    return cut_size(dim, (dim + 7) / 8, 512, INT64_MAX);
}

/* What one job's panels share. */
typedef struct plan3 {
    cuda_worker *w;
    gemmd_job *j;
    size_t es;
    const void *da, *db; /* A, B on the device */
    int64_t lda, ldb;    /* their leading dimensions there */
    void *dd;            /* the output, tight (ld ldd) */
    int64_t ldd;
    bool stage_a, stage_b; /* copied in by panels (not resident) */
    void *aw;              /* symm, hemm by GEMMs: A made whole */
    int64_t ldaw;
    gemmk_blas3_problem base;
    gemmk_result res;
    bool gated; /* copies in wait for the client's fill (fill.h) */
    int timed;  /* blocks of run_tri whose events tri_log may read */
    uint64_t queued_ns[CUDA_PANELS]; /* when block i's calls were queued */
} plan3;

/* The element at row r, column c of a device matrix at p (ld). */
static const void *at(const plan3 *q, const void *p, int64_t ld, int64_t r,
                      int64_t c)
{
    return (const char *)p + ((size_t)r * (size_t)ld + (size_t)c) * q->es;
}

static int call(plan3 *q, const gemmk_blas3_problem *p)
{
    int rv = gemmk_blas3(q->w->kctx, p, q->w->stream, &q->res);
    snprintf(q->j->ran, sizeof(q->j->ran), "%s",
             q->res.kernel != NULL ? q->res.kernel : "cublas");
    if (rv != GEMM_OK)
        snprintf(q->j->msg, sizeof(q->j->msg), "%s failed (%s): %.180s",
                 q->j->ran, gemm_strerror(rv), q->res.msg);
    return rv;
}

/* Rows [r0, r1) of op(X) for a rank update: rows of X (trans N) or its
 * columns (trans T/C), as a device pointer with X's leading dimension. */
static const void *rows_of(const plan3 *q, const void *x, int64_t ld,
                           int64_t r0)
{
    return q->j->op == VAL_OP_N ? at(q, x, ld, r0, 0) : at(q, x, ld, 0, r0);
}

/* Block row [r0, r1) of a rank update: the diagonal block by the routine,
 * the referenced rectangle beside it by GEMMs. */
static int rank_block(plan3 *q, int64_t r0, int64_t r1)
{
    gemmd_job *j = q->j;
    int64_t n = (int64_t)j->n, bs = r1 - r0;
    bool two = j->routine == VAL_SYR2K || j->routine == VAL_HER2K;
    bool her = j->routine == VAL_HERK || j->routine == VAL_HER2K;
    gemmk_blas3_problem p = q->base;
    p.n = bs;
    p.a = rows_of(q, q->da, q->lda, r0);
    p.b = two ? rows_of(q, q->db, q->ldb, r0) : NULL;
    p.c = (void *)at(q, q->dd, q->ldd, r0, r0);
    int rv = call(q, &p);
    if (rv != GEMM_OK)
        return rv;
    int64_t c0 = j->lower ? 0 : r1, c1 = j->lower ? r0 : n;
    if (c1 <= c0)
        return GEMM_OK;
    /* C[r0:r1, c0:c1] = alpha P_i Q_j^T (^H) [+ alpha' Q_i P_j^T] + beta C,
     * P = op(A), Q = op(B) (A again for syrk, herk) */
    gemmk_blas3_problem g = q->base;
    g.routine = GEMMK_GEMM3;
    g.m = bs;
    g.n = c1 - c0;
    g.trans = j->op; /* rows of op(X): X itself (N) or X^T/X^H */
    g.trans_b = j->op != VAL_OP_N ? VAL_OP_N : her ? VAL_OP_C : VAL_OP_T;
    g.c = (void *)at(q, q->dd, q->ldd, r0, c0);
    g.ldc = q->ldd;
    g.lda = q->lda;
    g.ldb = two ? q->ldb : q->lda;
    g.a = rows_of(q, q->da, q->lda, r0);
    g.b = rows_of(q, two ? q->db : q->da, g.ldb, c0);
    if (j->routine == VAL_HERK)
        g.alpha[1] = 0, g.beta[1] = 0;
    if (her)
        g.beta[1] = 0;
    if ((rv = call(q, &g)) != GEMM_OK || !two)
        return rv;
    g.a = rows_of(q, q->db, q->ldb, r0);
    g.lda = q->ldb;
    g.b = rows_of(q, q->da, q->lda, c0);
    g.ldb = q->lda;
    g.beta[0] = 1, g.beta[1] = 0;
    if (her)
        g.alpha[1] = -g.alpha[1]; /* conj(alpha) Q P^H */
    return call(q, &g);
}

/* Before rectangle r of the operand at src comes in (operands filled by
 * parts): the copies-in stream waits until the client has filled it. */
static int gate(plan3 *q, cuda_panels *x, const void *src, cuda_rect r)
{
    const gemmd_job *j = q->j;
    unsigned bit = gemm_fill_bit(j->routine, src == j->a   ? 0
                                             : src == j->b ? 1
                                                           : 2);
    const gemm_fill_cut *cut = &j->fill_cut;
    uint64_t need = 1;
    if ((cut->operands & bit) && r.rows > 0 && r.cols > 0) {
        uint64_t lo = (uint64_t)(cut->cols ? r.c : r.r);
        uint64_t hi = lo + (uint64_t)(cut->cols ? r.cols : r.rows);
        need = gemm_fill_need(cut, lo, hi);
    }
    return cuda_fill_gate(&q->w->fill, x->in, need, q->j->msg,
                          sizeof(q->j->msg));
}

/* Rectangle r of the host matrix src (ld lds) into the device matrix
 * dst (ld ldd), on the copies-in stream. */
static int put(plan3 *q, cuda_panels *x, void *dst, int64_t ldd,
               const void *src, int64_t lds, cuda_rect r)
{
    int rv = GEMM_OK;
    if (q->gated && (rv = gate(q, x, src, r)) != GEMM_OK)
        return rv;
    CK(cuda_copy_rect(x->in, dst, ldd, src, lds, r, q->es,
                      cudaMemcpyHostToDevice),
       q->j->msg, sizeof(q->j->msg));
fail:
    return rv;
}

/* Panel t of n has its copies in queued: its event marks their end (the
 * last panel's also the copies-in stage's). Every panel's copies are
 * queued before any call: a call that waits for the device on the host
 * (a workspace growing, an emulation's guard) then cannot hold back the
 * next panel's copies. */
static int panel_in(plan3 *q, cuda_panels *x, int t, int n)
{
    int rv = GEMM_OK;
    char *m = q->j->msg;
    size_t ml = sizeof(q->j->msg);
    if (t == n - 1)
        CK(cudaEventRecord(q->w->ev[1], x->in), m, ml);
    CK(cudaEventRecord(x->in_done[t], x->in), m, ml);
fail:
    return rv;
}

/* The worker's stream waits for panel t's copies in. */
static int panel_wait(plan3 *q, cuda_panels *x, int t)
{
    int rv = GEMM_OK;
    CK(cudaStreamWaitEvent(q->w->stream, x->in_done[t], 0), q->j->msg,
       sizeof(q->j->msg));
fail:
    return rv;
}

/* Panel t has its calls queued: rectangle r of the output goes out after
 * them, on the copies-out stream. */
static int panel_out(plan3 *q, cuda_panels *x, int t, cuda_rect r)
{
    int rv = GEMM_OK;
    char *m = q->j->msg;
    size_t ml = sizeof(q->j->msg);
    CK(cudaEventRecord(x->run_done[t], q->w->stream), m, ml);
    CK(cudaStreamWaitEvent(x->out, x->run_done[t], 0), m, ml);
    CK(cuda_copy_rect(x->out, q->j->d, (int64_t)q->j->shape.d.ld, q->dd, q->ldd,
                      r, q->es, cudaMemcpyDeviceToHost),
       m, ml);
    CK(cudaEventRecord(x->out_done[t], x->out), m, ml);
fail:
    return rv;
}

/* The rows or columns [r0, r1) of A's (or B's) panel for a rank update. */
static cuda_rect rank_panel(const gemmd_job *j, const val_matrix *m, int64_t r0,
                            int64_t r1)
{
    if (j->op == VAL_OP_N)
        return (cuda_rect){r0, 0, r1 - r0, (int64_t)m->cols};
    return (cuda_rect){0, r0, (int64_t)m->rows, r1 - r0};
}

/* The referenced part of block row [r0, r1) of a rank update's C. */
static cuda_rect rank_ref(const gemmd_job *j, int64_t r0, int64_t r1)
{
    int64_t n = (int64_t)j->n;
    return j->lower ? (cuda_rect){r0, 0, r1 - r0, r1}
                    : (cuda_rect){r0, r0, r1 - r0, n - r0};
}

/* The rank updates: block rows of C, in the order their A panels come. */
static int run_rank(plan3 *q, cuda_panels *x)
{
    int rv = GEMM_OK;
    gemmd_job *j = q->j;
    const val_matrix *sa = &j->shape.a, *sb = &j->shape.b, *sd = &j->shape.d;
    int64_t n = (int64_t)j->n, bs = panel_size(n);
    int np = (int)((n + bs - 1) / bs);
    bool two = j->routine == VAL_SYR2K || j->routine == VAL_HER2K;
    for (int t = 0; t < np; t++) {
        int i = j->lower ? t : np - 1 - t;
        int64_t r0 = i * bs, r1 = r0 + bs < n ? r0 + bs : n;
        if (q->stage_a &&
            (rv = put(q, x, (void *)q->da, q->lda, j->a, (int64_t)sa->ld,
                      rank_panel(j, sa, r0, r1))) != GEMM_OK)
            return rv;
        if (two && q->stage_b &&
            (rv = put(q, x, (void *)q->db, q->ldb, j->b, (int64_t)sb->ld,
                      rank_panel(j, sb, r0, r1))) != GEMM_OK)
            return rv;
        cuda_rect diag = {r0, r0, r1 - r0, r1 - r0};
        if ((rv = put(q, x, q->dd, q->ldd, j->d, (int64_t)sd->ld,
                      j->has_c ? rank_ref(j, r0, r1) : diag)) != GEMM_OK ||
            (rv = panel_in(q, x, t, np)) != GEMM_OK)
            return rv;
    }
    for (int t = 0; t < np; t++) {
        int i = j->lower ? t : np - 1 - t;
        int64_t r0 = i * bs, r1 = r0 + bs < n ? r0 + bs : n;
        if ((rv = panel_wait(q, x, t)) != GEMM_OK ||
            (rv = rank_block(q, r0, r1)) != GEMM_OK ||
            (rv = panel_out(q, x, t, rank_ref(j, r0, r1))) != GEMM_OK)
            return rv;
    }
    return GEMM_OK;
}

/* The rows or columns per block of a trsm or trmm by blocks along A's
 * dimension dim: the knob, or about an eighth, three sixteenths in
 * complex128 (multiples of 128, 256 to 2048). At 8192 on the H200,
 * dtrsm's device time was 30 ms with blocks of 1024 against 42 / 34 /
 * 33 / 35 with 512 / 768 / 1536 / 2048, ztrsm's 57 ms with 1536 against
 * 61 / 64 / 65 / 62. complex64 takes the eighth: its updates run on the
 * fp32 emulation at 2-3x CGEMM's rate while the diagonal blocks stay on
 * cuBLAS's CUDA-core routine, so smaller blocks pay. */
static int64_t trsm_block(int64_t dim, gemm_dtype t)
{
    return cut_size(dim,
                    t == GEMM_COMPLEX128 ? (dim * 3 + 15) / 16 : (dim + 7) / 8,
                    256, 2048);
}

/* The stored rectangle of A holding op(A)[i0:i1, j0:j1]. */
static cuda_rect opa_rect(const gemmd_job *j, int64_t i0, int64_t i1,
                          int64_t j0, int64_t j1)
{
    if (j->op == VAL_OP_N)
        return (cuda_rect){i0, j0, i1 - i0, j1 - j0};
    return (cuda_rect){j0, i0, j1 - j0, i1 - i0};
}

/* Block i (in running order) of a trsm or trmm by blocks: its rows or
 * columns [k0, k1) of B, the other blocks of its strip of op(A) [d0, d1)
 * (solved before it, for trsm), and the rectangles of A (its strip) and
 * of B (its block) that come in for it. */
typedef struct tblock {
    int64_t k0, k1, d0, d1;
    cuda_rect ar, br;
} tblock;

static tblock tri_at(const gemmd_job *j, int64_t dim, int64_t bs, int nb,
                     bool fwd, int i)
{
    int64_t rows = (int64_t)j->m, cols = (int64_t)j->n;
    int b = fwd ? i : nb - 1 - i;
    tblock t;
    t.k0 = b * bs;
    t.k1 = t.k0 + bs < dim ? t.k0 + bs : dim;
    t.d0 = fwd ? 0 : t.k1;
    t.d1 = fwd ? t.k0 : dim;
    int64_t u0 = fwd ? 0 : t.k0, u1 = fwd ? t.k1 : dim; /* and block k */
    t.ar = j->right ? opa_rect(j, u0, u1, t.k0, t.k1)
                    : opa_rect(j, t.k0, t.k1, u0, u1);
    t.br = j->right ? (cuda_rect){0, t.k0, rows, t.k1 - t.k0}
                    : (cuda_rect){t.k0, 0, t.k1 - t.k0, cols};
    return t;
}

/* The GEMM of block t of a trsm or trmm by blocks, with the blocks
 * before it in its strip of op(A): trsm B_k = alpha B_k - op(A)_{k,done}
 * X_done (left; on the right X_done op(A)_{done,k}), X in the output;
 * trmm D_k += alpha op(A)_{k,done} B_done, B staged apart (q->db). */
static int tri_update(plan3 *q, const tblock *t, bool mm)
{
    const gemmd_job *j = q->j;
    /* what op(A)'s strip multiplies: the solved X (trsm), B (trmm) */
    const void *y = mm ? q->db : q->dd;
    int64_t ldy = mm ? q->ldb : q->ldd;
    gemmk_blas3_problem g = q->base;
    g.routine = GEMMK_GEMM3;
    g.trans = VAL_OP_N;
    g.trans_b = VAL_OP_N;
    g.k = t->d1 - t->d0;
    if (mm) {
        g.beta[0] = 1, g.beta[1] = 0;
    } else {
        g.alpha[0] = -1, g.alpha[1] = 0;
        g.beta[0] = j->alpha, g.beta[1] = j->alpha_im;
    }
    g.c = (void *)at(q, q->dd, q->ldd, t->br.r, t->br.c);
    g.ldc = q->ldd;
    if (j->right) { /* Y[:, done] op(A)[done, k] */
        g.m = (int64_t)j->m, g.n = t->k1 - t->k0;
        g.a = at(q, y, ldy, 0, t->d0);
        g.lda = ldy;
        cuda_rect r = opa_rect(j, t->d0, t->d1, t->k0, t->k1);
        g.b = at(q, q->da, q->lda, r.r, r.c);
        g.ldb = q->lda;
        g.trans_b = j->op;
    } else { /* op(A)[k, done] Y[done, :] */
        g.m = t->k1 - t->k0, g.n = (int64_t)j->n;
        cuda_rect r = opa_rect(j, t->k0, t->k1, t->d0, t->d1);
        g.a = at(q, q->da, q->lda, r.r, r.c);
        g.lda = q->lda;
        g.trans = j->op;
        g.b = at(q, y, ldy, t->d0, 0);
        g.ldb = ldy;
    }
    return call(q, &g);
}

/* Event e marks this point of the worker's stream (run_tri's timing). */
static int mark(plan3 *q, cudaEvent_t e)
{
    int rv = GEMM_OK;
    CK(cudaEventRecord(e, q->w->stream), q->j->msg, sizeof(q->j->msg));
fail:
    return rv;
}

/* At LOG_DEBUG, after the job: each block of run_tri's times from the
 * job's start (ms): its copies in done, its first call's start, its
 * GEMM done (the routine's start), its calls done, its copy out done,
 * and when the host had queued them (where a call waited on the host,
 * the device may have idled). */
static void tri_log(const plan3 *q, const cuda_panels *x, uint64_t t0)
{
    if (LOG_DEBUG > gemmd_log_level)
        return;
    for (int i = 0; i < q->timed; i++) {
        float ms[5] = {0};
        cudaEvent_t ev[5] = {x->in_done[i], x->run_start[i], x->step_done[i],
                             x->run_done[i], x->out_done[i]};
        for (int e = 0; e < 5; e++)
            if (cudaEventElapsedTime(&ms[e], q->w->ev[0], ev[e]) != cudaSuccess)
                ms[e] = -1;
        gemmd_log(LOG_DEBUG,
                  "%s block %d: in %.2f, start %.2f, gemm done %.2f, done "
                  "%.2f, out %.2f ms; queued by %.2f ms",
                  q->j->routine == VAL_TRMM ? "trmm" : "trsm", i, ms[0], ms[1],
                  ms[2], ms[3], ms[4], (q->queued_ns[i] - t0) / 1e6);
    }
}

/* trsm and trmm by blocks along A's dimension (rows of B when A is on the
 * left, columns on the right), in the order the triangle of op(A) takes
 * them (op(A) lower on the left, upper on the right: from the first;
 * else from the last). Every block's strip of A and block of B come in
 * at once, in that order. trsm, left-looking: one GEMM as wide as B
 * subtracts what the blocks solved before contribute, the routine solves
 * the diagonal block in place. trmm: the routine multiplies the diagonal
 * block into the output (B staged apart, read by later blocks), one GEMM
 * adds the rest of the strip. Each block goes out once done, so the
 * copies in of later blocks and out of earlier ones overlap its work. */
static int run_tri(plan3 *q, cuda_panels *x)
{
    int rv = GEMM_OK;
    gemmd_job *j = q->j;
    const val_matrix *sa = &j->shape.a, *sd = &j->shape.d;
    bool mm = j->routine == VAL_TRMM;
    int64_t dim = j->right ? (int64_t)j->n : (int64_t)j->m;
    int64_t bs = trsm_block(dim, (gemm_dtype)j->ab_type);
    int nb = (int)((dim + bs - 1) / bs);
    bool opl = j->lower == (j->op == VAL_OP_N); /* op(A) is lower */
    bool fwd = j->right ? !opl : opl;
    char tri_ran[32] = "", gemm_ran[32] = "";
    for (int i = 0; i < nb; i++) {
        tblock t = tri_at(j, dim, bs, nb, fwd, i);
        if ((q->stage_a && (rv = put(q, x, (void *)q->da, q->lda, j->a,
                                     (int64_t)sa->ld, t.ar)) != GEMM_OK) ||
            (rv = put(q, x, mm ? (void *)q->db : q->dd, mm ? q->ldb : q->ldd,
                      j->d, (int64_t)sd->ld, t.br)) != GEMM_OK ||
            (rv = panel_in(q, x, i, nb)) != GEMM_OK)
            return rv;
    }
    for (int i = 0; i < nb; i++) {
        tblock t = tri_at(j, dim, bs, nb, fwd, i);
        bool first = t.d1 <= t.d0;
        if ((rv = panel_wait(q, x, i)) != GEMM_OK ||
            (rv = mark(q, x->run_start[i])) != GEMM_OK)
            return rv;
        if (!first && !mm) {
            if ((rv = tri_update(q, &t, mm)) != GEMM_OK)
                return rv;
            snprintf(gemm_ran, sizeof(gemm_ran), "%s", j->ran);
        }
        if ((rv = mark(q, x->step_done[i])) != GEMM_OK)
            return rv;
        gemmk_blas3_problem p = q->base;
        p.m = t.br.rows;
        p.n = t.br.cols;
        p.a = at(q, q->da, q->lda, t.k0, t.k0);
        p.c = (void *)at(q, q->dd, q->ldd, t.br.r, t.br.c);
        if (mm) { /* out of place: B_k in, D_k out */
            p.b = at(q, q->db, q->ldb, t.br.r, t.br.c);
            p.ldb = q->ldb;
        } else if (!first) {
            p.alpha[0] = 1, p.alpha[1] = 0; /* B_k scaled by the GEMM */
        }
        if ((rv = call(q, &p)) != GEMM_OK)
            return rv;
        snprintf(tri_ran, sizeof(tri_ran), "%s", j->ran);
        if (!first && mm) {
            if ((rv = tri_update(q, &t, mm)) != GEMM_OK)
                return rv;
            snprintf(gemm_ran, sizeof(gemm_ran), "%s", j->ran);
        }
        if ((rv = panel_out(q, x, i, t.br)) != GEMM_OK)
            return rv;
        q->queued_ns[i] = gemmd_now_ns();
        q->timed = i + 1;
    }
    if (gemm_ran[0] != '\0')
        snprintf(j->ran, sizeof(j->ran), "%s+%s", tri_ran, gemm_ran);
    return GEMM_OK;
}

/* Panel r of the output of symm or hemm as one GEMM on A made whole:
 * A r_B (A on the left) or r_B A (on the right). */
static int side_gemm(plan3 *q, cuda_rect r)
{
    const gemmd_job *j = q->j;
    gemmk_blas3_problem g = q->base;
    g.routine = GEMMK_GEMM3;
    g.c = (void *)at(q, q->dd, q->ldd, r.r, r.c);
    g.ldc = q->ldd;
    g.m = r.rows;
    g.n = r.cols;
    g.trans = VAL_OP_N;
    g.trans_b = VAL_OP_N;
    if (j->right) {
        g.k = (int64_t)j->n;
        g.a = at(q, q->db, q->ldb, r.r, 0);
        g.lda = q->ldb;
        g.b = q->aw;
        g.ldb = q->ldaw;
    } else {
        g.k = (int64_t)j->m;
        g.a = q->aw;
        g.lda = q->ldaw;
        g.b = at(q, q->db, q->ldb, 0, r.c);
        g.ldb = q->ldb;
    }
    return call(q, &g);
}

/* A made whole (q->aw) on the worker's stream, once its copies are in. */
static int make_whole(plan3 *q)
{
    gemmk_blas3_problem p = q->base;
    p.a = q->da;
    p.lda = q->lda;
    int rv = gemmk_blas3_whole(q->w->kctx, &p, q->aw, q->ldaw, q->w->stream,
                               &q->res);
    if (rv != GEMM_OK)
        snprintf(q->j->msg, sizeof(q->j->msg),
                 "blas3-whole failed (%s): %.180s", gemm_strerror(rv),
                 q->res.msg);
    return rv;
}

/* Panel i of symm or hemm's output (and B), cut at bs along dim:
 * columns when A is on the left, rows on the right. */
static cuda_rect side_panel(const gemmd_job *j, int64_t dim, int64_t bs, int i)
{
    int64_t p0 = i * bs, p1 = p0 + bs < dim ? p0 + bs : dim;
    return j->right ? (cuda_rect){p0, 0, p1 - p0, (int64_t)j->n}
                    : (cuda_rect){0, p0, (int64_t)j->m, p1 - p0};
}

/* symm, hemm: A, then independent panels of the output (and of B):
 * columns when A is on the left, rows on the right. Each panel is the
 * routine's call, or one GEMM on A made whole (q->aw). */
static int run_side(plan3 *q, cuda_panels *x)
{
    int rv = GEMM_OK;
    gemmd_job *j = q->j;
    const val_matrix *sa = &j->shape.a, *sb = &j->shape.b, *sd = &j->shape.d;
    bool whole = q->aw != NULL;
    int64_t rows = (int64_t)j->m, cols = (int64_t)j->n;
    int64_t dim = j->right ? rows : cols, bs = panel_size(dim);
    int np = (int)((dim + bs - 1) / bs);
    /* A by block rows, only what its triangle needs (the rest is never
     * read) */
    int64_t na = (int64_t)sa->rows, abs_ = panel_size(na);
    for (int64_t r0 = 0; q->stage_a && r0 < na; r0 += abs_) {
        int64_t r1 = r0 + abs_ < na ? r0 + abs_ : na;
        cuda_rect ar = j->lower ? (cuda_rect){r0, 0, r1 - r0, r1}
                                : (cuda_rect){r0, r0, r1 - r0, na - r0};
        if ((rv = put(q, x, (void *)q->da, q->lda, j->a, (int64_t)sa->ld,
                      ar)) != GEMM_OK)
            return rv;
    }
    for (int i = 0; i < np; i++) {
        cuda_rect r = side_panel(j, dim, bs, i);
        if ((q->stage_b && (rv = put(q, x, (void *)q->db, q->ldb, j->b,
                                     (int64_t)sb->ld, r)) != GEMM_OK) ||
            (j->has_c && (rv = put(q, x, q->dd, q->ldd, j->d, (int64_t)sd->ld,
                                   r)) != GEMM_OK) ||
            (rv = panel_in(q, x, i, np)) != GEMM_OK)
            return rv;
    }
    char gemm_ran[32] = "";
    for (int i = 0; i < np; i++) {
        cuda_rect r = side_panel(j, dim, bs, i);
        if ((rv = panel_wait(q, x, i)) != GEMM_OK ||
            (whole && i == 0 && (rv = make_whole(q)) != GEMM_OK))
            return rv;
        if (whole) {
            rv = side_gemm(q, r);
            snprintf(gemm_ran, sizeof(gemm_ran), "%s", j->ran);
        } else {
            gemmk_blas3_problem p = q->base;
            p.m = r.rows;
            p.n = r.cols;
            p.b = at(q, q->db, q->ldb, r.r, r.c);
            p.c = (void *)at(q, q->dd, q->ldd, r.r, r.c);
            rv = call(q, &p);
        }
        if (rv != GEMM_OK || (rv = panel_out(q, x, i, r)) != GEMM_OK)
            return rv;
    }
    if (whole)
        snprintf(j->ran, sizeof(j->ran), "whole+%s", gemm_ran);
    return GEMM_OK;
}

int cuda_stage_blas3(cuda_worker *w, gemmd_job *j)
{
    int rv = GEMM_OK;
    char *m = j->msg;
    size_t ml = sizeof(j->msg);
    const val_matrix *sa = &j->shape.a, *sb = &j->shape.b, *sd = &j->shape.d;
    size_t es = gemm_dtype_size(j->ab_type);
    bool rank = j->routine >= VAL_SYRK && j->routine <= VAL_HER2K;
    staged3 a = {0}, b = {0}, d = {0};
    bool started = false, following = false;
    cuda_panels *x = &w->panels;
    gemmk_blas3_problem kind = {
        .routine = j->routine,
        .dtype = (gemm_dtype)j->ab_type,
        .alpha = {j->alpha, j->alpha_im},
    };
    /* symm, hemm as GEMMs on A made whole: A staged (or copied from a
     * resident A) whole; trmm's B staged apart from its output (blocks
     * of B are read after the output's blocks are written) */
    bool whole = gemmk_blas3_whole_pays(w->kctx, &kind);
    bool tri_b = j->routine == VAL_TRMM;
    if (((!j->a_dev || whole) &&
         (rv = alloc3(w, &a, sa->rows, sa->cols, es, m, ml))) ||
        (j->b != NULL && !j->b_dev &&
         (rv = alloc3(w, &b, sb->rows, sb->cols, es, m, ml))) ||
        (tri_b && (rv = alloc3(w, &b, sd->rows, sd->cols, es, m, ml))) ||
        (rv = alloc3(w, &d, sd->rows, sd->cols, es, m, ml)))
        goto fail;
    plan3 q = {
        .w = w,
        .j = j,
        .es = es,
        .da = j->a_dev ? j->a : a.dev,
        .db = tri_b          ? b.dev
              : j->b == NULL ? NULL
              : j->b_dev     ? j->b
                             : b.dev,
        .lda = j->a_dev ? (int64_t)j->lda : (int64_t)sa->cols,
        .ldb = tri_b          ? (int64_t)sd->cols
               : j->b == NULL ? 0
               : j->b_dev     ? (int64_t)j->ldb
                              : (int64_t)sb->cols,
        .dd = d.dev,
        .ldd = (int64_t)sd->cols,
        .stage_a = !j->a_dev,
        .stage_b = tri_b || (j->b != NULL && !j->b_dev),
        .aw = whole ? a.dev : NULL,
        .ldaw = (int64_t)sa->cols,
    };
    q.base = (gemmk_blas3_problem){
        .routine = j->routine,
        .dtype = (gemm_dtype)j->ab_type,
        .right = j->right,
        .lower = j->lower,
        .trans = j->op,
        .unit_diag = j->unit_diag,
        .m = (int64_t)j->m,
        .n = (int64_t)j->n,
        .k = (int64_t)j->k,
        .alpha = {j->alpha, j->alpha_im},
        .beta = {j->has_c ? j->beta : 0.0, j->has_c ? j->beta_im : 0.0},
        .a = q.da,
        .b = q.db,
        .c = d.dev,
        .lda = q.lda,
        .ldb = q.ldb,
        .ldc = q.ldd,
    };
    /* operands the client still fills: the copies wait for each part on
     * the GPU (pinned buffers), or the job for all of them here */
    if ((rv = cuda_fill_start(&w->fill, j, cuda_job_pinned(j), &following)) !=
        GEMM_OK)
        goto fail;
    q.gated = following;
    /* the copy streams start after the pool's allocations */
    CK(cudaEventRecord(w->ev[0], w->stream), m, ml);
    const uint64_t t0 = gemmd_now_ns();
    started = true;
    CK(cudaStreamWaitEvent(x->in, w->ev[0], 0), m, ml);
    CK(cudaEventRecord(w->ev[1], x->in), m, ml); /* again after copies */
    if ((rv = rank ? run_rank(&q, x)
              : j->routine == VAL_TRSM || j->routine == VAL_TRMM
                  ? run_tri(&q, x)
                  : run_side(&q, x)) != GEMM_OK)
        goto fail;
    CK(cudaEventRecord(w->ev[2], w->stream), m, ml);
    CK(cudaEventRecord(w->ev[3], x->out), m, ml);
    CK(cudaStreamWaitEvent(w->stream, w->ev[3], 0), m, ml);
    if (following) {
        following = false;
        if ((rv = cuda_fill_end(&w->fill, false, m, ml)) != GEMM_OK)
            goto fail;
    }
    free3(w, &a);
    free3(w, &b);
    free3(w, &d);
    CK(cudaStreamSynchronize(w->stream), m, ml);
    tri_log(&q, x, t0);
    return cuda_stage_times(w, j);
fail:
    if (following) { /* its waits released before the streams are */
        char why[200];
        cuda_fill_end(&w->fill, true, why, sizeof(why));
    }
    if (started) {
        /* nothing may still read or write the memory given back */
        cudaStreamSynchronize(x->in);
        cudaStreamSynchronize(x->out);
    }
    cudaStreamSynchronize(w->stream);
    free3(w, &a);
    free3(w, &b);
    free3(w, &d);
    cudaStreamSynchronize(w->stream);
    return rv;
}
