/*
 * main.c: gemmctl, the command-line face of gemmd, built only on the public
 * libgemmclient API. Global options (--url, --help, --version), then one
 * subcommand: ping, status, mm (mm.c), kernels (kernels.c), bench
 * (bench.c), blas3 (blas3.c), dispatched through a table. The helpers they
 * share live in util.c. Exit codes: 0 ok, 1 runtime error, 2 usage error.
 */
#include "gemmctl.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char usage_text[] =
    "usage: gemmctl [--url URL] COMMAND [ARGS]\n"
    "\n"
    "Talks to gemmd, the shared-memory GEMM daemon.\n"
    "\n"
    "Commands:\n"
    "  ping                      round trip to the daemon; its version,\n"
    "                            backend and device\n"
    "  status [--json]           the daemon's counters (as Python's\n"
    "                            Client.status())\n"
    "  mm --a A.npy --b B.npy [--c C.npy [--beta x]] [--alpha x] [--ta]\n"
    "     [--tb] [--dtype T] [--cd-dtype T] [--out D.npy] [--out-dtype T]\n"
    "     [--check] [--quiet]\n"
    "                            D = alpha*op(A)*op(B) + beta*C from .npy\n"
    "                            files; D on stdout (or --out), the report\n"
    "                            on stderr; T is bf16, fp16, fp32, fp64,\n"
    "                            c64 or c128; 3-D files are stacks\n"
    "                            (numpy's matmul, one batch request, D a\n"
    "                            3-D .npy)\n"
    "  mm -m M -n N -k K [--dtype T] [--ta] [--tb] [--check] [--repeat R]\n"
    "                            random inputs; prints time and TFLOP/s\n"
    "  mm ... [--kernel NAME] [--precision default|tf32|fp32]\n"
    "         [--moduli N]       a kernel by name; fp32 inputs as tf32 or\n"
    "                            at fp32 accuracy; fp64 or fp32 inputs\n"
    "                            through the Ozaki-II emulation with N\n"
    "                            moduli (2..20)\n"
    "  kernels [--json]          the kernels a request may name\n"
    "  bench [--kernels A,B,..|--ladder] [--sizes 256,512,..]\n"
    "        [--dtype T] [--precision P] [--repeat R] [--csv FILE]\n"
    "                            time kernels against the reference;\n"
    "                            table of TFLOP/s, ratio and error\n"
    "  blas3 ROUTINE --a A.npy [--b B.npy] [--c C.npy] --out OUT.npy\n"
    "        [--side S] [--uplo U] [--trans T] [--diag D] [--alpha x]\n"
    "        [--beta x]          symm, hemm, syrk, herk, syr2k, her2k, trmm\n"
    "                            or trsm on .npy files ('gemmctl blas3\n"
    "                            --help' for shapes and flags)\n"
    "\n"
    "Options:\n"
    "  --url URL                 the daemon (default: $GEMM_URL, else\n"
    "                            ipc://$XDG_RUNTIME_DIR/gemmd.sock if it\n"
    "                            exists, else ipc:///run/gemmd/gemmd.sock)\n"
    "  --timeout MS              connect and per-request timeout (default\n"
    "                            2000 to connect, 60000 per request; -1:\n"
    "                            wait forever)\n"
    "  -h, --help                this text ('gemmctl mm --help' for mm)\n"
    "  -V, --version             gemmctl's version\n"
    "\n"
    "Exit status: 0 ok, 1 runtime error (daemon, file, failed --check),\n"
    "2 usage error.\n";

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int cmd_ping(const char *url, int argc, char **argv)
{
    gemm_server_info info;
    gemm_client *c;
    char buf[256];
    double t0;
    int rv, code;

    if (argc > 1) {
        if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
            printf("usage: gemmctl [--url URL] ping\n");
            return EXIT_OK;
        }
        return ctl_error(EXIT_USAGE, "ping: unexpected argument '%s'", argv[1]);
    }
    if ((code = ctl_open(url, &c)) != EXIT_OK)
        return code;
    t0 = now_us();
    rv = gemm_ping(c, &info);
    double rtt = now_us() - t0;
    if (rv != GEMM_OK) {
        code = ctl_fail(rv, "ping");
        gemm_client_close(c);
        return code;
    }
    if (url == NULL && gemm_default_url(buf, sizeof(buf)) == GEMM_OK)
        url = buf;
    printf("gemmd %s at %s: protocol %" PRIu32 ", backend %s, device %s; "
           "round trip %.0f us\n",
           info.server_version, url, info.protocol_version, info.backend,
           info.device[0] ? info.device : "?", rtt);
    gemm_client_close(c);
    return EXIT_OK;
}

