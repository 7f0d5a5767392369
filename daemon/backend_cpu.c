/*
 * backend_cpu.c: the CPU backend. OpenBLAS's cblas_sgemm does the work;
 * bf16 and fp16 operands are widened to fp32 first and D is narrowed after,
 * so accumulation is fp32 as on the GPU. fp64, complex64 and complex128
 * go to cblas_dgemm, cblas_cgemm and cblas_zgemm on the operands as they
 * are (row-major, the caller's leading dimensions, conjugate transposes
 * as CblasConjTrans), accumulating in their own type. Serves hosts without
 * a GPU, and CI.
 * One worker thread runs GEMMs one at a time, each using --threads
 * OpenBLAS threads (concurrent OpenBLAS calls would only fight over the
 * cores). --devices N makes N devices, each a worker thread computing on
 * its own thread (OpenBLAS single-threaded: its threaded calls take one
 * global lock, which would serialise the devices), so placement,
 * splitting, migration and faults are tested without a GPU: a resident
 * tensor lives on the device that uploaded it, and a GEMM on another
 * device works on that device's copy (made on first use, kept until the
 * tensor is freed, within --max-device-bytes per device, 256 MiB when
 * unset; past it the GEMM reads the home copy).
 *
 * int8 A and B (int32 C and D) have no OpenBLAS routine: they run on
 * cpu_s8.c's blocked kernel on as many threads as OpenBLAS gets (one per
 * device with --devices N), exact in wrapping int32 arithmetic.
 *
 * Three kernels by name: `openblas` (the default and the reference),
 * `cpu-s8` (int8, the only one that serves it) and
 * `cpu-naive` (one fp32 dot product per output in plain loops: the CPU's
 * first rung of the ladder, for `gemmctl bench`). fp32 inputs with
 * precision tf32 are rounded to tf32 first (10-bit mantissa, to nearest
 * with ties away from zero, as cvt.rna.tf32.f32) and multiplied in fp32,
 * so the CPU gives the tensor cores' tf32 numerics up to summation order;
 * precision fp32 (and default) is a plain SGEMM.
 *
 * A GEMM larger than one slice (slice.h) runs as OpenBLAS calls on tiles
 * of D of at most half of --slice-ms each, from the rates measured at
 * start-up (cpu_calibrate), so it stops, and small GEMMs of others run,
 * between two of them.
 *
 * Built with GEMMD_TEST_HOOKS (gemmd_test, for the test suites only; never
 * installed), a third kernel, `test-hold`, exists when gemmd starts with
 * GEMMD_TEST_HOLD_FD=N: a socket whose other end the test holds. On the
 * worker it writes one byte to N (the job is running), blocks until it
 * reads one byte back (the test's release, or end of file once the test
 * closed its end), then computes as openblas. A test thereby keeps the
 * worker busy exactly as long as it needs (tests/util/hold.h).
 */
#include "backend.h"
#include "backend_cpu_blas3.h"
#include "cpu_s8.h"
#include "fill_check.h"
#include "log.h"
#include "slice.h"

#include <gemm/types.h>

#include <cblas.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef GEMMD_TEST_HOOKS
#include <math.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#define CPU_HOLD_KERNEL "test-hold"

/* The test's hold socket (GEMMD_TEST_HOLD_FD), or -1: no test-hold kernel.
 * Set once by cpu_init before the worker starts. */
static int cpu_hold_fd = -1;

/* Takes the hold socket from the environment, if a test gave one. */
static void cpu_hold_init(void)
{
    const char *e = getenv("GEMMD_TEST_HOLD_FD");
    char *end;
    if (e == NULL || *e == '\0')
        return;
    long fd = strtol(e, &end, 10);
    if (*end != '\0' || fd < 3 || fd > INT_MAX ||
        fcntl((int)fd, F_SETFD, FD_CLOEXEC) != 0) {
        gemmd_log(LOG_WARNING,
                  "GEMMD_TEST_HOLD_FD=%s: not an open descriptor; "
                  "no test hold",
                  e);
        return;
    }
    cpu_hold_fd = (int)fd;
    gemmd_log(LOG_INFO, "cpu backend: kernel %s held on descriptor %d",
              CPU_HOLD_KERNEL, cpu_hold_fd);
}

/* Worker thread: tells the test that a held job runs, then blocks until
 * the test releases it (one byte) or closes its end. */
static void cpu_hold(void)
{
    char c = 'h';
    while (send(cpu_hold_fd, &c, 1, MSG_NOSIGNAL) < 0 && errno == EINTR)
        ;
    while (read(cpu_hold_fd, &c, 1) < 0 && errno == EINTR)
        ;
}

/*
 * The test pin: with GEMMD_TEST_PIN_MS_PER_MIB=X in the environment the
 * CPU backend pins client buffers as the cuda one does, but a pin only
 * takes X ms per MiB (the cost of cudaHostRegister, without a GPU), so
 * tests can watch a large buffer's pin run in the background. Its bytes
 * count against --max-pinned-bytes and show as pinned_bytes; a pin of
 * exactly GEMMD_TEST_PIN_FAIL_SIZE bytes fails (the failure path).
 */
static double cpu_pin_ms_per_mib = -1; /* < 0: no test pin */
static uint64_t cpu_pin_fail_size;
static unsigned long long cpu_pin_max;
static atomic_ullong cpu_pinned;

