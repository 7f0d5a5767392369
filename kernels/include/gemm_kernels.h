/*
 * gemm_kernels.h: the C API of gemmd's GEMM kernels: our own Hopper
 * (sm_90a) kernels, the teaching ladder, and cuBLAS as the reference and
 * for the wide types. Every kernel choice is made here: a caller names a
 * kernel of the catalog or asks for "auto", and learns what ran.
 *
 * D = alpha * op(A) * op(B) + beta * C, all matrices row-major on the device.
 * op(A) is M x K: A is stored M x K (lda >= K), or K x M when trans_a
 * (lda >= M). op(B) is K x N: B is stored K x N (ldb >= N), or N x K when
 * trans_b (ldb >= K). C and D are M x N (ldc, ldd >= N).
 *
 * Types: A and B are bf16 or fp16 (the same type), or fp32 multiplied per
 * `precision` (tf32, or 3xTF32 for fp32 accuracy), with C and D bf16, fp16
 * or fp32 (cd_type, one type for both) and fp32 accumulation; leading
 * dimensions are then multiples of 8 elements (16 bytes, what TMA needs)
 * and pointers 16-byte aligned. Or all four are fp64, complex64 or
 * complex128 (the wide types, GEMMK_WIDE_TYPES): computed in their own
 * precision (cuBLAS, or for fp64 the Ozaki-II kernels by name), any
 * leading dimension, pointers aligned to the element; D is updated in
 * place, so C, when read, must be D itself (c == d, ldc == ldd), and
 * complex operands may be conjugated (conj_a, conj_b with trans_x).
 * Or A and B int8 with C and D int32 (GEMM_INT8, GEMM_INT32): the int8
 * kernels of gemmk_gemm_s8, with alpha = zalpha[0] and beta = zbeta[0]
 * (integers in int32's range, imaginary parts 0; the float alpha, beta
 * are unused), lda and ldb multiples of 16, ldc and ldd of 4, pointers
 * 16-byte aligned, every transpose (MN-major operands are transposed
 * into the context's workspace first); never host-mapped.
 * Kernels of the catalog may serve less (see gemmk_kernel_desc). When
 * beta == 0, C is never read and may be NULL.
 *
 * Thread-safety: a gemmk_ctx belongs to one thread at a time (the daemon's
 * GPU worker); distinct contexts may be used from distinct threads. All
 * functions that take no context are thread-safe.
 * No function prints or exits; every fallible call returns a gemm_error.
 *
 * From the client API (gemm/gemm.h) this header uses gemm_error and its
 * GEMM_OK / GEMM_ERR_* values, gemm_dtype (GEMM_BF16 .. GEMM_INT32)
 * and gemm_precision (GEMM_PRECISION_*).
 */
#ifndef GEMM_KERNELS_H
#define GEMM_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>
#include <gemm/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gemmk_ctx gemmk_ctx;

typedef struct gemmk_problem {
    int64_t m, n, k;            /* >= 1 each */
    gemm_dtype ab_type;         /* see above */
    gemm_dtype cd_type;         /* see above; the wide types: ab_type */
    int trans_a, trans_b;       /* 0 or 1, see above */
    const void *a, *b, *c;      /* device pointers; c may be NULL if beta==0 */
    void *d;                    /* device pointer; must not alias a or b */
    int64_t lda, ldb, ldc, ldd; /* elements */
    float alpha, beta;          /* bf16, fp16, fp32 inputs */
    gemm_precision precision;   /* fp32 A/B only; DEFAULT otherwise */
    int conj_a, conj_b; /* complex: op(X) = X^H where trans_x (0 or 1) */
    double zalpha[2];   /* the wide types: alpha (real, imaginary) */
    double zbeta[2];    /* and beta; the float alpha, beta are unused */
    int host_mapped;    /* 1: the operands are host memory the device
                           maps (read over PCIe); "auto" then runs the
                           catalog's kernel for that (16-bit and fp32
                           inputs, not tf32) */
    int moduli;         /* fp64 only: 0 = "auto" chooses between cuBLAS
                           DGEMM and the Ozaki-II emulation at DGEMM's
                           accuracy (gemmk_gemm_f64); 2..20 = emulate with
                           exactly that many moduli (fewer: faster, less
                           accurate) */
} gemmk_problem;

