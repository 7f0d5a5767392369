/*
 * admit.c: the limits on what connections and users hold and ask for, the
 * memory budget, and the counts behind them; see admit.h.
 */
#include "admit.h"
#include "slice.h"
#include "log.h"

#include <gemm/types.h>

#include <stdio.h>
#include <stdlib.h>

int admit_bytes(gemmd *d, conn *c, uint64_t bytes, const char *what, char *msg,
                size_t len)
{
    sp_client *cl = sp_client_of(c);
    if (bytes > d->cfg.client_bytes - cl->bytes) {
        snprintf(msg, len,
                 "%s of %llu bytes would pass this connection's limit of "
                 "%llu bytes (buffers and tensors; %llu in use)",
                 what, (unsigned long long)bytes,
                 (unsigned long long)d->cfg.client_bytes,
                 (unsigned long long)cl->bytes);
        return GEMM_ERR_LIMIT;
    }
    if (bytes > d->cfg.user_bytes - c->user->bytes) {
        snprintf(msg, len,
                 "%s of %llu bytes would pass this user's limit of %llu "
                 "bytes (buffers and tensors, all connections; %llu in "
                 "use)",
                 what, (unsigned long long)bytes,
                 (unsigned long long)d->cfg.user_bytes,
                 (unsigned long long)c->user->bytes);
        return GEMM_ERR_LIMIT;
    }
    return GEMM_OK;
}

void admit_charge_bytes(conn *c, int64_t bytes)
{
    sp_client *cl = sp_client_of(c);
    cl->bytes += (uint64_t)bytes;
    c->user->bytes += (uint64_t)bytes;
}

int admit_buffer(gemmd *d, conn *c, char *msg, size_t len)
{
    sp_client *cl = sp_client_of(c);
    const char *cap = NULL;
    uint32_t n = 0;
    if (cl->buffers >= d->cfg.client_buffers)
        cap = "this connection", n = d->cfg.client_buffers;
    else if (c->user->buffers >= d->cfg.user_buffers)
        cap = "this user", n = d->cfg.user_buffers;
    if (cap == NULL)
        return GEMM_OK;
    snprintf(msg, len, "%s already holds its limit of %u buffers", cap, n);
    return GEMM_ERR_LIMIT;
}

void admit_buffer_added(conn *c, uint64_t size)
{
    sp_client_of(c)->buffers++;
    c->user->buffers++;
    admit_charge_bytes(c, (int64_t)size);
}

int admit_flops(gemmd *d, const gemmd_job *j, char *msg, size_t len)
{
    uint64_t f = slice_flops(j);
    if (f <= d->cfg.max_gemm_flops)
        return GEMM_OK;
    snprintf(msg, len,
             "this %llux%llux%llu GEMM is %.3g flops, more than "
             "--max-gemm-flops %.3g allows: split it into smaller GEMMs, or "
             "start gemmd with a larger --max-gemm-flops",
             (unsigned long long)j->m, (unsigned long long)j->n,
             (unsigned long long)j->k, (double)f,
             (double)d->cfg.max_gemm_flops);
    return GEMM_ERR_LIMIT;
}

int admit_work(gemmd *d, conn *c, uint64_t mem, char *msg, size_t len)
{
    sp_client *cl = sp_client_of(c);
    gemmd_user *u = c->user;
    uint32_t users = d->lsn.users_active;
    if (d->inflight >= d->cfg.max_queue) {
        snprintf(msg, len, "queue full: %u requests queued or running",
                 d->inflight);
        return GEMM_ERR_BUSY;
    }
    if (cl->inflight >= d->cfg.client_inflight) {
        snprintf(msg, len,
                 "this connection already has its limit of %u requests "
                 "queued or running",
                 d->cfg.client_inflight);
        return GEMM_ERR_LIMIT;
    }
    if (d->cfg.user_inflight != 0 && u->inflight >= d->cfg.user_inflight) {
        snprintf(msg, len,
                 "this user already has its limit of %u requests queued "
                 "or running (all connections)",
                 d->cfg.user_inflight);
        return GEMM_ERR_LIMIT;
    }
    /* fair share: with several users connected, none holds more than its
     * part of the queue, so one cannot fill it against the others */
    uint32_t n = users ? users : 1;
    uint32_t share = d->cfg.max_queue / n ? d->cfg.max_queue / n : 1;
    if (n > 1 && u->inflight >= share) {
        snprintf(msg, len,
                 "this user holds its share of the queue (%u of %u, %u "
                 "users connected): try again later",
                 u->inflight, d->cfg.max_queue, users);
        return GEMM_ERR_BUSY;
    }
    if (mem > d->user_memory || mem > d->mem_budget) {
        snprintf(msg, len,
                 "this request needs %llu bytes of the daemon's memory, "
                 "more than a user's share (%llu of a %llu-byte budget)",
                 (unsigned long long)mem, (unsigned long long)d->user_memory,
                 (unsigned long long)d->mem_budget);
        return GEMM_ERR_LIMIT;
    }
    if (mem > d->user_memory - u->memory || mem > d->mem_budget - d->mem_used) {
        snprintf(msg, len,
                 "the daemon's memory budget is in use (needs %llu bytes; "
                 "this user holds %llu of %llu, all users %llu of %llu): "
                 "try again later",
                 (unsigned long long)mem, (unsigned long long)u->memory,
                 (unsigned long long)d->user_memory,
                 (unsigned long long)d->mem_used,
                 (unsigned long long)d->mem_budget);
        return GEMM_ERR_BUSY;
    }
    return GEMM_OK;
}