/* Reads the test pin's settings; whether it is on. Main thread. */
static bool cpu_pin_init(const gemmd_config *cfg)
{
    const char *e = getenv("GEMMD_TEST_PIN_MS_PER_MIB");
    char *end;
    if (e == NULL || *e == '\0')
        return false;
    double ms = strtod(e, &end);
    if (*end != '\0' || !(ms >= 0 && ms <= 1e6)) {
        gemmd_log(LOG_WARNING,
                  "GEMMD_TEST_PIN_MS_PER_MIB=%s: not a number of ms in "
                  "[0, 1e6]; no test pin",
                  e);
        return false;
    }
    cpu_pin_ms_per_mib = ms;
    if ((e = getenv("GEMMD_TEST_PIN_FAIL_SIZE")) != NULL)
        cpu_pin_fail_size = strtoull(e, NULL, 10);
    cpu_pin_max = cfg->max_pinned_bytes;
    gemmd_log(LOG_INFO,
              "cpu backend: test pin, %.3f ms per MiB (pins of %llu bytes "
              "fail)",
              ms, (unsigned long long)cpu_pin_fail_size);
    return true;
}

static int cpu_pin_reserve(gemmd_backend *be, size_t size, char *msg,
                           size_t len)
{
    (void)be;
    unsigned long long now = atomic_fetch_add(&cpu_pinned, size);
    if (cpu_pin_max != 0 && now + size > cpu_pin_max) {
        atomic_fetch_sub(&cpu_pinned, size);
        snprintf(msg, len,
                 "pinning %zu more bytes would pass the daemon's limit of "
                 "%llu pinned bytes",
                 size, cpu_pin_max);
        return GEMM_ERR_LIMIT;
    }
    return GEMM_OK;
}

static void cpu_pin_unreserve(gemmd_backend *be, size_t size)
{
    (void)be;
    atomic_fetch_sub(&cpu_pinned, size);
}

/* Takes the configured time (the test's slow operation), then pins:
 * *handle is the size. Any thread. */
