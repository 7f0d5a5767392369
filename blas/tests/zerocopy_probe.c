/*
 * zerocopy_probe.c: a plain program linked with libgemmblas (so that its
 * malloc is the program's) for the zero-copy mode, run by zerocopy.sh
 * with GEMMBLAS_ZEROCOPY=1 against a private gemmd. Each mode prints what
 * it checked and exits 0 when all of it held, 1 otherwise, 77 when the
 * mode is not on in this process (an allocator of its own, e.g. ASan):
 *   gemm     dgemm_, sgemm_, zgemm_ (Fortran, with padded leading
 *            dimensions and a submatrix), cblas_dgemm row-major, dsyrk_,
 *            dtrsm_ and zhemm_ on malloc'd matrices, against references;
 *            8 threads sharing A and B (registered once); every operand
 *            in place, the outputs whose old value is read (beta != 0,
 *            trsm) backed up first, then a call with one operand on the
 *            stack: that one staged, the rest in place
 *   alloc    malloc/calloc/realloc/reallocarray/posix_memalign/
 *            aligned_alloc/memalign/valloc/pvalloc/malloc_usable_size on
 *            regions: contents kept, zeros, alignment, sizes; realloc of a
 *            registered region; a freed registered region kept and
 *            reused (calloc zeroes it); 8 threads allocating and freeing
 *            at once; freed registered regions released (counter)
 *   fdlimit  with 64 descriptors allowed, 16 regions at most (each holds a
 *            memfd), the other allocations glibc's
 *   fork     a child of a process whose regions are registered sees them
 *            as they were at the fork (the parent overwrites one at once),
 *            writes into them and computes: the parent sees none of it
 *            and its next dgemm is right and in place
 *   abandon  a request gemmd (stopped) never answers: the output's region
 *            detached before the CPU computes, gemmd's late write kept out
 *   rmw      a dtrsm whose B (read and written) is in place: gemmd
 *            (GEMMD_KILL_PID) is killed as soon as B starts to change,
 *            B's backup is put back and the CPU solves from it: right
 *   restart  a dgemm in place, then "ready" on stdout and a line awaited on
 *            stdin (zerocopy.sh kills gemmd, or restarts it, meanwhile): the
 *            next dgemm is right (on the CPU, or staged: gemmd sealed the
 *            old regions), and with gemmd back a new region is in place
 */
#include <complex.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <malloc.h>

void dgemm_(const char *, const char *, const int *, const int *, const int *,
            const double *, const double *, const int *, const double *,
            const int *, const double *, double *, const int *);
void sgemm_(const char *, const char *, const int *, const int *, const int *,
            const float *, const float *, const int *, const float *,
            const int *, const float *, float *, const int *);
void zgemm_(const char *, const char *, const int *, const int *, const int *,
            const double complex *, const double complex *, const int *,
            const double complex *, const int *, const double complex *,
            double complex *, const int *);
void dsyrk_(const char *, const char *, const int *, const int *,
            const double *, const double *, const int *, const double *,
            double *, const int *);
void dtrsm_(const char *, const char *, const char *, const char *, const int *,
            const int *, const double *, const double *, const int *, double *,
            const int *);
void zhemm_(const char *, const char *, const int *, const int *,
            const double complex *, const double complex *, const int *,
            const double complex *, const int *, const double complex *,
            double complex *, const int *);
void cblas_dgemm(int layout, int ta, int tb, int m, int n, int k, double alpha,
                 const double *a, int lda, const double *b, int ldb,
                 double beta, double *c, int ldc);
int gemmblas_zerocopy_counters(uint64_t *out, int n);

/* gemmblas_zerocopy_counters' order (blas/gemmblas.h) */
enum {
    ZC_ON,
    ZC_REGIONS,
    ZC_IMPORTS,
    ZC_IMPORT_FAILS,
    ZC_RELEASES,
    ZC_CALLS,
    ZC_CALLS_IN_PLACE,
    ZC_OPS_IN_PLACE,
    ZC_OPS_STAGED,
    ZC_BYTES_STAGED,
    ZC_DETACHES,
    ZC_REUSES,
    ZC_BACKUPS,
    ZC_BYTES_BACKED_UP,
    ZC_RESTORES,
    ZC_N
};

static int bad;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "zerocopy_probe: FAIL %s:%d: ", __FILE__,          \
                    __LINE__);                                                 \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
            bad = 1;                                                           \
        }                                                                      \
    } while (0)

static uint64_t counter(int which)
{
    uint64_t c[ZC_N] = {0};
    gemmblas_zerocopy_counters(c, ZC_N);
    return c[which];
}

/* Small integers: every product and sum exact in any order. */
static double val(size_t i, int salt)
{
    return (double)((i * 7 + (size_t)salt) % 9) - 4;
}

static bool is_region(const void *p)
{
    return ((uintptr_t)p & ((2u << 20) - 1)) == 0;
}

/* Column-major m x n C = A (m x k, lda) B (k x n, ldb) through dgemm_,
 * operands from malloc; exact check. */
