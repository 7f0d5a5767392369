/*
 * config.c: defaults and command-line parsing for gemmd (getopt_long).
 * Numbers are checked for range here, so the rest of the daemon can trust
 * the config.
 */
#include "config.h"
#include "log.h"

#include <gemm/types.h>

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <stdbool.h>
#include <stddef.h>
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
    cfg->ndevices = 0;              /* all */
    cfg->split_volume = 1ull << 39; /* 8192^3 */
    cfg->device_fail_limit = 3;
    cfg->max_queue = 256;
    cfg->max_message_bytes = 64 * 1024;
    cfg->max_dim = 1u << 20;
    cfg->max_gemm_flops = 1ull << 50;
    cfg->max_batch = 65536;
    cfg->slice_ms = 50;
    cfg->gemm_panels = 16;
    cfg->f64_calibrate = 1;
    cfg->max_connections = 0;
    cfg->client_buffers = 1024;
    cfg->client_bytes = 0;
    cfg->client_inflight = 64;
    cfg->client_pending = 0; /* = client_inflight */
    cfg->user_connections = 256;
    cfg->user_buffers = 4096;
    cfg->user_bytes = 0;
    cfg->user_inflight = 0;
    cfg->memory_budget = 0;
    cfg->user_memory = 0;
    cfg->fd_tickets = 16;
    cfg->user_fds = 64;
    cfg->handshake_timeout_s = 5.0;
    cfg->message_timeout_s = 10.0;
    cfg->send_timeout_s = 30.0;
    cfg->max_pinned_bytes = 0;
    cfg->max_device_bytes = 0;
    cfg->device_warm_bytes = 1ull << 30;
    cfg->spare_bytes = GEMMD_SPARE_AUTO;
    cfg->socket_mode = 0660;
    cfg->stats_interval_s = 60.0;
    cfg->drain_timeout_s = 30.0;
    cfg->spin_us = 200;
    cfg->log_level = LOG_INFO;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gemmd [options]\n"
            "Serve matrix multiplies to local processes over a Unix socket "
            "(SP REQ/REP).\n\n"
            "  --listen URL             socket to listen on (default: "
            "ipc://$XDG_RUNTIME_DIR/gemmd.sock,\n"
            "                           or ipc:///run/gemmd/gemmd.sock as a "
            "service)\n"
            "  --backend auto|cpu|cuda  compute backend (default auto: cuda "
            "when a Hopper GPU is present)\n"
            "  --devices all|LIST       the devices served, one device "
            "object each (default all:\n"
            "                           every Hopper GPU); cuda: ordinals "
            "(0,1; one may repeat);\n"
            "                           cpu: N independent devices, each "
            "with its own worker\n"
            "  --device N               one CUDA device: --devices N\n"
            "  --split-volume N         m*n*k from which one GEMM is split "
            "across the devices\n"
            "                           by panels of D (default 2^39 = "
            "8192^3; 0 = never)\n"
            "  --split-same-gpu         split across device objects of one "
            "GPU too (tests;\n"
            "                           by default one panel per GPU)\n"
            "  --device-fail-limit N    device failures in a row before the "
            "device leaves\n"
            "                           placement (default 3)\n"
            "  --threads N              CPU backend threads (default: all "
            "cores)\n"
            "  --max-queue N            jobs queued or running before "
            "'busy' (default 256)\n"
            "  --max-message-bytes N    largest request accepted (default "
            "65536)\n"
            "  --max-dim N              largest m, n or k (default 1048576)\n"
            "  --max-gemm-flops N       largest GEMM, in flops (2mnk, x4 "
            "complex; default 2^50)\n"
            "  --max-batch N            most problems in one batch request "
            "(default 65536);\n"
            "                           a batch's flops sum against "
            "--max-gemm-flops\n"
            "  --slice-ms MS            run large GEMMs in slices of about "
            "MS, so a GEMM whose\n"
            "                           client left or canceled stops, and "
            "small GEMMs of\n"
            "                           others start, within one (default "
            "50; 0 = whole)\n"
            "  --gemm-panels N          cuda: a large GEMM's copies overlap "
            "its compute in\n"
            "                           blocks of D, at most N panels a "
            "dimension (default 16;\n"
            "                           0 = copy all, then compute)\n"
            "  --max-connections N      connections at once (default: from "
            "the descriptor limit)\n"
            "Per connection:\n"
            "  --client-buffers N       registered buffers (default 1024)\n"
            "  --client-bytes N         registered and resident bytes "
            "(default: the host's RAM)\n"
            "  --client-inflight N      jobs queued or running (default 64)\n"
            "  --client-pending N       requests read whose replies are not "
            "yet written: past it\n"
            "                           the connection is not read until they "
            "drain (default:\n"
            "                           --client-inflight; above it, jobs past "
            "that are refused)\n"
            "Per user (uid), over all its connections:\n"
            "  --user-connections N     (default 256)\n"
            "  --user-buffers N         (default 4096)\n"
            "  --user-bytes N           registered and resident bytes "
            "(default: the host's RAM)\n"
            "  --user-inflight N        jobs queued or running (default: "
            "no cap; with several\n"
            "                           users connected each gets an equal "
            "share of max-queue)\n"
            "  --user-memory N          share of the memory budget (default "
            "half of it)\n"
            "  --user-fds N             descriptors passed and not yet "
            "registered, all its\n"
            "                           channels (default 64)\n"
            "Memory and time:\n"
            "  --memory-budget N        the daemon's own memory for client "
            "work (CPU scratch,\n"
            "                           host tensors); default half of "
            "min(RAM, cgroup limit)\n"
            "  --fd-tickets N           descriptors a channel may hold "
            "unregistered (default 16)\n"
            "  --handshake-timeout SEC  a new connection's greeting (default "
            "5)\n"
            "  --message-timeout SEC    one message, first byte to last "
            "(default 10)\n"
            "  --send-timeout SEC       drop a client whose replies stay "
            "unread this long,\n"
            "                           0 = never (default 30)\n"
            "  --max-pinned-bytes N     CUDA: cap on pinned client memory "
            "(default: half of RAM;\n"
            "                           'none': no cap)\n"
            "  --max-device-bytes N     CUDA: cap on device staging memory "
            "(default: none)\n"
            "  --device-warm-bytes N    CUDA: device memory made at start for "
            "the first\n"
            "                           requests (default 1 GiB; 0: none)\n"
            "  --spare-bytes N          memfds made and pinned ahead, lent to "
            "new buffers\n"
            "                           (default 1 GiB when the backend pins; "
            "'none')\n"
            "Operations:\n"
            "  --socket-mode MODE       octal permissions of the ipc socket "
            "(default 0660)\n"
            "  --socket-group NAME      group of the ipc socket (clients in it "
            "may connect)\n"
            "  --metrics-listen H:P     serve Prometheus metrics at "
            "http://H:P/metrics\n"
            "  --metrics-file PATH      write them to PATH every "
            "stats interval (textfile)\n"
            "  --stats-interval SEC     log a stats line every SEC seconds, "
            "0 = never (default 60)\n"
            "  --drain-timeout SEC      on SIGTERM, wait at most SEC for "
            "in-flight work (default 30)\n"
            "  --spin-us N              after a request or a finished GEMM, "
            "poll N us for the\n"
            "                           next before sleeping (cuts wake-up "
            "latency), 0 = off\n"
            "                           (default 200; never while the host "
            "has no free core)\n"
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

