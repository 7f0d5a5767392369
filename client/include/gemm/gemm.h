/*
 * gemm.h: the whole public API of libgemmclient, the library that talks to
 * gemmd. A client opens a connection, allocates shared-memory buffers that
 * the daemon maps too, writes matrices into them, and asks for
 * D = alpha * op(A) * op(B) + beta * C. Nothing is copied through the socket
 * but a small request.
 *
 * Conventions (as in nng): every fallible call returns a gemm_error (0 on
 * success); out-parameters are written only on success; each prototype says
 * who owns what and which threads may call it. The error codes, element
 * types, precisions and version macros live in gemm/types.h, included here.
 */
#ifndef GEMM_GEMM_H
#define GEMM_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gemm/types.h> /* errors, dtypes, precisions, versions */

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The URL a client connects to when none is given: $GEMM_URL if set, else
 * ipc://$XDG_RUNTIME_DIR/gemmd.sock if XDG_RUNTIME_DIR is set and that socket
 * exists, else ipc:///run/gemmd/gemmd.sock. Writes a NUL-terminated string
 * into buf. Returns GEMM_ERR_INVALID if it does not fit. Thread-safe.
 */
GEMM_API int gemm_default_url(char *buf, size_t len);

/* ---- connections ---------------------------------------------------- */

typedef struct gemm_client gemm_client;

/*
 * Connects to gemmd at url (NULL: gemm_default_url()). On success *out is a
 * new client the caller must gemm_client_close(); on failure *out is
 * untouched and nothing is left allocated. GEMM_ERR_CONNECT when no daemon
 * listens there; waits at most GEMM_CONNECT_TIMEOUT_MS for one that accepts
 * but does not answer (see gemm_client_open_timeout()). Thread-safe.
 *
 * A client is thread-safe: any number of threads may issue requests on one
 * client at once (each request uses its own nng context).
 */
GEMM_API int gemm_client_open(gemm_client **out, const char *url);

/*
 * gemm_client_open() waits at most timeout_ms for the connection (-1: as
 * long as nng's own handshake limit, 10 s); gemm_client_open() is this with
 * GEMM_CONNECT_TIMEOUT_MS. A missing socket, a refused connection or a
 * denied permission fail at once (GEMM_ERR_CONNECT, GEMM_ERR_PERMISSION: the
 * message names the socket's group and the command that grants it); a
 * daemon that accepts the connection but does not answer its handshake in
 * time (stopped, hung) is GEMM_ERR_NOT_ANSWERING. The timeout of later
 * requests is still gemm_client_set_timeout()'s. Thread-safe.
 */
GEMM_API int gemm_client_open_timeout(gemm_client **out, const char *url,
                                      int timeout_ms);

/* gemm_client_open()'s wait for a daemon's handshake, in milliseconds. */
#define GEMM_CONNECT_TIMEOUT_MS 2000

/*
 * Closes the connection and frees the client. Buffers still allocated on it
 * stay mapped in this process (the daemon releases its side when the
 * connection closes) and must still be freed with gemm_buffer_free().
 * Requests still pending must be waited for first. NULL is ignored. Not to be
 * called while another thread uses the client.
 */
GEMM_API void gemm_client_close(gemm_client *c);

/*
 * Per-request timeout in milliseconds for requests started after this call
 * (default 60000; -1 waits forever). Thread-safe.
 *
 * What a timeout means for a GEMM or a tensor upload: the client then asks
 * the daemon to cancel it. If it had not started, the daemon drops it and
 * the call returns GEMM_ERR_TIMEOUT: nothing was written, D is as before.
 * If it had started, the daemon stops a GEMM at its next slice (large
 * GEMMs run in slices of about gemmd's --slice-ms) and the call returns
 * GEMM_ERR_TIMEOUT saying so: D may then be partly written. A GEMM that
 * finished meanwhile returns its success (and timings); an upload is
 * waited for (as long as the timeout again, at least 1 s) and returns its
 * real outcome. Only if the
 * daemon does not answer the cancel in that time does the call return
 * GEMM_ERR_ABANDONED: the request may still run and write D later, so D
 * must not be reused until the connection is closed. Other requests (ping,
 * status, ...) change nothing and simply time out.
 */