static void check_dgemm(int m, int n, int k, int lda, int ldb, int ldc)
{
    double *a = malloc(sizeof(double) * (size_t)lda * k);
    double *b = malloc(sizeof(double) * (size_t)ldb * n);
    double *c = malloc(sizeof(double) * (size_t)ldc * n);
    CHECK(a && b && c, "malloc");
    CHECK(is_region(a) && is_region(b) && is_region(c),
          "dgemm operands are not regions (%p %p %p)", (void *)a, (void *)b,
          (void *)c);
    for (size_t i = 0; i < (size_t)lda * k; i++)
        a[i] = val(i, 1);
    for (size_t i = 0; i < (size_t)ldb * n; i++)
        b[i] = val(i, 2);
    for (size_t i = 0; i < (size_t)ldc * n; i++)
        c[i] = val(i, 3);
    double alpha = 2, beta = -1;
    dgemm_("N", "N", &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc);
    for (int j = 0; j < n; j += 3)
        for (int i = 0; i < ldc; i += 5) {
            double want = val((size_t)j * ldc + i, 3);
            if (i < m) {
                double s = 0;
                for (int l = 0; l < k; l++)
                    s += a[(size_t)l * lda + i] * b[(size_t)j * ldb + l];
                want = 2 * s - want;
            }
            CHECK(c[(size_t)j * ldc + i] == want, "dgemm C[%d,%d] %g want %g",
                  i, j, c[(size_t)j * ldc + i], want);
        }
    free(a);
    free(b);
    free(c);
}

static void check_sgemm(int n)
{
    float *a = malloc(sizeof(float) * (size_t)n * n);
    float *b = malloc(sizeof(float) * (size_t)n * n);
    float *c = calloc((size_t)n * n, sizeof(float));
    for (size_t i = 0; i < (size_t)n * n; i++) {
        a[i] = (float)val(i, 4);
        b[i] = (float)val(i, 5);
    }
    float one = 1, zero = 0;
    sgemm_("T", "N", &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n);
    for (int j = 0; j < n; j += 7)
        for (int i = 0; i < n; i += 5) {
            double s = 0;
            for (int l = 0; l < n; l++)
                s += (double)a[(size_t)i * n + l] * b[(size_t)j * n + l];
            CHECK(c[(size_t)j * n + i] == (float)s, "sgemm C[%d,%d] %g want %g",
                  i, j, (double)c[(size_t)j * n + i], s);
        }
    free(a);
    free(b);
    free(c);
}

static void check_zgemm(int n)
{
    double complex *a = malloc(sizeof(*a) * (size_t)n * n);
    double complex *b = malloc(sizeof(*b) * (size_t)n * n);
    double complex *c = malloc(sizeof(*c) * (size_t)n * n);
    for (size_t i = 0; i < (size_t)n * n; i++) {
        a[i] = val(i, 6) + I * val(i, 7);
        b[i] = val(i, 8) + I * val(i, 1);
    }
    double complex one = 1, zero = 0;
    zgemm_("C", "N", &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n);
    for (int j = 0; j < n; j += 7)
        for (int i = 0; i < n; i += 5) {
            double complex s = 0;
            for (int l = 0; l < n; l++)
                s += conj(a[(size_t)i * n + l]) * b[(size_t)j * n + l];
            CHECK(c[(size_t)j * n + i] == s, "zgemm C[%d,%d]", i, j);
        }
    free(a);
    free(b);
    free(c);
}

/* Row-major cblas_dgemm on a submatrix of a larger allocation. */
static void check_cblas_sub(int n)
{
    int ld = 2 * n;
    double *big = malloc(sizeof(double) * (size_t)ld * 2 * n);
    double *b = malloc(sizeof(double) * (size_t)n * n);
    double *c = malloc(sizeof(double) * (size_t)n * n);
    for (size_t i = 0; i < (size_t)ld * 2 * n; i++)
        big[i] = val(i, 2);
    for (size_t i = 0; i < (size_t)n * n; i++)
        b[i] = val(i, 5);
    const double *a = big + (size_t)n * ld + n; /* the lower right block */
    cblas_dgemm(101, 111, 111, n, n, n, 1, a, ld, b, n, 0, c, n);
    for (int i = 0; i < n; i += 5)
        for (int j = 0; j < n; j += 7) {
            double s = 0;
            for (int l = 0; l < n; l++)
                s += a[(size_t)i * ld + l] * b[(size_t)l * n + j];
            CHECK(c[(size_t)i * n + j] == s, "cblas C[%d,%d] %g want %g", i, j,
                  c[(size_t)i * n + j], s);
        }
    free(big);
    free(b);
    free(c);
}