/*
 * Creates a context on CUDA device `device` (makes it current on the calling
 * thread). The context owns the tensor-map cache and a split-K workspace.
 * On success *out must be freed with gemmk_ctx_destroy. Returns
 * GEMM_ERR_UNSUPPORTED when the device is not sm_90, GEMM_ERR_DEVICE when
 * the driver or device is missing, GEMM_ERR_NOMEM.
 */
gemm_error gemmk_ctx_create(gemmk_ctx **out, int device);

/* Frees the context and its workspace (synchronizes the device first).
 * NULL is a no-op. */
void gemmk_ctx_destroy(gemmk_ctx *ctx);

/* What a call ran, and why it failed. */
typedef struct gemmk_result {
    const char *kernel; /* static: the catalog kernel that ran ("auto"
                           resolved), or the one that failed; NULL when
                           none was chosen (an invalid problem) */
    char msg[256];      /* on failure: why, e.g. the CUDA or cuBLAS call,
                           its message and file:line; "" on success */
    int moduli;         /* fp64: the moduli the Ozaki-II emulation used;
                           0 when it ran natively */
} gemmk_result;

/* The wide types as bits (1u << gemm_dtype): fp64, complex64, complex128. */
#define GEMMK_WIDE_TYPES                                                       \
    ((1u << GEMM_FP64) | (1u << GEMM_COMPLEX64) | (1u << GEMM_COMPLEX128))

/* A tuning knob that was set in the environment when a context was made
 * (strings static or owned by the context). */
typedef struct gemmk_knob {
    const char *name;        /* e.g. "GEMMK_X3_BN" */
    const char *text;        /* as set */
    int value;               /* what the kernels use */
    const char *description; /* what it changes, and where */
} gemmk_knob;

/*
 * The i-th tuning knob set in the environment when ctx was made (knobs
 * are measurement switches: production sets none; the caller logs them).
 * Returns 1 and fills *out, or 0 past the last one set.
 */
int gemmk_ctx_knob(const gemmk_ctx *ctx, int i, gemmk_knob *out);

/*
 * Validates p (once, here: dims, types, leading dims, alignment, and that
 * the kernel serves it, as gemmk_check) and enqueues the multiply on
 * `stream` (0: the legacy default stream). kernel: NULL or "auto" picks a
 * kernel by shape, type and precision; otherwise a catalog name. res (may
 * be NULL) says what ran, or on failure why. Returns GEMM_ERR_INVALID for
 * bad dims, leading dims or alignment, GEMM_ERR_DTYPE for unsupported
 * types, GEMM_ERR_UNSUPPORTED for an unknown kernel name or one that does
 * not serve p, GEMM_ERR_DEVICE or GEMM_ERR_DEVICE_MEMORY on CUDA or cuBLAS
 * failures. Asynchronous, except fp64 by an Ozaki-II kernel (see
 * gemmk_gemm_f64): the operands must stay valid until the stream reaches
 * the work. Split-K configurations use the context's workspace: do not
 * run one context on two streams at once.
 */
gemm_error gemmk_gemm(gemmk_ctx *ctx, const gemmk_problem *p,
                      cudaStream_t stream, const char *kernel,
                      gemmk_result *res);

/*
 * Many GEMMs on `stream`, in as few kernel launches as their types allow:
 * the problems with bf16/fp16 inputs (fp32, bf16 or fp16 C/D, device
 * operands) run in one launch of the persistent grouped kernel per input
 * type and transpose pair (a class): "grouped128x256" when every problem
 * of the class is at least 256 wide and their 128 x 256 tiles number at
 * least the SMs, else "grouped128x128", each tile computing exactly what
 * gemmk_gemm(p, "ws128x256" or "ws128x128") computes (a class
 * that is a strided batch, one shape at constant operand strides, reads A
 * and B through two 3-D tensor maps: no per-problem maps); the wide
 * ones (fp64, complex64, complex128 on device operands, which "auto"
 * runs through cuBLAS) run in as few cuBLAS batched calls as their
 * shapes allow ("cublas": one strided-batched call per strided batch,
 * one pointer-array call per other shape, the fp64 shapes together in
 * one grouped-batched call); the others (fp32 and int8 inputs,
 * host-mapped operands) run one by one as gemmk_gemm(p, "auto") would,
 * on the same stream, without waiting between them. Problems with m or
 * n 0 are skipped; every other problem is validated as gemmk_gemm
 * validates one, all before anything runs. No D may overlap another
 * problem's A, B, C or D (not checked). res (may be NULL): the kernel
 * that ran (the grouped kernel's name when it ran, grouped128x256 when
 * any class ran with those tiles, else "cublas" when wide problems ran),
 * or on failure "problem I: why". Returns gemmk_gemm's errors; on a
 * failure after launches began, earlier problems may have run.
 * Asynchronous as gemmk_gemm: the operands must stay valid until the
 * stream reaches the work; the tensor maps and problem table live in the
 * context's workspace, as do the wide calls' pointer arrays (one stream
 * per context at a time).
 */
