/*
 * pipeline.c: a large staged GEMM in blocks of D whose copies overlap its
 * kernels; see pipeline.h. The cut is pipe_choose's (pipe_plan.c) from
 * the rates this device measured; --gemm-panels (default 16) bounds the
 * panels a dimension (an eighth of 8192 rows by an eighth of 8192 columns
 * is 8 x 4 tiles of 128 x 256, or 64 of 128 x 128: the model derates
 * such blocks by their last partial wave). A panel is a multiple
 * of 128 rows or columns (TMA alignment of every operand's offset, whole
 * kernel tiles) and a block no larger than one slice (cuda_slice_budget),
 * so the stop flag is checked as often as the unpipelined path checks it.
 */
#include "cuda/pipeline.h"
#include "cuda/rect.h"
#include "log.h"
#include "slice.h"

#include <gemm/types.h>

#include <stdio.h>

/* GEMMs under this many flops (1290^3) run whole: their copies take tens
 * of microseconds, about what the blocks' extra calls would cost. */
#define PIPE_MIN_FLOPS (1ull << 32)

static unsigned panel_count; /* set once before the workers run */

void cuda_pipeline_init(unsigned panels)
{
    panel_count = panels;
}

/* What pipe_choose asks of a candidate cut: the job and its problem. */
typedef struct plan_ctx {
    const gemmd_job *j;
    const gemmk_problem *kp;
} plan_ctx;

/* Device memory bytes per ns a kernel's pre-pass moves (an H100 streams
 * about 3 TB/s; a pre-pass reaches about two thirds of it), and the bytes
 * it moves per byte of its operand: a K-major copy reads and writes it, a
 * split (3xTF32's two parts, Ozaki-II's residues) writes about twice it. */
#define PREPASS_BPNS  2000.0
#define COPY_TRAFFIC  2.0
#define SPLIT_TRAFFIC 3.0

/* What a block of cut p of c's job costs beyond its kernel's flops: a
 * block reads a row panel of op(A) and a column panel of op(B), so where
 * the kernel the block would run rewrites an operand before its main loop
 * (gemmk_prepass), that operand's panel is rewritten by every block that
 * reads it: A's nc times, B's nr times, where running whole rewrites each
 * once. The repeats, shared over the blocks. */
static double plan_cost(void *arg, const pipe_plan *p)
{
    const plan_ctx *c = arg;
    const gemmd_job *j = c->j;
    slice_tile t = {0, p->rlen, 0, p->clen};
    gemmk_problem bp = cuda_tile_problem(j, c->kp, &t);
    unsigned pre = gemmk_prepass(&bp, j->kernel[0] != '\0' ? j->kernel : NULL);
    if (pre == 0)
        return 0;
    const double es = (double)gemm_dtype_size(j->ab_type);
    const double traffic = pre == (GEMMK_PREPASS_A | GEMMK_PREPASS_B)
                               ? SPLIT_TRAFFIC
                               : COPY_TRAFFIC;
    double bytes = 0; /* rewritten beyond once each */
    if (pre & GEMMK_PREPASS_A)
        bytes += (double)(p->nc - 1) * (double)j->m * (double)j->k * es;
    if (pre & GEMMK_PREPASS_B)
        bytes += (double)(p->nr - 1) * (double)j->k * (double)j->n * es;
    return bytes * traffic / PREPASS_BPNS / ((double)p->nr * p->nc);
}

/* The kernels' tiles on w's GPU, for the partial-wave derating: 128 x
 * 256 for the 16-bit and int8 kernels, 128 x 128 for the others. */
static pipe_shape wave_shape(const cuda_worker *w, const gemmd_job *j)
{
    return (pipe_shape){.sms = w->dev->sms,
                        .tile_m = 128,
                        .tile_n = gemm_dtype_size(j->ab_type) <= 2 ? 256 : 128};
}

/* Bytes of C that j's pipeline copies over the link (a resident C of a
 * wide type is copied into D on the device). */