/* dsyrk lower, C = A A^T + C: the upper triangle must stay as it was. */
static void check_dsyrk(int n, int k)
{
    double *a = malloc(sizeof(double) * (size_t)n * k);
    double *c = malloc(sizeof(double) * (size_t)n * n);
    for (size_t i = 0; i < (size_t)n * k; i++)
        a[i] = val(i, 3);
    for (size_t i = 0; i < (size_t)n * n; i++)
        c[i] = val(i, 4);
    double one = 1;
    dsyrk_("L", "N", &n, &k, &one, a, &n, &one, c, &n);
    for (int j = 0; j < n; j += 3)
        for (int i = 0; i < n; i += 5) {
            double want = val((size_t)j * n + i, 4);
            if (i >= j)
                for (int l = 0; l < k; l++)
                    want += a[(size_t)l * n + i] * a[(size_t)l * n + j];
            CHECK(c[(size_t)j * n + i] == want, "dsyrk C[%d,%d] %g want %g", i,
                  j, c[(size_t)j * n + i], want);
        }
    free(a);
    free(c);
}

/* dtrsm left lower unit: B := L^-1 B, checked by multiplying back. */
static void check_dtrsm(int m, int n)
{
    double *l = malloc(sizeof(double) * (size_t)m * m);
    double *b = malloc(sizeof(double) * (size_t)m * n);
    double *x0 = malloc(sizeof(double) * (size_t)m * n);
    for (size_t i = 0; i < (size_t)m * m; i++)
        l[i] = (val(i, 1) + 0.5) / 64; /* small: a well-conditioned L */
    for (size_t i = 0; i < (size_t)m * n; i++)
        b[i] = x0[i] = val(i, 2);
    double one = 1;
    dtrsm_("L", "L", "N", "U", &m, &n, &one, l, &m, b, &m);
    double worst = 0;
    for (int j = 0; j < n; j += 3)
        for (int i = 0; i < m; i += 5) {
            double s = b[(size_t)j * m + i]; /* unit diagonal */
            for (int p = 0; p < i; p++)
                s += l[(size_t)p * m + i] * b[(size_t)j * m + p];
            double e = fabs(s - x0[(size_t)j * m + i]);
            worst = e > worst ? e : worst;
        }
    CHECK(worst < 1e-9, "dtrsm: L X differs from B by %g", worst);
    free(l);
    free(b);
    free(x0);
}

/* zhemm left upper: C = A B with A Hermitian from its upper triangle. */
static void check_zhemm(int n)
{
    double complex *a = malloc(sizeof(*a) * (size_t)n * n);
    double complex *b = malloc(sizeof(*b) * (size_t)n * n);
    double complex *c = malloc(sizeof(*c) * (size_t)n * n);
    for (size_t i = 0; i < (size_t)n * n; i++) {
        a[i] = val(i, 1) + I * val(i, 2);
        b[i] = val(i, 3) - I * val(i, 4);
    }
    double complex one = 1, zero = 0;
    zhemm_("L", "U", &n, &n, &one, a, &n, b, &n, &zero, c, &n);
    for (int j = 0; j < n; j += 7)
        for (int i = 0; i < n; i += 5) {
            double complex s = 0;
            for (int l = 0; l < n; l++) {
                double complex h =
                    l >= i ? a[(size_t)l * n + i]
                           : conj(a[(size_t)i * n + l]); /* A(i,l) */
                if (l == i)
                    h = creal(h);
                s += h * b[(size_t)j * n + l];
            }
            CHECK(c[(size_t)j * n + i] == s, "zhemm C[%d,%d]", i, j);
        }
    free(a);
    free(b);
    free(c);
}

/* 8 threads multiply with the same A and B (new regions: they race to
 * register them) into C of their own, each checked. */
typedef struct shared_ab {
    int n;
    const double *a, *b;
} shared_ab;

static void *gemm_thread(void *arg)
{
    const shared_ab *s = arg;
    int n = s->n;
    double *c = malloc(sizeof(double) * (size_t)n * n);
    double one = 1, zero = 0;
    for (int r = 0; r < 3 && c != NULL; r++) {
        dgemm_("N", "T", &n, &n, &n, &one, s->a, &n, s->b, &n, &zero, c, &n);
        for (int j = 0; j < n; j += 13) {
            double x = 0;
            for (int l = 0; l < n; l++)
                x += s->a[(size_t)l * n + 5] * s->b[(size_t)l * n + j];
            if (c[(size_t)j * n + 5] != x)
                bad = 1;
        }
    }
    free(c);
    return NULL;
}

static void check_threads(void)
{
    int n = 160;
    double *a = malloc(sizeof(double) * (size_t)n * n);
    double *b = malloc(sizeof(double) * (size_t)n * n);
    for (size_t i = 0; i < (size_t)n * n; i++) {
        a[i] = val(i, 2);
        b[i] = val(i, 6);
    }
    shared_ab s = {n, a, b};
    uint64_t imp0 = counter(ZC_IMPORTS);
    pthread_t th[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&th[i], NULL, gemm_thread, &s);
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    CHECK(!bad, "8 threads: a wrong result");
    CHECK(counter(ZC_IMPORTS) - imp0 == 10,
          "8 threads: %llu registrations, expected 10 (A, B once each, 8 C)",
          (unsigned long long)(counter(ZC_IMPORTS) - imp0));
    free(a);
    free(b);
}