#define CTL_MAX_DEVICES 16

/* One device of gemmctl status: two lines. */
static void print_device(const gemm_device_status *d)
{
    printf("device %-8" PRIu32 " %s%s\n", d->index, d->name,
           d->placed ? "" : " (left placement after failures)");
    printf("                %" PRIu32 " running, %" PRIu32 " queued, %" PRIu64
           " jobs (%" PRIu64 " failed, %" PRIu64 " panels), busy %.2f s, "
           "%.1f MiB, %.1f MiB pinned, %" PRIu32 " tensors (%" PRIu64
           " copied in), tensor maps %" PRIu64 "/%" PRIu64 " hits\n",
           d->running, d->queued, d->jobs, d->failed, d->panels, d->busy_s,
           (double)d->memory_bytes / (1024.0 * 1024.0),
           (double)d->pinned_bytes / (1024.0 * 1024.0), d->tensors,
           d->migrations, d->tmap_hits, d->tmap_hits + d->tmap_misses);
}

/* One device as a JSON object (then a comma when more follow). */
static void print_device_json(const gemm_device_status *d, bool more)
{
    printf("{\"index\": %" PRIu32 ", \"name\": ", d->index);
    ctl_json_str(d->name);
    printf(", \"placed\": %s, \"running\": %" PRIu32 ", \"queued\": %" PRIu32
           ", \"jobs\": %" PRIu64 ", \"failed\": %" PRIu64
           ", \"panels\": %" PRIu64 ", \"busy_s\": %.3f"
           ", \"memory_bytes\": %" PRIu64 ", \"pinned_bytes\": %" PRIu64
           ", \"tensors\": %" PRIu32 ", \"migrations\": %" PRIu64
           ", \"tmap_hits\": %" PRIu64 ", \"tmap_misses\": %" PRIu64 "}%s",
           d->placed ? "true" : "false", d->running, d->queued, d->jobs,
           d->failed, d->panels, d->busy_s, d->memory_bytes, d->pinned_bytes,
           d->tensors, d->migrations, d->tmap_hits, d->tmap_misses,
           more ? ", " : "");
}