/* Numeric options: where they go and their range. */
enum opt_kind { K_U32, K_U64, K_SIZE, K_SEC, K_BYTES_NONE };

typedef struct num_opt {
    const char *name;
    int kind;
    size_t off;
    uint64_t lo, hi;
} num_opt;

#define O(f) offsetof(gemmd_config, f)
static const num_opt num_opts[] = {
    {"threads", K_U32, O(threads), 0, 4096},
    {"split-volume", K_U64, O(split_volume), 0, UINT64_MAX / 2},
    {"device-fail-limit", K_U32, O(device_fail_limit), 1, 1u << 20},
    {"max-queue", K_U32, O(max_queue), 1, 1u << 20},
    {"max-message-bytes", K_SIZE, O(max_message_bytes), 1024, 64u << 20},
    {"max-dim", K_U64, O(max_dim), 1, 1ull << 31},
    {"max-gemm-flops", K_U64, O(max_gemm_flops), 1, UINT64_MAX / 2},
    {"max-batch", K_U64, O(max_batch), 1, 1u << 24},
    {"slice-ms", K_U32, O(slice_ms), 0, 60000},
    {"gemm-panels", K_U32, O(gemm_panels), 0, 64},
    {"f64-calibrate", K_U32, O(f64_calibrate), 0, 1},
    {"max-connections", K_U32, O(max_connections), 1, 1u << 24},
    {"client-buffers", K_U32, O(client_buffers), 1, 1u << 20},
    {"client-bytes", K_U64, O(client_bytes), 4096, UINT64_MAX / 2},
    {"client-inflight", K_U32, O(client_inflight), 1, 1u << 20},
    {"client-pending", K_U32, O(client_pending), 1, 1u << 20},
    {"user-connections", K_U32, O(user_connections), 1, 1u << 24},
    {"user-buffers", K_U32, O(user_buffers), 1, 1u << 24},
    {"user-bytes", K_U64, O(user_bytes), 4096, UINT64_MAX / 2},
    {"user-inflight", K_U32, O(user_inflight), 1, 1u << 20},
    {"user-memory", K_U64, O(user_memory), 1, UINT64_MAX / 2},
    {"memory-budget", K_U64, O(memory_budget), 1, UINT64_MAX / 2},
    {"fd-tickets", K_U32, O(fd_tickets), 1, 4096},
    {"user-fds", K_U32, O(user_fds), 1, 1u << 20},
    {"handshake-timeout", K_SEC, O(handshake_timeout_s), 0, 0},
    {"message-timeout", K_SEC, O(message_timeout_s), 0, 0},
    {"send-timeout", K_SEC, O(send_timeout_s), 0, 0},
    {"max-pinned-bytes", K_BYTES_NONE, O(max_pinned_bytes), 0, UINT64_MAX / 2},
    {"max-device-bytes", K_U64, O(max_device_bytes), 0, UINT64_MAX / 2},
    {"device-warm-bytes", K_U64, O(device_warm_bytes), 0, UINT64_MAX / 2},
    {"spare-bytes", K_BYTES_NONE, O(spare_bytes), 0, UINT64_MAX / 2},
    {"stats-interval", K_SEC, O(stats_interval_s), 0, 0},
    {"drain-timeout", K_SEC, O(drain_timeout_s), 0, 0},
    {"spin-us", K_U32, O(spin_us), 0, 1000000},
};
#undef O

