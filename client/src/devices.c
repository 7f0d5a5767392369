/*
 * devices.c: each device object's counters, from the devices of a Status
 * reply (gemm_get_status keeps the totals), copied into a plain array so
 * the caller needs nothing of protobuf.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

GEMM_API int gemm_get_devices(gemm_client *c, gemm_device_status *out,
                              size_t cap, size_t *n)
{
    Gemm__Request req = GEMM__REQUEST__INIT;
    Gemm__StatusRequest status = GEMM__STATUS_REQUEST__INIT;
    Gemm__Reply *rep;
    int rv;

    cli_clear_error();
    if (c == NULL || n == NULL || (out == NULL && cap != 0))
        return cli_error(GEMM_ERR_INVALID, "gemm_get_devices: NULL argument");
    req.body_case = GEMM__REQUEST__BODY_STATUS;
    req.status = &status;
    if ((rv = cli_call(c, &req, "status", &rep, NULL)) != GEMM_OK)
        return rv;
    if (rep->body_case != GEMM__REPLY__BODY_STATUS_REPLY) {
        gemm__reply__free_unpacked(rep, NULL);
        return cli_error(GEMM_ERR_PROTOCOL, "status: reply has no status body");
    }
    const Gemm__StatusReply *s = rep->status_reply;
    *n = s->n_devices;
    for (size_t i = 0; i < s->n_devices && i < cap; i++) {
        const Gemm__DeviceStatus *g = s->devices[i];
        gemm_device_status *o = &out[i];
        memset(o, 0, sizeof(*o));
        o->index = g->index;
        snprintf(o->name, sizeof(o->name), "%s",
                 g->name != NULL ? g->name : "");
        o->placed = g->placed;
        o->running = g->running;
        o->queued = g->queued;
        o->jobs = g->jobs;
        o->failed = g->failed;
        o->panels = g->panels;
        o->busy_s = g->busy_s;
        o->memory_bytes = g->memory_bytes;
        o->pinned_bytes = g->pinned_bytes;
        o->tensors = g->tensors;
        o->migrations = g->migrations;
        o->tmap_hits = g->tmap_hits;
        o->tmap_misses = g->tmap_misses;
    }
    gemm__reply__free_unpacked(rep, NULL);
    return GEMM_OK;
}