static int cpu_pin(gemmd_backend *be, void *base, size_t size, void **handle,
                   char *msg, size_t len)
{
    (void)be;
    (void)base;
    double ns = cpu_pin_ms_per_mib * 1e6 * ((double)size / (1 << 20));
    struct timespec ts = {(time_t)(ns / 1e9), (long)fmod(ns, 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    if (size == cpu_pin_fail_size) {
        snprintf(msg, len, "test pin: pins of %zu bytes fail", size);
        return GEMM_ERR_DEVICE;
    }
    *handle = (void *)(uintptr_t)size;
    return GEMM_OK;
}

static void cpu_unpin(gemmd_backend *be, void *base, void *handle)
{
    (void)be;
    (void)base;
    atomic_fetch_sub(&cpu_pinned, (uintptr_t)handle);
}
#endif

/* Memory counters for Status: the test pin's bytes (none otherwise). */
static void cpu_stats(gemmd_backend *be, gemmd_backend_stats *out)
{
    (void)be;
    memset(out, 0, sizeof(*out));
#ifdef GEMMD_TEST_HOOKS
    out->pinned_bytes = atomic_load(&cpu_pinned);
#endif
}

/* Flops per slice by kind of call (fp32 and complex64: sgemm's rate;
 * fp64 and complex128: dgemm's; the naive loops'; int8's), from
 * cpu_calibrate; 0 = whole GEMMs. Set once by cpu_init before the worker
 * starts. */
static uint64_t cpu_slice_s, cpu_slice_d, cpu_slice_naive, cpu_slice_s8;

/* Threads one int8 GEMM computes on (OpenBLAS's count). Set once by
 * cpu_init before the worker starts. */
static unsigned cpu_s8_threads = 1;

static void naive_sgemm(const gemmd_job *j, const float *A, uint64_t lda,
                        const float *B, uint64_t ldb, float *D, uint64_t ldd,
                        uint64_t rows, uint64_t cols);

/* Flops per ns of kind (0 sgemm, 1 dgemm, 2 naive, 3 int8) on an n^3
 * problem (the best of 3 runs after one to warm up), or 0 when out of
 * memory. */
static double cpu_rate(int kind, int n)
{
    size_t es = kind == 1 ? sizeof(double) : sizeof(float);
    char *a = calloc((size_t)n * n, es), *b = calloc((size_t)n * n, es),
         *d = calloc((size_t)n * n, es);
    double best = 0;
    gemmd_job j = {
        .m = (uint64_t)n, .n = (uint64_t)n, .k = (uint64_t)n, .alpha = 1.0};
    for (int i = 0; a != NULL && b != NULL && d != NULL && i < 4; i++) {
        uint64_t t0 = gemmd_now_ns();
        if (kind == 0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n,
                        1.0f, (float *)a, n, (float *)b, n, 0.0f, (float *)d,
                        n);
        else if (kind == 1)
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0,
                        (double *)a, n, (double *)b, n, 0.0, (double *)d, n);
        else if (kind == 3)
            cpu_s8_gemm(&(cpu_s8_problem){.m = (uint64_t)n,
                                          .n = (uint64_t)n,
                                          .k = (uint64_t)n,
                                          .a = (const int8_t *)a,
                                          .b = (const int8_t *)b,
                                          .lda = (uint64_t)n,
                                          .ldb = (uint64_t)n,
                                          .d = (int32_t *)d,
                                          .ldd = (uint64_t)n,
                                          .alpha = 1},
                        cpu_s8_threads);
        else
            naive_sgemm(&j, (float *)a, (uint64_t)n, (float *)b, (uint64_t)n,
                        (float *)d, (uint64_t)n, (uint64_t)n, (uint64_t)n);
        uint64_t dt = gemmd_now_ns() - t0;
        double r = 2.0 * n * n * n / (double)(dt ? dt : 1);
        if (i > 0 && r > best)
            best = r;
    }
    free(a);
    free(b);
    free(d);
    return best;
}

/* Measures this host's sgemm, dgemm and naive rates and sets the flops of
 * a slice: half of slice_ms at each. */
static void cpu_calibrate(unsigned slice_ms)
{
    if (slice_ms == 0)
        return;
    double ns = slice_ms * 1e6 / 2, rs = cpu_rate(0, 512),
           rd = cpu_rate(1, 384), rn = cpu_rate(2, 64), r8 = cpu_rate(3, 512);
    cpu_slice_s = (uint64_t)(rs * ns) | 1;
    cpu_slice_d = (uint64_t)(rd * ns) | 1;
    cpu_slice_naive = (uint64_t)(rn * ns) | 1;
    cpu_slice_s8 = (uint64_t)(r8 * ns) | 1;
    gemmd_log(LOG_INFO,
              "cpu backend: sgemm %.1f, dgemm %.1f, naive %.2f GFLOP/s, int8 "
              "%.1f GOP/s (%s) measured; GEMMs run in slices of at most %.1f "
              "ms (%.3g, %.3g, %.3g, %.3g flops)",
              rs, rd, rn, r8, cpu_s8_isa(), slice_ms / 2.0, (double)cpu_slice_s,
              (double)cpu_slice_d, (double)cpu_slice_naive,
              (double)cpu_slice_s8);
}

static bool cpu_available(void)
{
    return true;
}

/* Copies of resident tensors one device may hold without --max-device-
 * bytes. */
#define CPU_COPY_CAP_DEFAULT (256ull << 20)

/* One CPU device's counters. */
typedef struct cpu_device {
    atomic_ullong copy_bytes; /* tensor copies held here */
    atomic_uint tensors;      /* tensors with a copy here (home included) */
    atomic_ullong migrations; /* copies made here */
} cpu_device;

typedef struct cpu_priv {
    cpu_device devs[GEMMD_MAX_DEVICES];
    unsigned ndevs;
    unsigned long long copy_cap; /* per device */
    uint64_t split_volume;       /* --split-volume (job_memory) */
    char model[128];
} cpu_priv;

/* A resident tensor: its home copy (the upload's, on device home) and the
 * copies other devices made. */
typedef struct cpu_tensor {
    char *data; /* the home copy: what reg_buffer.data points at */
    size_t bytes;
    unsigned home;
    cpu_priv *priv;
    pthread_mutex_t mu;            /* guards copy */
    char *copy[GEMMD_MAX_DEVICES]; /* NULL: none yet (home: data) */
    atomic_uint on;                /* bit i: device i has a copy */
} cpu_tensor;

static int cpu_init(gemmd_backend *be, const gemmd_config *cfg, char *msg,
                    size_t len)
{
    (void)msg;
    (void)len;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int threads =
        cfg->threads > 0 ? cfg->threads : (int)(cores > 0 ? cores : 1);
#ifdef GEMMD_TEST_HOOKS
    cpu_hold_init();
    be->pins = cpu_pin_init(cfg);
#endif
    cpu_priv *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return GEMM_ERR_NOMEM;
    p->ndevs = cfg->ndevices > 1    ? cfg->ndevices
               : cfg->ndevices == 1 ? (unsigned)cfg->devices[0]
                                    : 1;
    if (p->ndevs == 0)
        p->ndevs = 1;
    if (p->ndevs > GEMMD_MAX_DEVICES)
        p->ndevs = GEMMD_MAX_DEVICES;
    /* several devices: each computes on its worker's thread alone, so
     * they run side by side (OpenBLAS serialises threaded calls, unfairly,
     * on one lock) */
    if (p->ndevs > 1) {
        if (cfg->threads > 1)
            gemmd_log(LOG_NOTICE,
                      "cpu backend: --threads %u ignored: each of the %u "
                      "devices computes on one thread",
                      cfg->threads, p->ndevs);
        threads = 1;
    }
    openblas_set_num_threads(threads);
    cpu_s8_threads = (unsigned)threads;
    cpu_calibrate(cfg->slice_ms);
    p->copy_cap =
        cfg->max_device_bytes ? cfg->max_device_bytes : CPU_COPY_CAP_DEFAULT;
    be->priv = p;
    be->ndevices = p->ndevs;
    be->dev_workers = 1;
    be->workers = p->ndevs;
    be->threads = (unsigned)threads * p->ndevs; /* compute threads */
    be->host_tensors = true;
    be->split_align = 16;
    for (unsigned i = 0; i < p->ndevs; i++)
        be->group[i] = i;
    be->flops_rate = 50e9;
    be->copy_rate = 10e9;
    be->peer_rate = 10e9;
    /* The CPU model from /proc/cpuinfo, for Hello and Status. */
    snprintf(be->device, sizeof(be->device), "cpu");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f != NULL) {
        char line[256];
        while (fgets(line, sizeof(line), f) != NULL) {
            char *colon = strchr(line, ':');
            if (strncmp(line, "model name", 10) == 0 && colon != NULL) {
                colon += 1 + strspn(colon + 1, " \t");
                colon[strcspn(colon, "\n")] = '\0';
                snprintf(be->device, sizeof(be->device), "%s", colon);
                break;
            }
        }
        fclose(f);
    }
    snprintf(p->model, sizeof(p->model), "%s", be->device);
    gemmd_log(LOG_INFO, "cpu backend: %s, %d OpenBLAS threads, %u device%s",
              be->device, threads, p->ndevs, p->ndevs > 1 ? "s" : "");
    return GEMM_OK;
}