#define NUM_OPTS (sizeof(num_opts) / sizeof(num_opts[0]))

/* Sets numeric option o from s; returns 0 or -1 (with the message why). */
static int set_num(gemmd_config *cfg, const num_opt *o, const char *s,
                   char *why, size_t len)
{
    char *p = (char *)cfg + o->off;
    uint64_t v;
    double sec;
    switch (o->kind) {
    case K_SEC:
        if (parse_seconds(s, &sec) != 0)
            break;
        *(double *)p = sec;
        return 0;
    case K_BYTES_NONE:
        if (strcmp(s, "none") == 0) {
            *(uint64_t *)p = UINT64_MAX;
            return 0;
        }
        /* fall through */
    default:
        if (parse_u64(s, o->lo, o->hi, 10, &v) != 0)
            break;
        if (o->kind == K_U32)
            *(uint32_t *)p = (uint32_t)v;
        else if (o->kind == K_SIZE)
            *(size_t *)p = (size_t)v;
        else
            *(uint64_t *)p = v;
        return 0;
    }
    if (o->kind == K_SEC)
        snprintf(why, len, "--%s needs seconds", o->name);
    else
        snprintf(why, len, "--%s needs a number in %llu..%llu%s", o->name,
                 (unsigned long long)o->lo, (unsigned long long)o->hi,
                 o->kind == K_BYTES_NONE ? " or 'none'" : "");
    return -1;
}

