/*
 * job.h: one GEMM on its way through the daemon. Made by the loop thread
 * after validation (with references on its buffers), run by a backend
 * worker, handed back to the loop for the reply. Only one thread touches a
 * job at a time: the hand-offs go through mutex-protected queues.
 */
#ifndef GEMMD_JOB_H
#define GEMMD_JOB_H

#include "registry.h"
#include "validate.h"

#include <fill.h>
#include <gemm/types.h>

#include <stdatomic.h>
#include <stdint.h>

/* An item on the loop's inbox: a finished job, embedded in it. */
enum gemmd_event_kind {
    EV_DONE,
};

typedef struct gemmd_event {
    int kind;
    struct gemmd_event *next;
} gemmd_event;

/* Why a running job is asked to stop (gemmd_job.stop). */
enum gemmd_job_stop {
    JOB_RUN,      /* go on */
    JOB_CLOSED,   /* its connection closed: nobody waits for it */
    JOB_CANCELED, /* its client sent Cancel */
};

enum gemmd_job_kind {
    JOB_GEMM,   /* D = alpha op(A) op(B) + beta C */
    JOB_UPLOAD, /* copy a matrix into a resident tensor */
    JOB_BLAS3,  /* symm .. trsm: the routine fields below */
    JOB_BATCH,  /* many GEMMs, one reply: the batch fields below */
};

typedef struct gemmd_job {
    gemmd_event ev; /* EV_DONE, on the way back to the loop */
    int kind;       /* enum gemmd_job_kind */

    /* the problem, as validated */
    uint64_t m, n, k;
    int ab_type, cd_type;
    bool trans_a, trans_b;
    bool conj_a, conj_b; /* conjugate transpose (complex; with trans_x) */
    bool has_c;          /* beta != 0 */
    /* alpha = alpha + i alpha_im, beta likewise (imaginary parts 0 for
     * real types); backends of 16/32-bit types use them as float */
    double alpha, beta, alpha_im, beta_im;
    const void *a, *b, *c; /* c == NULL when !has_c */
    void *d;
    uint64_t lda, ldb, ldc, ldd; /* elements */
    val_resolved shape;          /* rows, cols, extents of each operand */
    /* operand is a resident tensor in device memory (a, b or c is then a
     * device pointer with a 16-byte pitch) */
    bool a_dev, b_dev, c_dev;
    int precision; /* gemm_precision, as validated (fp32 A/B) */
    char kernel[GEMM_KERNEL_NAME_MAX + 1]; /* requested; "" = auto */
    int moduli; /* fp64: Ozaki-II moduli asked for, as validated; 0 = auto */

    /* JOB_BLAS3 (blas3.c): the routine (enum val_routine) and its flags,
     * row-major as on the wire; ab_type = cd_type is its type, m, n, k
     * its dimensions (m = n for the rank updates), a and b (NULL when
     * unused) are read, d is the output (C, or B of trmm/trsm), read
     * first when has_c; shape.a, .b, .d their stored shapes */
    int routine;
    bool right, lower, unit_diag;
    int op; /* enum val_op: TRANS or TRANSA */

    /* JOB_GEMM and JOB_BLAS3 filled by parts (proto's Fill,
     * common/fill.h): the client's counter in its buffer (NULL: every
     * operand was final when sent), its parts and the operands' cut */
    const uint64_t *fill;
    unsigned fill_parts;
    gemm_fill_cut fill_cut;   /* A's for a GEMM */
    gemm_fill_cut fill_cut_b; /* a GEMM's B (no parts otherwise) */
    /* JOB_GEMM drained (proto's Drain): where D's final rows are said, in
     * the client's buffer (NULL: not asked) */
    uint64_t *drain;

    /* JOB_UPLOAD: a rows x cols matrix of dtype at a (ld lda) goes into
     * *tensor, whose pin (backend handle), data, size, ld and on_device the
     * backend fills */
    uint64_t rows, cols;
    int dtype;
    reg_buffer *tensor;

    /* JOB_BATCH (batch.c): nproblems JOB_GEMM jobs (each holding its
     * buffers; one with m or n 0 is not run), run in order on this job's
     * device (batch_run.c); ab_type, cd_type, precision and kernel are
     * the batch's, m = n = k = 0; work_flops and work_bytes their sums
     * (placement); nran counts those run, failed the problem that failed
     * (when status != OK after a run) */
    struct gemmd_job *problems;
    uint64_t nproblems, nran, failed;
    double work_flops, work_bytes;

    reg_buffer *bufs[6]; /* references held until the reply */
    int nbufs;

    /* the outcome, written by the worker */
    int status;
    char msg[256];
    uint64_t t_received; /* ns, CLOCK_MONOTONIC */
    uint64_t t_started;
    uint64_t t_finished;
    uint64_t t_pushed;                  /* handed to the inbox (trace.h) */
    uint64_t ns_h2d, ns_kernel, ns_d2h; /* stage times, if the backend
                                          measures them */
    char ran[GEMM_KERNEL_NAME_MAX + 1]; /* the kernel that ran */
    int ran_moduli; /* fp64: the moduli its emulation used (the largest
                       over panels and slices); 0 = ran natively */

    /* placement (scheduler.c, placement.c, split.c) */
    unsigned device;            /* the device object it runs on */
    double cost_ns;             /* estimated time on it, while counted */
    struct split_parent *split; /* a panel of a split GEMM: its whole */
    bool retried;               /* a panel run again after a device error */
    /* when a worker took it, more jobs waited on its device (more work
     * than workers): their copies and kernels overlap its own, so the
     * pipeline leaves it whole (cuda/pipeline.c) */
    bool crowded;

    uint32_t owner;       /* the connection that asked */
    uint64_t deadline_ns; /* drop unstarted after this; 0 = none */
    uint64_t mem;         /* of the daemon's memory budget, reserved */
    bool canceled;        /* dropped before it started (Cancel) */
    /* set by the loop thread, read by the worker between slices
     * (slice.h): enum gemmd_job_stop */
    atomic_int stop;
    /* installed by the scheduler for the worker that runs the job: called
     * between two of its slices (runs small jobs waiting meanwhile);
     * NULL: none */
    void (*between)(void *arg, struct gemmd_job *j);
    void *between_arg;

    /* where the reply goes */
    void *slot;      /* the sp_req it answers */
    uint64_t req_id; /* the request's id */
    /* the reply as its worker wrote it (complete_job_done): enum
     * conn_direct, the bytes written, the rest when only part was */
    int direct;
    size_t direct_bytes;
    struct conn_out *direct_rest;
    uint64_t t_replied; /* when the worker wrote it (direct) */

    struct gemmd_job *next; /* queue link */
} gemmd_job;