static int mode_gemm(void)
{
    uint64_t calls0 = counter(ZC_CALLS), inpl0 = counter(ZC_CALLS_IN_PLACE);
    uint64_t bytes0 = counter(ZC_BYTES_STAGED);
    uint64_t backups0 = counter(ZC_BACKUPS);
    uint64_t backed0 = counter(ZC_BYTES_BACKED_UP);
    check_dgemm(300, 260, 280, 300, 281, 305); /* padded leading dims */
    check_sgemm(400);
    check_zgemm(200);
    check_cblas_sub(300);
    check_dsyrk(300, 270);
    check_dtrsm(300, 250);
    check_zhemm(200);
    check_threads();
    uint64_t calls = counter(ZC_CALLS) - calls0;
    uint64_t inpl = counter(ZC_CALLS_IN_PLACE) - inpl0;
    uint64_t bytes = counter(ZC_BYTES_STAGED) - bytes0;
    printf("gemm: %llu calls offloaded, %llu fully in place, %llu bytes "
           "staged; %llu regions registered\n",
           (unsigned long long)calls, (unsigned long long)inpl,
           (unsigned long long)bytes, (unsigned long long)counter(ZC_IMPORTS));
    /* dgemm (beta -1), dsyrk (beta 1) and dtrsm read their output: it is
     * in place too, backed up first (a failure puts it back for the
     * CPU); nothing is staged */
    uint64_t outs = (uint64_t)(300 * 260 + 300 * 300 + 300 * 250) * 8;
    uint64_t backups = counter(ZC_BACKUPS) - backups0;
    uint64_t backed = counter(ZC_BYTES_BACKED_UP) - backed0;
    CHECK(calls == 7 + 24, "%llu calls offloaded, expected 31",
          (unsigned long long)calls);
    CHECK(inpl == calls, "%llu of %llu calls fully in place",
          (unsigned long long)inpl, (unsigned long long)calls);
    CHECK(bytes == 0, "%llu bytes staged, expected none",
          (unsigned long long)bytes);
    CHECK(backups == 3 && backed == outs,
          "%llu outputs backed up (%llu bytes), expected 3 (%llu bytes)",
          (unsigned long long)backups, (unsigned long long)backed,
          (unsigned long long)outs);
    CHECK(counter(ZC_RESTORES) == 0, "%llu backups restored, expected none",
          (unsigned long long)counter(ZC_RESTORES));

    /* mixed: B on the stack is staged, A and C stay in place */
    enum { N = 64 };
    static double bs[N * N];
    int n = N;
    double *a = malloc(sizeof(double) * N * N * 2); /* above the threshold */
    double *c = malloc(sizeof(double) * N * N * 2);
    for (int i = 0; i < N * N; i++) {
        a[i] = val((size_t)i, 1);
        bs[i] = val((size_t)i, 2);
    }
    uint64_t st0 = counter(ZC_OPS_STAGED), ip0 = counter(ZC_OPS_IN_PLACE);
    double one = 1, zero = 0;
    dgemm_("N", "N", &n, &n, &n, &one, a, &n, bs, &n, &zero, c, &n);
    for (int i = 0; i < N; i += 3)
        for (int j = 0; j < N; j += 5) {
            double s = 0;
            for (int l = 0; l < N; l++)
                s += a[l * N + i] * bs[j * N + l];
            CHECK(c[j * N + i] == s, "mixed C[%d,%d]", i, j);
        }
    CHECK(counter(ZC_OPS_STAGED) - st0 == 1 &&
              counter(ZC_OPS_IN_PLACE) - ip0 == 2,
          "mixed call: %llu staged, %llu in place (expected 1, 2)",
          (unsigned long long)(counter(ZC_OPS_STAGED) - st0),
          (unsigned long long)(counter(ZC_OPS_IN_PLACE) - ip0));
    /* C overlapping A's span in one allocation: C is staged, right */
    double *x = malloc(sizeof(double) * N * 2 * N); /* [A | C] column-major */
    for (int i = 0; i < N * N; i++)
        x[i] = val((size_t)i, 3);
    int ldx = N;
    st0 = counter(ZC_OPS_STAGED);
    dgemm_("N", "N", &n, &n, &n, &one, x, &ldx, bs, &n, &zero, x + N * N, &ldx);
    for (int i = 0; i < N; i += 3)
        for (int j = 0; j < N; j += 5) {
            double s = 0;
            for (int l = 0; l < N; l++)
                s += x[l * N + i] * bs[j * N + l];
            CHECK(x[N * N + j * N + i] == s, "[A|C] C[%d,%d]", i, j);
        }
    free(a);
    free(c);
    free(x);
    printf("gemm: mixed and overlapping calls right\n");
    return bad;
}

/* ---- alloc ---- */

static void fill(unsigned char *p, size_t n, int salt)
{
    for (size_t i = 0; i < n; i += 4093)
        p[i] = (unsigned char)(i * 31 + (size_t)salt);
    p[n - 1] = (unsigned char)salt;
}

static bool filled(const unsigned char *p, size_t n, int salt)
{
    for (size_t i = 0; i < n; i += 4093)
        if (p[i] != (unsigned char)(i * 31 + (size_t)salt))
            return false;
    return p[n - 1] == (unsigned char)salt;
}