gemm_error gemmk_gemm_grouped(gemmk_ctx *ctx, const gemmk_problem *probs,
                              int count, cudaStream_t stream,
                              gemmk_result *res);

/* 1 when `name` asks for the automatic choice (NULL or "auto"). */
int gemmk_is_auto(const char *name);

/*
 * The operands kernel `name` (NULL = "auto") rewrites on the device
 * before its main loop when it runs p: a K-major copy of an MN-major
 * operand (int8, tf32) or the splits of 3xTF32 and Ozaki-II, as
 * GEMMK_PREPASS_A | GEMMK_PREPASS_B. A caller that cuts p into panels
 * sharing one operand pays that operand's pre-pass once per panel. 0
 * for a problem gemmk_gemm would refuse. Thread-safe.
 */
#define GEMMK_PREPASS_A 1u
#define GEMMK_PREPASS_B 2u
unsigned gemmk_prepass(const gemmk_problem *p, const char *name);

/*
 * The configuration gemmk_gemm would pick for p with kernel == NULL:
 * writes its name (static string) into *name. Returns GEMM_ERR_INVALID on
 * a bad problem.
 */
gemm_error gemmk_select(const gemmk_ctx *ctx, const gemmk_problem *p,
                        const char **name);

/*
 * Device facts the heuristic uses: SM count and how many 2-CTA clusters of
 * the 128x256 kernel are co-resident (cudaOccupancyMaxActiveClusters, or
 * $GEMMK_MAX_CLUSTERS when set: an experiment knob). Either out may be NULL.
 */
void gemmk_ctx_info(const gemmk_ctx *ctx, int *num_sms, int *max_clusters2);

/*
 * The kernel catalog: every kernel gemmk_gemm can run by name, from the
 * teaching ladder of the seed notes (naive ... wgmma-basic) through the
 * production configurations to cuBLAS as the reference. It lists only
 * what a client can ask for (the int8 kernels included: int8 is a request
 * type, run through gemmk_gemm or gemmk_gemm_s8); rows kept for
 * measurements are callable by name but not listed. Entries are static
 * and thread-safe to read.
 */
typedef struct gemmk_kernel_desc {
    const char *name;    /* what a request names, e.g. "naive", "ws128x256" */
    int ladder;          /* 1.. its rung on the ladder (bench order); 0: a
                            production configuration not on the ladder */
    int reference;       /* 1: cuBLAS, the reference others are compared to */
    const char *summary; /* one line: what it is */
    unsigned ab_types;   /* bit (1u << gemm_dtype) per A/B type it serves */
    unsigned cd_types;   /* bit (1u << gemm_dtype) per C/D type it serves */
    unsigned precisions; /* fp32 A/B: bit (1u << gemm_precision) per
                            precision served (DEFAULT counts as FP32) */
    unsigned transposes; /* bit (trans_a | trans_b << 1) per combination */
} gemmk_kernel_desc;

#define GEMMK_TRANS_ALL 0xFu

/* Number of listed entries, and the i-th (NULL when out of range). */
int gemmk_catalog_size(void);
const gemmk_kernel_desc *gemmk_catalog_entry(int i);
/* The listed entry named `name` ("auto" included), or NULL. */
const gemmk_kernel_desc *gemmk_catalog_find(const char *name);