GEMM_API int gemm_client_set_timeout(gemm_client *c, int ms);

/*
 * How a request's reply is waited for. A thread asleep until the reply
 * comes is woken by the connection's own thread, which on a virtual
 * machine costs tens of microseconds. So the client remembers the last
 * round trip of each kind and shape of request (16 of them) and, for a
 * request like one it has seen, sleeps until shortly before the reply is
 * due and spins for the rest: for half the expected time (at least 100
 * us, at most us) before and as long after, then sleeps as before. us = 0 never
 * spins. The default is 200, or GEMM_CLIENT_SPIN_US when set at
 * gemm_client_open(). Thread-safe.
 */
GEMM_API int gemm_client_set_spin(gemm_client *c, int us);

/* The message of the last failed request made by the calling thread on any
 * client (the server's words when the server refused it), or "" if none.
 * Valid until the thread's next request. Thread-safe (thread-local). */
GEMM_API const char *gemm_last_error_message(void);

typedef struct gemm_server_info {
    uint32_t protocol_version;
    char server_version[32];
    char backend[16];
    char device[128];
} gemm_server_info;

/* Round trip to the daemon; fills *info if non-NULL. Thread-safe. */
GEMM_API int gemm_ping(gemm_client *c, gemm_server_info *info);

/* What the daemon takes beyond protocol version 1's requests, as it said
 * at the last gemm_ping (0 before one): GEMM_FEATURE_* bits (gemm/types.h). */
GEMM_API uint32_t gemm_server_features(gemm_client *c);

typedef struct gemm_status {
    double uptime_s;
    char backend[16];
    char device[128];
    uint64_t requests_served;
    uint64_t requests_failed;
    uint32_t queue_depth;
    uint32_t queue_capacity;
    uint32_t buffers;      /* registered buffers, all clients */
    uint64_t buffer_bytes; /* their total size */
    uint32_t clients;      /* connected clients */
    uint32_t threads;      /* backend worker threads */
    double latency_p50_us; /* GEMM latency in the daemon, recent window */
    double latency_p90_us;
    double latency_p99_us;
    double latency_max_us;
    uint64_t gemm_flops;             /* 2*M*N*K over all served GEMMs */
    uint32_t tensors;                /* resident tensors, all clients */
    uint64_t tensor_bytes;           /* their memory */
    uint64_t pinned_bytes;           /* cuda: client memory pinned */
    uint64_t device_bytes;           /* cuda: device memory in use */
    uint64_t tmap_hits, tmap_misses; /* cuda: tensor-map cache */
    double stage_queue_us;           /* mean per GEMM: waiting in the queue */
    double stage_h2d_us;             /* copies to the device */
    double stage_kernel_us;          /* compute */
    double stage_d2h_us;             /* copy back */
    uint32_t connections;            /* open connections, all kinds */
    uint32_t users;                  /* uids connected */
    uint64_t memory_budget;          /* the daemon's own memory budget */
    uint64_t memory_used;            /* of it, in use */
    uint64_t gemms_served;           /* GEMM requests answered OK */
    uint64_t gemms_failed;           /* GEMM requests answered an error */
    /* requests answered OK per gemm_routine (index 0: GEMM; then symm ..
     * trsm); appended after 0.2 */
    uint64_t routine_served[9];
    /* batch requests answered OK and the problems they held; appended
     * with gemm_get_status_sized */
    uint64_t batches_served;
    uint64_t batch_problems;
    /* pins of large buffers run in the background (cuda:
     * cudaHostRegister off the daemon's loop): queued or running now,
     * done, failed, and the seconds and bytes of those done */
    uint32_t pins_pending;
    uint64_t pins_done;
    uint64_t pins_failed;
    double pin_seconds;
    uint64_t pin_bytes;
    /* spares (--spare-bytes): memfds the daemon made and pinned ahead,
     * lent whole to new buffers: ready now and their bytes, lent, asked
     * for with none fitting, made, failed (since start) */
    uint32_t spares_ready;
    uint64_t spare_bytes;
    uint64_t spares_lent;
    uint64_t spares_none;
    uint64_t spares_made;
    uint64_t spares_failed;
} gemm_status;