/* --devices all|N[,N...]: fills cfg->devices; returns 0 or -1. */
static int parse_devices(gemmd_config *cfg, const char *s)
{
    if (strcmp(s, "all") == 0) {
        cfg->ndevices = 0;
        cfg->device = 0;
        return 0;
    }
    int list[GEMMD_MAX_DEVICES];
    unsigned n = 0;
    char buf[256];
    if (strlen(s) >= sizeof(buf))
        return -1;
    snprintf(buf, sizeof(buf), "%s", s);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t != NULL;
         t = strtok_r(NULL, ",", &save)) {
        uint64_t v;
        if (n == GEMMD_MAX_DEVICES || parse_u64(t, 0, 1024, 10, &v) != 0)
            return -1;
        list[n++] = (int)v;
    }
    if (n == 0 || s[strlen(s) - 1] == ',' || s[0] == ',' ||
        strstr(s, ",,") != NULL)
        return -1;
    memcpy(cfg->devices, list, n * sizeof(int));
    cfg->ndevices = n;
    cfg->device = list[0];
    return 0;
}

enum {
    OPT_LISTEN = 256,
    OPT_BACKEND,
    OPT_SOCKET_MODE,
    OPT_SOCKET_GROUP,
    OPT_METRICS_LISTEN,
    OPT_METRICS_FILE,
    OPT_LOG_LEVEL,
    OPT_DEVICE,
    OPT_DEVICES,
    OPT_SPLIT_SAME_GPU,
    OPT_VERSION,
    OPT_HELP,
    OPT_NUM, /* + index into num_opts */
};

/*
 * Whether this process may give the socket to group `name` (chown's rule:
 * root may give a file to any group, others only to a group they are in).
 * Returns 0 if so; otherwise -1 with the reason and the way out in why.
 * Main thread only (getgrnam, getpwuid).
 */
static int check_socket_group(const char *name, char *why, size_t len)
{
    struct group *g = getgrnam(name);
    if (g == NULL) {
        snprintf(why, len,
                 "--socket-group: there is no group '%s' (getent group "
                 "lists them; groupadd makes one)",
                 name);
        return -1;
    }
    gid_t gid = g->gr_gid;
    if (geteuid() == 0 || getegid() == gid)
        return 0;
    gid_t groups[256];
    int n = getgroups(256, groups);
    for (int i = 0; i < n; i++)
        if (groups[i] == gid)
            return 0;
    struct passwd *pw = getpwuid(geteuid());
    char user[64];
    if (pw != NULL)
        snprintf(user, sizeof(user), "%s", pw->pw_name);
    else
        snprintf(user, sizeof(user), "%u", (unsigned)geteuid());
    snprintf(why, len,
             "--socket-group %s: gemmd runs as user %s, who is not in group "
             "%s, and only root or a member may give the socket to it: add "
             "the user (usermod -aG %s %s, then log in again or run newgrp "
             "%s) or leave the option out",
             name, user, name, name, user, name);
    return -1;
}

/* Whether HOST of a HOST:PORT spec is a loopback address (127.0.0.0/8,
 * ::1, "localhost"); a name or a wildcard is not. Thread-safe. */
static bool metrics_is_loopback(const char *spec)
{
    char host[160];
    const char *colon = strrchr(spec, ':');
    size_t n = colon != NULL ? (size_t)(colon - spec) : strlen(spec);
    if (n >= sizeof(host))
        return false;
    memcpy(host, spec, n);
    host[n] = '\0';
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
        memmove(host, host + 1, n - 2);
        host[n - 2] = '\0';
    }
    if (strcmp(host, "localhost") == 0)
        return true;
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1)
        return memcmp(&a6, &in6addr_loopback, sizeof(a6)) == 0;
    return false;
}