static void *thread_main(void *arg)
{
    size_t min = *(size_t *)arg;
    for (int r = 0; r < 50; r++) {
        size_t n = min + (size_t)r * 4096;
        unsigned char *p = malloc(n);
        unsigned char *q = malloc(100);
        if (p == NULL || q == NULL || !is_region(p)) {
            bad = 1;
            return NULL;
        }
        fill(p, n, r);
        p = realloc(p, n * 2);
        if (p == NULL || !filled(p, n, r))
            bad = 1;
        free(q);
        free(p);
    }
    return NULL;
}

static int mode_alloc(size_t min)
{
    size_t n = min * 3 + 123;
    unsigned char *p = malloc(n);
    CHECK(p != NULL && is_region(p), "malloc(%zu) = %p: not a region", n,
          (void *)p);
    CHECK(malloc_usable_size(p) >= n && malloc_usable_size(p) < n + 4096,
          "malloc_usable_size %zu for %zu", malloc_usable_size(p), n);
    fill(p, n, 1);
    /* grows (unregistered: the memfd is resized), contents kept */
    p = realloc(p, n * 4);
    CHECK(p != NULL && is_region(p) && filled(p, n, 1),
          "realloc up lost contents");
    /* shrinks, still large: stays */
    unsigned char *q = realloc(p, n);
    CHECK(q == p, "realloc down moved a region that still fits");
    /* below the threshold: moves to glibc, contents kept */
    p = q;
    unsigned char head[1000];
    memcpy(head, p, sizeof(head));
    q = realloc(p, 1000);
    CHECK(q != NULL && !is_region(q) && memcmp(q, head, sizeof(head)) == 0,
          "realloc to 1000 bytes stayed a region or lost its contents");
    free(q);
    /* a glibc chunk growing past the threshold becomes a region */
    q = malloc(5000);
    memset(q, 7, 5000);
    q = realloc(q, n);
    CHECK(q != NULL && is_region(q) && q[0] == 7 && q[4999] == 7,
          "realloc of a small chunk past the threshold");
    free(q);
    CHECK(realloc(malloc(n), 0) == NULL, "realloc(p, 0) is not NULL");
    /* calloc: zeros, also where a freed region was */
    for (int r = 0; r < 3; r++) {
        size_t cn = n / 8;
        double *z = calloc(cn, 8);
        CHECK(z != NULL && is_region(z), "calloc: not a region");
        bool zero = true;
        for (size_t i = 0; i < cn; i += 511)
            zero = zero && z[i] == 0;
        CHECK(zero && z[cn - 1] == 0, "calloc: not zeroed");
        memset(z, 0xab, cn * 8);
        free(z);
    }
    volatile size_t huge = SIZE_MAX / 2; /* overflows times 4 */
    CHECK(calloc(huge, 4) == NULL, "calloc overflow");
    /* aligned forms */
    size_t aligns[] = {16, 64, 4096, 2u << 20, 4u << 20};
    for (size_t i = 0; i < sizeof(aligns) / sizeof(aligns[0]); i++) {
        void *m = NULL;
        CHECK(posix_memalign(&m, aligns[i], n) == 0 && m != NULL &&
                  (uintptr_t)m % aligns[i] == 0,
              "posix_memalign(%zu)", aligns[i]);
        CHECK(malloc_usable_size(m) >= n, "posix_memalign usable size");
        fill(m, n, 3);
        CHECK(filled(m, n, 3), "posix_memalign memory");
        free(m);
        m = aligned_alloc(aligns[i], n);
        CHECK(m != NULL && (uintptr_t)m % aligns[i] == 0, "aligned_alloc");
        free(m);
        m = memalign(aligns[i], n);
        CHECK(m != NULL && (uintptr_t)m % aligns[i] == 0, "memalign");
        free(m);
    }
    void *m = NULL;
    CHECK(posix_memalign(&m, 24, n) != 0, "posix_memalign(24) accepted");
    m = valloc(n);
    CHECK(m != NULL && (uintptr_t)m % 4096 == 0, "valloc");
    free(m);
    m = pvalloc(n);
    CHECK(m != NULL && (uintptr_t)m % 4096 == 0 &&
              malloc_usable_size(m) % 4096 == 0,
          "pvalloc");
    free(m);
    m = reallocarray(NULL, n, 2);
    CHECK(m != NULL && is_region(m), "reallocarray");
    m = reallocarray(m, n, 3);
    CHECK(m != NULL, "reallocarray grow");
    void *m2 = reallocarray(m, huge, 4);
    CHECK(m2 == NULL, "reallocarray overflow");
    free(m2 == NULL ? m : m2);
    free(NULL);

    /* a registered region: a dgemm on it first; then realloc (gemmd sealed
     * it: moves, contents kept), and free (its release) */
    uint64_t rel0 = counter(ZC_RELEASES), imp0 = counter(ZC_IMPORTS);
    int dn = 64;
    size_t bytes = min > (size_t)dn * dn * 8 ? min : (size_t)dn * dn * 8;
    double *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes);
    for (int i = 0; i < dn * dn; i++)
        a[i] = b[i] = val((size_t)i, 1);
    double one = 1, zero = 0;
    dgemm_("N", "N", &dn, &dn, &dn, &one, a, &dn, b, &dn, &zero, c, &dn);
    CHECK(counter(ZC_IMPORTS) - imp0 == 3, "%llu regions registered, not 3",
          (unsigned long long)(counter(ZC_IMPORTS) - imp0));
    double c0 = c[0], clast = c[dn * dn - 1];
    double *c2 = realloc(c, bytes * 2);
    CHECK(c2 != NULL && c2[0] == c0 && c2[dn * dn - 1] == clast,
          "realloc of a registered region lost its contents");
    free(a);
    free(b);
    free(c2);
    /* freed registered regions are kept: the next allocations of about
     * their size get them back, registered (no new registration), and
     * calloc zeroes */
    uint64_t reuse0 = counter(ZC_REUSES), imp1 = counter(ZC_IMPORTS);
    double *again = calloc(bytes / 8, 8);
    CHECK(again == a || again == b || again == c, "no kept region came back");
    bool zeroed = true;
    for (size_t i = 0; i < bytes / 8; i++)
        zeroed = zeroed && again[i] == 0;
    CHECK(zeroed, "calloc of a kept region is not zero");
    double *a2 = malloc(bytes), *b2 = malloc(bytes);
    CHECK(counter(ZC_REUSES) - reuse0 == 3, "reuses %llu, expected 3",
          (unsigned long long)(counter(ZC_REUSES) - reuse0));
    for (int i = 0; i < dn * dn; i++)
        a2[i] = b2[i] = val((size_t)i, 3);
    dgemm_("N", "N", &dn, &dn, &dn, &one, a2, &dn, b2, &dn, &zero, again, &dn);
    double s0 = 0;
    for (int l = 0; l < dn; l++)
        s0 += a2[l * dn] * b2[l];
    CHECK(again[0] == s0, "dgemm into a kept region: %g want %g", again[0], s0);
    CHECK(counter(ZC_IMPORTS) == imp1,
          "%llu new registrations for kept regions",
          (unsigned long long)(counter(ZC_IMPORTS) - imp1));
    free(a2);
    free(b2);
    free(again);
    /* released by the background thread (kept ones after 1 s): poll with
     * a deadline */
    for (int i = 0; i < 500 && counter(ZC_RELEASES) - rel0 < 3; i++)
        usleep(10000);
    CHECK(counter(ZC_RELEASES) - rel0 == 3, "%llu registrations released",
          (unsigned long long)(counter(ZC_RELEASES) - rel0));

    /* threads */
    pthread_t th[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&th[i], NULL, thread_main, &min);
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    CHECK(!bad, "threads");
    printf("alloc: semantics right; %llu regions made\n",
           (unsigned long long)counter(ZC_REGIONS));
    return bad;
}

