/*
 * gemmblas.h: what the files of libgemmblas share (nothing here is
 * exported; the exports are listed in own.list and symbols.list).
 *
 * libgemmblas is a complete libblas.so.3: ?gemm_ and cblas_?gemm are its
 * own (gemm.c: reference argument checks, then offload.c: gemmd or the CPU
 * BLAS), and so are the other level-3 routines (level3.c: symm .. trsm,
 * which level3_offload.c stages for gemmd, the CPU BLAS computing the
 * rest, or cpu_level3.c's plain loops where it lacks them); every other
 * BLAS/CBLAS name is a trampoline into a real CPU BLAS that real.c
 * dlopens on first use. A GEMM travels as a gb_gemm: the caller's problem
 * restated row-major (a column-major call is the row-major product of the
 * transposes: A and B swap places, m and n swap, the operators N/T/C
 * stay), so the offload and the CPU paths each have one form to serve.
 */
#ifndef GEMMBLAS_H
#define GEMMBLAS_H

#include <gemm/gemm.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gemm_client;
struct gemm_buffer;

#define GB_HIDDEN __attribute__((visibility("hidden")))

/* CBLAS's enumerations (the values of every cblas.h). */
enum { GB_ROW_MAJOR = 101, GB_COL_MAJOR = 102 };
enum { GB_NO_TRANS = 111, GB_TRANS = 112, GB_CONJ_TRANS = 113 };

/* The four BLAS types: s, d, c, z. */
typedef enum gb_type { GB_S, GB_D, GB_C, GB_Z } gb_type;

/*
 * One GEMM, row-major: C (m x n, ldc) = alpha op(A) op(B) + beta C, op
 * 'N', 'T' or 'C' (conjugate transpose; 'C' on a real type means 'T').
 * A is stored m x k ('N') or k x m, B k x n ('N') or n x k; ld in
 * elements, >= the stored row length. alpha and beta point at one scalar
 * of the type (two parts for c and z). The caller's memory: read A, B (C
 * when beta != 0), write C.
 */
typedef struct gb_gemm {
    gb_type t;
    int64_t m, n, k;
    char opa, opb;
    const void *a, *b;
    void *c;
    int64_t lda, ldb, ldc;
    const void *alpha, *beta;
} gb_gemm;

/* ---- elem.c ---- */

/* Bytes of one element of t (4, 8, 8, 16). */
GB_HIDDEN size_t gb_esize(gb_type t);
/* Whether *s (a scalar of t) is 0, or 1. */
GB_HIDDEN bool gb_is_zero(gb_type t, const void *s);
GB_HIDDEN bool gb_is_one(gb_type t, const void *s);

/* ---- gemm.c ---- */

/*
 * The reference BLAS argument checks of ?GEMM, in the reference order:
 * TRANSA (1), TRANSB (2), M (3), N (4), K (5), LDA (8), LDB (10), LDC
 * (13). Returns 0 when all are legal, else the position of the first
 * illegal one. ta/tb: any case of N, T, C. Thread-safe.
 */
GB_HIDDEN int gb_check_f77(char ta, char tb, int64_t m, int64_t n, int64_t k,
                           int64_t lda, int64_t ldb, int64_t ldc);

/*
 * The same for cblas_?gemm, as the reference CBLAS reports them to
 * cblas_xerbla: layout (1), TransA (2), TransB (3), then the Fortran
 * checks of the call the reference makes (row-major: A and B, M and N
 * swapped) at their Fortran position + 1. Returns 0 or that number.
 * Thread-safe.
 */
GB_HIDDEN int gb_check_cblas(int layout, int ta, int tb, int64_t m, int64_t n,
                             int64_t k, int64_t lda, int64_t ldb, int64_t ldc);

/*
 * The row-major form of a column-major (Fortran) GEMM: C^T = op(B)^T
 * op(A)^T, so B's memory is the row-major problem's A and m, n swap; no
 * data moves. ta/tb are the Fortran characters (any case). Thread-safe.
 */
GB_HIDDEN void gb_from_colmajor(gb_gemm *g, gb_type t, char ta, char tb,
                                int64_t m, int64_t n, int64_t k,
                                const void *alpha, const void *a, int64_t lda,
                                const void *b, int64_t ldb, const void *beta,
                                void *c, int64_t ldc);

