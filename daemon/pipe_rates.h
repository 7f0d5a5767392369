/*
 * pipe_rates.h: what the pipeline's model (pipe_plan.h) runs on, measured:
 * one GPU's table of the link's and the kernels' rates, folded in from
 * the pipelined GEMMs it ran, and a worker's cache of the plans it made
 * from them.
 */
#ifndef GEMMD_PIPE_RATES_H
#define GEMMD_PIPE_RATES_H

#include "pipe_plan.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* Measured rates of one GPU, by request class (type and precision),
 * starting from defaults; guarded by mu. */
#define PIPE_CLASSES 32
typedef struct pipe_rates_table {
    pthread_mutex_t mu;
    double link_bpns[2]; /* in, out */
    /* by class: kernels, the gap between blocks, and the strided copies'
     * share of the link (it differs with what else moves at once) */
    double flops_pns[PIPE_CLASSES], block_ns[PIPE_CLASSES];
    double strided[PIPE_CLASSES];
    bool link_measured[2];
    bool measured[PIPE_CLASSES], block_measured[PIPE_CLASSES];
    bool strided_measured[PIPE_CLASSES];
} pipe_rates_table;

/* What one pipelined GEMM measured: its copies in ([0]) and out ([1]),
 * whole-row ones and strided ones apart, and its kernels, whose flops at
 * full waves (each block's over pipe_wave_eff) summed to wave_flops. */
typedef struct pipe_sample {
    double bytes[2], ns[2];   /* whole rows */
    double sbytes[2], sns[2]; /* strided */
    double wave_flops, kernel_ns;
    /* the device's idle time between a block's kernel and the next one's
     * whose inputs were already in (launch, events, the host's queueing) */
    double gaps, gap_ns;
} pipe_sample;

/* The class of an A/B type and precision (gemm_dtype, gemm_precision). */
unsigned pipe_class(int ab_type, int precision);

void pipe_rates_init(pipe_rates_table *t);
void pipe_rates_destroy(pipe_rates_table *t);

/* The rates for class c now. */
pipe_rates pipe_rates_get(pipe_rates_table *t, unsigned c);

/* Whether class c's kernels and the link have been measured. */
bool pipe_rates_known(pipe_rates_table *t, unsigned c);

/* Folds in what a pipelined GEMM of class c measured: each direction's
 * whole-row rate, then the share of it the strided copies got, the
 * kernels' rate and the gap a block leaves. Parts with no bytes (or
 * flops, or gaps) are ignored. */
void pipe_rates_learn(pipe_rates_table *t, unsigned c, const pipe_sample *s);

/* A worker's last plans, by a key of everything a plan depends on but the
 * rates: reused while the rates stay within PIPE_CACHE_DRIFT of those
 * it was made with (so the model runs once for a stream of like GEMMs,
 * and again once what it was made from has moved). One thread. */
#define PIPE_CACHE_SLOTS 8
#define PIPE_CACHE_DRIFT 0.15
typedef struct pipe_cached {
    uint64_t key[4];
    pipe_rates rates;
    pipe_plan plan;
    bool used;
} pipe_cached;
typedef struct pipe_cache {
    pipe_cached e[PIPE_CACHE_SLOTS];
    unsigned next;
    unsigned runs; /* pipelined GEMMs planned (pipe_measure) */
} pipe_cache;

/* Whether the next pipelined GEMM planned with c is measured (its every
 * copy and kernel timed for pipe_rates_learn): the first and then one in
 * PIPE_MEASURE_EVERY, so that the events and their reading cost a stream
 * of like requests little. Counts the GEMM. */
#define PIPE_MEASURE_EVERY 8
bool pipe_measure(pipe_cache *c);

/* The plan cached for key made with rates close to r, into *out. */
bool pipe_cache_get(const pipe_cache *c, const uint64_t key[4],
                    const pipe_rates *r, pipe_plan *out);
/* Remembers plan p for key made with rates r (the oldest slot goes). */
void pipe_cache_put(pipe_cache *c, const uint64_t key[4], const pipe_rates *r,
                    const pipe_plan *p);

#endif