/*
 * Fetches the daemon's counters into out, of size bytes: the caller's
 * sizeof(gemm_status). gemm_status only grows at its end, so a program
 * built against an older gemm.h gets the fields it knows and nothing is
 * written past them. GEMM_ERR_INVALID when size is 0. Thread-safe.
 */
GEMM_API int gemm_get_status_sized(gemm_client *c, gemm_status *out,
                                   size_t size);

/*
 * gemm_get_status(c, out): gemm_get_status_sized with sizeof(*out). The
 * function of that name, for callers that do not see the macro (programs
 * built before it, ctypes), fills the fields up to and including
 * routine_served: the struct as it was before the batch counters.
 */
GEMM_API int(gemm_get_status)(gemm_client *c, gemm_status *out);
#define gemm_get_status(c, out)                                                \
    gemm_get_status_sized((c), (out), sizeof(*(out)))

/* One device object of the daemon (a GPU; one GPU listed twice in
 * --devices is two; or one of the CPU backend's devices). gemm_status
 * holds the totals. */
typedef struct gemm_device_status {
    uint32_t index;
    char name[128];
    bool placed;           /* in placement (false: left after failures) */
    uint32_t running;      /* jobs running on it now */
    uint32_t queued;       /* jobs waiting for it */
    uint64_t jobs;         /* jobs run (panels of split GEMMs too) */
    uint64_t failed;       /* of them, failed */
    uint64_t panels;       /* panels of split GEMMs run */
    double busy_s;         /* time its workers spent in jobs */
    uint64_t memory_bytes; /* device memory in use (cpu: tensor copies) */
    uint64_t pinned_bytes; /* client memory pinned, usable by it */
    uint32_t tensors;      /* resident tensors held (home or copy) */
    uint64_t migrations;   /* tensor copies made to it */
    uint64_t tmap_hits, tmap_misses; /* cuda: tensor-map cache */
} gemm_device_status;

/* Fetches each device's counters: out[0 .. min(cap, *n)) and in *n the
 * number of devices the daemon has (out may be NULL when cap is 0).
 * Thread-safe. */
GEMM_API int gemm_get_devices(gemm_client *c, gemm_device_status *out,
                              size_t cap, size_t *n);

/* ---- shared-memory buffers ----------------------------------------- */

typedef struct gemm_buffer gemm_buffer;

/*
 * Creates a shared-memory buffer of size bytes (rounded up to a page),
 * registers it with the daemon and maps it here. The memory is an anonymous
 * memfd (no name anywhere: nothing is left behind if anyone crashes) whose
 * pages are allocated up front, to this process (GEMM_ERR_SHM / NOMEM when
 * memory is short); its descriptor goes to the daemon over a second
 * connection to the same socket (SCM_RIGHTS), so a daemon running as
 * another user maps it too. The daemon seals it: from then on it cannot be
 * resized or have pages removed, by anyone. A buffer of 32 MiB or more
 * may instead be a spare the daemon made and pinned ahead
 * (GEMM_FEATURE_LEND; never lent before, so zero-filled too): its first
 * GEMM then waits for no pinning, and it may be up to twice size
 * (gemm_buffer_size() says). On success *out is a new buffer the caller
 * must gemm_buffer_free(); its memory is zero-filled. Thread-safe.
 */
GEMM_API int gemm_buffer_alloc(gemm_client *c, size_t size, gemm_buffer **out);

/*
 * Releases the buffer on the daemon (if its client is still open) and unmaps
 * it here (an imported one stays mapped: gemm_buffer_import). NULL is
 * ignored. No request using it may be pending. Thread-safe with respect to
 * other buffers.
 */
GEMM_API void gemm_buffer_free(gemm_buffer *b);

/* The mapped memory (page-aligned) and its usable size. Valid until
 * gemm_buffer_free(). */
GEMM_API void *gemm_buffer_data(const gemm_buffer *b);
GEMM_API size_t gemm_buffer_size(const gemm_buffer *b);
/* The daemon's id for the buffer (opaque; for diagnostics). */
GEMM_API uint64_t gemm_buffer_id(const gemm_buffer *b);
/* Whether the buffer is a spare gemmd lent (made and pinned ahead, see
 * gemm_buffer_alloc): its first GEMM waits for no pin. */
