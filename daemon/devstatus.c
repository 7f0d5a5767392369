/*
 * devstatus.c: each device object's counters, gathered from the
 * scheduler and the backend (devstatus.h), and their Status messages.
 */
#include "devstatus.h"

#include <string.h>

unsigned devstatus_get(gemmd *d, devstatus out[GEMMD_MAX_DEVICES])
{
    unsigned n = d->sched.ndevs ? d->sched.ndevs : 1;
    for (unsigned i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof(out[i]));
        if (d->be.ops->device_stats != NULL)
            d->be.ops->device_stats(&d->be, i, &out[i].be);
        else
            snprintf(out[i].be.name, sizeof(out[i].be.name), "%s",
                     d->be.device);
        sched_device(&d->sched, i, &out[i].s);
    }
    return n;
}

void devstatus_reply(gemmd *d, Gemm__StatusReply *st, devstatus_msgs *m)
{
    unsigned n = devstatus_get(d, m->ds);
    for (unsigned i = 0; i < n; i++) {
        const devstatus *s = &m->ds[i];
        Gemm__DeviceStatus *g = &m->msg[i];
        gemm__device_status__init(g);
#define SET(f, v)                                                              \
    do {                                                                       \
        g->has_##f = true;                                                     \
        g->f = (v);                                                            \
    } while (0)
        SET(index, i);
        g->name = (char *)s->be.name;
        SET(placed, s->s.placed);
        SET(running, s->s.running);
        SET(queued, s->s.queued);
        SET(jobs, s->s.jobs);
        SET(failed, s->s.failed);
        SET(panels, s->s.parts);
        SET(busy_s, s->s.busy_ns / 1e9);
        SET(memory_bytes, s->be.memory_bytes);
        SET(pinned_bytes, s->be.pinned_bytes);
        SET(tensors, s->be.tensors);
        SET(migrations, s->be.migrations);
        SET(tmap_hits, s->be.tmap_hits);
        SET(tmap_misses, s->be.tmap_misses);
#undef SET
        m->ptr[i] = g;
    }
    st->n_devices = n;
    st->devices = m->ptr;
}

/* One metric over every device: HELP, TYPE and a row per device. */
static void per_device(FILE *f, const devstatus *ds, unsigned n,
                       const char *name, const char *type, const char *help,
                       double (*get)(const devstatus *))
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    for (unsigned i = 0; i < n; i++)
        fprintf(f, "%s{device=\"%u\"} %.17g\n", name, i, get(&ds[i]));
}

#define GETTER(fn, expr)                                                       \
    static double fn(const devstatus *x)                                       \
    {                                                                          \
        return (double)(expr);                                                 \
    }
GETTER(g_pinned, x->be.pinned_bytes)
GETTER(g_memory, x->be.memory_bytes)
GETTER(g_placed, x->s.placed)
GETTER(g_running, x->s.running)
GETTER(g_queued, x->s.queued)
GETTER(g_jobs, x->s.jobs)
GETTER(g_failed, x->s.failed)
GETTER(g_panels, x->s.parts)
GETTER(g_busy, x->s.busy_ns / 1e9)
GETTER(g_tensors, x->be.tensors)
GETTER(g_migrations, x->be.migrations)
#undef GETTER

void devstatus_metrics(gemmd *d, FILE *f)
{
    devstatus ds[GEMMD_MAX_DEVICES];
    unsigned n = devstatus_get(d, ds);
    fprintf(f, "# HELP gemmd_device_info Each device object (always 1).\n"
               "# TYPE gemmd_device_info gauge\n");
    for (unsigned i = 0; i < n; i++) {
        char name[sizeof(ds[i].be.name)];
        memcpy(name, ds[i].be.name, sizeof(name));
        name[sizeof(name) - 1] = '\0';
        for (char *c = name; *c; c++)
            if (*c == '"' || *c == '\\' || *c == '\n')
                *c = '_';
        fprintf(f, "gemmd_device_info{device=\"%u\",name=\"%s\"} 1\n", i, name);
    }
    per_device(f, ds, n, "gemmd_device_pinned_bytes", "gauge",
               "Client memory pinned (cudaHostRegister, once for the host), "
               "usable by the device.",
               g_pinned);
    per_device(f, ds, n, "gemmd_device_memory_bytes", "gauge",
               "Device memory in use for staging and resident tensors.",
               g_memory);
    fprintf(f, "# HELP gemmd_device_tensor_map_lookups_total Tensor-map cache "
               "lookups by result.\n"
               "# TYPE gemmd_device_tensor_map_lookups_total counter\n");
    for (unsigned i = 0; i < n; i++)
        fprintf(f,
                "gemmd_device_tensor_map_lookups_total{device=\"%u\","
                "result=\"hit\"} %llu\n"
                "gemmd_device_tensor_map_lookups_total{device=\"%u\","
                "result=\"miss\"} %llu\n",
                i, (unsigned long long)ds[i].be.tmap_hits, i,
                (unsigned long long)ds[i].be.tmap_misses);
    per_device(f, ds, n, "gemmd_device_placed", "gauge",
               "1 while the device takes work; 0 after it left placement "
               "(--device-fail-limit failures in a row).",
               g_placed);
    per_device(f, ds, n, "gemmd_device_running", "gauge",
               "Jobs the device runs now.", g_running);
    per_device(f, ds, n, "gemmd_device_queued", "gauge",
               "Jobs waiting for the device.", g_queued);
    per_device(f, ds, n, "gemmd_device_jobs_total", "counter",
               "Jobs the device ran (panels of split GEMMs too).", g_jobs);
    per_device(f, ds, n, "gemmd_device_failed_total", "counter",
               "Of them, failed.", g_failed);
    per_device(f, ds, n, "gemmd_device_panels_total", "counter",
               "Panels of split GEMMs the device ran.", g_panels);
    per_device(f, ds, n, "gemmd_device_busy_seconds_total", "counter",
               "Time the device's workers spent in jobs.", g_busy);
    per_device(f, ds, n, "gemmd_device_tensors", "gauge",
               "Resident tensors the device holds (home or copy).", g_tensors);
    per_device(f, ds, n, "gemmd_device_tensor_migrations_total", "counter",
               "Resident tensors copied to the device from another.",
               g_migrations);
}
