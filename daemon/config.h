/*
 * config.h: gemmd's settings, filled from the command line. One struct,
 * read-only once the server starts (so every thread may read it).
 */
#ifndef GEMMD_CONFIG_H
#define GEMMD_CONFIG_H

#include <stddef.h>
#include <stdint.h>

typedef struct gemmd_config {
    char listen[512];          /* nng URL, ipc://... */
    char backend[16];          /* "auto", "cpu" or "cuda" */
    int threads;               /* CPU backend threads (0 = all cores) */
    int device;                /* CUDA device ordinal */
    uint32_t max_queue;        /* GEMMs queued or running, all clients */
    size_t max_message_bytes;  /* larger requests get GEMM_ERR_TOO_LARGE */
    uint64_t max_dim;          /* upper limit for m, n and k */
    uint32_t contexts;         /* nng contexts: requests received at once */
    uint32_t client_buffers;   /* per client: registered buffers */
    uint64_t client_bytes;     /* per client: registered bytes */
    uint32_t client_inflight;  /* per client: GEMMs queued or running */
    uint64_t max_pinned_bytes; /* CUDA: pinned client memory; 0 = no cap */
    uint64_t max_device_bytes; /* CUDA: staging memory; 0 = no cap */
    unsigned socket_mode;      /* permissions of the ipc socket file */
    char socket_group[64];     /* group of the socket file; "" = ours */
    double stats_interval_s;   /* stats log line period; 0 = never */
    double drain_timeout_s;    /* SIGTERM: longest wait for in-flight work */
    double watchdog_s;         /* listener self-probe period; 0 = off */
    uint32_t spin_us;          /* after any event, the loop and the workers
                                  poll this long before sleeping; 0 = off */
    int log_level;             /* syslog level */
} gemmd_config;

/* Fills *cfg with the defaults (listen URL from the environment). */
void gemmd_config_defaults(gemmd_config *cfg);

/*
 * Parses argv into *cfg. Returns 0 to go on, 1 when the program should exit
 * 0 (--help, --version: already printed), 2 on a usage error (already
 * printed to stderr). Main thread only.
 */
int gemmd_config_parse(gemmd_config *cfg, int argc, char **argv);

#endif