/* ---- fdlimit ---- */

/* Under a descriptor limit of 64 (zerocopy.sh): at most 16 regions live,
 * the allocations past them glibc's, all of them usable; freed, the
 * regions come back. */
static int mode_fdlimit(size_t min)
{
    enum { N = 40 };
    unsigned char *p[N];
    int regions = 0;
    for (int round = 0; round < 2; round++) {
        regions = 0;
        for (int i = 0; i < N; i++) {
            p[i] = malloc(min);
            CHECK(p[i] != NULL, "malloc %d", i);
            if (p[i] == NULL)
                return 1;
            regions += is_region(p[i]);
            fill(p[i], min, i);
        }
        for (int i = 0; i < N; i++) {
            CHECK(filled(p[i], min, i), "allocation %d lost its contents", i);
            free(p[i]);
        }
        CHECK(regions == 16,
              "round %d: %d regions under a limit of 64 "
              "descriptors, expected 16",
              round, regions);
    }
    printf("fdlimit: 16 of %d allocations regions, the rest glibc's\n", N);
    return bad;
}

/* ---- fork ---- */

static int mode_fork(void)
{
    int n = 200;
    size_t bytes = sizeof(double) * (size_t)n * n;
    double *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes);
    for (int i = 0; i < n * n; i++) {
        a[i] = val((size_t)i, 1);
        b[i] = val((size_t)i, 2);
    }
    double one = 1, zero = 0;
    dgemm_("N", "N", &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n);
    double c00 = c[0];
    uint64_t inpl0 = counter(ZC_CALLS_IN_PLACE);
    CHECK(counter(ZC_IMPORTS) >= 3, "the parent's regions are not registered");
    pid_t pid = fork();
    if (pid == 0) {
        /* the child sees the regions as they were at the fork, whatever
         * the parent writes after it */
        for (int i = 0; i < n * n; i++)
            if (a[i] != val((size_t)i, 1))
                _exit(4);
        /* the child writes into every region and computes (on the CPU:
         * the parent used nng) */
        for (int i = 0; i < n * n; i++)
            a[i] = 1, b[i] = 1;
        dgemm_("N", "N", &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n);
        int ok = c[0] == n && c[n * n - 1] == n;
        double *d = malloc(bytes); /* regions work in the child */
        ok = ok && d != NULL && is_region(d);
        free(d);
        _exit(ok ? 0 : 3);
    }
    /* the parent writes A at once (the child must not see it), then puts
     * it back */
    for (int i = 0; i < n * n; i++)
        a[i] = 99;
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
              WEXITSTATUS(st) == 0,
          "the child failed (status %d%s)", st,
          WIFEXITED(st) && WEXITSTATUS(st) == 4
              ? ": it saw the parent's writes after the fork"
              : "");
    for (int i = 0; i < n * n; i++)
        a[i] = val((size_t)i, 1);
    CHECK(a[0] == val(0, 1) && b[5] == val(5, 2) && c[0] == c00,
          "the child's writes reached the parent");
    bool same = true;
    for (int i = 0; i < n * n; i++)
        same = same && a[i] == val((size_t)i, 1);
    CHECK(same, "the parent's A changed");
    memset(c, 0, bytes);
    dgemm_("N", "N", &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n);
    double s = 0;
    for (int l = 0; l < n; l++)
        s += a[l * n + 7] * b[9 * n + l];
    CHECK(c[9 * n + 7] == s, "the parent's dgemm after fork");
    CHECK(counter(ZC_CALLS_IN_PLACE) == inpl0 + 1,
          "the parent's dgemm after fork was not in place");
    printf("fork: the child's writes stayed in the child; the parent's "
           "dgemm in place and right\n");
    free(a);
    free(b);
    free(c);
    return bad;
}

