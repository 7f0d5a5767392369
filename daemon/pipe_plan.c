/*
 * pipe_plan.c: the cut of a large staged GEMM into blocks whose copies
 * overlap its kernels, by a model of both; see pipe_plan.h.
 */
#include "pipe_plan.h"

#include <gemm/types.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Until a GPU has measured them: a PCIe 4 x16 link's practical rate
 * (bytes per ns; a PCIe 5 link moves twice it), kernels at about what
 * docs/kernel-notes.md measures on an H100 (flops per ns), and a launch
 * with its events. The first pipelined GEMM of a class replaces them. */
#define DEFAULT_LINK_BPNS 25.0
#define DEFAULT_BLOCK_NS  10000.0

/* Until measured: a copy in rows narrower than the matrix moves at about
 * this share of a whole matrix's rate (0.7 on the H200 for 4 KiB rows;
 * inside the H100's pipelines 0.6-0.8 for 8-16 KiB rows beside copies
 * the other way, docs/e2e-bench.md: the low end, so that a grid is taken
 * first only where it clearly pays). */
#define DEFAULT_STRIDED 0.6

static double default_flops_pns(int ab_type, bool tf32)
{
    switch (ab_type) {
    case GEMM_BF16:
    case GEMM_FP16:
        return 650e3;
    case GEMM_INT8:
        return 1000e3;
    case GEMM_FP32:
    case GEMM_COMPLEX64:
        return tf32 ? 300e3 : 100e3;
    default: /* fp64, complex128 */
        return 55e3;
    }
}

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return (a + b - 1) / b;
}

uint64_t pipe_len(uint64_t dim, uint64_t len, unsigned i)
{
    uint64_t at = (uint64_t)i * len;
    return at >= dim ? 0 : dim - at < len ? dim - at : len;
}

double pipe_wave_eff(const pipe_shape *s, uint64_t rows, uint64_t cols)
{
    if (s->sms == 0 || s->tile_m == 0 || s->tile_n == 0)
        return 1.0;
    uint64_t tiles = ceil_div(rows, s->tile_m) * ceil_div(cols, s->tile_n);
    uint64_t waves = ceil_div(tiles, s->sms);
    return waves == 0 ? 1.0 : (double)tiles / ((double)waves * s->sms);
}

unsigned pipe_order(const pipe_plan *p, double a_bytes, double b_bytes,
                    pipe_step *steps)
{
    unsigned i = 0, j = 0, n = 0;
    while (i < p->nr || j < p->nc) {
        bool a;
        if (i >= p->nr)
            a = false;
        else if (j >= p->nc)
            a = true;
        else if (a_bytes == 0 || b_bytes == 0)
            a = a_bytes == 0; /* what needs no copy is there first */
        else {
            /* i / nr against j / nc, in integers */
            uint64_t fa = (uint64_t)i * p->nc, fb = (uint64_t)j * p->nr;
            a = fa < fb || (fa == fb && p->nr <= p->nc);
        }
        steps[n++] = (pipe_step){.b = !a, .i = a ? i++ : j++};
    }
    return n;
}

unsigned pipe_ready(const pipe_step *steps, unsigned at, unsigned *ri,
                    unsigned *ci)
{
    const pipe_step s = steps[at];
    unsigned n = 0;
    for (unsigned y = 0; y < at; y++) {
        if (steps[y].b == s.b)
            continue;
        ri[n] = s.b ? steps[y].i : s.i;
        ci[n] = s.b ? s.i : steps[y].i;
        n++;
    }
    return n;
}

/* The rate of a copy at bpns: a share of it when strided. */
static double rate_of(double bpns, double share, bool strided)
{
    return strided ? bpns * share : bpns;
}

static double maxd(double a, double b)
{
    return a > b ? a : b;
}