/* The row-major gb_gemm of a checked CBLAS call (either layout; ta/tb
 * CBLAS's values). Thread-safe. */
GB_HIDDEN void gb_from_cblas(gb_gemm *g, gb_type t, int layout, int ta, int tb,
                             int64_t m, int64_t n, int64_t k, const void *alpha,
                             const void *a, int64_t lda, const void *b,
                             int64_t ldb, const void *beta, void *c,
                             int64_t ldc);

/*
 * Runs a checked GEMM: m or n 0 returns; alpha 0 or k 0 scales C here
 * (beta 1: untouched, beta 0: zeroed without reading it); else gemmd when
 * the policy says so and it succeeds, the CPU BLAS otherwise (C zeroed
 * first when beta is 0, so a NaN there never propagates). Any thread.
 */
GB_HIDDEN void gb_run(const gb_gemm *g);

/* cpu_gemm.c: the CPU BLAS computes g (C zeroed first when beta is 0;
 * plain loops without a CPU BLAS); gb_scale_c: C = beta C (beta 0
 * writes zeros without reading C). Any thread. */
GB_HIDDEN void gb_cpu_gemm(const gb_gemm *g);
GB_HIDDEN void gb_scale_c(const gb_gemm *g);

/* ---- offload.c ---- */

/*
 * Sends g to gemmd when its flops reach GEMMBLAS_MIN_FLOPS: staged into
 * the calling thread's registered buffer, run, copied back. Returns true
 * when C holds the result; false (C untouched) when the CPU must compute:
 * below the threshold, no daemon, a refusal or any failure (one line on
 * stderr with GEMMBLAS_VERBOSE). Never blocks past the configured
 * timeouts. Any thread.
 */
GB_HIDDEN bool gb_offload(const gb_gemm *g);

/* One operand of a call as the caller holds it (row-major rows x cols,
 * ld elements apart) and where gemmd reads or writes it: in place (in a
 * zero-copy region registered on the connection: m names it) or staged
 * (packed tightly at byte `off` of the thread's buffer). An output in
 * place whose old value gemmd reads is backed up: its old value copied
 * to `off` first, so that a failed call can put it back for the CPU. */
typedef struct gb_opnd {
    const void *p; /* NULL: not used by this call */
    size_t rows, cols, ld;
    bool in_place;
    bool backup;   /* in place, its old value kept at off (outputs read) */
    gemm_matrix m; /* in place: the region's buffer, offset and ld */
    size_t off;    /* staged or backed up: offset in the thread's buffer */
} gb_opnd;

/* The operands of a call; out is the index of the written one. */
enum { GB_OPND_A, GB_OPND_B, GB_OPND_OUT, GB_NOPND };

/* One call to stage in a thread's buffer: `need` bytes of it (prepare,
 * when set, decides which operands are in place and sets need); run packs
 * the staged operands into buf (NULL when need is 0) and copies a
 * backed-up output's old value there, sends the request on c, waits, and
 * on success copies a staged result back to the caller (on failure the
 * caller's memory is untouched, unless run sets partial: then part of it
 * was written and the call is not tried again); it returns a gemm_error.
 * restore (set when an output can be backed up) copies the backup at
 * ops[GB_OPND_OUT].off in buf back over the caller's output after a
 * failure, before the CPU computes. ops and es: its operands, for the
 * zero-copy counters. */
typedef struct gb_call {
    char what[64]; /* "dsyrk 4096x4096x4096", for messages */
    size_t need;
    const gb_opnd *ops;
    size_t es;
    void (*prepare)(struct gemm_client *c, uint64_t gen, struct gb_call *call);
    int (*run)(struct gemm_client *c, struct gemm_buffer *buf, const void *arg);
    void (*restore)(struct gemm_buffer *buf, const void *arg);
    void *arg;
    bool partial; /* set by run: it wrote part of the output, then failed */
    bool fresh;   /* set before run: the buffer was made for this call and
                     gemmd is still pinning it (not a spare it lent) */
} gb_call;

/* Runs call through gemmd with the thread's buffer, the connection, its
 * restarts and fork rules as for a GEMM. Returns true when the result is
 * in place; false when the CPU must compute (one line with
 * GEMMBLAS_VERBOSE). Any thread. */
