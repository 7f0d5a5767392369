/*
 * bench_pin.c: what pinning client memory costs, and what it costs a
 * buffer's first GEMM through gemmd (issue 21, point 2).
 *
 *   bench_pin [table] [--max-mib N] [--reps R] [--budget-s S]
 *       cudaHostRegister (portable | mapped, as gemmd pins) and
 *       cudaHostUnregister of memfd-backed MAP_SHARED buffers of 64 MiB ..
 *       N MiB (default 8192), doubling: once with every page written by
 *       this process first ("touched"), once only allocated (fallocate,
 *       as gemm_buffer_alloc leaves a buffer: the register faults every
 *       page in). Median of R runs (default 3; 1 from 2 GiB up); no larger
 *       size is started after S seconds (default 60, so that the whole
 *       fits scripts/gpu/measure.sh's 90 s). Prints one table: seconds,
 *       GB/s and s/GB per size and case. The default mode.
 *
 *   bench_pin first-gemm --url URL [--mib M] [--n N]
 *       Through a running gemmd (libgemmclient, public API): allocates and
 *       registers an M MiB buffer (default 1024), fills A and B (N^3 bf16,
 *       default 4096, D bf16) and times the first GEMM on it, the second,
 *       and one after the daemon reports the background pin done (Status
 *       pins_pending 0); checks sampled elements of D against an fp64
 *       reference. Prints the registration time, the three latencies, and
 *       the daemon's pin seconds and bytes.
 *
 * Needs a GPU for `table`; says so when there is none.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create, fallocate */
#endif
#include "../bench_util.h"

#include <gemm/gemm.h>

#include <cuda_runtime_api.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#define CK(call)                                                               \
    do {                                                                       \
        cudaError_t e_ = (call);                                               \
        if (e_ != cudaSuccess) {                                               \
            fprintf(stderr, "%s failed: %s (%s:%d)\n", #call,                  \
                    cudaGetErrorString(e_), __FILE__, __LINE__);               \
            return -1;                                                         \
        }                                                                      \
    } while (0)

/* One memfd of size bytes, allocated (fallocate) and mapped shared into
 * *base; touched: every page written too. Returns the fd or -1. */
static int make_buffer(size_t size, int touched, void **base)
{
    int fd = memfd_create("bench_pin", MFD_CLOEXEC);
    if (fd < 0) {
        perror("memfd_create");
        return -1;
    }
    if (fallocate(fd, 0, 0, (off_t)size) != 0) {
        perror("fallocate");
        close(fd);
        return -1;
    }
    *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (*base == MAP_FAILED) {
        perror("mmap");
        close(fd);
        return -1;
    }
    if (touched) {
        long page = sysconf(_SC_PAGESIZE);
        for (size_t i = 0; i < size; i += (size_t)page)
            ((volatile char *)*base)[i] = (char)(i >> 12 | 1);
    }
    return fd;
}

/* Times one register and unregister of a fresh buffer; -1 on failure. */
static int pin_once(size_t size, int touched, double *reg_s, double *unreg_s)
{
    void *base;
    int fd = make_buffer(size, touched, &base);
    if (fd < 0)
        return -1;
    double t0 = now_s();
    CK(cudaHostRegister(base, size,
                        cudaHostRegisterPortable | cudaHostRegisterMapped));
    double t1 = now_s();
    CK(cudaHostUnregister(base));
    double t2 = now_s();
    munmap(base, size);
    close(fd);
    *reg_s = t1 - t0;
    *unreg_s = t2 - t1;
    return 0;
}

