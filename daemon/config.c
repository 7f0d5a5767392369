/*
 * config.c: defaults and command-line parsing for gemmd (getopt_long).
 * Numbers are checked for range here, so the rest of the daemon can trust
 * the config.
 */
#include "config.h"
#include "log.h"

#include <gemm/gemm.h>

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void gemmd_config_defaults(gemmd_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    /* As a system service (RuntimeDirectory=gemmd) systemd sets
     * RUNTIME_DIRECTORY; a user's daemon lives in XDG_RUNTIME_DIR. */
    const char *rt = getenv("RUNTIME_DIRECTORY");
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    if (rt != NULL && *rt != '\0' && strchr(rt, ':') == NULL)
        snprintf(cfg->listen, sizeof(cfg->listen), "ipc://%s/gemmd.sock", rt);
    else if (xdg != NULL && *xdg != '\0')
        snprintf(cfg->listen, sizeof(cfg->listen), "ipc://%s/gemmd.sock", xdg);
    else
        snprintf(cfg->listen, sizeof(cfg->listen),
                 "ipc:///run/gemmd/gemmd.sock");
    snprintf(cfg->backend, sizeof(cfg->backend), "auto");
    cfg->threads = 0;
    cfg->device = 0;
    cfg->max_queue = 256;
    cfg->max_message_bytes = 64 * 1024;
    cfg->max_dim = 1u << 20;
    cfg->contexts = 64;
    cfg->client_buffers = 1024;
    cfg->client_bytes = 64ull << 30;
    cfg->client_inflight = 64;
    cfg->max_pinned_bytes = 0;
    cfg->max_device_bytes = 0;
    cfg->socket_mode = 0660;
    cfg->stats_interval_s = 60.0;
    cfg->drain_timeout_s = 30.0;
    cfg->watchdog_s = 0.5;
    cfg->spin_us = 200;
    cfg->log_level = LOG_INFO;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gemmd [options]\n"
            "Serve matrix multiplies to local processes over nng ipc.\n\n"
            "  --listen URL             socket to listen on (default: "
            "ipc://$XDG_RUNTIME_DIR/gemmd.sock,\n"
            "                           or ipc:///run/gemmd/gemmd.sock as a "
            "service)\n"
            "  --backend auto|cpu|cuda  compute backend (default auto: cuda "
            "when a Hopper GPU is present)\n"
            "  --device N               CUDA device ordinal (default 0)\n"
            "  --threads N              CPU backend threads (default: all "
            "cores)\n"
            "  --max-queue N            GEMMs queued or running before "
            "'busy' (default 256)\n"
            "  --max-message-bytes N    largest request accepted (default "
            "65536)\n"
            "  --max-dim N              largest m, n or k (default 1048576)\n"
            "  --contexts N             requests received concurrently "
            "(default 64)\n"
            "  --client-buffers N       buffers one client may register "
            "(default 1024)\n"
            "  --client-bytes N         bytes one client may register "
            "(default 64 GiB)\n"
            "  --client-inflight N      GEMMs one client may have queued "
            "(default 64)\n"
            "  --max-pinned-bytes N     CUDA: cap on pinned client memory "
            "(default: none)\n"
            "  --max-device-bytes N     CUDA: cap on device staging memory "
            "(default: none)\n"
            "  --socket-mode MODE       octal permissions of the ipc socket "
            "(default 0660)\n"
            "  --socket-group NAME      group of the ipc socket (clients in it "
            "may connect)\n"
            "  --stats-interval SEC     log a stats line every SEC seconds, "
            "0 = never (default 60)\n"
            "  --drain-timeout SEC      on SIGTERM, wait at most SEC for "
            "in-flight work (default 30)\n"
            "  --watchdog SEC           probe the listener every SEC seconds "
            "and re-create it\n"
            "                           if new connections go unserved, 0 = "
            "off (default 0.5)\n"
            "  --spin-us N              after a request or a finished GEMM, "
            "poll N us for the\n"
            "                           next before sleeping (cuts wake-up "
            "latency), 0 = off\n"
            "                           (default 200)\n"
            "  --log-level LEVEL        err|warning|notice|info|debug "
            "(default info)\n"
            "  --version                print the version and exit\n"
            "  --help                   print this help and exit\n");
}