GB_HIDDEN bool gb_offload_call(gb_call *call);

/* ---- panels.c ---- */

/* How many row panels g (flops of work) is cut into: 1 (one request) when
 * panels are off (GEMMBLAS_PANELS 0 or 1), the zero-copy mode is on, or
 * a panel would fall below GEMMBLAS_PANEL_MIN_FLOPS. Any thread. */
GB_HIDDEN int gb_panel_count(const gb_gemm *g, double flops);

/* Sends g to gemmd in npanels (> 1) row panels, the staging copies of
 * one overlapping the daemon's work on others. Returns true when C holds
 * the result (a panel that failed, and those after it, computed on the
 * CPU from the caller's C rows, which were not yet written); false (C
 * untouched) when the CPU must compute all of it. Any thread. */
GB_HIDDEN bool gb_offload_panels(const gb_gemm *g, int npanels);

/* The wire type of t; the scalar of t at s as (re, im) doubles. */
GB_HIDDEN gemm_dtype gb_wire_type(gb_type t);

GB_HIDDEN void gb_scalar(gb_type t, const void *s, double out[2]);

/* ---- level3.c, level3_offload.c ---- */

/* The level-3 routines besides GEMM: the wire's numbers. */
enum {
    GB_SYMM = 1,
    GB_HEMM,
    GB_SYRK,
    GB_HERK,
    GB_SYR2K,
    GB_HER2K,
    GB_TRMM,
    GB_TRSM,
    GB_NROUTINES
};

/*
 * One level-3 call as the Fortran routine sees it (column-major; for a
 * row-major CBLAS call, the column-major call reference CBLAS makes):
 * side, uplo, trans, diag as characters (upper case), m, n (symm, trmm,
 * trsm) or n, k (the rank updates), the scalars as the routine takes them
 * (herk: alpha and beta real; her2k: beta real), A, B (NULL when unused)
 * and the output c (C, or B of trmm/trsm) with their leading dimensions.
 */
typedef struct gb_l3 {
    gb_type t;
    int r; /* GB_SYMM .. GB_TRSM */
    char side, uplo, trans, diag;
    int64_t m, n, k;
    const void *alpha, *beta;
    const void *a, *b;
    void *c;
    int64_t lda, ldb, ldc;
} gb_l3;

/* The reference's argument check of p: 0, or the position of the first
 * illegal argument (as xerbla reports it). Thread-safe. */
GB_HIDDEN int gb_l3_check(const gb_l3 *p);

/* Sends a checked p with a product to do (dimensions and alpha nonzero)
 * to gemmd when its flops reach the routine's threshold: true when the
 * output holds the result, false when the CPU BLAS must compute it (the
 * output untouched). Any thread. */
GB_HIDDEN bool gb_offload3(const gb_l3 *p);

/* cpu_level3.c: computes a checked p in plain loops, exactly as the
 * reference BLAS routine does (its quick returns and alpha = 0 / beta = 0
 * cases included; only the referenced triangles read and written), in
 * double precision per element; for a call no CPU BLAS can make. Any
 * thread. */
GB_HIDDEN void gb_cpu_l3(const gb_l3 *p);

/* ---- real.c ---- */

/* The real CPU BLAS's ?gemm_ (Fortran ABI, trailing string lengths), or
 * NULL when no CPU BLAS can be loaded (the reason printed once). Any
 * thread. */
typedef void (*gb_f77_gemm)(const char *, const char *, const int *,
                            const int *, const int *, const void *,
                            const void *, const int *, const void *,
                            const int *, const void *, void *, const int *,
                            size_t, size_t);
GB_HIDDEN gb_f77_gemm gb_real_gemm(gb_type t);

/* The CPU BLAS's function `name` (never ours), or NULL when no CPU BLAS
 * has it. Any thread. */
GB_HIDDEN void *gb_real_sym(const char *name);

/* Resolves forwarded function i (forward_names.h) and fills its table
 * entry; called by gb_fwd_lazy. Never returns NULL: a name no CPU BLAS
 * has gets a function that says so and aborts. */
GB_HIDDEN void *gb_fwd_resolve(unsigned i);

/* ---- copy.c ---- */