double pipe_predict(const pipe_shape *s, const pipe_rates *r,
                    const pipe_plan *p)
{
    pipe_step st[PIPE_MAX_STEPS];
    unsigned ri[PIPE_MAX_STEPS], ci[PIPE_MAX_STEPS];
    const unsigned ns = pipe_order(p, s->a_bytes, s->b_bytes, st);
    const double mn = (double)s->m * (double)s->n;
    /* bytes per ns of each copy under this cut */
    const double f = r->strided;
    const double ra = rate_of(r->in_bpns, f, s->a_strided && p->nr > 1);
    const double rb = rate_of(r->in_bpns, f, s->b_strided && p->nc > 1);
    const double rc = rate_of(r->in_bpns, f, p->nc > 1);
    const double rd = rate_of(r->out_bpns, f, p->nc > 1);
    const double per_block = r->block_ns + p->extra_ns;
    double tin = 0, tk = 0, tout = 0;
    for (unsigned x = 0; x < ns; x++) {
        const bool b = st[x].b;
        uint64_t len = b ? pipe_len(s->n, p->clen, st[x].i)
                         : pipe_len(s->m, p->rlen, st[x].i);
        double share = (double)len / (double)(b ? s->n : s->m);
        tin += b ? s->b_bytes * share / rb : s->a_bytes * share / ra;
        unsigned nb = pipe_ready(st, x, ri, ci);
        for (unsigned y = 0; y < nb; y++) {
            uint64_t rows = pipe_len(s->m, p->rlen, ri[y]);
            uint64_t cols = pipe_len(s->n, p->clen, ci[y]);
            double area = (double)rows * (double)cols / mn;
            tin += s->c_bytes * area / rc;
            double kn = s->flops * area /
                            (r->flops_pns * pipe_wave_eff(s, rows, cols)) +
                        per_block;
            tk = maxd(tk, tin) + kn;
            tout = maxd(tout, tk) + s->d_bytes * area / rd;
        }
    }
    return tout;
}

/* The cut of a dimension of length dim into about want panels: the panel
 * length (a multiple of PIPE_ALIGN, at least two of them), or 0 when that
 * does not make want panels. */
static uint64_t cut_len(uint64_t dim, unsigned want)
{
    if (want == 1)
        return dim;
    uint64_t len = ceil_div(ceil_div(dim, want), PIPE_ALIGN) * PIPE_ALIGN;
    if (len < 2 * PIPE_ALIGN || ceil_div(dim, len) != want)
        return 0;
    return len;
}

/* Cuts of at most PIPE_MAX_BLOCKS blocks: sum over nr of 64 / nr is 280. */
#define PIPE_CANDIDATES 320

/* p with block_cost's charge (predicted again when there is one); false
 * when block_cost refuses it. */
static bool costed(const pipe_shape *s, const pipe_rates *r, pipe_plan *p)
{
    if (s->block_cost == NULL)
        return true;
    p->extra_ns = s->block_cost(s->arg, p);
    if (p->extra_ns < 0)
        return false;
    if (p->extra_ns > 0)
        p->predicted_ns = pipe_predict(s, r, p);
    return true;
}

static int by_time(const void *a, const void *b)
{
    double x = ((const pipe_plan *)a)->predicted_ns;
    double y = ((const pipe_plan *)b)->predicted_ns;
    return (x > y) - (x < y);
}

