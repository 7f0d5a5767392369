/*
 * pipe_plan.c: the cut of a large staged GEMM into blocks whose copies
 * overlap its kernels, by a model of both; see pipe_plan.h.
 */
#include "pipe_plan.h"

#include <stdlib.h>

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