GEMM_API bool gemm_buffer_lent(const gemm_buffer *b);

/*
 * Registers memory the caller already has: fd is a memfd made with
 * MFD_ALLOW_SEALING (and not sealed yet), mapped MAP_SHARED from offset 0
 * at addr (page-aligned) for at least size bytes. Pages of its first size
 * bytes (rounded up to a page) not yet allocated are allocated here
 * (posix_fallocate: contents kept; refused past MemAvailable), then the
 * descriptor goes to the daemon as gemm_buffer_alloc()'s does and the
 * daemon seals it: from then on the memfd cannot be resized or registered
 * again (a second import of it, on any connection, is GEMM_ERR_SHM), and
 * no new writable mapping of it can be made (addr stays writable). A memfd
 * made without MFD_ALLOW_SEALING, or sealed already, is GEMM_ERR_SHM
 * naming the fix. The caller keeps fd and the mapping: gemm_buffer_free()
 * releases the registration and leaves both alone (the caller unmaps and
 * closes them after it). On success *out is a buffer whose
 * gemm_buffer_data() is addr. Thread-safe.
 */
GEMM_API int gemm_buffer_import(gemm_client *c, int fd, size_t size, void *addr,
                                gemm_buffer **out);

/* ---- GEMM ------------------------------------------------------------ */

/* A matrix in a buffer: byte offset and leading dimension in elements
 * (0 = tight: the stored row length); or, when tensor is non-zero, a
 * resident tensor (gemm_tensor_upload; buf, offset and ld are then
 * ignored). */
typedef struct gemm_matrix {
    gemm_buffer *buf;
    uint64_t offset;
    uint64_t ld;
    uint64_t tensor;
} gemm_matrix;

/*
 * D = alpha * op(A) * op(B) + beta * C; row-major; op(A) is m x k, op(B) is
 * k x n. With trans_a, A is stored k x m; with trans_b, B is stored n x k.
 * A and B are of ab_type, C and D of cd_type. C is read only when
 * beta != 0 (c.buf may be NULL otherwise). D may be the same memory as C.
 *
 * Scalars: alpha and beta (float) serve the 16/32-bit types. fp64 and
 * complex GEMMs want double and complex scalars: gemm_op_set_scalars()
 * sets alpha_re .. beta_im and scalars64, and then those are used and
 * alpha/beta ignored (the library still sends alpha/beta, rounded, for
 * older daemons). int8 A/B (int32 C/D) take integer alpha and beta in
 * int32's range, applied in wrapping int32 arithmetic (see gemm_dtype):
 * the float fields carry integers exactly up to 2^24 in magnitude,
 * gemm_op_set_scalars any int32; anything else is GEMM_ERR_INVALID from
 * the daemon. The fields after `kernel` were appended after 0.1.0:
 * code built against 0.1.0's header must be rebuilt (the struct grew;
 * the older fields keep their offsets).
 */
typedef struct gemm_op {
    uint64_t m, n, k;
    gemm_dtype ab_type;
    gemm_dtype cd_type;
    bool trans_a;
    bool trans_b;
    float alpha;
    float beta;
    gemm_matrix a, b, c, d;
    /* deadline: if the daemon has not started the GEMM this many ms after
     * receiving it, it is dropped with GEMM_ERR_TIMEOUT (0 = none) */
    uint32_t timeout_ms;
    /* fp32 A/B only: see gemm_precision */
    gemm_precision precision;
    /* NULL or "auto": the daemon picks. Otherwise a name from
     * gemm_list_kernels() (at most GEMM_KERNEL_NAME_MAX bytes); a kernel
     * that cannot serve this op is GEMM_ERR_UNSUPPORTED. Copied by
     * gemm_submit. */
    const char *kernel;
    /* complex A/B only: with trans_a, op(A) is the conjugate transpose
     * A^H (BLAS op 'C') instead of A^T; refused (GEMM_ERR_INVALID) without
     * trans_a or on a real type. Same for B. */
    bool conj_a, conj_b;
    /* true: alpha = alpha_re + i alpha_im, beta = beta_re + i beta_im
     * (imaginary parts must be 0 for real types); false: alpha, beta */
    bool scalars64;
    double alpha_re, alpha_im, beta_re, beta_im;
    /* fp64 A/B, or fp32 A/B with fp32 C/D at fp32 precision: the
     * Ozaki-II emulation's modulus count. 0: the daemon picks (native
     * DGEMM, for fp32 3xTF32, or the emulation at their accuracy);
     * GEMM_OZ_MODULI_MIN..GEMM_OZ_MODULI_MAX: emulate with exactly that
     * many (fewer: faster, less accurate; ~15 match DGEMM, ~7 SGEMM).
     * Anything else, or nonzero on another type or in a batch's op, is
     * GEMM_ERR_INVALID; with a named kernel that does not emulate,
     * GEMM_ERR_UNSUPPORTED. A backend without the emulation (cpu)
     * computes natively; gemm_timings.moduli says what ran. */
    uint32_t moduli;
} gemm_op;