static void cpu_fini(gemmd_backend *be)
{
    free(be->priv);
    be->priv = NULL;
}

/* The address on device dev of what ptr points at, when ptr lies in a
 * resident tensor of j whose home is elsewhere: dev's copy (made now if
 * it has none and the cap allows), else ptr. Worker thread. */
static const void *cpu_local(cpu_priv *p, gemmd_job *j, unsigned dev,
                             const void *ptr)
{
    for (int i = 0; i < j->nbufs; i++) {
        reg_buffer *b = j->bufs[i];
        if (b->kind != REG_TENSOR || b->pin == NULL)
            continue;
        cpu_tensor *t = b->pin;
        const char *c = ptr;
        if (c < t->data || c >= t->data + t->bytes)
            continue;
        if (t->home == dev || dev >= p->ndevs)
            return ptr;
        cpu_device *d = &p->devs[dev];
        pthread_mutex_lock(&t->mu);
        char *copy = t->copy[dev];
        if (copy == NULL &&
            atomic_fetch_add(&d->copy_bytes, t->bytes) + t->bytes <=
                p->copy_cap &&
            (copy = malloc(t->bytes)) != NULL) {
            memcpy(copy, t->data, t->bytes);
            t->copy[dev] = copy;
            atomic_fetch_or(&t->on, 1u << dev);
            atomic_fetch_add(&d->tensors, 1);
            atomic_fetch_add(&d->migrations, 1);
        } else if (copy == NULL) {
            atomic_fetch_sub(&d->copy_bytes, t->bytes);
        }
        pthread_mutex_unlock(&t->mu);
        return copy != NULL ? copy + (c - t->data) : ptr;
    }
    return ptr;
}

/* Copies a rows x cols matrix of type st with leading dimension ld into a
 * dense fp32 array (widening). */
static void widen(float *dst, const void *src, int st, uint64_t rows,
                  uint64_t cols, uint64_t ld)
{
    size_t es = gemm_dtype_size(st);
    for (uint64_t r = 0; r < rows; r++)
        gemm_convert(dst + r * cols, GEMM_FP32, (const char *)src + r * ld * es,
                     st, cols);
}

/* fp32 rounded to tf32: 10 mantissa bits, to nearest, ties away from
 * zero (cvt.rna.tf32.f32); inf and NaN unchanged. */
static float tf32_round(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) {
        u += 0x1000u; /* half of the 13 dropped bits, on the magnitude */
        u &= 0xffffe000u;
    }
    memcpy(&f, &u, 4);
    return f;
}

/* Copies an fp32 rows x cols matrix with leading dimension ld into a dense
 * array, rounding each element to tf32. */
static void round_tf32(float *dst, const float *src, uint64_t rows,
                       uint64_t cols, uint64_t ld)
{
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t c = 0; c < cols; c++)
            dst[r * cols + c] = tf32_round(src[r * ld + c]);
}

static const gemmd_kernel cpu_kernels[] = {
    {
        .name = "openblas",
        .summary = "OpenBLAS cblas_sgemm (bf16/fp16 widened to fp32), "
                   "dgemm, cgemm, zgemm; the reference",
        .ladder = 0,
        .reference = true,
        .ab_types = 1u << GEMM_BF16 | 1u << GEMM_FP16 | 1u << GEMM_FP32 |
                    1u << GEMM_FP64 | 1u << GEMM_COMPLEX64 |
                    1u << GEMM_COMPLEX128,
        .cd_types = 1u << GEMM_BF16 | 1u << GEMM_FP16 | 1u << GEMM_FP32 |
                    1u << GEMM_FP64 | 1u << GEMM_COMPLEX64 |
                    1u << GEMM_COMPLEX128,
        .precisions = 1u << GEMM_PRECISION_DEFAULT | 1u << GEMM_PRECISION_TF32 |
                      1u << GEMM_PRECISION_FP32,
        .transposes = 0xfu,
    },
    {
        .name = "cpu-s8",
        .summary = "int8 x int8 -> int32, blocked and packed, AVX2 where "
                   "the CPU has it; exact, int32 wraps on overflow",
        .ladder = 0,
        .reference = false,
        .ab_types = 1u << GEMM_INT8,
        .cd_types = 1u << GEMM_INT32,
        .precisions = 1u << GEMM_PRECISION_DEFAULT,
        .transposes = 0xfu,
    },
    {
        .name = "cpu-naive",
        .summary = "one fp32 dot product per output in plain C loops",
        .ladder = 1,
        .reference = false,
        .ab_types = 1u << GEMM_BF16 | 1u << GEMM_FP16 | 1u << GEMM_FP32,
        .cd_types = 1u << GEMM_BF16 | 1u << GEMM_FP16 | 1u << GEMM_FP32,
        .precisions = 1u << GEMM_PRECISION_DEFAULT | 1u << GEMM_PRECISION_TF32 |
                      1u << GEMM_PRECISION_FP32,
        .transposes = 0xfu,
    },
#ifdef GEMMD_TEST_HOOKS
    {
        .name = CPU_HOLD_KERNEL,
        .summary = "openblas (cpu-s8 for int8) once the test releases it "
                   "(test builds only)",
        .ladder = 2,
        .reference = false,
        .ab_types = 1u << GEMM_BF16 | 1u << GEMM_FP16 | 1u << GEMM_FP32 |
                    1u << GEMM_FP64 | 1u << GEMM_COMPLEX64 |
                    1u << GEMM_COMPLEX128 | 1u << GEMM_INT8,
        .cd_types = 1u << GEMM_BF16 | 1u << GEMM_FP16 | 1u << GEMM_FP32 |
                    1u << GEMM_FP64 | 1u << GEMM_COMPLEX64 |
                    1u << GEMM_COMPLEX128 | 1u << GEMM_INT32,
        .precisions = 1u << GEMM_PRECISION_DEFAULT | 1u << GEMM_PRECISION_TF32 |
                      1u << GEMM_PRECISION_FP32,
        .transposes = 0xfu,
    },
#endif
};