static double c_link_bytes(const gemmd_job *j)
{
    return j->has_c && !j->c_dev
               ? (double)j->m * (double)j->n * gemm_dtype_size(j->cd_type)
               : 0;
}

/* Everything but the rates that j's plan depends on. */
static void plan_key(const gemmd_job *j, uint64_t key[4])
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a of the kernel's name */
    for (const char *c = j->kernel; *c != '\0'; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ull;
    key[0] = j->m;
    key[1] = j->n;
    key[2] = j->k;
    key[3] = (uint64_t)j->ab_type | (uint64_t)j->cd_type << 4 |
             (uint64_t)j->precision << 8 | (uint64_t)j->trans_a << 12 |
             (uint64_t)j->trans_b << 13 | (uint64_t)j->a_dev << 14 |
             (uint64_t)j->b_dev << 15 | (uint64_t)j->has_c << 16 |
             (uint64_t)j->c_dev << 17 | (uint64_t)(j->moduli & 63) << 18 |
             (h << 32);
}

unsigned cuda_pipe_plan(cuda_worker *w, const gemmd_job *j,
                        const gemmk_problem *kp, pipe_plan *plan, bool *measure)
{
    *measure = false;
    if (panel_count <= 1 || slice_flops(j) < PIPE_MIN_FLOPS || j->crowded)
        return 0;
    /* both inputs resident and emulated whole: nothing to stream in, and
     * a cut would prepare B once a block */
    if (j->a_dev && j->b_dev && j->kernel[0] == '\0' &&
        gemmk_auto_emulation_s(w->kctx, kp) > 0)
        return 0;
    const double es = (double)gemm_dtype_size(j->ab_type);
    const double cs = (double)gemm_dtype_size(j->cd_type);
    plan_ctx c = {.j = j, .kp = kp};
    const pipe_shape wave = wave_shape(w, j);
    pipe_shape s = {
        .m = j->m,
        .n = j->n,
        .k = j->k,
        .flops = (double)slice_flops(j),
        .a_bytes = j->a_dev ? 0 : (double)j->m * (double)j->k * es,
        .b_bytes = j->b_dev ? 0 : (double)j->k * (double)j->n * es,
        .c_bytes = c_link_bytes(j),
        .d_bytes = (double)j->m * (double)j->n * cs,
        .cut_rows = true,
        .cut_cols = true,
        .max_panels = panel_count,
        .max_block_flops = cuda_slice_budget(j),
        .sms = wave.sms,
        .tile_m = wave.tile_m,
        .tile_n = wave.tile_n,
        .a_strided = j->trans_a,
        .b_strided = !j->trans_b,
        .block_cost = plan_cost,
        .arg = &c,
    };
    const unsigned cls = pipe_class(j->ab_type, j->precision);
    pipe_rates r = pipe_rates_get(&w->dev->rates, cls);
    uint64_t key[4];
    plan_key(j, key);
    bool fresh = !pipe_cache_get(&w->plans, key, &r, plan);
    if (fresh) {
        *plan = pipe_choose(&s, &r);
        pipe_cache_put(&w->plans, key, &r, plan);
    }
    unsigned blocks = plan->nr * plan->nc;
    if (blocks < 2)
        return 0;
    /* a new plan, or rates still defaults, are checked at once */
    *measure = pipe_measure(&w->plans) || fresh ||
               !pipe_rates_known(&w->dev->rates, cls);
    return blocks;
}

/* Row panel i of op(A) (all of K and of N) as a tile of D. */
static slice_tile row_panel(const gemmd_job *j, const pipe_plan *p, unsigned i)
{
    return (slice_tile){(uint64_t)i * p->rlen, pipe_len(j->m, p->rlen, i), 0,
                        j->n};
}