/* Fills *op with m, n, k, types, alpha = 1, beta = 0 (float and double
 * forms, scalars64 off), no transposes, tight leading dimensions and no
 * buffers. Thread-safe. */
GEMM_API void gemm_op_init(gemm_op *op, uint64_t m, uint64_t n, uint64_t k,
                           gemm_dtype ab_type, gemm_dtype cd_type);

/* Sets op's scalars to alpha = alpha_re + i alpha_im and beta = beta_re +
 * i beta_im in double precision (scalars64 on; alpha and beta get the
 * real parts rounded to float). Thread-safe. */
GEMM_API void gemm_op_set_scalars(gemm_op *op, double alpha_re, double alpha_im,
                                  double beta_re, double beta_im);

typedef struct gemm_timings {
    uint64_t queued_us;     /* in the daemon's queue */
    uint64_t compute_us;    /* on the backend */
    uint64_t total_us;      /* in the daemon, receive to reply */
    uint64_t round_trip_us; /* measured by the client */
    /* the kernel that ran ("auto" resolved; "" from an older daemon) */
    char kernel[GEMM_KERNEL_NAME_MAX + 1];
    /* the multiply alone, ns: cuda, the kernel between CUDA events on the
     * device; cpu, the BLAS call (conversions excluded); 0 if unmeasured */
    uint64_t kernel_ns;
    /* fp64 and fp32: the moduli the Ozaki-II emulation used; 0 when the
     * multiply ran natively (and for other types, or an older daemon).
     * Appended after 0.1.0 */
    uint32_t moduli;
} gemm_timings;

/*
 * Runs one GEMM and waits for it. On success D has been written and *t (if
 * non-NULL) holds the timings. On failure D is unchanged and
 * gemm_last_error_message() says why. Thread-safe.
 */
GEMM_API int gemm_run(gemm_client *c, const gemm_op *op, gemm_timings *t);

/* ---- kernels ---------------------------------------------------------- */

/* One kernel the daemon's backend can run by name (gemm_op.kernel). */
typedef struct gemm_kernel_info {
    char name[GEMM_KERNEL_NAME_MAX + 1];
    unsigned ladder;     /* rung on the teaching ladder (1 = simplest); 0 = not
                            on it (a production kernel or the reference) */
    bool reference;      /* the reference the others are compared to (cuBLAS on
                            the cuda backend, OpenBLAS on the cpu backend) */
    char summary[128];   /* one line, truncated */
    uint32_t ab_types;   /* bit (1u << gemm_dtype) per A/B type served */
    uint32_t cd_types;   /* bit (1u << gemm_dtype) per C/D type served */
    uint32_t precisions; /* fp32 A/B: bit (1u << gemm_precision) per
                            precision served (DEFAULT counts as FP32) */
    uint32_t transposes; /* bit (trans_a | trans_b << 1) per combination */
} gemm_kernel_info;

/*
 * Lists the kernels of the daemon's backend, in its catalog's order. On
 * success *out is an array of *n entries that the caller frees with
 * gemm_kernel_info_free(); on failure *out and *n are untouched.
 * Thread-safe.
 */
GEMM_API int gemm_list_kernels(gemm_client *c, gemm_kernel_info **out,
                               size_t *n);