/* The kernels listed: the test hold's row only while a test holds it. */
static size_t cpu_nkernels(void)
{
    size_t n = sizeof(cpu_kernels) / sizeof(cpu_kernels[0]);
#ifdef GEMMD_TEST_HOOKS
    if (cpu_hold_fd < 0)
        n--;
#endif
    return n;
}

static bool cpu_kernel_at(gemmd_backend *be, size_t i, gemmd_kernel *out)
{
    (void)be;
    if (i >= cpu_nkernels())
        return false;
    *out = cpu_kernels[i];
    return true;
}

/* Whether t is one of the types computed in their own precision (fp64,
 * complex64, complex128) rather than in fp32. */
static bool wide_type(int t)
{
    return t == GEMM_FP64 || t == GEMM_COMPLEX64 || t == GEMM_COMPLEX128;
}

/* A kernel serves j when the name is known and its catalog entry has j's
 * types (every precision and transpose is served). */
static int cpu_kernel_check(gemmd_backend *be, const gemmd_job *j, char *msg,
                            size_t len)
{
    (void)be;
    if (j->kernel[0] == '\0')
        return GEMM_OK;
    for (size_t i = 0; i < cpu_nkernels(); i++) {
        if (strcmp(j->kernel, cpu_kernels[i].name) != 0)
            continue;
        if (cpu_kernels[i].ab_types & (1u << j->ab_type))
            return GEMM_OK;
        snprintf(msg, len,
                 "kernel '%s' cannot serve this request: it has no %s "
                 "inputs (%s has; or leave the kernel out)",
                 j->kernel, gemm_dtype_name(j->ab_type),
                 j->ab_type == GEMM_INT8 ? "cpu-s8" : "openblas");
        return GEMM_ERR_UNSUPPORTED;
    }
    snprintf(msg, len,
             "kernel '%s' is not available on the cpu backend (it has "
             "openblas, cpu-s8 and cpu-naive; gemmctl kernels lists them)",
             j->kernel);
    return GEMM_ERR_UNSUPPORTED;
}

/* D = alpha * op(A) * op(B) + beta * D (beta only when has_c) for the
 * rows x cols of D at D, fp32, one dot product per element: the naive
 * kernel. */
static void naive_sgemm(const gemmd_job *j, const float *A, uint64_t lda,
                        const float *B, uint64_t ldb, float *D, uint64_t ldd,
                        uint64_t rows, uint64_t cols)
{
    for (uint64_t i = 0; i < rows; i++) {
        for (uint64_t q = 0; q < cols; q++) {
            float acc = 0.0f;
            for (uint64_t p = 0; p < j->k; p++) {
                float a = j->trans_a ? A[p * lda + i] : A[i * lda + p];
                float b = j->trans_b ? B[q * ldb + p] : B[p * ldb + q];
                acc += a * b;
            }
            float *d = &D[i * ldd + q];
            *d =
                (float)j->alpha * acc + (j->has_c ? (float)j->beta * *d : 0.0f);
        }
    }
}

/* The fp32 copies cpu_gemm makes: A and B when they are 16-bit (or fp32
 * rounded to tf32), D when it is 16-bit. The wide types (fp64, complex)
 * run on the operands where they are. */
static uint64_t cpu_job_memory(gemmd_backend *be, const gemmd_job *j)
{
    cpu_priv *p = be->priv;
    if (j->kind != JOB_GEMM)
        return 0;
    if (j->ab_type == GEMM_INT8) /* packing buffers */
        return (uint64_t)cpu_s8_scratch() * cpu_s8_threads;
    uint64_t bytes = 0;
    bool tf32 = j->ab_type == GEMM_FP32 && j->precision == GEMM_PRECISION_TF32;
    bool half_ab = j->ab_type == GEMM_BF16 || j->ab_type == GEMM_FP16;
    bool half_cd = j->cd_type == GEMM_BF16 || j->cd_type == GEMM_FP16;
    /* split across the devices (split.c), each panel widens all of B */
    uint64_t copies_b = 1;
    if (p->ndevs > 1 && p->split_volume != 0 &&
        (double)j->m * j->n * j->k >= (double)p->split_volume &&
        j->m >= 2 * be->split_align)
        copies_b = p->ndevs;
    if (half_ab || tf32)
        bytes += (j->m * j->k + copies_b * j->k * j->n) * sizeof(float);
    if (half_cd)
        bytes += j->m * j->n * sizeof(float);
    return bytes;
}

