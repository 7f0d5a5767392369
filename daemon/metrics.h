/*
 * metrics.h: counters for operators, served in the Prometheus text
 * exposition format (version 0.0.4) over HTTP on a local TCP address
 * (--metrics-listen, e.g. 127.0.0.1:9464; GET /metrics) and, if asked,
 * written to a file for node-exporter's textfile collector
 * (--metrics-file, replaced atomically every --stats-interval). Requests
 * by kind and status, their latency histograms, bytes on the socket,
 * connections, queue, memory budget, per-uid usage against its limits and
 * the backend's device figures. Loop thread only.
 */
#ifndef GEMMD_METRICS_H
#define GEMMD_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/* Request kinds, as the metrics label them. */
enum metrics_kind {
    MK_INVALID, /* undecodable, or no known body */
    MK_HELLO,
    MK_STATUS,
    MK_REGISTER,
    MK_RELEASE,
    MK_GEMM,
    MK_UPLOAD,
    MK_TENSOR_FREE,
    MK_LIST_KERNELS,
    MK_CANCEL,
    MK_BLAS3,
    MK_BATCH,
    MK_COUNT,
};

#define METRICS_STATUS_MAX 64 /* gemm_error numbers below this */
#define METRICS_BUCKETS    16

typedef struct gemmd_metrics {
    uint64_t requests[MK_COUNT][METRICS_STATUS_MAX];
    uint64_t lat_count[MK_COUNT][METRICS_BUCKETS]; /* per bucket */
    double lat_sum[MK_COUNT];
    /* the socket side counts its own (listen.h, conn.h) */
    uint64_t jobs_canceled; /* dropped before they started */
    /* the HTTP listener */
    uv_tcp_t http;
    int http_on;
} gemmd_metrics;

/* Counts one answered request of kind with status, ns after it arrived. */
void metrics_observe(gemmd_metrics *m, int kind, int status, uint64_t ns);

struct gemmd;

/* Renders every metric into a malloc'd string (*len bytes); NULL when out
 * of memory. */
char *metrics_render(struct gemmd *d, size_t *len);

/* Starts the HTTP listener at cfg.metrics_listen ("HOST:PORT"), if set.
 * Returns a gemm_error and a message. Main thread, before uv_run. */
int metrics_start(struct gemmd *d, char *msg, size_t len);

/* Writes cfg.metrics_file, if set (temporary file, then rename). */
void metrics_write_file(struct gemmd *d);

/* Closes the listener and its connections. */
void metrics_stop(struct gemmd *d);

#endif
