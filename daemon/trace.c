/*
 * trace.c: the kept stamps of answered requests and their report; see
 * trace.h. Compiled to nothing without GEMMD_TRACE.
 */
#include "trace.h"

#ifdef GEMMD_TRACE
#include "log.h"
#include "metrics.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define TRACE_KEEP 65536

typedef struct trace_rec {
    int kind;
    uint64_t t[TR_NPOINTS];
} trace_rec;

static trace_rec trace_recs[TRACE_KEEP]; /* loop thread */
static unsigned trace_n, trace_next;

static const char *const trace_names[TR_NPOINTS] = {
    "io",      "read",     "decoded", "handler", "admitted", "queued",
    "started", "computed", "pushed",  "inbox",   "packed",   "sent",
};

void trace_keep(int kind, const uint64_t *t)
{
    trace_rec *r = &trace_recs[trace_next];
    r->kind = kind;
    memcpy(r->t, t, sizeof(r->t));
    trace_next = (trace_next + 1) % TRACE_KEEP;
    if (trace_n < TRACE_KEEP)
        trace_n++;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Logs p50 and mean of t[to] - t[from] over the n records of kind that
 * have both; v is scratch of TRACE_KEEP. */
static void report_stage(int kind, int from, int to, uint64_t *v)
{
    unsigned n = 0;
    double sum = 0;
    for (unsigned i = 0; i < trace_n; i++) {
        const trace_rec *r = &trace_recs[i];
        if (r->kind != kind || r->t[from] == 0 || r->t[to] == 0)
            continue;
        uint64_t d = r->t[to] >= r->t[from] ? r->t[to] - r->t[from] : 0;
        v[n++] = d;
        sum += (double)d;
    }
    if (n == 0)
        return;
    qsort(v, n, sizeof(v[0]), cmp_u64);
    gemmd_log(LOG_NOTICE,
              "trace kind %d: %-8s -> %-8s p50 %8.2f us  p99 %8.2f us  "
              "mean %8.2f us  (%u)",
              kind, trace_names[from], trace_names[to], v[n / 2] / 1e3,
              v[(size_t)(0.99 * (n - 1))] / 1e3, sum / n / 1e3, n);
}

void trace_report(void)
{
    uint64_t *v = malloc(TRACE_KEEP * sizeof(*v));
    if (v == NULL)
        return;
    for (int kind = 0; kind < MK_COUNT; kind++) {
        bool seen[TR_NPOINTS] = {false}; /* points this kind passes */
        for (unsigned i = 0; i < trace_n; i++)
            for (int p = 0; p < TR_NPOINTS; p++)
                seen[p] |= trace_recs[i].kind == kind && trace_recs[i].t[p];
        int prev = -1, first = -1;
        for (int p = 0; p < TR_NPOINTS; p++) {
            if (!seen[p])
                continue;
            if (prev >= 0)
                report_stage(kind, prev, p, v);
            else
                first = p;
            prev = p;
        }
        if (first >= 0 && prev > first)
            report_stage(kind, first, prev, v);
    }
    free(v);
}
#endif
