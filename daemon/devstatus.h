/*
 * devstatus.h: what Status, the metrics and the stats log show of each
 * device object: the scheduler's side (queued, running, jobs, failures,
 * busy time, in placement or not) beside the backend's (name, memory,
 * pinned, tensors, migrations, tensor-map cache).
 */
#ifndef GEMMD_DEVSTATUS_H
#define GEMMD_DEVSTATUS_H

#include "gemm.pb-c.h"
#include "gemmd.h"

#include <stdio.h>

typedef struct devstatus {
    gemmd_device_stats be;
    sched_dev_stats s;
} devstatus;

/* Fills out[0..n) for the daemon's devices; returns n. Loop thread. */
unsigned devstatus_get(gemmd *d, devstatus out[GEMMD_MAX_DEVICES]);

/* Storage for the per-device messages of one StatusReply. */
typedef struct devstatus_msgs {
    devstatus ds[GEMMD_MAX_DEVICES];
    Gemm__DeviceStatus msg[GEMMD_MAX_DEVICES];
    Gemm__DeviceStatus *ptr[GEMMD_MAX_DEVICES];
} devstatus_msgs;

/* Sets st->devices from m (filled here; it must outlive the packing).
 * Loop thread. */
void devstatus_reply(gemmd *d, Gemm__StatusReply *st, devstatus_msgs *m);

/* Writes each device's metrics (label device="INDEX") in the Prometheus
 * text format to f. Loop thread. */
void devstatus_metrics(gemmd *d, FILE *f);

#endif