int cmd_status(const char *url, int argc, char **argv)
{
    gemm_status s;
    gemm_client *c;
    int json = 0, rv, code;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("usage: gemmctl [--url URL] status [--json]\n");
            return EXIT_OK;
        } else
            return ctl_error(EXIT_USAGE, "status: unknown argument '%s'",
                             argv[i]);
    }
    if ((code = ctl_open(url, &c)) != EXIT_OK)
        return code;
    gemm_device_status devs[CTL_MAX_DEVICES];
    size_t ndev = 0;
    rv = gemm_get_status(c, &s);
    if (rv == GEMM_OK)
        rv = gemm_get_devices(c, devs, CTL_MAX_DEVICES, &ndev);
    gemm_client_close(c);
    if (rv != GEMM_OK)
        return ctl_fail(rv, "status");
    if (ndev > CTL_MAX_DEVICES)
        ndev = CTL_MAX_DEVICES;
    if (json) {
        printf("{\"uptime_s\": %.3f, \"backend\": ", s.uptime_s);
        ctl_json_str(s.backend);
        printf(", \"device\": ");
        ctl_json_str(s.device);
        printf(", \"requests_served\": %" PRIu64
               ", \"requests_failed\": %" PRIu64 ", \"queue_depth\": %" PRIu32
               ", \"queue_capacity\": %" PRIu32 ", \"buffers\": %" PRIu32
               ", \"buffer_bytes\": %" PRIu64 ", \"clients\": %" PRIu32
               ", \"threads\": %" PRIu32
               ", \"latency_p50_us\": %.1f, \"latency_p90_us\": %.1f"
               ", \"latency_p99_us\": %.1f, \"latency_max_us\": %.1f"
               ", \"gemm_flops\": %" PRIu64 ", \"tensors\": %" PRIu32
               ", \"tensor_bytes\": %" PRIu64 ", \"pinned_bytes\": %" PRIu64
               ", \"device_bytes\": %" PRIu64 ", \"tmap_hits\": %" PRIu64
               ", \"tmap_misses\": %" PRIu64
               ", \"stage_queue_us\": %.1f, \"stage_h2d_us\": %.1f"
               ", \"stage_kernel_us\": %.1f, \"stage_d2h_us\": %.1f"
               ", \"connections\": %" PRIu32 ", \"users\": %" PRIu32
               ", \"memory_budget\": %" PRIu64 ", \"memory_used\": %" PRIu64
               ", \"gemms_served\": %" PRIu64 ", \"gemms_failed\": %" PRIu64,
               s.requests_served, s.requests_failed, s.queue_depth,
               s.queue_capacity, s.buffers, s.buffer_bytes, s.clients,
               s.threads, s.latency_p50_us, s.latency_p90_us, s.latency_p99_us,
               s.latency_max_us, s.gemm_flops, s.tensors, s.tensor_bytes,
               s.pinned_bytes, s.device_bytes, s.tmap_hits, s.tmap_misses,
               s.stage_queue_us, s.stage_h2d_us, s.stage_kernel_us,
               s.stage_d2h_us, s.connections, s.users, s.memory_budget,
               s.memory_used, s.gemms_served, s.gemms_failed);
        /* per routine: served_gemm, served_symm, ... served_trsm */
        for (int r = 0; r < GEMM_ROUTINE_COUNT; r++)
            printf(", \"served_%s\": %" PRIu64,
                   gemm_routine_name((gemm_routine)r), s.routine_served[r]);
        printf(", \"batches_served\": %" PRIu64
               ", \"batch_problems\": %" PRIu64,
               s.batches_served, s.batch_problems);
        printf(", \"pins_pending\": %" PRIu32 ", \"pins_done\": %" PRIu64
               ", \"pins_failed\": %" PRIu64 ", \"pin_seconds\": %.6f"
               ", \"pin_bytes\": %" PRIu64,
               s.pins_pending, s.pins_done, s.pins_failed, s.pin_seconds,
               s.pin_bytes);
        printf(", \"spares_ready\": %" PRIu32 ", \"spare_bytes\": %" PRIu64
               ", \"spares_lent\": %" PRIu64 ", \"spares_none\": %" PRIu64
               ", \"spares_made\": %" PRIu64 ", \"spares_failed\": %" PRIu64,
               s.spares_ready, s.spare_bytes, s.spares_lent, s.spares_none,
               s.spares_made, s.spares_failed);
        printf(", \"devices\": [");
        for (size_t i = 0; i < ndev; i++)
            print_device_json(&devs[i], i + 1 < ndev);
        printf("]}\n");
        return EXIT_OK;
    }
    printf("uptime          %.1f s\n", s.uptime_s);
    printf("backend         %s (%s), %" PRIu32 " threads\n", s.backend,
           s.device[0] ? s.device : "?", s.threads);
    printf("gemms           %" PRIu64 " served, %" PRIu64 " failed\n",
           s.gemms_served, s.gemms_failed);
    bool any3 = false;
    for (int r = 1; r < GEMM_ROUTINE_COUNT; r++)
        any3 = any3 || s.routine_served[r] != 0;
    if (any3) { /* the other level-3 routines, where some were served */
        printf("level 3        ");
        for (int r = 1; r < GEMM_ROUTINE_COUNT; r++)
            printf(" %s %" PRIu64, gemm_routine_name((gemm_routine)r),
                   s.routine_served[r]);
        printf("\n");
    }
    if (s.batches_served != 0)
        printf("batches         %" PRIu64 " served (%" PRIu64 " problems)\n",
               s.batches_served, s.batch_problems);
    if (s.pins_done + s.pins_failed + s.pins_pending != 0)
        printf("background pins %" PRIu64 " done (%.2f GB in %.3f s), %" PRIu64
               " failed, %" PRIu32 " pending\n",
               s.pins_done, s.pin_bytes / 1e9, s.pin_seconds, s.pins_failed,
               s.pins_pending);
    if (s.spares_made + s.spares_failed != 0)
        printf("spares          %" PRIu32 " ready (%.2f GB), %" PRIu64
               " lent, %" PRIu64 " asked with none fitting, %" PRIu64
               " failed\n",
               s.spares_ready, s.spare_bytes / 1e9, s.spares_lent,
               s.spares_none, s.spares_failed);
    printf("requests        %" PRIu64 " served, %" PRIu64
           " failed (every kind: GEMM, hello, status, register, ...)\n",
           s.requests_served, s.requests_failed);
    printf("queue           %" PRIu32 " of %" PRIu32 "\n", s.queue_depth,
           s.queue_capacity);
    printf("clients         %" PRIu32 " (%" PRIu32 " connections, %" PRIu32
           " users)\n",
           s.clients, s.connections, s.users);
    printf("buffers         %" PRIu32 " (%.1f MiB)\n", s.buffers,
           (double)s.buffer_bytes / (1024.0 * 1024.0));
    printf("latency (us)    p50 %.1f  p90 %.1f  p99 %.1f  max %.1f\n",
           s.latency_p50_us, s.latency_p90_us, s.latency_p99_us,
           s.latency_max_us);
    printf("tensors         %" PRIu32 " resident (%.1f MiB)\n", s.tensors,
           (double)s.tensor_bytes / (1024.0 * 1024.0));
    if (s.memory_budget != 0)
        printf("memory budget   %.1f of %.1f MiB in use\n",
               (double)s.memory_used / (1024.0 * 1024.0),
               (double)s.memory_budget / (1024.0 * 1024.0));
    if (strcmp(s.backend, "cuda") == 0) {
        printf("memory          %.1f MiB pinned, %.1f MiB on the device\n",
               (double)s.pinned_bytes / (1024.0 * 1024.0),
               (double)s.device_bytes / (1024.0 * 1024.0));
        printf("tensor maps     %" PRIu64 " hits, %" PRIu64 " misses\n",
               s.tmap_hits, s.tmap_misses);
    }
    if (strcmp(s.backend, "cuda") == 0)
        printf("stages (us)     queue %.1f  h2d %.1f  kernel %.1f  d2h %.1f "
               "(mean per GEMM)\n",
               s.stage_queue_us, s.stage_h2d_us, s.stage_kernel_us,
               s.stage_d2h_us);
    else /* no device copies: the BLAS call is the kernel */
        printf("stages (us)     queue %.1f  h2d -  kernel %.1f  d2h - "
               "(mean per GEMM)\n",
               s.stage_queue_us, s.stage_kernel_us);
    printf("work            %.3g GFLOP\n", (double)s.gemm_flops / 1e9);
    for (size_t i = 0; i < ndev; i++)
        print_device(&devs[i]);
    return EXIT_OK;
}

