/*
 * pipeline.c: a large staged GEMM in panels of D whose copies overlap its
 * kernels; see pipeline.h. The panel count is --gemm-panels (default 8):
 * enough that the first panel's wait is an eighth of the streamed
 * operand, few enough that each panel's kernel still fills the GPU (an
 * eighth of 8192 rows is 8 x 32 tiles of 128 x 256 on 132 SMs). A panel
 * is a multiple of 128 rows or columns (TMA alignment of every operand's
 * offset, whole kernel tiles) and no larger than one slice
 * (cuda_slice_budget), so the stop flag is checked as often as the
 * unpipelined path checks it.
 */
#include "cuda/pipeline.h"
#include "cuda/rect.h"
#include "log.h"
#include "slice.h"

#include <gemm/types.h>

#include <stdio.h>

/* GEMMs under this many flops (1290^3) run whole: their copies take tens
 * of microseconds, about what the panels' extra calls would cost. */
#define PIPE_MIN_FLOPS (1ull << 32)
#define PIPE_ALIGN     128

static unsigned panel_count; /* set once before the workers run */

void cuda_pipeline_init(unsigned panels)
{
    panel_count = panels;
}

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return (a + b - 1) / b;
}

/* A panel's block of an operand stored across it (op(A) transposed for
 * panels of rows, B not transposed for panels of columns) is copied in
 * rows narrower than the matrix: on the H200, 4 KiB rows moved at about
 * 0.7 of a whole matrix's rate (2048x16384x8192 bf16, panels of B's
 * columns). */
#define STRIDED_RATE 0.7

/* Whether job j (kp on the device) runs in panels of rows (op(A)
 * streams, B comes first) rather than of columns (op(B) streams, A
 * first); *ok false when it should not run in panels at all. Every panel
 * reads all of the operand that comes first: where the kernel rewrites it
 * before its main loop (gemmk_prepass: a K-major copy, or the splits of
 * 3xTF32 and Ozaki-II), that work is paid once per panel, so the panels
 * go the other way; when both operands are rewritten, only splits (whose
 * kernels run long enough to hide them) are cut, the smaller operand
 * coming first. An fp64 problem the kernel library would emulate whole,
 * with both inputs resident (nothing to stream in), runs whole: cut, it
 * would prepare B once a panel. Otherwise the copies decide, by a model
 * of the link: the
 * operand that comes first plus the larger of the streamed copies in and
 * D's copies out. */
static bool by_rows(cuda_worker *w, const gemmd_job *j, const gemmk_problem *kp,
                    bool *ok)
{
    unsigned pre = gemmk_prepass(kp, j->kernel[0] != '\0' ? j->kernel : NULL);
    *ok = true;
    if (j->a_dev && j->b_dev && j->kernel[0] == '\0' &&
        gemmk_auto_emulation_s(w->kctx, kp) > 0) {
        *ok = false; /* nothing to stream in: one emulation, one split */
        return true;
    }
    if (pre == GEMMK_PREPASS_A)
        return true;
    if (pre == GEMMK_PREPASS_B)
        return false;
    if (pre != 0) {
        bool splits = j->ab_type == GEMM_FP32
                          ? j->precision != GEMM_PRECISION_TF32
                          : j->ab_type != GEMM_INT8;
        *ok = splits;
        return j->n <= j->m;
    }
    double a = j->a_dev ? 0 : (double)j->m * j->k;
    double b = j->b_dev ? 0 : (double)j->k * j->n;
    double cd = (double)j->m * j->n; /* C's share is the same either way */
    double ra = a / (j->trans_a ? STRIDED_RATE : 1);
    double rb = b / (j->trans_b ? 1 : STRIDED_RATE);
    double rows = b + (ra > cd ? ra : cd), cols = a + (rb > cd ? rb : cd);
    return rows <= cols;
}

/* Rows (or columns) per panel of j, or 0 when it is not pipelined. */
static uint64_t panel_len(const gemmd_job *j, bool rows)
{
    uint64_t dim = rows ? j->m : j->n, flops = slice_flops(j);
    if (panel_count <= 1 || flops < PIPE_MIN_FLOPS)
        return 0;
    uint64_t len =
        ceil_div(ceil_div(dim, panel_count), PIPE_ALIGN) * PIPE_ALIGN;
    if (len < 2 * PIPE_ALIGN)
        len = 2 * PIPE_ALIGN;
    uint64_t budget = cuda_slice_budget(j), per = flops / dim;
    if (budget != 0 && per * len > budget)
        len = budget / per / PIPE_ALIGN * PIPE_ALIGN;
    if (len == 0)
        return 0;
    uint64_t np = ceil_div(dim, len);
    return np >= 2 && np <= CUDA_PANELS ? len : 0;
}

unsigned cuda_pipe_panels(cuda_worker *w, const gemmd_job *j,
                          const gemmk_problem *kp)
{
    bool ok, rows = by_rows(w, j, kp, &ok);
    uint64_t len = ok ? panel_len(j, rows) : 0;
    return len == 0 ? 0 : (unsigned)ceil_div(rows ? j->m : j->n, len);
}

/* The block of stored A holding op(A)'s rows of tile t (all of K). */
static cuda_rect a_rect(const gemmd_job *j, const slice_tile *t)
{
    if (j->trans_a) /* stored K x M */
        return (cuda_rect){0, t->r0, j->k, t->rows};
    return (cuda_rect){t->r0, 0, t->rows, j->k};
}