/* The longest a job waits for its client to fill its operands when its
 * request set no timeout (proto's Fill): a worker waits that long at
 * most for a client that never fills. */
#define JOB_FILL_WAIT_MS 10000

/*
 * Waits until j's fill counter reaches need (or j has none): GEMM_OK, or
 * GEMM_ERR_TIMEOUT past job_fill_deadline and GEMM_ERR_ABANDONED once
 * the client is gone, with j->msg set. The worker's thread.
 */
int job_fill_wait(gemmd_job *j, uint64_t need);

/* One look at a fill wait: GEMM_OK when the counter value v has reached
 * need, JOB_FILL_PENDING while it may still, else the error (msg set):
 * the client gone, or now past end. */
#define JOB_FILL_PENDING (-1)
int job_fill_state(const gemmd_job *j, uint64_t v, uint64_t need, uint64_t end,
                   char *msg, size_t len);

/* Between two looks: yields the CPU the first times, then sleeps 20 us. */
void job_fill_pause(unsigned spins);

/* j's fill counter now (acquire), or UINT64_MAX when it has none. */
uint64_t job_fill_now(const gemmd_job *j);

/* The time after which j's fill wait gives up (ns, as gemmd_now_ns). */
uint64_t job_fill_deadline(const gemmd_job *j);

/* Monotonic clock in nanoseconds. Thread-safe. */
uint64_t gemmd_now_ns(void);

/* The address of a validated operand: its place in a mapped buffer, or a
 * resident tensor's data (device memory when the tensor is on_device).
 * Loop thread (the registry's entries are the loop's). */
void *job_operand_ptr(const val_matrix *m);

/*
 * Fills the problem of GEMM job j (zeroed by the caller) from the
 * validated request v and its resolved operands res: shape, types,
 * transposes, scalars, precision, requested kernel and moduli, operand
 * addresses and leading dimensions. Takes no references (the caller
 * holds the buffers). Returns GEMM_OK or a gemm_error with j->msg set. Loop
 * thread.
 */
int job_fill_gemm(gemmd_job *j, const val_gemm *v, const val_resolved *res);

/* Takes a reference on each buffer of ms (n entries, NULL ones skipped,
 * at most 6 in all) for job j, held until its reply. job_hold_gemm: those
 * of a GEMM job filled by job_fill_gemm (A, B, D, C when read, and the
 * fill and drain counters'). Loop thread. */
void job_hold(gemmd_job *j, const val_matrix *const *ms, int n);
void job_hold_gemm(gemmd_job *j);

/* Sets j's deadline to timeout_ms after t_received (a request's timeout
 * field; 0 or absent: none). */
void job_set_timeout(gemmd_job *j, uint64_t t_received, bool has,
                     uint32_t timeout_ms);

/* Asks job j to stop at its next slice (why: enum gemmd_job_stop), and
 * every problem of a batch with it. Loop thread. */
void job_request_stop(gemmd_job *j, int why);

#endif