/* Parses an unsigned integer in [lo, hi]; returns 0 or -1. */
static int parse_u64(const char *s, uint64_t lo, uint64_t hi, int base,
                     uint64_t *out)
{
    char *end;
    errno = 0;
    if (s == NULL || *s == '\0' || *s == '-')
        return -1;
    unsigned long long v = strtoull(s, &end, base);
    if (errno != 0 || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_seconds(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || *end != '\0' || !(v >= 0.0) || v > 86400.0 * 365)
        return -1;
    *out = v;
    return 0;
}

enum {
    OPT_LISTEN = 256,
    OPT_BACKEND,
    OPT_DEVICE,
    OPT_THREADS,
    OPT_MAX_QUEUE,
    OPT_MAX_MSG,
    OPT_MAX_DIM,
    OPT_CONTEXTS,
    OPT_SOCKET_MODE,
    OPT_SOCKET_GROUP,
    OPT_CLIENT_BUFFERS,
    OPT_MAX_PINNED,
    OPT_MAX_DEVICE,
    OPT_CLIENT_BYTES,
    OPT_CLIENT_INFLIGHT,
    OPT_STATS,
    OPT_DRAIN,
    OPT_WATCHDOG,
    OPT_SPIN,
    OPT_LOG_LEVEL,
    OPT_VERSION,
    OPT_HELP,
};

int gemmd_config_parse(gemmd_config *cfg, int argc, char **argv)
{
    static const struct option opts[] = {
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"backend", required_argument, NULL, OPT_BACKEND},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"max-queue", required_argument, NULL, OPT_MAX_QUEUE},
        {"max-message-bytes", required_argument, NULL, OPT_MAX_MSG},
        {"max-dim", required_argument, NULL, OPT_MAX_DIM},
        {"contexts", required_argument, NULL, OPT_CONTEXTS},
        {"socket-mode", required_argument, NULL, OPT_SOCKET_MODE},
        {"socket-group", required_argument, NULL, OPT_SOCKET_GROUP},
        {"client-buffers", required_argument, NULL, OPT_CLIENT_BUFFERS},
        {"max-pinned-bytes", required_argument, NULL, OPT_MAX_PINNED},
        {"max-device-bytes", required_argument, NULL, OPT_MAX_DEVICE},
        {"client-bytes", required_argument, NULL, OPT_CLIENT_BYTES},
        {"client-inflight", required_argument, NULL, OPT_CLIENT_INFLIGHT},
        {"stats-interval", required_argument, NULL, OPT_STATS},
        {"drain-timeout", required_argument, NULL, OPT_DRAIN},
        {"watchdog", required_argument, NULL, OPT_WATCHDOG},
        {"spin-us", required_argument, NULL, OPT_SPIN},
        {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
        {"version", no_argument, NULL, OPT_VERSION},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    uint64_t v;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        const char *bad = NULL;
        switch (c) {
        case OPT_LISTEN:
            if (strlen(optarg) >= sizeof(cfg->listen) ||
                strncmp(optarg, "ipc://", 6) != 0 || optarg[6] == '\0')
                bad = "--listen needs an ipc:// URL";
            else
                snprintf(cfg->listen, sizeof(cfg->listen), "%s", optarg);
            break;
        case OPT_BACKEND:
            if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "cpu") != 0 &&
                strcmp(optarg, "cuda") != 0)
                bad = "--backend must be auto, cpu or cuda";
            else
                snprintf(cfg->backend, sizeof(cfg->backend), "%s", optarg);
            break;
        case OPT_DEVICE:
            if (parse_u64(optarg, 0, 1024, 10, &v) != 0)
                bad = "--device needs a device ordinal";
            else
                cfg->device = (int)v;
            break;
        case OPT_THREADS:
            if (parse_u64(optarg, 0, 4096, 10, &v) != 0)
                bad = "--threads needs a number in 0..4096";
            else
                cfg->threads = (int)v;
            break;
        case OPT_MAX_QUEUE:
            if (parse_u64(optarg, 1, 1u << 20, 10, &v) != 0)
                bad = "--max-queue needs a number in 1..1048576";
            else
                cfg->max_queue = (uint32_t)v;
            break;
        case OPT_MAX_MSG:
            if (parse_u64(optarg, 1024, 64u << 20, 10, &v) != 0)
                bad = "--max-message-bytes needs a number in 1024..67108864";
            else
                cfg->max_message_bytes = (size_t)v;
            break;
        case OPT_MAX_DIM:
            if (parse_u64(optarg, 1, 1ull << 31, 10, &v) != 0)
                bad = "--max-dim needs a number in 1..2^31";
            else
                cfg->max_dim = v;
            break;
        case OPT_CONTEXTS:
            if (parse_u64(optarg, 1, 4096, 10, &v) != 0)
                bad = "--contexts needs a number in 1..4096";
            else
                cfg->contexts = (uint32_t)v;
            break;
        case OPT_MAX_PINNED:
            if (parse_u64(optarg, 0, UINT64_MAX / 2, 10, &v) != 0)
                bad = "--max-pinned-bytes needs a number of bytes";
            else
                cfg->max_pinned_bytes = v;
            break;
        case OPT_MAX_DEVICE:
            if (parse_u64(optarg, 0, UINT64_MAX / 2, 10, &v) != 0)
                bad = "--max-device-bytes needs a number of bytes";
            else
                cfg->max_device_bytes = v;
            break;
        case OPT_CLIENT_BUFFERS:
            if (parse_u64(optarg, 1, 1u << 20, 10, &v) != 0)
                bad = "--client-buffers needs a number in 1..1048576";
            else
                cfg->client_buffers = (uint32_t)v;
            break;
        case OPT_CLIENT_BYTES:
            if (parse_u64(optarg, 4096, UINT64_MAX / 2, 10, &v) != 0)
                bad = "--client-bytes needs a number of bytes >= 4096";
            else
                cfg->client_bytes = v;
            break;
        case OPT_CLIENT_INFLIGHT:
            if (parse_u64(optarg, 1, 1u << 20, 10, &v) != 0)
                bad = "--client-inflight needs a number in 1..1048576";
            else
                cfg->client_inflight = (uint32_t)v;
            break;
        case OPT_SOCKET_MODE:
            if (parse_u64(optarg, 0, 0777, 8, &v) != 0 || (v & 0007) != 0)
                bad = "--socket-mode needs an octal mode with no bits for "
                      "others (e.g. 0660 or 0600)";
            else
                cfg->socket_mode = (unsigned)v;
            break;
        case OPT_SOCKET_GROUP:
            if (*optarg == '\0' || strlen(optarg) >= sizeof(cfg->socket_group))
                bad = "--socket-group needs a group name";
            else
                snprintf(cfg->socket_group, sizeof(cfg->socket_group), "%s",
                         optarg);
            break;
        case OPT_STATS:
            if (parse_seconds(optarg, &cfg->stats_interval_s) != 0)
                bad = "--stats-interval needs seconds";
            break;
        case OPT_DRAIN:
            if (parse_seconds(optarg, &cfg->drain_timeout_s) != 0)
                bad = "--drain-timeout needs seconds";
            break;
        case OPT_WATCHDOG:
            if (parse_seconds(optarg, &cfg->watchdog_s) != 0)
                bad = "--watchdog needs seconds";
            break;
        case OPT_SPIN:
            if (parse_u64(optarg, 0, 1000000, 10, &v) != 0)
                bad = "--spin-us needs 0..1000000";
            else
                cfg->spin_us = (uint32_t)v;
            break;
        case OPT_LOG_LEVEL: {
            int l = gemmd_log_parse_level(optarg);
            if (l < 0)
                bad = "--log-level must be err, warning, notice, info, "
                      "debug or 0..7";
            else
                cfg->log_level = l;
            break;
        }
        case OPT_VERSION:
            printf("gemmd %s (protocol %d)\n", GEMM_VERSION_STRING,
                   GEMM_PROTOCOL_VERSION);
            return 1;
        case OPT_HELP:
            usage(stdout);
            return 1;
        default:
            usage(stderr);
            return 2;
        }
        if (bad != NULL) {
            fprintf(stderr, "gemmd: %s (got '%s')\n", bad, optarg);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "gemmd: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    return 0;
}