int gemmd_config_parse(gemmd_config *cfg, int argc, char **argv)
{
    static const struct option named[] = {
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"backend", required_argument, NULL, OPT_BACKEND},
        {"socket-mode", required_argument, NULL, OPT_SOCKET_MODE},
        {"socket-group", required_argument, NULL, OPT_SOCKET_GROUP},
        {"metrics-listen", required_argument, NULL, OPT_METRICS_LISTEN},
        {"metrics-file", required_argument, NULL, OPT_METRICS_FILE},
        {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"devices", required_argument, NULL, OPT_DEVICES},
        {"split-same-gpu", no_argument, NULL, OPT_SPLIT_SAME_GPU},
        {"version", no_argument, NULL, OPT_VERSION},
        {"help", no_argument, NULL, OPT_HELP},
    };
    enum { NNAMED = sizeof(named) / sizeof(named[0]) };
    struct option opts[NNAMED + NUM_OPTS + 1];
    memcpy(opts, named, sizeof(named));
    for (size_t i = 0; i < NUM_OPTS; i++)
        opts[NNAMED + i] = (struct option){num_opts[i].name, required_argument,
                                           NULL, OPT_NUM + (int)i};
    memset(&opts[NNAMED + NUM_OPTS], 0, sizeof(opts[0]));
    uint64_t v;
    int c;
    char why[400];
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
            else if (check_socket_group(optarg, why, sizeof(why)) != 0)
                bad = why;
            else
                snprintf(cfg->socket_group, sizeof(cfg->socket_group), "%s",
                         optarg);
            break;
        case OPT_METRICS_LISTEN:
            if (strchr(optarg, ':') == NULL ||
                strlen(optarg) >= sizeof(cfg->metrics_listen))
                bad = "--metrics-listen needs HOST:PORT (e.g. "
                      "127.0.0.1:9464)";
            else
                snprintf(cfg->metrics_listen, sizeof(cfg->metrics_listen), "%s",
                         optarg);
            break;
        case OPT_METRICS_FILE:
            if (*optarg == '\0' || strlen(optarg) >= sizeof(cfg->metrics_file))
                bad = "--metrics-file needs a path";
            else
                snprintf(cfg->metrics_file, sizeof(cfg->metrics_file), "%s",
                         optarg);
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
        case OPT_DEVICE:
            if (parse_u64(optarg, 0, 1024, 10, &v) != 0)
                bad = "--device needs a device number in 0..1024";
            else {
                cfg->devices[0] = cfg->device = (int)v;
                cfg->ndevices = 1;
            }
            break;
        case OPT_DEVICES:
            if (parse_devices(cfg, optarg) != 0)
                bad = "--devices needs all or a list of device numbers "
                      "(0,1 or 0,0; at most 16)";
            break;
        case OPT_SPLIT_SAME_GPU:
            cfg->split_same_gpu = true;
            break;
        case OPT_VERSION:
            printf("gemmd %s (protocol %d)\n", GEMM_VERSION_STRING,
                   GEMM_PROTOCOL_VERSION);
            return 1;
        case OPT_HELP:
            usage(stdout);
            return 1;
        default:
            if (c >= OPT_NUM && c < OPT_NUM + (int)NUM_OPTS) {
                if (set_num(cfg, &num_opts[c - OPT_NUM], optarg, why,
                            sizeof(why)) != 0)
                    bad = why;
                break;
            }
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
    if (cfg->metrics_listen[0] != '\0' &&
        !metrics_is_loopback(cfg->metrics_listen))
        fprintf(stderr,
                "gemmd: warning: --metrics-listen %s is not a loopback "
                "address: anyone who can reach it reads /metrics, which shows "
                "per-uid usage (requests, bytes, connections of each user "
                "id); listen on 127.0.0.1 unless a firewall guards the "
                "port\n",
                cfg->metrics_listen);
    return 0;
}