int admit_submit(gemmd *d, sp_req *q, gemmd_job *j, uint64_t mem)
{
    conn *c = q->conn;
    j->t_received = q->t_received;
    j->owner = c->id;
    j->slot = q;
    j->req_id = q->id;
    j->mem = mem;
    if (sched_submit(&d->sched, j) != GEMM_OK) {
        for (int i = 0; i < j->nbufs; i++)
            reg_put(&d->reg, j->bufs[i]);
        for (uint64_t p = 0; p < j->nproblems; p++)
            for (int i = 0; i < j->problems[p].nbufs; i++)
                reg_put(&d->reg, j->problems[p].bufs[i]);
        free(j->problems);
        free(j->tensor);
        free(j);
        return GEMM_ERR_NOMEM;
    }
    TRACE_AT(q->tr, TR_QUEUED);
    q->job = j;
    d->inflight++;
    sp_client_of(c)->inflight++;
    c->user->inflight++;
    d->mem_used += mem;
    c->user->memory += mem;
    return GEMM_OK;
}

void admit_release_job(gemmd *d, gemmd_job *j)
{
    sp_req *q = j->slot;
    conn *c = q->conn;
    for (int i = 0; i < j->nbufs; i++)
        reg_put(&d->reg, j->bufs[i]);
    j->nbufs = 0;
    for (uint64_t p = 0; p < j->nproblems; p++) { /* a batch's */
        gemmd_job *pj = &j->problems[p];
        for (int i = 0; i < pj->nbufs; i++)
            reg_put(&d->reg, pj->bufs[i]);
        pj->nbufs = 0;
    }
    d->inflight--;
    sp_client_of(c)->inflight--;
    c->user->inflight--;
    d->mem_used -= j->mem;
    c->user->memory -= j->mem;
    q->job = NULL;
}

int admit_release_entry(gemmd *d, conn *c, uint64_t id, int kind)
{
    reg_buffer *b = reg_find(&d->reg, c->id, id, kind);
    if (b == NULL)
        return GEMM_ERR_NO_BUFFER;
    size_t size = b->size;
    uint64_t charge = b->charge;
    reg_release_kind(&d->reg, c->id, id, kind);
    admit_charge_bytes(c, -(int64_t)size);
    if (kind == REG_BUFFER) {
        sp_client_of(c)->buffers--;
        c->user->buffers--;
    }
    d->mem_used -= charge;
    c->user->memory -= charge;
    return GEMM_OK;
}

void admit_release_owner(gemmd *d, conn *c)
{
    sp_client *cl = sp_client_of(c);
    uint64_t charges;
    uint32_t n = reg_release_owner(&d->reg, c->id, &charges);
    gemmd_log(LOG_DEBUG, "client %u gone: %u buffers and tensors released",
              c->id, n);
    c->user->buffers -= cl->buffers;
    c->user->bytes -= cl->bytes;
    cl->buffers = 0;
    cl->bytes = 0;
    d->mem_used -= charges; /* tensors in host memory held budget */
    c->user->memory -= charges;
}

void admit_tensor_added(gemmd *d, conn *c, reg_buffer *t, uint64_t bytes)
{
    t->charge = d->be.host_tensors ? bytes : 0;
    d->mem_used += t->charge;
    c->user->memory += t->charge;
    if (t->size != bytes) /* the backend's copy may be padded */
        admit_charge_bytes(c, (int64_t)t->size - (int64_t)bytes);
}