/*
 * Copies a rows x cols matrix of es-byte elements from src (leading
 * dimension lds elements) to dst (ldd), splitting large copies over the
 * copy threads (GEMMBLAS_COPY_THREADS). Any thread.
 */
GB_HIDDEN void gb_copy2d(void *dst, size_t ldd, const void *src, size_t lds,
                         size_t rows, size_t cols, size_t es);

/* The same for the lower (or upper) triangle of an n x n matrix, the
 * diagonal included; nothing outside it is read or written. */
GB_HIDDEN void gb_copy_tri(void *dst, size_t ldd, const void *src, size_t lds,
                           size_t n, bool lower, size_t es);

/* Rows [lo, hi) of a rows x cols matrix (columns [lo, hi) when by_cols)
 * from src (lds) into the same place of dst (ldd): one part of an
 * operand filled by parts (common/fill.h). */
GB_HIDDEN void gb_copy_span(void *dst, size_t ldd, const void *src, size_t lds,
                            size_t rows, size_t cols, bool by_cols, size_t lo,
                            size_t hi, size_t es);

/* Forgets the copy threads in a child after fork (they do not exist
 * there). */
GB_HIDDEN void gb_copy_atfork_child(void);

/* ---- zcalloc.c, zerocopy.c: the zero-copy mode (GEMMBLAS_ZEROCOPY) ---- */

/* A region: large memory of the program's served from a memfd (zcalloc.c)
 * and its registration with gemmd (zerocopy.c). A copy of a table record
 * (rec, seq: which one, and which use of it). */
typedef struct gb_zc_region {
    uintptr_t start; /* 2 MiB-aligned */
    size_t len;      /* mapped bytes (whole pages) */
    int fd;          /* the memfd; -1 in a child of fork (private copy) */
    uint32_t seq;    /* bumps with every reuse of the record */
    int rec;         /* the record's index */
    struct gemm_buffer *buf; /* registered on connection gen, or NULL */
    uint64_t gen;
    uint64_t freed_ns; /* when it was freed (kept for reuse) */
    void *snap;        /* during fork: its private snapshot */
    bool sealed;       /* registered once: gemmd sealed it, never again */
    bool refused;      /* the registration failed for good: staged */
} gb_zc_region;

/* The counters of gemmblas_zerocopy_counters (exported), in order. */
enum {
    GB_ZC_ON,             /* 1: the mode is on */
    GB_ZC_REGIONS,        /* regions made */
    GB_ZC_IMPORTS,        /* regions registered with gemmd */
    GB_ZC_IMPORT_FAILS,   /* registrations that failed */
    GB_ZC_RELEASES,       /* registrations released after a free */
    GB_ZC_CALLS,          /* calls gemmd completed with the mode on */
    GB_ZC_CALLS_IN_PLACE, /* of them, every operand in place */
    GB_ZC_OPERANDS_IN_PLACE,
    GB_ZC_OPERANDS_STAGED,
    GB_ZC_BYTES_STAGED,    /* bytes of the staged operands */
    GB_ZC_DETACHES,        /* regions detached after an abandoned request */
    GB_ZC_REUSES,          /* allocations served by a freed registered region */
    GB_ZC_BACKUPS,         /* calls with an output read and written in place */
    GB_ZC_BYTES_BACKED_UP, /* their outputs' bytes, copied aside first */
    GB_ZC_RESTORES,        /* backups put back after a failed call */
    GB_ZC_NCOUNT
};

/* zcalloc.c. gb_zc_on: whether regions are being made, the threshold, and
 * when GEMMBLAS_ZEROCOPY asked for it but it is off, why. gb_zc_find: the
 * live region holding [p, p + extent) copied to *out. gb_zc_update: stores
 * r's registration fields back into its record (false when the region was
 * freed or reused meanwhile). gb_zc_take_pending: up to max freed,
 * registered regions (their registration to release, then
 * gb_zc_pending_done unmaps each). gb_zc_set_wake: called (outside any
 * lock) when a registered region is freed. All thread-safe; none calls
 * the client. */
GB_HIDDEN bool gb_zc_on(size_t *min_bytes, const char **why_off);
/* Whether another allocator (jemalloc, tcmalloc, ...) follows this
 * library's malloc in the search order, and so serves nothing. */