/* The subcommands, by name. */
static const struct {
    const char *name;
    int (*run)(const char *url, int argc, char **argv);
} commands[] = {
    {"ping", cmd_ping},       {"status", cmd_status}, {"mm", cmd_mm},
    {"kernels", cmd_kernels}, {"bench", cmd_bench},   {"blas3", cmd_blas3},
};

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"url", required_argument, NULL, 'u'},
        {"timeout", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    const char *url = NULL;
    int ch;

    opterr = 0;
    /* '+': stop at the subcommand; its options are its own. */
    while ((ch = getopt_long(argc, argv, "+:hV", opts, NULL)) != -1) {
        switch (ch) {
        case 'u':
            url = optarg;
            break;
        case 't': {
            char *end;
            long ms = strtol(optarg, &end, 10);
            if (end == optarg || *end != '\0' || ms < -1 || ms == 0 ||
                ms > 86400000)
                return ctl_error(EXIT_USAGE,
                                 "--timeout wants milliseconds (or -1 for "
                                 "none), not '%s'",
                                 optarg);
            ctl_set_timeout((int)ms);
            break;
        }
        case 'h':
            fputs(usage_text, stdout);
            return EXIT_OK;
        case 'V':
            printf("gemmctl %s (libgemmclient %s, protocol %d)\n",
                   GEMM_VERSION_STRING, gemm_version_string(),
                   GEMM_PROTOCOL_VERSION);
            return EXIT_OK;
        case ':':
            return ctl_error(EXIT_USAGE, "%s needs an argument",
                             argv[optind - 1]);
        default:
            return ctl_error(EXIT_USAGE,
                             "unknown option '%s' (see gemmctl --help)",
                             argv[optind - 1]);
        }
    }
    if (optind >= argc) {
        fputs(usage_text, stderr);
        return ctl_error(EXIT_USAGE, "no command given");
    }
    const char *cmd = argv[optind];
    int sub_argc = argc - optind;
    char **sub_argv = argv + optind;
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(cmd, commands[i].name) == 0)
            return commands[i].run(url, sub_argc, sub_argv);
    if (strcmp(cmd, "help") == 0) {
        fputs(usage_text, stdout);
        return EXIT_OK;
    }
    return ctl_error(EXIT_USAGE, "unknown command '%s' (see gemmctl --help)",
                     cmd);
}