static int run_table(size_t max_mib, int reps, double budget_s)
{
    double t_start = now_s();
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        fprintf(stderr, "bench_pin table: no CUDA device (%s)\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 1;
    }
    CK(cudaFree(NULL)); /* the context, outside the timings */
    /* warm-up: the driver's first registration */
    double r, u;
    if (pin_once(64 * MIB, 1, &r, &u) != 0)
        return 1;
    printf("%-9s %-9s %10s %8s %8s %10s %8s\n", "size_mib", "pages", "reg_s",
           "reg_GB/s", "reg_s/GB", "unreg_s", "unreg_GB/s");
    for (size_t mib = 64; mib <= max_mib; mib *= 2) {
        if (now_s() - t_start > budget_s) {
            printf("(stopped before %zu MiB: past the %.0f s budget)\n", mib,
                   budget_s);
            break;
        }
        size_t size = mib * MIB;
        int n = mib >= 2048 ? 1 : reps;
        for (int touched = 1; touched >= 0; touched--) {
            double rs[16], us[16];
            for (int i = 0; i < n; i++)
                if (pin_once(size, touched, &rs[i], &us[i]) != 0)
                    return 1;
            double rm = median(rs, n), um = median(us, n);
            double gb = size / 1e9;
            printf("%-9zu %-9s %10.4f %8.2f %8.3f %10.4f %8.2f\n", mib,
                   touched ? "touched" : "allocated", rm, gb / rm, rm / gb, um,
                   gb / um);
            fflush(stdout);
        }
    }
    return 0;
}

/* bf16 <-> float, round to nearest even. */
static uint16_t to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

static double from_bf16(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static int status_of(gemm_client *c, gemm_status *st)
{
    int rv = gemm_get_status(c, st);
    if (rv != GEMM_OK)
        fprintf(stderr, "gemm_get_status: %s (%s)\n", gemm_strerror(rv),
                gemm_last_error_message());
    return rv;
}

static int run_gemm(gemm_client *c, const gemm_op *op, double *ms,
                    gemm_timings *t)
{
    double t0 = now_s();
    int rv = gemm_run(c, op, t);
    *ms = (now_s() - t0) * 1e3;
    if (rv != GEMM_OK)
        fprintf(stderr, "gemm_run: %s (%s)\n", gemm_strerror(rv),
                gemm_last_error_message());
    return rv;
}

static int run_first_gemm(const char *url, size_t mib, uint64_t n)
{
    gemm_client *c;
    gemm_buffer *buf;
    gemm_status s0, s1, s2;
    size_t size = mib * MIB, mat = (size_t)(n * n * 2);
    int rv = gemm_client_open(&c, url);
    if (rv != GEMM_OK) {
        fprintf(stderr, "gemm_client_open(%s): %s (%s)\n", url,
                gemm_strerror(rv), gemm_last_error_message());
        return 1;
    }
    if (3 * mat + 4096 > size) {
        fprintf(stderr, "--mib %zu too small for three %llu^2 bf16\n", mib,
                (unsigned long long)n);
        return 1;
    }
    if (status_of(c, &s0) != GEMM_OK)
        return 1;
    double t0 = now_s();
    if ((rv = gemm_buffer_alloc(c, size, &buf)) != GEMM_OK) {
        fprintf(stderr, "gemm_buffer_alloc(%zu MiB): %s (%s)\n", mib,
                gemm_strerror(rv), gemm_last_error_message());
        return 1;
    }
    double alloc_ms = (now_s() - t0) * 1e3;
    if (status_of(c, &s1) != GEMM_OK)
        return 1;
    /* A at the start, B in the middle, D at the end: the GEMM reads and
     * writes pages all over the registration */
    uint8_t *base = gemm_buffer_data(buf);
    size_t off_a = 0, off_b = (size / 2) & ~(size_t)4095,
           off_d = (size - mat) & ~(size_t)4095;
    uint16_t *a = (uint16_t *)(base + off_a), *b = (uint16_t *)(base + off_b);
    uint64_t seed = 0x9e3779b97f4a7c15u;
    for (size_t i = 0; i < n * n; i++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        a[i] = to_bf16((float)((seed >> 40) / (double)(1 << 24) * 2 - 1));
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        b[i] = to_bf16((float)((seed >> 40) / (double)(1 << 24) * 2 - 1));
    }
    gemm_op op;
    gemm_op_init(&op, n, n, n, GEMM_BF16, GEMM_BF16);
    op.a = (gemm_matrix){.buf = buf, .offset = off_a};
    op.b = (gemm_matrix){.buf = buf, .offset = off_b};
    op.d = (gemm_matrix){.buf = buf, .offset = off_d};
    gemm_status sf;
    if (status_of(c, &sf) != GEMM_OK)
        return 1;
    double first, second, pinned;
    gemm_timings tf;
    if (run_gemm(c, &op, &first, &tf) || run_gemm(c, &op, &second, NULL))
        return 1;
    double until = now_s() + 120;
    do {
        if (status_of(c, &s2) != GEMM_OK)
            return 1;
        if (s2.pins_pending == 0)
            break;
        usleep(1000); /* a pause between looks, under a deadline */
    } while (now_s() < until);
    if (s2.pins_pending != 0) {
        fprintf(stderr, "the pin was still pending after 120 s\n");
        return 1;
    }
    if (run_gemm(c, &op, &pinned, NULL))
        return 1;
    /* sampled check against fp64 */
    const uint16_t *d = (const uint16_t *)(base + off_d);
    double worst = 0;
    for (int s = 0; s < 32; s++) {
        uint64_t i = (uint64_t)s * 7919 % n, j = (uint64_t)s * 104729 % n;
        double ref = 0, mag = 0;
        for (uint64_t k = 0; k < n; k++) {
            double p = from_bf16(a[i * n + k]) * from_bf16(b[k * n + j]);
            ref += p;
            mag += fabs(p);
        }
        double err = fabs(from_bf16(d[i * n + j]) - ref) / (mag + 1e-30);
        worst = err > worst ? err : worst;
    }
    double pin_s = s2.pin_seconds - s0.pin_seconds;
    uint64_t pin_b = s2.pin_bytes - s0.pin_bytes;
    printf("%-34s %12s\n", "what", "value");
    printf("%-34s %12.2f\n", "register (gemm_buffer_alloc) ms", alloc_ms);
    printf("%-34s %12u\n", "pins pending after register", s1.pins_pending);
    printf("%-34s %12u\n", "pins pending at first GEMM", sf.pins_pending);
    printf("%-34s %12.2f\n", "first GEMM ms", first);
    printf("%-34s %12.2f\n", "  of which queued ms", tf.queued_us / 1e3);
    printf("%-34s %12.2f\n", "  of which on the backend ms",
           tf.compute_us / 1e3);
    printf("%-34s %12.2f\n", "  of which the kernel ms", tf.kernel_ns / 1e6);
    printf("%-34s %12.2f\n", "second GEMM ms", second);
    printf("%-34s %12.2f\n", "GEMM after the pin ms", pinned);
    printf("%-34s %12.4f\n", "daemon pin seconds", pin_s);
    printf("%-34s %12.2f\n", "daemon pin GB/s",
           pin_s > 0 ? pin_b / 1e9 / pin_s : 0.0);
    printf("%-34s %12llu\n", "pins failed",
           (unsigned long long)(s2.pins_failed - s0.pins_failed));
    printf("%-34s %12.2e %s\n", "worst sampled rel. error", worst,
           worst < 1e-2 ? "ok" : "WRONG");
    gemm_buffer_free(buf);
    gemm_client_close(c);
    return worst < 1e-2 ? 0 : 1;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_pin [table] [--max-mib N] [--reps R] "
                    "[--budget-s S]\n"
                    "       bench_pin first-gemm --url URL [--mib M] "
                    "[--n N]\n");
}