/* Frees an array from gemm_list_kernels(). NULL is ignored. */
GEMM_API void gemm_kernel_info_free(gemm_kernel_info *k);

/* ---- resident tensors ----------------------------------------------- */

/*
 * Copies the rows x cols matrix of type t at src (a buffer region) into the
 * daemon's memory (the GPU's, on the cuda backend) and keeps it there: use
 * the id as gemm_matrix.tensor for A, B or C of later GEMMs, which then
 * skip that copy (weights used again and again). On success *tensor_id is
 * the id; the tensor belongs to this connection and lives until
 * gemm_tensor_free() or until the client closes. Counts against the
 * daemon's device-memory cap (GEMM_ERR_DEVICE_MEMORY past it).
 * Thread-safe.
 */
GEMM_API int gemm_tensor_upload(gemm_client *c, const gemm_matrix *src,
                                uint64_t rows, uint64_t cols, gemm_dtype t,
                                uint64_t *tensor_id);

/* Frees a resident tensor (GEMMs already queued that use it finish
 * first). GEMM_ERR_NO_BUFFER if the id is not this connection's.
 * Thread-safe. */
GEMM_API int gemm_tensor_free(gemm_client *c, uint64_t tensor_id);

typedef struct gemm_request gemm_request;

/*
 * Sends one GEMM without waiting. On success *out is a pending request that
 * must be passed to gemm_wait() exactly once (which frees it). The op is
 * copied; the buffers must stay allocated until then. Thread-safe.
 */
GEMM_API int gemm_submit(gemm_client *c, const gemm_op *op, gemm_request **out);

/*
 * What overlaps a GEMM with its client's own copies (gemm_submit_overlapped;
 * proto/gemm.proto's Fill and Drain), in words of buffer buf:
 *  - fill_parts > 0: the operands are still being written ("filled by
 *    parts", as gemm_blas3_submit_filled): the caller's uint64_t counter
 *    at fill_offset (8-aligned, outside every operand) says 1 once C (when
 *    read) is written, 2 + p once parts 0..p are, fill_parts + 1 at the
 *    end; the first fill_parts / 2 parts (1..64 in all) cut B along K
 *    (rows of B, or columns when trans_b), the rest A along op(A)'s rows
 *    (rows of A, or columns when trans_a), each from the first
 *    (common/fill.h: gemm_fill_cut_gemm_b, gemm_fill_cut_of). Stored with
 * release semantics (after a fence for streaming stores). A counter that stops
 * short fails the op with GEMM_ERR_TIMEOUT at op->timeout_ms (or the daemon's
 * limit, 10 s). Needs GEMM_FEATURE_FILL_GEMM.
 *  - drain: the daemon stores at drain_offset (8-aligned, outside every
 *    operand and the fill counter; the caller sets it to 0 first) how many
 *    of D's rows, from the first, are final, as they land, so that the
 *    caller copies them out before the reply (read with acquire
 *    semantics; gemm_request_done says when to stop looking). A hint: it
 *    may stay 0 until the end; after a failed op D is undefined. Needs
 *    GEMM_FEATURE_DRAIN.
 */
typedef struct gemm_overlap {
    gemm_buffer *buf; /* the counters' buffer (one of the caller's) */
    uint32_t fill_parts;
    uint64_t fill_offset;
    bool drain;
    uint64_t drain_offset;
} gemm_overlap;

/* gemm_submit with ov (NULL: as gemm_submit). GEMM_ERR_UNSUPPORTED when
 * the daemon did not name the features ov needs at the last gemm_ping.
 * Thread-safe. */
GEMM_API int gemm_submit_overlapped(gemm_client *c, const gemm_op *op,
                                    const gemm_overlap *ov, gemm_request **out);

/* Whether r's reply (or its failure) has come, so that gemm_wait(r) will
 * not block. Thread-safe; r must not have been waited for. */
GEMM_API bool gemm_request_done(gemm_request *r);

/*
 * Waits for a request from gemm_submit() and frees it; returns its status
 * and fills *t (if non-NULL) on success. Any thread may wait, once.
 */