/* ---- rmw ---- */

/* What the watcher compares and whom it kills. */
typedef struct watch {
    const double *b, *b0;
    size_t n;
    pid_t gemmd;
    volatile int stop;
    int killed; /* 1: B changed and gemmd was killed */
} watch;

/* Polls a sample of B (every 512th element) until one differs from B0,
 * then kills gemmd at once: gemmd has written part of B in place. */
static void *watch_main(void *arg)
{
    watch *w = arg;
    while (!w->stop) {
        for (size_t i = 0; i < w->n; i += 512)
            if (w->b[i] != w->b0[i]) {
                kill(w->gemmd, SIGKILL);
                w->killed = 1;
                return NULL;
            }
    }
    return NULL;
}

/* dtrsm left lower unit with B in place and read: gemmd killed mid-way
 * (GEMMD_KILL_PID) after writing part of B; the call must put B's
 * backup back and solve on the CPU. Checked by multiplying back. */
static int mode_rmw(void)
{
    const char *e = getenv("GEMMD_KILL_PID");
    if (e == NULL)
        return 2;
    int m = 2000, n = 2000;
    size_t mn = (size_t)m * n;
    double *l = malloc(sizeof(double) * (size_t)m * m);
    double *b = malloc(sizeof(double) * mn);
    double *x0 = malloc(sizeof(double) * mn);
    for (size_t i = 0; i < (size_t)m * m; i++)
        l[i] = (val(i, 1) + 0.5) / 256; /* small: a well-conditioned L */
    for (size_t i = 0; i < mn; i++)
        b[i] = x0[i] = val(i, 2);
    watch w = {.b = b, .b0 = x0, .n = mn, .gemmd = (pid_t)atoi(e)};
    pthread_t th;
    pthread_create(&th, NULL, watch_main, &w);
    double one = 1;
    dtrsm_("L", "L", "N", "U", &m, &n, &one, l, &m, b, &m);
    w.stop = 1;
    pthread_join(th, NULL);
    CHECK(w.killed, "B never changed while the call ran");
    CHECK(counter(ZC_BACKUPS) == 0,
          "gemmd completed the call before it was killed");
    CHECK(counter(ZC_RESTORES) == 1 && counter(ZC_DETACHES) == 1,
          "%llu restores, %llu detaches (expected 1 and 1)",
          (unsigned long long)counter(ZC_RESTORES),
          (unsigned long long)counter(ZC_DETACHES));
    double worst = 0;
    for (int j = 0; j < n; j += 7)
        for (int i = 0; i < m; i += 5) {
            double s = b[(size_t)j * m + i];
            for (int p = 0; p < i; p++)
                s += l[(size_t)p * m + i] * b[(size_t)j * m + p];
            double d = fabs(s - x0[(size_t)j * m + i]);
            worst = d > worst ? d : worst;
        }
    CHECK(worst < 1e-9, "dtrsm after the kill: L X differs from B by %g",
          worst);
    printf("rmw: gemmd killed after writing part of B; B put back, solved "
           "on the CPU (L X - B at most %.3g)\n",
           worst);
    free(l);
    free(b);
    free(x0);
    return bad;
}

/* ---- restart ---- */

static void one_dgemm(int n, double *a, double *b, double *c, const char *what)
{
    double one = 1, zero = 0;
    memset(c, 0, sizeof(double) * (size_t)n * n);
    dgemm_("N", "N", &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n);
    for (int j = 0; j < n; j += 11) {
        double s = 0;
        for (int l = 0; l < n; l++)
            s += a[l * n + 3] * b[j * n + l];
        CHECK(c[j * n + 3] == s, "%s: C[3,%d] %g want %g", what, j,
              c[j * n + 3], s);
    }
}

