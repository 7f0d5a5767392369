/*
 * stats.c: counters and latency percentiles (nearest-rank over a sorted copy
 * of the window: 4096 values, sorted only when someone asks for status).
 */
#include "stats.h"
#include "job.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t gemmd_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void stats_init(gemmd_stats *s)
{
    memset(s, 0, sizeof(*s));
    s->started_ns = gemmd_now_ns();
}

void stats_record_latency(gemmd_stats *s, uint64_t ns)
{
    s->lat_ns[s->lat_next] = ns;
    s->lat_next = (s->lat_next + 1) % STATS_WINDOW;
    if (s->lat_count < STATS_WINDOW)
        s->lat_count++;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

void stats_latency(const gemmd_stats *s, gemmd_latency *out)
{
    memset(out, 0, sizeof(*out));
    uint32_t n = s->lat_count;
    if (n == 0)
        return;
    static uint64_t v[STATS_WINDOW]; /* loop thread only */
    memcpy(v, s->lat_ns, n * sizeof(v[0]));
    qsort(v, n, sizeof(v[0]), cmp_u64);
#define RANK(p) (v[(uint32_t)((p) * (n - 1) + 0.5)] / 1e3)
    out->p50_us = RANK(0.50);
    out->p90_us = RANK(0.90);
    out->p99_us = RANK(0.99);
    out->max_us = v[n - 1] / 1e3;
#undef RANK
}