static CBLAS_TRANSPOSE cblas_op(bool trans, bool conj)
{
    return !trans ? CblasNoTrans : conj ? CblasConjTrans : CblasTrans;
}

/* One tile of a wide GEMM (slice_fn): the BLAS call of j's type on the
 * tile's part of the operands. Worker thread. */
static int cpu_wide_tile(gemmd_job *j, const slice_tile *t, void *arg)
{
    (void)arg;
    CBLAS_TRANSPOSE ta = cblas_op(j->trans_a, j->conj_a);
    CBLAS_TRANSPOSE tb = cblas_op(j->trans_b, j->conj_b);
    int m = (int)t->rows, n = (int)t->cols, k = (int)j->k;
    int lda = (int)j->lda, ldb = (int)j->ldb, ldd = (int)j->ldd;
    size_t es = gemm_dtype_size(j->ab_type);
    const char *a = (const char *)j->a + slice_off_a(j, t, j->lda) * es;
    const char *b = (const char *)j->b + slice_off_b(j, t, j->ldb) * es;
    char *d = (char *)j->d + slice_off_d(t, j->ldd) * es;
    switch (j->ab_type) {
    case GEMM_FP64:
        cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, j->alpha, (const double *)a,
                    lda, (const double *)b, ldb, j->has_c ? j->beta : 0.0,
                    (double *)d, ldd);
        break;
    case GEMM_COMPLEX64: {
        float al[2] = {(float)j->alpha, (float)j->alpha_im};
        float be[2] = {j->has_c ? (float)j->beta : 0.0f,
                       j->has_c ? (float)j->beta_im : 0.0f};
        cblas_cgemm(CblasRowMajor, ta, tb, m, n, k, al, a, lda, b, ldb, be, d,
                    ldd);
        break;
    }
    case GEMM_COMPLEX128: {
        double al[2] = {j->alpha, j->alpha_im};
        double be[2] = {j->has_c ? j->beta : 0.0, j->has_c ? j->beta_im : 0.0};
        cblas_zgemm(CblasRowMajor, ta, tb, m, n, k, al, a, lda, b, ldb, be, d,
                    ldd);
        break;
    }
    default:
        snprintf(j->msg, sizeof(j->msg), "cpu backend: no BLAS for %s",
                 gemm_dtype_name(j->ab_type));
        return GEMM_ERR_INTERNAL;
    }
    return GEMM_OK;
}

/* fp64, complex64, complex128: D = alpha op(A) op(B) + beta C with
 * OpenBLAS in the type itself, on the operands where they are (C copied
 * into D first when it is elsewhere). The caller checked the 32-bit
 * limits. Worker thread. */
static int cpu_gemm_wide(gemmd_job *j)
{
    size_t es = gemm_dtype_size(j->cd_type);
    if (j->has_c && j->c != j->d)
        for (uint64_t r = 0; r < j->m; r++)
            memcpy((char *)j->d + r * j->ldd * es,
                   (const char *)j->c + r * j->ldc * es, j->n * es);
    uint64_t t0 = gemmd_now_ns();
    uint64_t budget = j->ab_type == GEMM_COMPLEX64 ? cpu_slice_s : cpu_slice_d;
    int rv = slice_run(j, budget, 16, cpu_wide_tile, NULL);
    if (rv != GEMM_OK)
        return rv;
    j->ns_kernel = gemmd_now_ns() - t0;
    if (j->ns_kernel == 0)
        j->ns_kernel = 1;
    snprintf(j->ran, sizeof(j->ran), "openblas");
    return GEMM_OK;
}

/* The fp32 operands of a GEMM as cpu_gemm prepared them. */
typedef struct cpu_f32 {
    const float *a, *b;
    float *d;
    uint64_t lda, ldb, ldd;
    bool naive;
} cpu_f32;

/* One tile of an fp32 GEMM (slice_fn): cblas_sgemm, or the naive loops,
 * on the tile's part of the operands in arg (a cpu_f32). Worker thread. */
static int cpu_f32_tile(gemmd_job *j, const slice_tile *t, void *arg)
{
    const cpu_f32 *f = arg;
    const float *A = f->a + slice_off_a(j, t, f->lda);
    const float *B = f->b + slice_off_b(j, t, f->ldb);
    float *D = f->d + slice_off_d(t, f->ldd);
    if (f->naive)
        naive_sgemm(j, A, f->lda, B, f->ldb, D, f->ldd, t->rows, t->cols);
    else
        cblas_sgemm(CblasRowMajor, j->trans_a ? CblasTrans : CblasNoTrans,
                    j->trans_b ? CblasTrans : CblasNoTrans, (int)t->rows,
                    (int)t->cols, (int)j->k, (float)j->alpha, A, (int)f->lda, B,
                    (int)f->ldb, j->has_c ? (float)j->beta : 0.0f, D,
                    (int)f->ldd);
    return GEMM_OK;
}

/* One tile of an int8 GEMM (slice_fn): cpu_s8_gemm on the tile's part
 * of the operands (where cpu_gemm found them). Worker thread. */