pipe_plan pipe_choose(const pipe_shape *s, const pipe_rates *r)
{
    pipe_plan whole = {.nr = 1, .nc = 1, .rlen = s->m, .clen = s->n};
    whole.predicted_ns = pipe_predict(s, r, &whole);
    const unsigned maxr = s->cut_rows ? s->max_panels : 1;
    const unsigned maxc = s->cut_cols ? s->max_panels : 1;
    const double mn = (double)s->m * (double)s->n;
    /* every cut's time without block_cost, which only adds: the cuts are
     * then tried fastest first, until one's lower bound is past the best
     * full time found (block_cost, which may ask the kernel library, is
     * asked for a few) */
    pipe_plan cand[PIPE_CANDIDATES];
    unsigned n = 0;
    for (unsigned nr = 1; nr <= maxr && nr <= PIPE_MAX_BLOCKS; nr++) {
        uint64_t rlen = cut_len(s->m, nr);
        if (rlen == 0)
            continue;
        for (unsigned nc = 1; nc <= maxc && nc <= PIPE_MAX_BLOCKS; nc++) {
            uint64_t clen = cut_len(s->n, nc);
            if (nr * nc > PIPE_MAX_BLOCKS)
                break;
            if (clen == 0 || nr * nc < 2)
                continue;
            if (s->max_block_flops != 0 &&
                s->flops * ((double)rlen * (double)clen / mn) >
                    (double)s->max_block_flops)
                continue;
            pipe_plan p = {.nr = nr, .nc = nc, .rlen = rlen, .clen = clen};
            p.predicted_ns = pipe_predict(s, r, &p);
            if (p.predicted_ns < whole.predicted_ns && n < PIPE_CANDIDATES)
                cand[n++] = p;
        }
    }
    qsort(cand, n, sizeof(cand[0]), by_time);
    pipe_plan best = whole;
    for (unsigned i = 0; i < n && cand[i].predicted_ns < best.predicted_ns;
         i++) {
        pipe_plan p = cand[i];
        if (!costed(s, r, &p))
            continue;
        if (p.predicted_ns < best.predicted_ns)
            best = p;
    }
    /* the plain cut, PIPE_PLAIN_PANELS panels of rows or of columns,
     * unless the model sees a clear gain elsewhere */
    pipe_plan plain = whole;
    for (int cols = 0; cols < 2; cols++) {
        if (!(cols ? s->cut_cols : s->cut_rows))
            continue;
        unsigned want = PIPE_PLAIN_PANELS < s->max_panels ? PIPE_PLAIN_PANELS
                                                          : s->max_panels;
        uint64_t len = cut_len(cols ? s->n : s->m, want);
        if (want < 2 || len == 0)
            continue;
        pipe_plan p = {.nr = cols ? 1 : want,
                       .nc = cols ? want : 1,
                       .rlen = cols ? s->m : len,
                       .clen = cols ? len : s->n};
        if (s->max_block_flops != 0 &&
            s->flops / want > (double)s->max_block_flops)
            continue;
        p.predicted_ns = pipe_predict(s, r, &p);
        if (costed(s, r, &p) && p.predicted_ns < plain.predicted_ns)
            plain = p;
    }
    if (plain.nr * plain.nc > 1 &&
        best.predicted_ns > (1 - PIPE_MIN_GAIN) * plain.predicted_ns)
        return plain;
    return best;
}

unsigned pipe_class(int ab_type, int precision)
{
    unsigned c = ((unsigned)ab_type % 16) * 2 +
                 (precision == GEMM_PRECISION_TF32 ? 1 : 0);
    return c % PIPE_CLASSES;
}

void pipe_rates_init(pipe_rates_table *t)
{
    pthread_mutex_init(&t->mu, NULL);
    for (int d = 0; d < 2; d++) {
        t->link_bpns[d] = DEFAULT_LINK_BPNS;
        t->link_measured[d] = false;
    }
    for (unsigned c = 0; c < PIPE_CLASSES; c++) {
        t->flops_pns[c] = default_flops_pns((int)(c / 2), c % 2 == 1);
        t->block_ns[c] = DEFAULT_BLOCK_NS;
        t->strided[c] = DEFAULT_STRIDED;
        t->measured[c] = t->block_measured[c] = false;
        t->strided_measured[c] = false;
    }
}

void pipe_rates_destroy(pipe_rates_table *t)
{
    pthread_mutex_destroy(&t->mu);
}

pipe_rates pipe_rates_get(pipe_rates_table *t, unsigned c)
{
    pthread_mutex_lock(&t->mu);
    pipe_rates r = {
        .in_bpns = t->link_bpns[0],
        .out_bpns = t->link_bpns[1],
        .strided = t->strided[c % PIPE_CLASSES],
        .flops_pns = t->flops_pns[c % PIPE_CLASSES],
        .block_ns = t->block_ns[c % PIPE_CLASSES],
    };
    pthread_mutex_unlock(&t->mu);
    return r;
}