/* Column panel i of op(B) as a tile of D. */
static slice_tile col_panel(const gemmd_job *j, const pipe_plan *p, unsigned i)
{
    return (slice_tile){0, j->m, (uint64_t)i * p->clen,
                        pipe_len(j->n, p->clen, i)};
}

/* Block (r, c) of D. */
static slice_tile block(const gemmd_job *j, const pipe_plan *p, unsigned r,
                        unsigned c)
{
    slice_tile a = row_panel(j, p, r), b = col_panel(j, p, c);
    return (slice_tile){a.r0, a.rows, b.c0, b.cols};
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

static cuda_rect d_rect(const slice_tile *t)
{
    return (cuda_rect){t->r0, t->c0, t->rows, t->cols};
}

/* Rectangle r of stored B in on w's copies-in stream: gated, one copy a
 * part of B's cut along K (common/fill.h), each after its part is
 * final. */
static int copy_b(cuda_worker *w, gemmd_job *j, const cuda_pipe *p, cuda_rect r)
{
    int rv = GEMM_OK;
    const gemmk_problem *kp = &p->kp;
    const gemm_fill_cut *c = &j->fill_cut_b;
    const size_t es = gemm_dtype_size(j->ab_type);
    const bool cut = p->gated && c->parts > 0;
    const unsigned parts = cut ? c->parts : 1;
    for (unsigned q = 0; q < parts; q++) {
        cuda_rect part = r;
        if (cut) {
            uint64_t lo, hi;
            gemm_fill_range(c, q, &lo, &hi);
            if (hi <= lo)
                continue;
            if (c->cols) { /* stored N x K: columns of K */
                part.c = lo;
                part.cols = hi - lo;
            } else {
                part.r = lo;
                part.rows = hi - lo;
            }
            if ((rv = cuda_fill_gate(&w->fill, w->panels.in,
                                     gemm_fill_need(c, lo, hi), j->msg,
                                     sizeof(j->msg))) != GEMM_OK)
                return rv;
        }
        CK(cuda_copy_rect(w->panels.in, (void *)kp->b, (uint64_t)kp->ldb, j->b,
                          j->ldb, part, es, cudaMemcpyHostToDevice),
           j->msg, sizeof(j->msg));
    }
    return GEMM_OK;
fail:
    return rv;
}

int cuda_pipe_run(cuda_worker *w, gemmd_job *j, const cuda_pipe *p,
                  cuda_run_fn run)
{
    int rv = GEMM_OK;
    char *m = j->msg;
    size_t ml = sizeof(j->msg);
    cuda_panels *x = &w->panels;
    const pipe_plan *pl = &p->plan;
    const size_t es = gemm_dtype_size(j->ab_type);
    const size_t cs = gemm_dtype_size(j->cd_type);
    const gemmk_problem *kp = &p->kp;
    pipe_step st[PIPE_MAX_STEPS];
    unsigned ri[PIPE_MAX_BLOCKS], ci[PIPE_MAX_BLOCKS], nb = 0;
    const unsigned ns = pipe_order(pl, p->copy_a, p->copy_b, st);
    bool started = false;
    /* other clients' small GEMMs reach the device through the other
     * workers: this one runs no job between its blocks */
    j->between = NULL;
    gemmd_log(LOG_DEBUG,
              "a %llux%llux%llu GEMM runs in %u x %u blocks of %llux%llu "
              "(model: %.2f ms)",
              (unsigned long long)j->m, (unsigned long long)j->n,
              (unsigned long long)j->k, pl->nr, pl->nc,
              (unsigned long long)pl->rlen, (unsigned long long)pl->clen,
              pl->predicted_ns / 1e6);
    /* the copy streams start after the pool's allocations */
    CK(cudaEventRecord(w->ev[0], w->stream), m, ml);
    started = true;
    CK(cudaStreamWaitEvent(x->in, w->ev[0], 0), m, ml);
    /* filled by parts: C is final at the counter's 1 (B too when it is
     * not cut) */
    if (p->gated && (rv = cuda_fill_gate(&w->fill, x->in, 1, m, ml)) != GEMM_OK)
        goto fail;
    /* every copy in, back to back: panels in plan order, each followed by
     * the C blocks it readies; in_done[b] marks block b's inputs */
    for (unsigned s = 0; s < ns; s++) {
        if (st[s].b && p->copy_b) {
            slice_tile t = col_panel(j, pl, st[s].i);
            if ((rv = copy_b(w, j, p, b_rect(j, &t))) != GEMM_OK)
                goto fail;
        } else if (!st[s].b && p->copy_a) {
            slice_tile t = row_panel(j, pl, st[s].i);
            if (p->gated &&
                (rv = cuda_fill_gate(
                     &w->fill, x->in,
                     gemm_fill_need(&j->fill_cut, t.r0, t.r0 + t.rows), m,
                     ml)) != GEMM_OK)
                goto fail;
            CK(cuda_copy_rect(x->in, (void *)kp->a, (uint64_t)kp->lda, j->a,
                              j->lda, a_rect(j, &t), es,
                              cudaMemcpyHostToDevice),
               m, ml);
        }
        if (p->measure)
            CK(cudaEventRecord(x->step_done[s], x->in), m, ml);
        for (unsigned end = nb + pipe_ready(st, s, ri + nb, ci + nb); nb < end;
             nb++) {
            slice_tile t = block(j, pl, ri[nb], ci[nb]);
            if (p->copy_c)
                CK(cuda_copy_rect(x->in, p->c_dst, p->c_dst_ld, j->c, j->ldc,
                                  d_rect(&t), cs, p->c_kind),
                   m, ml);
            CK(cudaEventRecord(x->in_done[nb], x->in), m, ml);
        }
    }
    CK(cudaEventRecord(w->ev[1], x->in), m, ml);
    unsigned left[PIPE_MAX_BLOCKS]; /* blocks of each row not yet out */
    unsigned drained = 0;           /* rows of blocks all out */
    for (unsigned r = 0; r < pl->nr && r < PIPE_MAX_BLOCKS; r++)
        left[r] = pl->nc;
    for (unsigned b = 0; b < nb; b++) {
        if (b >= 2) { /* at most two blocks' kernels in flight */
            CK(cudaEventSynchronize(x->run_done[b - 2]), m, ml);
            if (slice_yield(j, b - 1, nb)) {
                rv = slice_stopped(j);
                goto fail;
            }
        }
        slice_tile t = block(j, pl, ri[b], ci[b]);
        CK(cudaStreamWaitEvent(w->stream, x->in_done[b], 0), m, ml);
        CK(cudaEventRecord(x->run_start[b], w->stream), m, ml);
        gemmk_problem tp = cuda_tile_problem(j, kp, &t);
        if ((rv = run(w, j, &tp)) != GEMM_OK)
            goto fail;
        CK(cudaEventRecord(x->run_done[b], w->stream), m, ml);
        CK(cudaStreamWaitEvent(x->out, x->run_done[b], 0), m, ml);
        CK(cuda_copy_rect(x->out, j->d, j->ldd, kp->d, (uint64_t)kp->ldd,
                          d_rect(&t), cs, cudaMemcpyDeviceToHost),
           m, ml);
        if (p->drain && --left[ri[b]] == 0 && ri[b] == drained) {
            while (drained < pl->nr && left[drained] == 0)
                drained++;
            uint64_t rows =
                drained == pl->nr ? j->m : (uint64_t)drained * pl->rlen;
            if ((rv = cuda_drain_post(x->out, p->drain_dev, rows, m, ml)) !=
                GEMM_OK)
                goto fail;
        }
        if (p->measure)
            CK(cudaEventRecord(x->out_done[b], x->out), m, ml);
    }
    CK(cudaEventRecord(w->ev[2], w->stream), m, ml);
    CK(cudaEventRecord(w->ev[3], x->out), m, ml);
    /* what the caller frees on w's stream is freed after every copy */
    CK(cudaStreamWaitEvent(w->stream, w->ev[3], 0), m, ml);
    return GEMM_OK;
fail:
    if (p->gated) { /* its waits released before the streams are */
        char why[200];
        cuda_fill_end(&w->fill, true, why, sizeof(why));
    }
    if (started) { /* nothing may still read or write the operands */
        cudaStreamSynchronize(x->in);
        cudaStreamSynchronize(x->out);
    }
    cudaStreamSynchronize(w->stream);
    return rv;
}

/* ms from event a to event b, 0 when unknown. */
static double span_ms(cudaEvent_t a, cudaEvent_t b)
{
    float ms;
    return cudaEventElapsedTime(&ms, a, b) == cudaSuccess && ms > 0 ? ms : 0;
}

/* Logs block b's timeline: ms since the start when its inputs were in,
 * its kernel ran and its part of D was out. */
static void log_block(cuda_worker *w, unsigned b, unsigned r, unsigned c)
{
    const cuda_panels *x = &w->panels;
    gemmd_log(
        LOG_DEBUG,
        "  block %u (%u, %u): in %.3f, kernel %.3f-%.3f, out %.3f ms", b, r, c,
        span_ms(w->ev[0], x->in_done[b]), span_ms(w->ev[0], x->run_start[b]),
        span_ms(w->ev[0], x->run_done[b]), span_ms(w->ev[0], x->out_done[b]));
}

/* Adds a copy of `bytes` that took ns, in direction d, to sample x, a
 * strided one (rows of a block narrower than the matrix) apart. */
static void add_copy(pipe_sample *x, int d, bool strided, double bytes,
                     double ns)
{
    if (ns <= 0)
        return;
    if (strided) {
        x->sbytes[d] += bytes;
        x->sns[d] += ns;
    } else {
        x->bytes[d] += bytes;
        x->ns[d] += ns;
    }
}

/* The last pipelined GEMM of this worker thread, measured after its
 * reply is out (cuda_pipe_learn): its job's scalars and plan. Its events
 * stay as they are until the worker's next job. */
static _Thread_local struct {
    bool pending;
    cuda_worker *w;
    gemmd_job j;
    cuda_pipe p;
} last;

uint64_t cuda_pipe_finish(cuda_worker *w, const gemmd_job *j,
                          const cuda_pipe *p)
{
    const unsigned nb = p->plan.nr * p->plan.nc;
    double kernel_ms = 0;
    for (unsigned b = 0; b < nb; b++)
        kernel_ms += span_ms(w->panels.run_start[b], w->panels.run_done[b]);
    last.pending = p->measure;
    last.w = w;
    last.j = *j;
    last.p = *p;
    return (uint64_t)(kernel_ms * 1e6);
}

void cuda_pipe_learn(void)
{
    if (!last.pending)
        return;
    last.pending = false;
    cuda_worker *w = last.w;
    const gemmd_job *j = &last.j;
    const cuda_pipe *p = &last.p;
    const cuda_panels *x = &w->panels;
    const pipe_plan *pl = &p->plan;
    pipe_step st[PIPE_MAX_STEPS];
    unsigned ri[PIPE_MAX_BLOCKS], ci[PIPE_MAX_BLOCKS], nb = 0;
    const unsigned ns = pipe_order(pl, p->copy_a, p->copy_b, st);
    const double flops = (double)slice_flops(j);
    const double mn = (double)j->m * (double)j->n;
    const double es = (double)gemm_dtype_size(j->ab_type);
    const double cs = (double)gemm_dtype_size(j->cd_type);
    const pipe_shape wave = wave_shape(w, j);
    pipe_sample smp = {0};
    /* the copies in ran back to back: each from the event before it */
    cudaEvent_t prev = w->ev[0];
    for (unsigned s = 0; s < ns; s++) {
        const bool b = st[s].b;
        slice_tile t =
            b ? col_panel(j, pl, st[s].i) : row_panel(j, pl, st[s].i);
        /* a gated copy's time includes the client's filling */
        if ((b ? p->copy_b : p->copy_a) && !p->gated) {
            bool strided =
                b ? !j->trans_b && pl->nc > 1 : j->trans_a && pl->nr > 1;
            double bytes = (double)(b ? t.cols : t.rows) * (double)j->k * es;
            add_copy(&smp, 0, strided, bytes,
                     span_ms(prev, x->step_done[s]) * 1e6);
        }
        prev = x->step_done[s];
        for (unsigned end = nb + pipe_ready(st, s, ri + nb, ci + nb); nb < end;
             nb++) {
            slice_tile q = block(j, pl, ri[nb], ci[nb]);
            if (p->copy_c && p->c_kind == cudaMemcpyHostToDevice && !p->gated)
                add_copy(&smp, 0, pl->nc > 1, (double)q.rows * q.cols * cs,
                         span_ms(prev, x->in_done[nb]) * 1e6);
            prev = x->in_done[nb];
        }
    }
    double kernel_ms = 0, last_out = 0;
    for (unsigned b = 0; b < nb; b++) {
        slice_tile t = block(j, pl, ri[b], ci[b]);
        kernel_ms += span_ms(x->run_start[b], x->run_done[b]);
        smp.wave_flops += flops * ((double)t.rows * (double)t.cols / mn) /
                          pipe_wave_eff(&wave, t.rows, t.cols);
        /* a copy out starts when its kernel and the copy before it are
         * done */
        double done = span_ms(w->ev[0], x->run_done[b]);
        double out = span_ms(w->ev[0], x->out_done[b]);
        add_copy(&smp, 1, pl->nc > 1, (double)t.rows * t.cols * cs,
                 (out - (done > last_out ? done : last_out)) * 1e6);
        last_out = out;
    }
    smp.kernel_ns = kernel_ms * 1e6 - pl->extra_ns * nb;
    /* the device's gap before a block whose inputs were in when the
     * kernel before it ended */
    for (unsigned b = 1; b < nb; b++) {
        double prev_end = span_ms(w->ev[0], x->run_done[b - 1]);
        if (span_ms(w->ev[0], x->in_done[b]) <= prev_end) {
            smp.gaps++;
            smp.gap_ns += span_ms(x->run_done[b - 1], x->run_start[b]) * 1e6;
        }
    }
    pipe_rates_learn(&w->dev->rates, pipe_class(j->ab_type, j->precision),
                     &smp);
    if (LOG_DEBUG <= gemmd_log_level) {
        double in_ms = span_ms(w->ev[0], w->ev[1]);
        gemmd_log(LOG_DEBUG,
                  "the %u x %u blocks took %.3f ms (model: %.3f): copies in "
                  "%.3f ms (whole rows %.1f GB/s, strided %.1f GB/s), out "
                  "%.1f GB/s (strided %.1f), kernels %.3f ms (%.1f TFLOP/s "
                  "in full waves), %.1f us between blocks",
                  pl->nr, pl->nc, span_ms(w->ev[0], w->ev[3]),
                  pl->predicted_ns / 1e6, in_ms,
                  smp.ns[0] > 0 ? smp.bytes[0] / smp.ns[0] : 0,
                  smp.sns[0] > 0 ? smp.sbytes[0] / smp.sns[0] : 0,
                  smp.ns[1] > 0 ? smp.bytes[1] / smp.ns[1] : 0,
                  smp.sns[1] > 0 ? smp.sbytes[1] / smp.sns[1] : 0, kernel_ms,
                  kernel_ms > 0 ? smp.wave_flops / kernel_ms / 1e9 : 0,
                  smp.gaps > 0 ? smp.gap_ns / smp.gaps / 1e3 : 0);
        for (unsigned b = 0; b < nb; b++)
            log_block(w, b, ri[b], ci[b]);
    }
}