static int mode_restart(void)
{
    int n = 200;
    size_t bytes = sizeof(double) * (size_t)n * n;
    double *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes);
    for (int i = 0; i < n * n; i++) {
        a[i] = val((size_t)i, 1);
        b[i] = val((size_t)i, 2);
    }
    one_dgemm(n, a, b, c, "before");
    CHECK(counter(ZC_CALLS_IN_PLACE) == 1, "the first dgemm not in place");
    printf("ready\n");
    fflush(stdout);
    char line[64];
    if (fgets(line, sizeof(line), stdin) == NULL)
        return 1;
    uint64_t calls0 = counter(ZC_CALLS), inpl0 = counter(ZC_CALLS_IN_PLACE);
    one_dgemm(n, a, b, c, "after"); /* the CPU, or staged */
    CHECK(counter(ZC_CALLS_IN_PLACE) == inpl0,
          "a region gemmd sealed before was used in place again");
    bool back = counter(ZC_CALLS) > calls0;
    if (back) { /* gemmd is back: new regions are in place */
        double *a2 = malloc(bytes), *b2 = malloc(bytes), *c2 = malloc(bytes);
        memcpy(a2, a, bytes);
        memcpy(b2, b, bytes);
        one_dgemm(n, a2, b2, c2, "new regions");
        CHECK(counter(ZC_CALLS_IN_PLACE) == inpl0 + 1,
              "new regions after the restart not in place");
        free(a2);
        free(b2);
        free(c2);
    }
    free(a);
    free(b);
    free(c);
    printf("restart: right %s\n",
           back ? "through the new gemmd (old regions staged, new ones in "
                  "place)"
                : "on the CPU (no gemmd)");
    return bad;
}

/* ---- abandon ---- */

/* Waits for a line on stdin after saying `what` on stdout. */
static bool handshake(const char *what)
{
    char line[64];
    printf("%s\n", what);
    fflush(stdout);
    return fgets(line, sizeof(line), stdin) != NULL;
}

/* A dgemm in place; then (gemmd stopped by zerocopy.sh, a short
 * GEMMBLAS_TIMEOUT_MS) one gemmd never answers: abandoned, its output's
 * region detached, computed on the CPU, right; C then set to a sentinel
 * and gemmd continued: whatever it writes late into the memfd must not
 * reach C. */
static int mode_abandon(void)
{
    int n = 200;
    size_t bytes = sizeof(double) * (size_t)n * n;
    double *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes);
    for (int i = 0; i < n * n; i++) {
        a[i] = val((size_t)i, 1);
        b[i] = val((size_t)i, 2);
    }
    one_dgemm(n, a, b, c, "before");
    CHECK(counter(ZC_CALLS_IN_PLACE) == 1, "the first dgemm not in place");
    if (!handshake("ready1")) /* zerocopy.sh stops gemmd */
        return 1;
    one_dgemm(n, a, b, c, "abandoned"); /* on the CPU, right */
    CHECK(counter(ZC_DETACHES) == 1, "%llu regions detached, expected 1",
          (unsigned long long)counter(ZC_DETACHES));
    for (int i = 0; i < n * n; i++)
        c[i] = 7;
    if (!handshake("ready2")) /* zerocopy.sh continues gemmd, waits */
        return 1;
    bool kept = true;
    for (int i = 0; i < n * n; i++)
        kept = kept && c[i] == 7;
    CHECK(kept, "gemmd's late write reached the detached C");
    printf("abandon: detached, right on the CPU, C untouched by gemmd "
           "after\n");
    free(a);
    free(b);
    free(c);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    uint64_t on = 0;
    gemmblas_zerocopy_counters(&on, 1);
    if (!on) {
        printf("skipped: the zero-copy mode is not on in this process "
               "(GEMMBLAS_ZEROCOPY unset, or another allocator such as "
               "AddressSanitizer's interposes malloc)\n");
        return 77;
    }
    const char *e = getenv("GEMMBLAS_ZEROCOPY_MIN_BYTES");
    size_t min = e != NULL ? (size_t)strtoull(e, NULL, 10) : 16u << 20;
    int rv;
    if (strcmp(argv[1], "gemm") == 0)
        rv = mode_gemm();
    else if (strcmp(argv[1], "alloc") == 0)
        rv = mode_alloc(min);
    else if (strcmp(argv[1], "fdlimit") == 0)
        rv = mode_fdlimit(min);
    else if (strcmp(argv[1], "fork") == 0)
        rv = mode_fork();
    else if (strcmp(argv[1], "abandon") == 0)
        rv = mode_abandon();
    else if (strcmp(argv[1], "rmw") == 0)
        rv = mode_rmw();
    else if (strcmp(argv[1], "restart") == 0)
        rv = mode_restart();
    else
        return 2;
    return rv ? 1 : 0;
}
