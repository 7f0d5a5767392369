/*
 * bench_cpu_s8.c: the CPU backend's int8 kernel (daemon/cpu_s8.c) alone,
 * without the daemon: n^3 int8 x int8 -> int32 GEMMs of random operands
 * (every int8 value), each transpose combination, on the given thread
 * counts. Each run is checked first (sampled rows against a 64-bit
 * reference reduced modulo 2^32, exact), warmed up once, then timed
 * --repeat times (wall clock, and the process's CPU time); the table of
 * medians and bests is printed last.
 * Usage: bench_cpu_s8 [--sizes 512,1024,2048] [--threads 1,2] [--repeat 5]
 */
#include "cpu_s8.h"

#include <gemm/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_LIST 16

static double now_s(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int parse_list(const char *s, unsigned *out)
{
    int n = 0;
    for (char *end; *s != '\0' && n < MAX_LIST; s = *end ? end + 1 : end) {
        unsigned long v = strtoul(s, &end, 10);
        if (end == s || v == 0)
            return -1;
        out[n++] = (unsigned)v;
    }
    return n;
}

static int cmp_d(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* Rows of D checked: every step-th, exactly. Returns the bad elements. */
static unsigned long check(const cpu_s8_problem *p)
{
    unsigned long bad = 0;
    uint64_t step = p->m / 16 ? p->m / 16 : 1;
    for (uint64_t i = 0; i < p->m; i += step)
        for (uint64_t q = 0; q < p->n; q++) {
            int64_t acc = 0;
            for (uint64_t l = 0; l < p->k; l++)
                acc +=
                    (int64_t)(p->trans_a ? p->a[l * p->lda + i]
                                         : p->a[i * p->lda + l]) *
                    (p->trans_b ? p->b[q * p->ldb + l] : p->b[l * p->ldb + q]);
            if (p->d[i * p->ldd + q] != (int32_t)(uint32_t)(uint64_t)acc)
                bad++;
        }
    return bad;
}

int main(int argc, char **argv)
{
    unsigned sizes[MAX_LIST] = {512, 1024, 2048}, threads[MAX_LIST] = {1, 2};
    int ns = 3, nt = 2;
    unsigned repeat = 5;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc)
            ns = parse_list(argv[++i], sizes);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            nt = parse_list(argv[++i], threads);
        else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc)
            repeat = (unsigned)strtoul(argv[++i], NULL, 10);
        else
            ns = -1;
        if (ns <= 0 || nt <= 0 || repeat == 0 || repeat > 1000) {
            fprintf(stderr,
                    "usage: %s [--sizes 512,1024,2048] [--threads "
                    "1,2] [--repeat 5]\n",
                    argv[0]);
            return 2;
        }
    }
    static const char *const tn[4] = {"NN", "TN", "NT", "TT"};
    char table[MAX_LIST * MAX_LIST * 4][128];
    int rows = 0;
    for (int s = 0; s < ns; s++) {
        size_t n = sizes[s];
        int8_t *a = malloc(n * n), *b = malloc(n * n);
        int32_t *d = malloc(n * n * sizeof(int32_t));
        double *wall = calloc(repeat, sizeof(double)),
               *cpu = calloc(repeat, sizeof(double));
        if (!a || !b || !d || !wall || !cpu) {
            fprintf(stderr, "out of memory for n = %zu\n", n);
            return 1;
        }
        uint64_t x = 0x9e3779b97f4a7c15ull;
        for (size_t i = 0; i < n * n; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            a[i] = (int8_t)(x >> 56);
            b[i] = (int8_t)(x >> 48);
        }
        for (int t = 0; t < nt; t++)
            for (int tr = 0; tr < 4; tr++) {
                cpu_s8_problem p = {.m = n,
                                    .n = n,
                                    .k = n,
                                    .trans_a = tr & 1,
                                    .trans_b = tr >> 1,
                                    .a = a,
                                    .b = b,
                                    .lda = n,
                                    .ldb = n,
                                    .d = d,
                                    .ldd = n,
                                    .alpha = 1};
                if (cpu_s8_gemm(&p, threads[t]) != GEMM_OK) {
                    fprintf(stderr, "out of memory in the kernel\n");
                    return 1;
                }
                unsigned long bad = check(&p);
                if (bad != 0) {
                    fprintf(stderr, "FAIL n %zu %s threads %u: %lu wrong\n", n,
                            tn[tr], threads[t], bad);
                    return 1;
                }
                for (unsigned r = 0; r < repeat; r++) {
                    double w0 = now_s(CLOCK_MONOTONIC),
                           c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
                    cpu_s8_gemm(&p, threads[t]);
                    wall[r] = now_s(CLOCK_MONOTONIC) - w0;
                    cpu[r] = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
                }
                qsort(wall, repeat, sizeof(double), cmp_d);
                qsort(cpu, repeat, sizeof(double), cmp_d);
                double ops = 2.0 * (double)n * (double)n * (double)n;
                snprintf(table[rows++], sizeof(table[0]),
                         "%6zu %3s %7u %10.2f %10.2f %8.1f %10.2f", n, tn[tr],
                         threads[t], wall[repeat / 2] * 1e3, wall[0] * 1e3,
                         ops / wall[repeat / 2] / 1e9, cpu[repeat / 2] * 1e3);
            }
        free(a);
        free(b);
        free(d);
        free(wall);
        free(cpu);
    }
    printf("cpu_s8 (%s), int8 x int8 -> int32, checked exactly; %u runs "
           "each\n",
           cpu_s8_isa(), repeat);
    printf("%6s %3s %7s %10s %10s %8s %10s\n", "n", "op", "threads",
           "median ms", "best ms", "GOP/s", "cpu ms");
    for (int i = 0; i < rows; i++)
        printf("%s\n", table[i]);
    return 0;
}