GB_HIDDEN bool gb_zc_shadows(void);
GB_HIDDEN bool gb_zc_find(const void *p, size_t extent, gb_zc_region *out);
GB_HIDDEN bool gb_zc_update(const gb_zc_region *r);
GB_HIDDEN int gb_zc_take_pending(gb_zc_region *out, int max);
/* Gives the region holding p a private copy in place (its memfd closed):
 * gemmd's late writes (an abandoned request) no longer reach the
 * program. Returns false when there was no memory for the copy. */
GB_HIDDEN bool gb_zc_detach(const void *p);
GB_HIDDEN void gb_zc_pending_done(const gb_zc_region *r);
GB_HIDDEN bool gb_zc_any_pending(void);
/* Moves the regions kept for reuse past their time (1 s) to the pending
 * releases; returns when the next one's time is up (CLOCK_MONOTONIC ns),
 * 0 when none is kept. */
GB_HIDDEN uint64_t gb_zc_evict(void);
GB_HIDDEN void gb_zc_set_wake(void (*wake)(void));
/* zerocopy.c's fork handlers, run around zcalloc.c's own. */
GB_HIDDEN void gb_zc_set_fork_hooks(void (*prepare)(void), void (*parent)(void),
                                    void (*child)(void));
GB_HIDDEN void gb_zc_count(int which, uint64_t n);

/* zerocopy.c. gb_zc_plan: for the used operands of a call (es-byte
 * elements; ops[GB_OPND_OUT] written, and read too when out_read), which
 * lie in place in regions (registering a region on c, connection gen, the
 * first time), and the staging offsets of the others; returns the bytes
 * to stage (0: none). An output that is read and in place is backed up
 * (its old value copied into the buffer at its offset): a failure after
 * gemmd wrote part of it puts the old value back for the CPU.
 * gb_zc_drain: releases the registrations of freed regions and unmaps
 * them (the connection's read lock held). The atfork handlers of its
 * locks. Any thread. */
GB_HIDDEN size_t gb_zc_plan(struct gemm_client *c, uint64_t gen, gb_opnd *ops,
                            size_t es, bool out_read);
/* Counts a call that gemmd completed with the plan in ops. */
GB_HIDDEN void gb_zc_done(const gb_opnd *ops, size_t es);
GB_HIDDEN void gb_zc_drain(void);
/* The connection's read lock for the release thread's drains (offload.c
 * installs its own at its init; until then none is drained there). */
GB_HIDDEN void gb_zc_use_conn_lock(void (*rdlock)(void), void (*unlock)(void));

/* ---- config.c ---- */

typedef struct gb_config {
    /* GEMM, by gb_type: GEMMBLAS_MIN_FLOPS when set, else the type's
     * default; < 0: never offload */
    double min_flops[4];
    /* per level-3 routine (GB_SYMM ..) and type (gb_type):
     * GEMMBLAS_MIN_FLOPS_SYRK etc. (every type), else GEMMBLAS_MIN_FLOPS
     * when set, else the routine's default for the type */
    double min_flops3[GB_NROUTINES][4];
    int verbose;            /* GEMMBLAS_VERBOSE: 0, 1 (failures), 2 (all) */
    int timeout_ms;         /* GEMMBLAS_TIMEOUT_MS: one request */
    int connect_ms;         /* GEMMBLAS_CONNECT_TIMEOUT_MS: first ping */
    int retry_ms;           /* GEMMBLAS_RETRY_MS: after a failed connect */
    int queue_ms;           /* GEMMBLAS_QUEUE_MS: start deadline, 0 none */
    int copy_threads;       /* GEMMBLAS_COPY_THREADS */
    bool copy_nt;           /* GEMMBLAS_COPY_NT */
    int fill_parts;         /* GEMMBLAS_FILL_PARTS: level 3 filled by parts
                               while gemmd works (0 or 1: off) */
    double fill_min_bytes;  /* GEMMBLAS_FILL_MIN_BYTES: staged from */
    bool fill_gemm;         /* GEMMBLAS_FILL_GEMM: ?gemm filled by parts */
    bool drain;             /* GEMMBLAS_DRAIN: ?gemm's D copied out early */
    int panels;             /* GEMMBLAS_PANELS: 0 or 1 off */
    int panels_inflight;    /* GEMMBLAS_PANELS_INFLIGHT */
    double panel_min_flops; /* GEMMBLAS_PANEL_MIN_FLOPS: per panel */
    bool tf32;              /* GEMMBLAS_PRECISION=tf32 for sgemm */
    const char *cpu_blas;   /* GEMMBLAS_CPU_BLAS or NULL */
} gb_config;