static int cpu_s8_tile(gemmd_job *j, const slice_tile *t, void *arg)
{
    (void)arg;
    cpu_s8_problem p = {
        .m = t->rows,
        .n = t->cols,
        .k = j->k,
        .trans_a = j->trans_a,
        .trans_b = j->trans_b,
        .a = (const int8_t *)j->a + slice_off_a(j, t, j->lda),
        .b = (const int8_t *)j->b + slice_off_b(j, t, j->ldb),
        .lda = j->lda,
        .ldb = j->ldb,
        .c = j->has_c ? (const int32_t *)j->c + slice_off_d(t, j->ldc) : NULL,
        .ldc = j->ldc,
        .d = (int32_t *)j->d + slice_off_d(t, j->ldd),
        .ldd = j->ldd,
        /* validated: integers in int32's range */
        .alpha = (int32_t)j->alpha,
        .beta = j->has_c ? (int32_t)j->beta : 0,
    };
    int rv = cpu_s8_gemm(&p, cpu_s8_threads);
    if (rv != GEMM_OK)
        snprintf(j->msg, sizeof(j->msg),
                 "out of memory for the int8 kernel's packing buffers");
    return rv;
}

/* int8: D = alpha op(A) op(B) + beta C in wrapping int32 on cpu_s8.c's
 * kernel, in slices. Worker thread. */
static int cpu_gemm_s8(gemmd_job *j)
{
    uint64_t t0 = gemmd_now_ns();
    int rv = slice_run(j, cpu_slice_s8, 16, cpu_s8_tile, NULL);
    if (rv != GEMM_OK)
        return rv;
    j->ns_kernel = gemmd_now_ns() - t0;
    if (j->ns_kernel == 0)
        j->ns_kernel = 1;
    snprintf(j->ran, sizeof(j->ran), "cpu-s8");
    return GEMM_OK;
}

static int cpu_gemm_here(gemmd_job *j);

/* Runs j on device j->device, on that device's copies of the resident
 * tensors it reads. Worker thread. */
static int cpu_gemm(gemmd_backend *be, gemmd_job *j)
{
    cpu_priv *p = be->priv;
    const void *a = j->a, *b = j->b, *c = j->c;
    if (p->ndevs > 1) {
        j->a = cpu_local(p, j, j->device, j->a);
        j->b = cpu_local(p, j, j->device, j->b);
        if (j->c != NULL)
            j->c = cpu_local(p, j, j->device, j->c);
    }
    /* operands filled by parts: the CPU reads them all at once */
    fill_check fc;
    int rv = fill_wait_whole(j, &fc);
    if (rv == GEMM_OK)
        rv = cpu_gemm_here(j);
    if (rv == GEMM_OK)
        rv = fill_check_after(j, &fc);
    if (rv == GEMM_OK && j->drain != NULL) /* all of D is final */
        __atomic_store_n(j->drain, j->m, __ATOMIC_RELEASE);
    j->a = a;
    j->b = b;
    j->c = c;
    return rv;
}

static int cpu_gemm_here(gemmd_job *j)
{
    int rv = GEMM_OK;
    float *a32 = NULL, *b32 = NULL, *d32 = NULL;
    bool naive = strcmp(j->kernel, "cpu-naive") == 0;
    bool tf32 = j->ab_type == GEMM_FP32 && j->precision == GEMM_PRECISION_TF32;
    if (j->m > INT_MAX || j->n > INT_MAX || j->k > INT_MAX ||
        j->lda > INT_MAX || j->ldb > INT_MAX || j->ldd > INT_MAX) {
        snprintf(j->msg, sizeof(j->msg),
                 "dimensions exceed the CPU backend's 32-bit BLAS");
        return GEMM_ERR_UNSUPPORTED;
    }
#ifdef GEMMD_TEST_HOOKS
    if (cpu_hold_fd >= 0 && strcmp(j->kernel, CPU_HOLD_KERNEL) == 0)
        cpu_hold();
#endif
    if (j->kind == JOB_BLAS3)
        return cpu_blas3(j);
    if (wide_type(j->ab_type))
        return cpu_gemm_wide(j);
    if (j->ab_type == GEMM_INT8)
        return cpu_gemm_s8(j);
    const val_matrix *sa = &j->shape.a, *sb = &j->shape.b;
    const float *A = j->a, *B = j->b;
    int lda = (int)j->lda, ldb = (int)j->ldb;
    if (j->ab_type != GEMM_FP32) {
        a32 = malloc(sa->rows * sa->cols * sizeof(float));
        b32 = malloc(sb->rows * sb->cols * sizeof(float));
        if (a32 == NULL || b32 == NULL)
            goto nomem;
        widen(a32, j->a, j->ab_type, sa->rows, sa->cols, j->lda);
        widen(b32, j->b, j->ab_type, sb->rows, sb->cols, j->ldb);
        A = a32;
        B = b32;
        lda = (int)sa->cols;
        ldb = (int)sb->cols;
    } else if (tf32) {
        a32 = malloc(sa->rows * sa->cols * sizeof(float));
        b32 = malloc(sb->rows * sb->cols * sizeof(float));
        if (a32 == NULL || b32 == NULL)
            goto nomem;
        round_tf32(a32, j->a, sa->rows, sa->cols, j->lda);
        round_tf32(b32, j->b, sb->rows, sb->cols, j->ldb);
        A = a32;
        B = b32;
        lda = (int)sa->cols;
        ldb = (int)sb->cols;
    }
    float *D = j->d;
    int ldd = (int)j->ldd;
    if (j->cd_type != GEMM_FP32) {
        if ((d32 = malloc(j->m * j->n * sizeof(float))) == NULL)
            goto nomem;
        if (j->has_c)
            widen(d32, j->c, j->cd_type, j->m, j->n, j->ldc);
        D = d32;
        ldd = (int)j->n;
    } else if (j->has_c && j->c != j->d) {
        for (uint64_t r = 0; r < j->m; r++)
            memcpy((float *)j->d + r * j->ldd, (const float *)j->c + r * j->ldc,
                   j->n * sizeof(float));
    }
    uint64_t t0 = gemmd_now_ns();
    cpu_f32 f = {A, B, D, (uint64_t)lda, (uint64_t)ldb, (uint64_t)ldd, naive};
    rv = slice_run(j, naive ? cpu_slice_naive : cpu_slice_s, 16, cpu_f32_tile,
                   &f);
    if (rv != GEMM_OK)
        goto done; /* stopped: a 16-bit D is left as it was */
    j->ns_kernel = gemmd_now_ns() - t0;
    if (j->ns_kernel == 0)
        j->ns_kernel = 1; /* measured, if below the clock's grain */
    snprintf(j->ran, sizeof(j->ran), "%s", naive ? "cpu-naive" : "openblas");
    if (d32 != NULL) {
        size_t es = gemm_dtype_size(j->cd_type);
        for (uint64_t r = 0; r < j->m; r++)
            gemm_convert((char *)j->d + r * j->ldd * es, j->cd_type,
                         d32 + r * j->n, GEMM_FP32, j->n);
    }
    goto done;
nomem:
    snprintf(j->msg, sizeof(j->msg),
             "out of memory for the fp32 copies of a %llux%llux%llu GEMM",
             (unsigned long long)j->m, (unsigned long long)j->n,
             (unsigned long long)j->k);
    rv = GEMM_ERR_NOMEM;
done:
    free(a32);
    free(b32);
    free(d32);
    return rv;
}