GEMM_API int gemm_wait(gemm_request *r, gemm_timings *t);

/* ---- the other level-3 routines --------------------------------------- */

/*
 * The BLAS level-3 routines (the wire's Routine). GEMM is gemm_run's; the
 * others are gemm_blas3_run's, with the meaning of CBLAS's row-major
 * interface (cblas_?symm(CblasRowMajor, ...) etc.).
 */
typedef enum gemm_routine {
    GEMM_ROUTINE_GEMM = 0,
    GEMM_ROUTINE_SYMM = 1,  /* C = alpha A B + beta C (right: B A) */
    GEMM_ROUTINE_HEMM = 2,  /* the same with A Hermitian (complex) */
    GEMM_ROUTINE_SYRK = 3,  /* C = alpha op(A) op(A)^T + beta C */
    GEMM_ROUTINE_HERK = 4,  /* C = alpha op(A) op(A)^H + beta C (real) */
    GEMM_ROUTINE_SYR2K = 5, /* C = alpha (op(A) op(B)^T + op(B) op(A)^T) .. */
    GEMM_ROUTINE_HER2K = 6, /* alpha op(A) op(B)^H + conj(alpha) op(B) .. */
    GEMM_ROUTINE_TRMM = 7,  /* B = alpha op(A) B (right: B op(A)) */
    GEMM_ROUTINE_TRSM = 8,  /* op(A) X = alpha B (right: X op(A)), X in B */
} gemm_routine;

#define GEMM_ROUTINE_COUNT 9

/* "gemm", "symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm",
 * "trsm"; "?" otherwise. Thread-safe. */
GEMM_API const char *gemm_routine_name(gemm_routine r);

/*
 * One of symm .. trsm, row-major, in place. Shapes (as stored):
 *   symm/hemm    A ka x ka (ka = right ? n : m), B and C m x n
 *   syrk/herk    A n x k (trans 'N') or k x n ('T' syrk, 'C' herk), C n x n
 *   syr2k/her2k  A and B as A of syrk, C n x n
 *   trmm/trsm    A ka x ka, B m x n (written)
 * Only the triangle `lower` names of A (symmetric, Hermitian, triangular)
 * is read, and only that triangle of C for the rank updates is written.
 * herk's alpha and beta and her2k's beta are real. trans: 'N', 'T' or
 * 'C' (complex), as each routine allows (the daemon names a bad one as
 * the reference's xerbla would). dtype fp32, fp64, c64 or c128 (hemm,
 * herk, her2k: complex). Unused fields stay 0.
 */
typedef struct gemm_blas3_op {
    gemm_routine routine;
    gemm_dtype dtype;
    bool right;     /* SIDE: B A (symm), B op(A) (trmm/trsm) */
    bool lower;     /* UPLO: the lower triangle */
    char trans;     /* TRANS / TRANSA: 'N', 'T', 'C' (0 = 'N') */
    bool unit_diag; /* DIAG: A's diagonal is ones, not read */
    uint64_t m, n, k;
    double alpha_re, alpha_im, beta_re, beta_im;
    gemm_matrix a, b, c; /* b: symm, syr2k, trmm/trsm (written); c:
                            symm .. her2k (written; read if beta != 0) */
    uint32_t timeout_ms; /* as gemm_op's */
} gemm_blas3_op;

/* Fills *op for routine r of type t: alpha 1, beta 0, left, upper, 'N',
 * non-unit, no dimensions or buffers. Thread-safe. */
GEMM_API void gemm_blas3_init(gemm_blas3_op *op, gemm_routine r, gemm_dtype t);

/* Sends op without waiting; *out goes to gemm_wait() exactly once (its
 * timings as a GEMM's). The buffers must stay until then. Thread-safe. */
GEMM_API int gemm_blas3_submit(gemm_client *c, const gemm_blas3_op *op,
                               gemm_request **out);