/*
 * GEMM_OK if kernel `name` (NULL = "auto") serves p's types, precision,
 * transposes and conjugations; else GEMM_ERR_UNSUPPORTED (GEMM_ERR_DTYPE
 * for an unknown type, GEMM_ERR_INVALID for a malformed precision) with a
 * static reason in *why (if why is non-NULL), e.g. "the kernel serves
 * bf16/fp16 inputs only". Looks at types, precision, transposes and
 * conjugations only (gemmk_gemm validates the rest): a caller may check a
 * request before its operands exist. Thread-safe.
 */
gemm_error gemmk_check(const char *name, const gemmk_problem *p,
                       const char **why);

/*
 * Element types of the int8 path (gemmk_gemm_s8): gemm.h's GEMM_INT8 and
 * GEMM_INT32 (the numbers the kernels used before the request types had
 * them). GEMMK_TYPE_F64 is GEMM_FP64.
 */
#define GEMMK_TYPE_F64 GEMM_FP64
#define GEMMK_TYPE_S8  GEMM_INT8
#define GEMMK_TYPE_S32 GEMM_INT32

/*
 * int8 GEMM: D = alpha * op(A) * op(B) + beta * C with A, B
 * int8 and C, D int32, row-major as above; products accumulate in int32
 * and wrap on overflow (as do alpha and beta's products and the sum: the
 * results are exact modulo 2^32). lda and ldb are multiples of 16
 * (elements = bytes), ldc and ldd of 4; pointers 16-byte aligned. The
 * tensor cores read int8 K-major only: A stored M x K (trans_a = 0) and B
 * stored N x K (trans_b = 1) are read in place, other layouts are first
 * transposed into the context's workspace.
 */
typedef struct gemmk_problem_s8 {
    int64_t m, n, k;
    int trans_a, trans_b;
    const int8_t *a, *b;
    const int32_t *c; /* may be NULL if beta == 0 */
    int32_t *d;
    int64_t lda, ldb, ldc, ldd;
    int32_t alpha, beta;
} gemmk_problem_s8;

/*
 * Enqueues an int8 GEMM on stream. kernel: NULL, "auto" or "ws-s8" (the
 * default kernel, pp-s8), "pp-s8" (ping-pong, a 128 x 128 tile per
 * consumer warpgroup), "ws-s8x256", "ws-s8x128" (cooperative). Errors as
 * gemmk_gemm; GEMM_ERR_UNSUPPORTED for another kernel name.
 */
gemm_error gemmk_gemm_s8(gemmk_ctx *ctx, const gemmk_problem_s8 *p,
                         cudaStream_t stream, const char *kernel);

/*
 * fp64 GEMM: D = alpha * op(A) * op(B) + beta * C, all fp64,
 * row-major with transposes and leading dimensions as above (any ld >= the
 * minimum; pointers 8-byte aligned). Either native DGEMM (cuBLAS) or the
 * Ozaki-II emulation on the int8 tensor cores: A and B scaled row- and
 * column-wise (powers of two times j/8) to integers, multiplied exactly
 * modulo n moduli <= 256 (int8 GEMMs, int32 accumulation) and rebuilt by
 * the Chinese remainder theorem.
 *
 * moduli = 0 (the default): n is chosen from the inputs (their exponent
 * spread per row of A and column of B) so the error matches native
 * DGEMM's; inputs with inf/NaN or subnormals, or too wide a spread, run
 * natively, and GEMMK_F64_AUTO emulates only where the context's measured
 * cost model (gemmk_f64_rates) says it is faster. The reconstruction is
 * exact: the result is the scaled inputs' exact product correctly
 * rounded, so where every product and partial sum is representable
 * (integer matrices of modest size, say) the result is exact. moduli = 2..20:
 * exactly that many (fewer is faster and less accurate; about 2^-(8n/2 - 1)
 * relative to |a_i| |b_j|), falling back only for inf/NaN. docs/ozaki-notes.md
 * has the error model.
 */
typedef enum gemmk_f64_method {
    GEMMK_F64_AUTO = 0,    /* emulate where faster and as accurate */
    GEMMK_F64_NATIVE = 1,  /* cuBLAS DGEMM */
    GEMMK_F64_EMULATE = 2, /* emulate whenever the inputs allow it */
} gemmk_f64_method;

