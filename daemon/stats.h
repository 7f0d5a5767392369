/*
 * stats.h: the daemon's counters and a window of recent GEMM latencies for
 * percentiles. Loop thread only.
 */
#ifndef GEMMD_STATS_H
#define GEMMD_STATS_H

#include <stdint.h>

#define STATS_WINDOW   4096
#define GEMMD_ROUTINES 9 /* the wire's Routine: GEMM, SYMM .. TRSM */

typedef struct gemmd_stats {
    uint64_t started_ns;
    uint64_t served;                     /* replies with status OK */
    uint64_t failed;                     /* replies with an error */
    uint64_t gemms_served, gemms_failed; /* of them, GEMM requests */
    uint64_t gemm_flops;
    uint64_t batches_served;                 /* Batch replies OK */
    uint64_t batch_problems;                 /* problems of those */
    uint64_t routine_served[GEMMD_ROUTINES]; /* OK replies by routine
                                                (0: GEMM, then symm ..
                                                trsm as on the wire) */
    uint64_t stage_count;                    /* GEMMs in the stage sums below */
    uint64_t ns_queue, ns_h2d, ns_kernel, ns_d2h;
    uint64_t lat_ns[STATS_WINDOW]; /* ring of recent GEMM latencies */
    uint32_t lat_next, lat_count;
} gemmd_stats;

typedef struct gemmd_latency {
    double p50_us, p90_us, p99_us, max_us;
} gemmd_latency;

void stats_init(gemmd_stats *s);
void stats_record_latency(gemmd_stats *s, uint64_t ns);
/* Percentiles of the window (zeros when empty). */
void stats_latency(const gemmd_stats *s, gemmd_latency *out);

#endif