/* GEMMBLAS_ZEROCOPY (on) and GEMMBLAS_ZEROCOPY_MIN_BYTES, read when the
 * library loads (zcalloc.c's constructor: allocations start before any
 * BLAS call); no allocation. */
GB_HIDDEN void gb_zc_env(bool *on, size_t *min_bytes);
/* The default GEMMBLAS_ZEROCOPY_MIN_BYTES. */
#define GB_ZC_DEFAULT_MIN_BYTES ((size_t)16 << 20)

/* The configuration, read from the environment once. Any thread. */
GB_HIDDEN const gb_config *gb_cfg(void);
/* fn runs once, at the first gb_cfg() after this call (zcalloc.c's log
 * of the zero-copy settings). */
GB_HIDDEN void gb_cfg_on_first_call(void (*fn)(void));

/* x rounded up to a multiple of a. */
static inline size_t gb_align_up(size_t x, size_t a)
{
    return (x + a - 1) / a * a;
}

/* "gemmblas: ..." on stderr when GEMMBLAS_VERBOSE >= level. */
/* CLOCK_MONOTONIC in milliseconds, for the verbose lines. */
GB_HIDDEN double gb_ms_now(void);

GB_HIDDEN void gb_log(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The default GEMMBLAS_MIN_FLOPS by type (s, d, c, z): where gemmd on
 * the H100 overtook a 16-thread OpenBLAS in steady state (bench_blas
 * --crossover: sgemm from n = 1024, dgemm from n = 512; blas/README.md);
 * cgemm and zgemm, not measured, keep the single threshold the two gave
 * before (2e9). */
#define GB_DEFAULT_MIN_FLOPS                                                   \
    {                                                                          \
        2e9, 2.7e8, 2e9, 2e9                                                   \
    }
/* The default GEMMBLAS_PANELS and GEMMBLAS_PANEL_MIN_FLOPS: panels are
 * off unless asked for (8 with two in flight measured on the H100, blas/
 * README.md: first calls 1.5-2.0x faster, steady dgemm 8192 1.06x but
 * sgemm 8192 0.85x: B's copy and upload and the copies out stay on the
 * critical path); a panel of less than 3e10 flops (dgemm 2048 whole is
 * 1.7e10) gains less from the overlap than its requests cost, and 3e10
 * gives n = 4096 four panels of 1024 rows. */
#define GB_DEFAULT_PANELS          1
#define GB_DEFAULT_PANEL_MIN_FLOPS 3e10
/* The level-3 routines' defaults by type (s, d, c, z), the same
 * measurement (bench_blas3 --crossover on the H100, blas/README.md), in
 * each routine's own flops: syrk from n = 1024 (s), 768 (d), 512 (c, z);
 * trsm from 512 (s), 1024 (d), 768 (c), 256 (z, the smallest size
 * tried); symm from 1024 (s), 768 (d), 512 (c, z). hemm takes symm's,
 * herk and the rank-2k updates syrk's, trmm trsm's. Indexed by GB_SYMM
 * .. GB_TRSM, then gb_type. */
#define GB_MIN_SYMM                                                            \
    {                                                                          \
        2.15e9, 9e8, 1.07e9, 1.07e9                                            \
    }
#define GB_MIN_SYRK                                                            \
    {                                                                          \
        1.07e9, 4.5e8, 5.4e8, 5.4e8                                            \
    }
#define GB_MIN_TRSM                                                            \
    {                                                                          \
        4.5e8, 1.3e8, 1.8e9, 6.7e7                                             \
    }
#define GB_DEFAULT_MIN_FLOPS3                                                  \
    {                                                                          \
        {0, 0, 0, 0}, GB_MIN_SYMM, GB_MIN_SYMM, GB_MIN_SYRK, GB_MIN_SYRK,      \
            GB_MIN_SYRK, GB_MIN_SYRK, GB_MIN_TRSM, GB_MIN_TRSM                 \
    }

#endif /* GEMMBLAS_H */