typedef struct gemmk_problem_f64 {
    int64_t m, n, k;
    int trans_a, trans_b;
    const double *a, *b;
    const double *c; /* may be NULL if beta == 0 */
    double *d;       /* must not alias a, b (c may equal d) */
    int64_t lda, ldb, ldc, ldd;
    double alpha, beta;
    int moduli;              /* 0: chosen for DGEMM accuracy; 2..20 */
    gemmk_f64_method method; /* GEMMK_F64_AUTO by default (0) */
} gemmk_problem_f64;

typedef struct gemmk_f64_result {
    int emulated;       /* 1: Ozaki-II ran; 0: native DGEMM (or alpha == 0) */
    int moduli;         /* moduli used (0 when native) */
    const char *kernel; /* static: "oz2-bytes", "oz2", "oz2-unfused",
                           "cublas-dgemm", "scale" (alpha == 0) */
    const char *reason; /* static: why native ran; NULL when emulated */
    int beta_a, beta_b; /* bits of the scaled integers (diagnostics) */
    double spread_a, spread_b; /* the inputs' exponent spreads */
} gemmk_f64_result;

/*
 * Runs p on stream and says in *res (may be NULL) what ran. kernel: NULL
 * or "auto" (the choice above; emulation runs as "oz2-bytes"), "oz2-bytes"
 * (one int8 GEMM per modulus whose epilogue keeps each product mod p as
 * one byte, then a reconstruction pass), "oz2" (all moduli of a tile in
 * one CTA, reconstruction in the epilogue), "oz2-unfused" (int32 products
 * through memory, GEMMul8's structure), "cublas-dgemm" (native); the
 * three emulations compute the same numbers.
 * Emulation reads the inputs' statistics back to the host first: the call
 * waits for the stream up to that point (one pass over A and B), the
 * products are then enqueued asynchronously. Returns GEMM_ERR_INVALID for
 * bad dims, leading dims, pointers or moduli, GEMM_ERR_UNSUPPORTED for an
 * unknown kernel, GEMM_ERR_DEVICE / GEMM_ERR_DEVICE_MEMORY on CUDA
 * failures (a workspace that cannot be had makes it run natively instead).
 * Uses the context's workspaces: one stream per context at a time.
 */
gemm_error gemmk_gemm_f64(gemmk_ctx *ctx, const gemmk_problem_f64 *p,
                          cudaStream_t stream, const char *kernel,
                          gemmk_f64_result *res);

/*
 * The fp64 cost model: what "auto" compares to choose between cuBLAS DGEMM
 * and the Ozaki-II emulation, measured on the device by
 * gemmk_f64_calibrate (nothing in the library guesses them):
 *   native   = native_s + 2 m n k / native_flops
 *   emulated = emul_s + bytes / emul_bandwidth + n_mod 2 m' n' k' / int8_ops
 * bytes = (16 + n_mod)(m + n) k (two reads of A and B, the residues) +
 * (2 n_mod + 8 (+ 8 with C)) m n (the residue planes, D); m', n', k' the
 * dims rounded up to the int8 kernel's 128-wide tiles. The emulation runs
 * where it is at least 5% faster and the inputs allow DGEMM's accuracy.
 */
typedef struct gemmk_f64_rates {
    double native_s, native_flops;
    double emul_s, emul_bandwidth, int8_ops;
    int moduli; /* the count the calibration's inputs needed */
    int size;   /* the largest cube it timed (n of n x n x n) */
    double ms;  /* how long it took */
    /* fp32 at fp32 accuracy (precision FP32, C and D fp32): 3xTF32
     *   x3 = x3_s + 2 m n k / x3_flops
     * against the same emulation from fp32 inputs, whose preparation
     * reads half the bytes: emul32_s + bytes32 / emul32_bandwidth + the
     * int8 term above, bytes32 = (8 + n_mod)(m + n) k + (2 n_mod + 4
     * (+ 4 with C)) m n. Zero where not measured ("auto" runs 3xTF32). */
    double x3_s, x3_flops;
    double emul32_s, emul32_bandwidth;
    int moduli_f32; /* the count the fp32 calibration's inputs needed */
    /* cuBLAS SGEMM (true fp32), the same line: what complex64's CGEMM
     * runs at, against which "auto" weighs complex64's emulation */
    double sgemm_s, sgemm_flops;
} gemmk_f64_rates;

