/*
 * pipe_rates.c: the measured rates of the pipeline's model and the plans
 * cached on them; see pipe_rates.h.
 */
#include "pipe_rates.h"

#include <gemm/types.h>

#include <math.h>
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