int main(int argc, char **argv)
{
    const char *mode = argc >= 2 && argv[1][0] != '-' ? argv[1] : "table";
    int first = argc >= 2 && argv[1][0] != '-' ? 2 : 1;
    double budget_s = 60;
    size_t max_mib = 8192, mib = 1024;
    int reps = 3;
    uint64_t n = 4096;
    const char *url = NULL;
    for (int i = first; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL) {
            usage();
            return 2;
        }
        if (strcmp(argv[i], "--max-mib") == 0)
            max_mib = strtoull(v, NULL, 10);
        else if (strcmp(argv[i], "--budget-s") == 0)
            budget_s = atof(v);
        else if (strcmp(argv[i], "--reps") == 0)
            reps = atoi(v);
        else if (strcmp(argv[i], "--url") == 0)
            url = v;
        else if (strcmp(argv[i], "--mib") == 0)
            mib = strtoull(v, NULL, 10);
        else if (strcmp(argv[i], "--n") == 0)
            n = strtoull(v, NULL, 10);
        else {
            usage();
            return 2;
        }
        i++;
    }
    if (reps < 1 || reps > 16)
        reps = 3;
    if (strcmp(mode, "table") == 0)
        return run_table(max_mib, reps, budget_s) == 0 ? 0 : 1;
    if (strcmp(mode, "first-gemm") == 0 && url != NULL)
        return run_first_gemm(url, mib, n);
    usage();
    return 2;
}