/*
 * Measures the rates above on ctx's device: cuBLAS DGEMM, the emulation's
 * preparation and the whole emulation on random n x n x n problems (inputs
 * as bench_gemm's, phi = 0.5) at two sizes, the larger the biggest of
 * 8192, 6144, 4096 whose buffers fit max_bytes (0: 8192) and 90% of the
 * free memory, the other half of it; the fastest of three runs each, the
 * lines through the two points (through the origin and the larger one
 * where other work on the GPU bent them); then the fp32 lines (3xTF32, SGEMM
 * and the emulation from fp32 inputs) the same way, left zero where they
 * cannot be measured. Runs on `stream`; returns when done (about 0.5 s
 * on an H100) with ctx's workspaces grown (freed with
 * the context). stop (may be NULL): when *stop turns nonzero, returns
 * GEMM_ERR_SHUTDOWN after the run in progress. GEMM_ERR_DEVICE_MEMORY if
 * even 4096 does not fit; msg says what failed.
 */
gemm_error gemmk_f64_calibrate(gemmk_ctx *ctx, cudaStream_t stream,
                               size_t max_bytes, const int *stop,
                               gemmk_f64_rates *out, char *msg, size_t len);

/*
 * The rates "auto" uses for fp64 on ctx (a copy is kept). Until they are
 * set, "auto" runs cuBLAS DGEMM (an explicit moduli count or an Ozaki-II
 * kernel name still emulates). Safe to call from another thread while
 * ctx runs: calls that already started keep the old choice.
 */
void gemmk_ctx_set_f64_rates(gemmk_ctx *ctx, const gemmk_f64_rates *r);

/* The seconds ctx's cost model predicts for p (fp64, or fp32 with fp32
 * C and D at fp32 precision; moduli 0) when gemmk_gemm with kernel "auto"
 * would run it as the Ozaki-II emulation, inputs allowing; 0 when it
 * would run DGEMM or 3xTF32 (or the model is not set, or p is not such a
 * problem). A caller that would cut p into panels or slices can run it
 * whole instead: each piece would prepare its operands again.
 * Thread-safe. */
double gemmk_auto_emulation_s(gemmk_ctx *ctx, const gemmk_problem *p);

/* 1 where, by r, the emulation of an m x n x k fp64 problem with
 * `moduli` moduli (and C read: with_c) is at least 5% faster than
 * native DGEMM; else 0. */
int gemmk_f64_emulation_pays(const gemmk_f64_rates *r, int64_t m, int64_t n,
                             int64_t k, int moduli, int with_c);

/* The smallest cube n x n x n (a multiple of 256, up to 32768) from
 * which r says the emulation pays, at the calibration's moduli; 0 when
 * none does (for logs and tables). */
int64_t gemmk_f64_crossover(const gemmk_f64_rates *r);

/* The same two for fp32 inputs against 3xTF32 (r's x3 and emul32 lines;
 * the crossover at the fp32 calibration's moduli). */
int gemmk_f32_emulation_pays(const gemmk_f64_rates *r, int64_t m, int64_t n,
                             int64_t k, int moduli, int with_c);
int64_t gemmk_f32_crossover(const gemmk_f64_rates *r);

typedef struct gemmk_cache_stats {
    uint64_t hits, misses, evictions;
    uint32_t entries, capacity;
} gemmk_cache_stats;

/* Tensor-map cache counters of ctx. */
void gemmk_cache_stats_get(const gemmk_ctx *ctx, gemmk_cache_stats *out);

/* Drops every cached tensor map whose global address lies in
 * [base, base + bytes). Cached maps embed the pointer, so call this after
 * freeing device memory to keep the cache small; correctness does not
 * depend on it (the key holds pointer, shape, strides, type and box). */
void gemmk_cache_forget(gemmk_ctx *ctx, const void *base, size_t bytes);

/* Pays the context's first-use costs now (the modules of the kernels
 * "auto" picks, cuBLAS's first wide-type calls, the tensor-map encoder)
 * by running representative products on zeroed scratch on `stream`;
 * returns when they finished and the scratch is freed. full = 0 runs only
 * the small shapes (little memory, for a context's second worker). Returns
 * a gemm_error; on failure msg says which call. Not thread-safe with
 * other calls on ctx. */
gemm_error gemmk_ctx_warm(gemmk_ctx *ctx, cudaStream_t stream, int full,
                          char *msg, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* GEMM_KERNELS_H */