/* A resident tensor on the CPU backend: a dense host copy, at home on
 * device j->device. */
static int cpu_upload(gemmd_backend *be, gemmd_job *j)
{
    cpu_priv *pv = be->priv;
    size_t es = gemm_dtype_size(j->dtype);
    reg_buffer *t = j->tensor;
    cpu_tensor *ct = calloc(1, sizeof(*ct));
    char *p = malloc(j->rows * j->cols * es);
    if (p == NULL || ct == NULL) {
        free(p);
        free(ct);
        snprintf(j->msg, sizeof(j->msg), "out of memory for a %llux%llu tensor",
                 (unsigned long long)j->rows, (unsigned long long)j->cols);
        return GEMM_ERR_NOMEM;
    }
    for (uint64_t r = 0; r < j->rows; r++)
        memcpy(p + r * j->cols * es, (const char *)j->a + r * j->lda * es,
               j->cols * es);
    pthread_mutex_init(&ct->mu, NULL);
    ct->data = p;
    ct->bytes = j->rows * j->cols * es;
    ct->home = j->device < pv->ndevs ? j->device : 0;
    ct->priv = pv;
    atomic_init(&ct->on, 1u << ct->home);
    atomic_fetch_add(&pv->devs[ct->home].tensors, 1);
    t->pin = ct;
    t->data = p;
    t->size = ct->bytes;
    t->ld = j->cols;
    t->on_device = false;
    return GEMM_OK;
}

/* Frees a tensor and every device's copy. Loop thread (no job uses it). */
static void cpu_tensor_free(gemmd_backend *be, void *handle)
{
    (void)be;
    cpu_tensor *t = handle;
    cpu_priv *p = t->priv;
    for (unsigned i = 0; i < p->ndevs; i++) {
        if (t->copy[i] != NULL) {
            free(t->copy[i]);
            atomic_fetch_sub(&p->devs[i].copy_bytes, t->bytes);
        }
        if (atomic_load(&t->on) & (1u << i))
            atomic_fetch_sub(&p->devs[i].tensors, 1);
    }
    pthread_mutex_destroy(&t->mu);
    free(t->data);
    free(t);
}

static uint32_t cpu_tensor_devices(gemmd_backend *be, const void *handle)
{
    (void)be;
    return atomic_load(&((cpu_tensor *)handle)->on);
}

static void cpu_device_stats(gemmd_backend *be, unsigned i,
                             gemmd_device_stats *out)
{
    cpu_priv *p = be->priv;
    memset(out, 0, sizeof(*out));
    if (i >= p->ndevs)
        return;
    if (p->ndevs > 1)
        snprintf(out->name, sizeof(out->name), "cpu %u: %.100s", i, p->model);
    else
        snprintf(out->name, sizeof(out->name), "%s", p->model);
    out->memory_bytes = atomic_load(&p->devs[i].copy_bytes);
    out->tensors = atomic_load(&p->devs[i].tensors);
    out->migrations = atomic_load(&p->devs[i].migrations);
}

const gemmd_backend_ops gemmd_backend_cpu = {
    .name = "cpu",
    .available = cpu_available,
    .init = cpu_init,
    .fini = cpu_fini,
#ifdef GEMMD_TEST_HOOKS
    .pin_reserve = cpu_pin_reserve,
    .pin_unreserve = cpu_pin_unreserve,
    .pin = cpu_pin,
    .unpin = cpu_unpin,
#endif
    .gemm = cpu_gemm,
    .job_memory = cpu_job_memory,
    .upload = cpu_upload,
    .tensor_free = cpu_tensor_free,
    .stats = cpu_stats,
    .kernel_at = cpu_kernel_at,
    .kernel_check = cpu_kernel_check,
    .device_stats = cpu_device_stats,
    .tensor_devices = cpu_tensor_devices,
};