/* The block of stored B holding op(B)'s columns of tile t. */
static cuda_rect b_rect(const gemmd_job *j, const slice_tile *t)
{
    if (j->trans_b) /* stored N x K */
        return (cuda_rect){t->c0, 0, t->cols, j->k};
    return (cuda_rect){0, t->c0, j->k, t->cols};
}

static cuda_rect whole(const val_matrix *s)
{
    return (cuda_rect){0, 0, s->rows, s->cols};
}

int cuda_pipe_run(cuda_worker *w, gemmd_job *j, const cuda_pipe *p,
                  cuda_run_fn run)
{
    int rv = GEMM_OK;
    char *m = j->msg;
    size_t ml = sizeof(j->msg);
    cuda_panels *x = &w->panels;
    bool ok;
    const bool rows = by_rows(w, j, &p->kp, &ok);
    const uint64_t dim = rows ? j->m : j->n, len = panel_len(j, rows);
    const unsigned np = (unsigned)ceil_div(dim, len);
    const size_t es = gemm_dtype_size(j->ab_type);
    const size_t cs = gemm_dtype_size(j->cd_type);
    const gemmk_problem *kp = &p->kp;
    bool started = false;
    /* other clients' small GEMMs reach the device through the other
     * workers: this one runs no job between its panels */
    j->between = NULL;
    gemmd_log(LOG_DEBUG, "a %llux%llux%llu GEMM runs in %u panels of %llu %s",
              (unsigned long long)j->m, (unsigned long long)j->n,
              (unsigned long long)j->k, np, (unsigned long long)len,
              rows ? "rows" : "columns");
    /* the copy streams start after the pool's allocations */
    CK(cudaEventRecord(w->ev[0], w->stream), m, ml);
    started = true;
    CK(cudaStreamWaitEvent(x->in, w->ev[0], 0), m, ml);
    /* the operand every panel reads comes whole, first */
    if (rows && p->copy_b)
        CK(cuda_copy_rect(x->in, (void *)kp->b, (uint64_t)kp->ldb, j->b, j->ldb,
                          whole(&j->shape.b), es, cudaMemcpyHostToDevice),
           m, ml);
    if (!rows && p->copy_a)
        CK(cuda_copy_rect(x->in, (void *)kp->a, (uint64_t)kp->lda, j->a, j->lda,
                          whole(&j->shape.a), es, cudaMemcpyHostToDevice),
           m, ml);
    for (unsigned i = 0; i < np; i++) {
        uint64_t at = i * len, n = dim - at < len ? dim - at : len;
        slice_tile t =
            rows ? (slice_tile){at, n, 0, j->n} : (slice_tile){0, j->m, at, n};
        cuda_rect dr = {t.r0, t.c0, t.rows, t.cols};
        if (rows && p->copy_a)
            CK(cuda_copy_rect(x->in, (void *)kp->a, (uint64_t)kp->lda, j->a,
                              j->lda, a_rect(j, &t), es,
                              cudaMemcpyHostToDevice),
               m, ml);
        if (!rows && p->copy_b)
            CK(cuda_copy_rect(x->in, (void *)kp->b, (uint64_t)kp->ldb, j->b,
                              j->ldb, b_rect(j, &t), es,
                              cudaMemcpyHostToDevice),
               m, ml);
        if (p->copy_c)
            CK(cuda_copy_rect(x->in, p->c_dst, p->c_dst_ld, j->c, j->ldc, dr,
                              cs, p->c_kind),
               m, ml);
        if (i == np - 1)
            CK(cudaEventRecord(w->ev[1], x->in), m, ml);
        CK(cudaEventRecord(x->in_done[i], x->in), m, ml);
        if (i >= 2) { /* at most two panels' kernels in flight */
            CK(cudaEventSynchronize(x->run_done[i - 2]), m, ml);
            if (slice_yield(j, i - 1, np)) {
                rv = slice_stopped(j);
                goto fail;
            }
        }
        CK(cudaStreamWaitEvent(w->stream, x->in_done[i], 0), m, ml);
        CK(cudaEventRecord(x->run_start[i], w->stream), m, ml);
        gemmk_problem tp = cuda_tile_problem(j, kp, &t);
        if ((rv = run(w, j, &tp)) != GEMM_OK)
            goto fail;
        CK(cudaEventRecord(x->run_done[i], w->stream), m, ml);
        CK(cudaStreamWaitEvent(x->out, x->run_done[i], 0), m, ml);
        CK(cuda_copy_rect(x->out, j->d, j->ldd, kp->d, (uint64_t)kp->ldd, dr,
                          cs, cudaMemcpyDeviceToHost),
           m, ml);
    }
    CK(cudaEventRecord(w->ev[2], w->stream), m, ml);
    CK(cudaEventRecord(w->ev[3], x->out), m, ml);
    /* what the caller frees on w's stream is freed after every copy */
    CK(cudaStreamWaitEvent(w->stream, w->ev[3], 0), m, ml);
    return GEMM_OK;
fail:
    if (started) { /* nothing may still read or write the operands */
        cudaStreamSynchronize(x->in);
        cudaStreamSynchronize(x->out);
    }
    cudaStreamSynchronize(w->stream);
    return rv;
}

uint64_t cuda_pipe_kernel_ns(cuda_worker *w, unsigned panels)
{
    uint64_t ns = 0;
    for (unsigned i = 0; i < panels && i < CUDA_PANELS; i++) {
        float ms;
        if (cudaEventElapsedTime(&ms, w->panels.run_start[i],
                                 w->panels.run_done[i]) == cudaSuccess &&
            ms > 0)
            ns += (uint64_t)(ms * 1e6);
    }
    return ns;
}