/* A new measurement replaces the default, then moves the rate halfway. */
static void fold(double *rate, bool *measured, double v)
{
    if (!(v >= 0) || !isfinite(v))
        return;
    *rate = *measured ? 0.5 * (*rate + v) : v;
    *measured = true;
}

static bool some(double bytes, double ns)
{
    return bytes > 0 && ns > 0 && isfinite(bytes) && isfinite(ns);
}

void pipe_rates_learn(pipe_rates_table *t, unsigned c, const pipe_sample *s)
{
    pthread_mutex_lock(&t->mu);
    for (int d = 0; d < 2; d++)
        if (some(s->bytes[d], s->ns[d]))
            fold(&t->link_bpns[d], &t->link_measured[d],
                 s->bytes[d] / s->ns[d]);
    /* the strided copies' share of the whole-row rate: their time at
     * that rate over the time they took, both directions */
    double ideal = 0, took = 0;
    for (int d = 0; d < 2; d++)
        if (some(s->sbytes[d], s->sns[d])) {
            ideal += s->sbytes[d] / t->link_bpns[d];
            took += s->sns[d];
        }
    if (took > 0)
        fold(&t->strided[c % PIPE_CLASSES],
             &t->strided_measured[c % PIPE_CLASSES],
             fmin(1.0, fmax(0.05, ideal / took)));
    if (some(s->wave_flops, s->kernel_ns))
        fold(&t->flops_pns[c % PIPE_CLASSES], &t->measured[c % PIPE_CLASSES],
             s->wave_flops / s->kernel_ns);
    if (s->gaps > 0 && s->gap_ns >= 0 && isfinite(s->gap_ns))
        fold(&t->block_ns[c % PIPE_CLASSES],
             &t->block_measured[c % PIPE_CLASSES], s->gap_ns / s->gaps);
    pthread_mutex_unlock(&t->mu);
}

bool pipe_rates_known(pipe_rates_table *t, unsigned c)
{
    pthread_mutex_lock(&t->mu);
    bool k = t->link_measured[0] && t->measured[c % PIPE_CLASSES];
    pthread_mutex_unlock(&t->mu);
    return k;
}

bool pipe_measure(pipe_cache *c)
{
    return c->runs++ % PIPE_MEASURE_EVERY == 0;
}

static bool near(double a, double b)
{
    return fabs(a - b) <= PIPE_CACHE_DRIFT * fabs(b);
}

static bool rates_near(const pipe_rates *a, const pipe_rates *b)
{
    return near(a->in_bpns, b->in_bpns) && near(a->out_bpns, b->out_bpns) &&
           near(a->strided, b->strided) && near(a->flops_pns, b->flops_pns) &&
           near(a->block_ns, b->block_ns);
}

bool pipe_cache_get(const pipe_cache *c, const uint64_t key[4],
                    const pipe_rates *r, pipe_plan *out)
{
    for (unsigned i = 0; i < PIPE_CACHE_SLOTS; i++) {
        const pipe_cached *e = &c->e[i];
        if (e->used && memcmp(e->key, key, sizeof(e->key)) == 0 &&
            rates_near(r, &e->rates)) {
            *out = e->plan;
            return true;
        }
    }
    return false;
}

void pipe_cache_put(pipe_cache *c, const uint64_t key[4], const pipe_rates *r,
                    const pipe_plan *p)
{
    pipe_cached *e = NULL;
    for (unsigned i = 0; i < PIPE_CACHE_SLOTS && e == NULL; i++)
        if (c->e[i].used && memcmp(c->e[i].key, key, sizeof(c->e[i].key)) == 0)
            e = &c->e[i]; /* the same key made anew */
    if (e == NULL) {
        e = &c->e[c->next];
        c->next = (c->next + 1) % PIPE_CACHE_SLOTS;
    }
    memcpy(e->key, key, sizeof(e->key));
    e->rates = *r;
    e->plan = *p;
    e->used = true;
}
