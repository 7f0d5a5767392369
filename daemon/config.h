/*
 * config.h: gemmd's settings, filled from the command line. One struct,
 * read-only once the server starts (so every thread may read it).
 */
#ifndef GEMMD_CONFIG_H
#define GEMMD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GEMMD_MAX_DEVICES 16 /* device objects one daemon serves */

typedef struct gemmd_config {
    char listen[512]; /* ipc://PATH: the Unix socket */
    char backend[16]; /* "auto", "cpu" or "cuda" */
    int threads;      /* CPU backend threads (0 = all cores) */
    int device;       /* CUDA device ordinal: the first of devices */
    /* --devices: CUDA ordinals, one device object each (one ordinal may be
     * listed twice); the CPU backend makes one device per entry, or N for
     * the single entry N. ndevices 0: all (every Hopper GPU; one CPU) */
    int devices[GEMMD_MAX_DEVICES];
    unsigned ndevices;
    uint64_t split_volume;      /* m*n*k from which one GEMM runs on several
                                   devices by panels of D; 0 = never */
    uint32_t device_fail_limit; /* device failures in a row before a device
                                   leaves placement */
    bool split_same_gpu;        /* split across device objects of one GPU
                                   too (tests on a one-GPU host) */
    uint32_t max_queue;         /* jobs queued or running, all clients */
    size_t max_message_bytes;   /* larger requests get GEMM_ERR_TOO_LARGE */
    uint64_t max_dim;           /* upper limit for m, n and k */
    uint64_t max_gemm_flops;    /* one request's 2mnk (x4 complex) */
    uint64_t max_batch;         /* problems in one Batch request */
    uint32_t slice_ms;          /* a large GEMM runs in slices of about this
                                   long, stoppable between; 0 = whole */
    uint32_t gemm_panels;       /* a large staged GEMM (cuda) in this many
                                   panels overlapping copies and compute */
    uint32_t f64_calibrate;     /* cuda: 1 = measure the fp64 cost model
                                   (DGEMM against the Ozaki-II emulation) at
                                   start-up, off the readiness path; 0 = no:
                                   fp64 "auto" stays on DGEMM */
    uint32_t max_connections;   /* 0 = from RLIMIT_NOFILE */
    /* per connection */
    uint32_t client_buffers;  /* registered buffers */
    uint64_t client_bytes;    /* registered + resident bytes; 0 = RAM */
    uint32_t client_inflight; /* jobs queued or running */
    uint32_t client_pending;  /* requests read, reply not yet written:
                                  past it the connection is not read
                                  (back-pressure); 0 = client_inflight */
    /* per uid, over all its connections */
    uint32_t user_connections;
    uint32_t user_buffers;
    uint64_t user_bytes;        /* 0 = the host's RAM */
    uint32_t user_inflight;     /* 0 = no cap: a fair share of max_queue
                                   while several users are connected */
    uint64_t memory_budget;     /* the daemon's own memory for client work
                                   (CPU scratch, host tensors); 0 = half of
                                   min(RAM, cgroup limit) */
    uint64_t user_memory;       /* one uid's share of it; 0 = half */
    uint32_t fd_tickets;        /* descriptors a channel may hold unused */
    uint32_t user_fds;          /* descriptors one uid may have the daemon
                                   hold unregistered, all its channels */
    double handshake_timeout_s; /* greeting must be whole by then */
    double message_timeout_s;   /* a message, from its first byte */
    double send_timeout_s;      /* replies unread this long: drop; 0 = no */
    uint64_t max_pinned_bytes;  /* CUDA: pinned client memory; 0 = half of
                                   RAM, UINT64_MAX = no cap */
    uint64_t max_device_bytes;  /* CUDA: staging memory; 0 = no cap */
    uint64_t device_warm_bytes; /* CUDA: device memory pool grown by this
                                   at start (first requests do not wait
                                   for it); 0 = off */
    uint64_t spare_bytes;       /* spares made and pinned ahead (spares.h);
                                   GEMMD_SPARE_AUTO: 1 GiB (at most RAM /
                                   16) when the backend pins, else off;
                                   0 or UINT64_MAX ('none'): off */
    unsigned socket_mode;       /* permissions of the ipc socket file */
    char socket_group[64];      /* group of the socket file; "" = ours */
    char metrics_listen[160];   /* HOST:PORT for GET /metrics; "" = off */
    char metrics_file[512];     /* textfile-collector file; "" = off */
    double stats_interval_s;    /* stats log line period; 0 = never */
    double drain_timeout_s;     /* SIGTERM: longest wait for in-flight work */
    uint32_t spin_us;           /* after any event, the loop and the workers
                                   poll this long before sleeping; 0 = off */
    int log_level;              /* syslog level */
} gemmd_config;

#define GEMMD_SPARE_AUTO (UINT64_MAX - 1)

/* Fills *cfg with the defaults (listen URL from the environment). */
void gemmd_config_defaults(gemmd_config *cfg);

/*
 * Parses argv into *cfg. Returns 0 to go on, 1 when the program should exit
 * 0 (--help, --version: already printed), 2 on a usage error (already
 * printed to stderr). Main thread only.
 */
int gemmd_config_parse(gemmd_config *cfg, int argc, char **argv);

#endif