/*
 * gemm_blas3_submit for operands still being written ("filled by
 * parts"): the daemon starts on op at once and reads each part only after
 * the caller says it is there. The caller publishes its progress in a
 * uint64_t at fill_offset (8-aligned, outside every operand) of buffer
 * fill, stored with release semantics (and after a fence for streaming
 * stores): 1 once every operand not cut into parts is written, 2 + p once
 * parts 0..p are, parts + 1 at the end; the cut of the operands into
 * parts (1..64) is proto/gemm.proto's Fill. A counter that stops short
 * fails the op with GEMM_ERR_TIMEOUT at op->timeout_ms (or the daemon's
 * limit, 10 s), leaving the output undefined. GEMM_ERR_UNSUPPORTED unless
 * the daemon said GEMM_FEATURE_FILL at the last gemm_ping. Thread-safe.
 */
GEMM_API int gemm_blas3_submit_filled(gemm_client *c, const gemm_blas3_op *op,
                                      gemm_buffer *fill, uint64_t fill_offset,
                                      uint32_t parts, gemm_request **out);

/* Runs op and waits. On success the output (C, or B of trmm/trsm) holds
 * the result and *t (if non-NULL) the timings; on failure it is unchanged
 * and gemm_last_error_message() says why. Thread-safe. */
GEMM_API int gemm_blas3_run(gemm_client *c, const gemm_blas3_op *op,
                            gemm_timings *t);

/* ---- Batched GEMM ----------------------------------------------------- */

/* One problem of a grouped batch: its own shape, transposes and operands.
 * Types, precision, kernel, timeout and (unless scalars is set) alpha and
 * beta come from the batch's template op. m == 0 (an expert with no
 * tokens) is allowed and does nothing. */
typedef struct gemm_problem {
    uint64_t m, n, k;
    bool trans_a, trans_b;
    gemm_matrix a, b, c, d;
    bool scalars; /* true: this problem's own alpha/beta below */
    double alpha_re, alpha_im, beta_re, beta_im;
} gemm_problem;

/* A batch: either strided (count > 0: every problem has op's shape,
 * transposes and leading dimensions; problem i's operand X starts at
 * op.X.offset + i * stride_X bytes; a stride of 0 shares one operand, e.g.
 * a resident weight; stride_d must not be 0 when count > 1 unless m*n==0)
 * or grouped (count == 0: nproblems problems from problems[]; op gives the
 * shared types/scalars/etc. and its m/n/k/a/b/c/d are ignored).
 * The daemon checks every problem as it checks one GEMM, and across
 * problems: no D may overlap another problem's A, B, C or D. When any
 * problem is bad nothing runs; the error is the first bad problem's,
 * its message "problem I: ...", and gemm_last_error_problem() is I. The
 * batch counts as one request against the daemon's limits; its problems
 * against --max-batch and their summed flops against --max-gemm-flops.
 * It runs as one job (on one device, problems in order); a timeout or
 * cancel stops it between problems (D of those run is written) and a
 * problem failing at run time ends it with "problem I: ..." too. */
typedef struct gemm_batch {
    gemm_op op;
    uint64_t count;
    uint64_t stride_a, stride_b, stride_c, stride_d;
    const gemm_problem *problems;
    size_t nproblems;
} gemm_batch;

/* Copies *op into b->op and zeroes the rest (a grouped batch of no
 * problems until problems/nproblems or count are set). Thread-safe. */
GEMM_API void gemm_batch_init(gemm_batch *b, const gemm_op *op);

/* Sends batch b without waiting. On success *out is a pending request
 * that must go to gemm_wait() exactly once (the batch's timings, as a
 * GEMM's: queued until its first problem started, compute until its last
 * ended, kernel_ns summed). b and problems[] are copied; the buffers must
 * stay allocated until then. Thread-safe. */
GEMM_API int gemm_batch_submit(gemm_client *c, const gemm_batch *b,
                               gemm_request **out);

/* gemm_batch_submit() then gemm_wait(). On failure no D has been written
 * if the batch was refused (validation, limits), and
 * gemm_last_error_problem() names the first bad problem. Thread-safe. */
GEMM_API int gemm_batch_run(gemm_client *c, const gemm_batch *b,
                            gemm_timings *t);

/* After a batch failed validation: the index of the first bad problem the
 * daemon named (thread-local, like gemm_last_error_message), or -1. */
GEMM_API int64_t gemm_last_error_problem(void);

#ifdef __cplusplus
}
#endif

#endif /* GEMM_GEMM_H */
