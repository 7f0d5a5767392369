/*
 * bench_blas.c: dgemm_ and sgemm_ from a plain C program through the BLAS
 * libraries a user compares, side by side in one run:
 *   openblas     the host's OpenBLAS (libblas.so.3, all its cores; its
 *                configuration, core and threads head the table, and
 *                --openblas-coretype sets OPENBLAS_CORETYPE where a VM
 *                hides the CPU's flags)
 *   nvblas       NVBLAS from the CUDA toolkit (libnvblas.so, with an
 *                nvblas.conf written here that names the CPU BLAS)
 *   nvblas-pin   the same with NVBLAS_AUTOPIN_MEM_ENABLED, its fastest
 *                setting for a single-threaded caller: the anchor the
 *                targets count against
 *   gemmblas     libgemmblas with gemmd running (GEMMBLAS_MIN_FLOPS=0;
 *                its row panels as the environment or its defaults say)
 *   gemmblas-np  the same with GEMMBLAS_PANELS=0: one request a call, the
 *                staging copies before and after it (run only when named
 *                in --variants)
 *   gemmblas-nf  the same with GEMMBLAS_FILL_GEMM=0 and GEMMBLAS_DRAIN=0:
 *                A staged whole before the request and D copied out after
 *                the reply, not beside gemmd (run only when named in
 *                --variants)
 *   gemmblas-zc  the same in its zero-copy mode: preloaded (so its malloc
 *                is the worker's) with GEMMBLAS_ZEROCOPY=1, the worker's
 *                matrices are memfd regions its GEMMs use in place; its
 *                load time is the preload's, not measured; the worker
 *                reports the calls that ran with every operand in place
 *                and the bytes still staged (gemmblas_zerocopy_counters)
 * For each type and size: a fresh process times its first call (from
 * before loading the library to the first result: what a short script
 * pays) and then up to --calls more within --row-s (steady state:
 * median); then --procs fresh processes of the --procs-variants call at
 * once after a barrier (each warmed up by one call) and their total
 * throughput is reported. Every worker checks 16 elements of its C
 * against a long double dot product (random data, never zeros).
 * --budget-s bounds the whole run (rows that no longer fit are listed as
 * not run), so that the default table fits in one device call.
 * --crossover instead times steady-state openblas against gemmblas over
 * small sizes and prints where gemmd starts to win: the measurement
 * behind GEMMBLAS_MIN_FLOPS.
 *
 * The libraries are dlopened by the workers (RTLD_LOCAL), each in its own
 * process (proc.h), so nothing of one variant is loaded in another's. Not
 * a test: a program that prints a table (and --csv).
 */
#include "proc.h"

#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef void (*gemm_fn)(const char *, const char *, const int *, const int *,
                        const int *, const void *, const void *, const int *,
                        const void *, const int *, const void *, void *,
                        const int *);

/* The variants: openblas, nvblas, nvblas-pin, gemmblas, gemmblas-zc,
 * gemmblas-np, gemmblas-nf. */
#define NVAR 7

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- the worker: one process, one library ---- */

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static double rnd(void) /* uniform in [-1, 1), never 0 */
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return ((double)(rng_state >> 11) + 0.5) * 0x1p-52 - 1.0;
}

/* Max relative error of 16 sampled elements of C = A B (column-major n x
 * n) against long double. */
static double sample_error(char t, int n, const void *a, const void *b,
                           const void *c)
{
    double worst = 0;
    for (int s = 0; s < 16; s++) {
        int i = (int)((s * 7919u + 13) % (unsigned)n);
        int j = (int)((s * 104729u + 7) % (unsigned)n);
        long double acc = 0, mag = 0;
        for (int l = 0; l < n; l++) {
            long double x = t == 'd' ? ((const double *)a)[(size_t)l * n + i]
                                     : ((const float *)a)[(size_t)l * n + i];
            long double y = t == 'd' ? ((const double *)b)[(size_t)j * n + l]
                                     : ((const float *)b)[(size_t)j * n + l];
            acc += x * y;
            mag += fabsl(x * y);
        }
        long double got = t == 'd' ? ((const double *)c)[(size_t)j * n + i]
                                   : ((const float *)c)[(size_t)j * n + i];
        double e = (double)(fabsl(got - acc) / (mag > 0 ? mag : 1));
        if (!(e <= worst))
            worst = isnan(e) ? INFINITY : e;
    }
    return worst;
}

/* bench_blas --worker LIB TYPE N CALLS MAX_MS [together]: times the first
 * call and then up to CALLS more while they take less than MAX_MS in all
 * (at least one), and prints "RESULT load_ms first_ms median_ms min_ms err
 * calls". With "together": after the first call it prints "READY", waits
 * for a byte on stdin, makes CALLS calls and prints "RESULT4 elapsed_ms
 * err". An OpenBLAS says its configuration first ("CONFIG ..."). */
static int worker(int argc, char **argv)
{
    if (argc < 7)
        return 2;
    const char *lib = argv[2];
    char t = argv[3][0];
    int n = atoi(argv[4]), calls = atoi(argv[5]);
    double max_ms = atof(argv[6]);
    bool together = argc > 7 && strcmp(argv[7], "together") == 0;
    size_t es = t == 'd' ? 8 : 4, nn = (size_t)n * n;
    void *a = malloc(nn * es), *b = malloc(nn * es), *c = malloc(nn * es);
    double *ms = calloc((size_t)calls + 1, sizeof(double));
    if (a == NULL || b == NULL || c == NULL || ms == NULL) {
        printf("ERROR out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < nn; i++) {
        if (t == 'd') {
            ((double *)a)[i] = rnd();
            ((double *)b)[i] = rnd();
        } else {
            ((float *)a)[i] = (float)rnd();
            ((float *)b)[i] = (float)rnd();
        }
    }
    memset(c, 0, nn * es);
    double one_d = 1, zero_d = 0;
    float one_f = 1, zero_f = 0;
    const void *one = t == 'd' ? (void *)&one_d : (void *)&one_f;
    const void *zero = t == 'd' ? (void *)&zero_d : (void *)&zero_f;

    double t0 = bp_now_ms();
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        printf("ERROR dlopen %s: %s\n", lib, dlerror());
        return 1;
    }
    gemm_fn f = (gemm_fn)dlsym(h, t == 'd' ? "dgemm_" : "sgemm_");
    if (f == NULL) {
        printf("ERROR %s has no %cgemm_\n", lib, t);
        return 1;
    }
    double t1 = bp_now_ms();
    f("N", "N", &n, &n, &n, one, a, &n, b, &n, zero, c, &n);
    double t2 = bp_now_ms();
    bp_print_blas_config(h);
    double err = sample_error(t, n, a, b, c);
    if (together) {
        char x;
        printf("READY\n");
        fflush(stdout);
        if (read(0, &x, 1) != 1)
            return 1;
        double s0 = bp_now_ms();
        for (int i = 0; i < calls; i++)
            f("N", "N", &n, &n, &n, one, a, &n, b, &n, zero, c, &n);
        double s1 = bp_now_ms();
        double e2 = sample_error(t, n, a, b, c);
        printf("RESULT4 %.3f %.3g\n", s1 - s0, e2 > err ? e2 : err);
        return 0;
    }
    int (*zc)(uint64_t *, int) =
        (int (*)(uint64_t *, int))dlsym(h, "gemmblas_zerocopy_counters");
    uint64_t z[10] = {0};
    if (zc != NULL) /* the counters' order: blas/gemmblas.h */
        zc(z, 10);
    int done = 0;
    double start = bp_now_ms();
    while (done < calls && (done == 0 || bp_now_ms() - start < max_ms)) {
        double s0 = bp_now_ms();
        f("N", "N", &n, &n, &n, one, a, &n, b, &n, zero, c, &n);
        ms[done++] = bp_now_ms() - s0;
    }
    double e2 = sample_error(t, n, a, b, c);
    if (zc != NULL && z[0] != 0) { /* the mode is on: steady calls' use */
        uint64_t z2[10] = {0};
        zc(z2, 10);
        printf("ZC %llu %llu %llu\n", (unsigned long long)(z2[5] - z[5]),
               (unsigned long long)(z2[6] - z[6]),
               (unsigned long long)(z2[9] - z[9]));
    }
    qsort(ms, (size_t)done, sizeof(double), cmp_d);
    printf("RESULT %.3f %.3f %.3f %.3f %.3g %d\n", t1 - t0, t2 - t0,
           done ? ms[done / 2] : 0, done ? ms[0] : 0, e2 > err ? e2 : err,
           done);
    return 0;
}

/* ---- the controller ---- */

typedef struct result {
    bool run; /* false: the budget left it out */
    bool ok;
    double load_ms, first_ms, med_ms, min_ms, err;
    int calls;           /* steady calls made */
    double procs_tflops; /* 0: not run */
    double procs_err;
    /* gemmblas-zc's steady calls: gemmd's, all operands in place, bytes
     * staged (zc_calls < 0: no report) */
    long long zc_calls, zc_inplace, zc_staged;
} result;

static double flops(int n)
{
    return 2.0 * n * (double)n * n;
}

static double tol(char t)
{
    return t == 'd' ? 1e-12 : 1e-5;
}

/* One fresh process: first call and up to calls more within max_ms. */
static void run_single(const bp_variant *v, char t, int n, int calls,
                       double max_ms, result *r)
{
    char who[96], line[1024], tb[2] = {t, 0}, nb[16], cb[16], mb[32];
    snprintf(who, sizeof(who), "%s %cgemm %d", v->name, t, n);
    snprintf(nb, sizeof(nb), "%d", n);
    snprintf(cb, sizeof(cb), "%d", calls);
    snprintf(mb, sizeof(mb), "%.0f", max_ms);
    char *args[] = {(char *)v->lib, tb, nb, cb, mb, NULL};
    FILE *out;
    r->run = true;
    r->ok = false;
    r->zc_calls = -1;
    pid_t pid = bp_spawn(v, args, &out, NULL);
    if (pid < 0) {
        fprintf(stderr, "%s: cannot start a worker\n", who);
        return;
    }
    while (fgets(line, sizeof(line), out) != NULL) {
        if (strncmp(line, "CONFIG ", 7) == 0) {
            bp_say_config(v, line);
        } else if (strncmp(line, "ZC ", 3) == 0) {
            if (sscanf(line, "ZC %lld %lld %lld", &r->zc_calls, &r->zc_inplace,
                       &r->zc_staged) != 3)
                r->zc_calls = -1;
        } else if (strncmp(line, "RESULT ", 7) == 0) {
            r->ok = sscanf(line, "RESULT %lf %lf %lf %lf %lf %d", &r->load_ms,
                           &r->first_ms, &r->med_ms, &r->min_ms, &r->err,
                           &r->calls) == 6;
        } else if (strncmp(line, "ERROR", 5) == 0) {
            fprintf(stderr, "%s: %s", who, line);
        }
    }
    fclose(out);
    int st = bp_reap(pid);
    if (st != 0) {
        fprintf(stderr, "%s: worker exit status %d\n", who, st);
        r->ok = false;
    }
    if (r->ok && !(r->err <= tol(t)))
        fprintf(stderr, "%s: WRONG RESULT (sampled relative error %.3g)\n", who,
                r->err);
}

/* procs processes at once, each warmed up, released together. */
static void run_procs(const bp_variant *v, char t, int n, int calls, int procs,
                      result *r)
{
    char who[96], tb[2] = {t, 0}, nb[16], cb[16];
    snprintf(who, sizeof(who), "%s %cgemm %d x%d", v->name, t, n, procs);
    snprintf(nb, sizeof(nb), "%d", n);
    snprintf(cb, sizeof(cb), "%d", calls);
    char *args[] = {(char *)v->lib, tb, nb, cb, "0", "together", NULL};
    double slowest, err;
    bool ok = bp_together(v, args, procs, who, &slowest, &err);
    r->procs_tflops = ok && slowest > 0
                          ? procs * calls * flops(n) / (slowest * 1e-3) / 1e12
                          : 0;
    r->procs_err = err;
    if (ok && !(err <= tol(t)))
        fprintf(stderr, "%s: WRONG RESULT (sampled relative error %.3g)\n", who,
                err);
}

static void usage(void)
{
    fputs("usage: bench_blas [--sizes 1024,2048,4096,8192] [--types d,s]\n"
          "                  [--calls 10] [--row-s 3] [--budget-s 480]\n"
          "                  [--procs 4] [--procs-calls 5]\n"
          "                  [--procs-variants nvblas,nvblas-pin,gemmblas]\n"
          "                  [--variants openblas,nvblas,nvblas-pin,"
          "gemmblas,gemmblas-np,gemmblas-nf,gemmblas-zc]\n"
          "                  [--openblas LIB] [--openblas-coretype CORE]\n"
          "                  [--nvblas LIB] [--gemmblas LIB] [--csv FILE]\n"
          "       bench_blas --crossover [--sizes 256,384,...] [--types d,s]\n"
          "--procs 0: no runs of several processes. gemmblas-zc (the\n"
          "zero-copy mode), gemmblas-np (GEMMBLAS_PANELS=0) and gemmblas-nf\n"
          "(no fill or drain) run only when named in --variants.\n"
          "--row-s: the\n"
          "steady calls of one row stop after this long (at least one);\n"
          "--budget-s 0: no budget for the run. gemmd must be running for\n"
          "gemmblas (GEMM_URL, else the default socket). Defaults: Debian's\n"
          "OpenBLAS, /usr/local/cuda's NVBLAS, libgemmblas.so.0 beside this\n"
          "program's build or installed.\n",
          stderr);
}

static const char *first_existing(const char *const *paths)
{
    for (; *paths != NULL; paths++)
        if (access(*paths, R_OK) == 0)
            return *paths;
    return NULL;
}

/* Index of the variant called name in vs, or -1. */
static int find(const bp_variant *vs, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(vs[i].name, name) == 0)
            return i;
    return -1;
}

/* "x.xx" for a / b where both ran, else "-". */
static const char *ratio(char *buf, size_t len, bool ok, double a, double b)
{
    if (ok && a > 0 && b > 0)
        snprintf(buf, len, "%.2f", a / b);
    else
        snprintf(buf, len, "-");
    return buf;
}

static void target(const char *what, double x, const char *unit, bool met)
{
    printf("  %-44s %8.2f%s %s\n", what, x, unit, met ? "MET" : "MISSED");
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--worker") == 0)
        return worker(argc, argv);

    int sizes[32] = {1024, 2048, 4096, 8192}, nsizes = 4;
    char types[8] = "ds";
    int calls = 10, procs = 4, procs_calls = 5;
    double row_s = 3, budget_s = 480;
    bool crossover = false;
    const char *csv = NULL, *want = "openblas,nvblas,nvblas-pin,gemmblas";
    const char *want_procs = "nvblas,nvblas-pin,gemmblas", *core = NULL;
    static const char *const ob_paths[] = {
        "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3",
        "/usr/lib/x86_64-linux-gnu/libopenblas.so.0", NULL};
    static const char *const nv_paths[] = {
        "/usr/local/cuda/lib64/libnvblas.so",
        "/usr/local/cuda/targets/x86_64-linux/lib/libnvblas.so", NULL};
    const char *ob = first_existing(ob_paths), *nv = first_existing(nv_paths);
    const char *gb = "libgemmblas.so.0";
    char self[4096] = "", gbdef[4200];
    if (bp_init() != 0 ||
        readlink("/proc/self/exe", self, sizeof(self) - 1) < 0)
        return 1;
    snprintf(gbdef, sizeof(gbdef), "%.4000s", self);
    char *slash = strrchr(gbdef, '/');
    if (slash != NULL) { /* build tree: bench/blas/ -> blas/ */
        snprintf(slash + 1, sizeof(gbdef) - (size_t)(slash + 1 - gbdef),
                 "../../blas/libgemmblas.so.0");
        if (access(gbdef, R_OK) == 0)
            gb = gbdef;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--crossover") == 0) {
            crossover = true;
            continue;
        }
        if (v == NULL)
            return usage(), 2;
        i++;
        if (strcmp(a, "--sizes") == 0) {
            if ((nsizes = bp_parse_ints(v, sizes, 32)) <= 0)
                return usage(), 2;
        } else if (strcmp(a, "--types") == 0) {
            int k = 0;
            for (const char *p = v; *p && k < 4; p++)
                if (*p == 'd' || *p == 's')
                    types[k++] = *p;
            types[k] = 0;
        } else if (strcmp(a, "--calls") == 0) {
            calls = atoi(v);
        } else if (strcmp(a, "--row-s") == 0) {
            row_s = atof(v);
        } else if (strcmp(a, "--budget-s") == 0) {
            budget_s = atof(v);
        } else if (strcmp(a, "--procs") == 0) {
            procs = atoi(v);
        } else if (strcmp(a, "--procs-calls") == 0) {
            procs_calls = atoi(v);
        } else if (strcmp(a, "--procs-variants") == 0) {
            want_procs = v;
        } else if (strcmp(a, "--openblas") == 0) {
            ob = v;
        } else if (strcmp(a, "--openblas-coretype") == 0) {
            core = v;
        } else if (strcmp(a, "--nvblas") == 0) {
            nv = v;
        } else if (strcmp(a, "--gemmblas") == 0) {
            gb = v;
        } else if (strcmp(a, "--variants") == 0) {
            want = v;
        } else if (strcmp(a, "--csv") == 0) {
            csv = v;
        } else {
            return usage(), 2;
        }
    }
    if (calls < 1 || procs < 0 || procs > 64 || procs_calls < 1 ||
        !(row_s > 0) || budget_s < 0 || types[0] == 0)
        return usage(), 2;
    if (ob == NULL) {
        fprintf(stderr, "bench_blas: no OpenBLAS (give --openblas LIB)\n");
        return 1;
    }
    if (crossover && nsizes == 4 && sizes[0] == 1024) {
        static const int xs[] = {128,  192,  256,  384,  512, 768,
                                 1024, 1536, 2048, 3072, 4096};
        nsizes = (int)(sizeof(xs) / sizeof(xs[0]));
        memcpy(sizes, xs, sizeof(xs));
    }
    bp_set_coretype(core);
    bp_budget_start(budget_s);

    /* nvblas.conf without and with autopin: the CPU BLAS for what NVBLAS
     * does not take, all GPUs */
    static char nvconf[2][300], gbcpu[4200], zcpre[4200];
    bool have_conf = bp_nvblas_conf("bench_blas", ob, false, nvconf[0],
                                    sizeof(nvconf[0])) == 0 &&
                     bp_nvblas_conf("bench_blas", ob, true, nvconf[1],
                                    sizeof(nvconf[1])) == 0;
    snprintf(gbcpu, sizeof(gbcpu), "GEMMBLAS_CPU_BLAS=%.4000s", ob);
    snprintf(zcpre, sizeof(zcpre), "LD_PRELOAD=%.4000s", gb);
    static char *nvenv[2][2], *gbenv[4], *zcenv[6], *npenv[5], *nfenv[6];
    nvenv[0][0] = nvconf[0];
    nvenv[1][0] = nvconf[1];
    gbenv[0] = "GEMMBLAS_MIN_FLOPS=0";
    gbenv[1] = gbcpu;
    /* says so if gemmd is not there; GEMMBLAS_VERBOSE=2 in the
     * environment: a line per call (the panels' times) */
    static char verb[32] = "GEMMBLAS_VERBOSE=1";
    const char *ve = getenv("GEMMBLAS_VERBOSE");
    if (ve != NULL && ve[0] >= '1' && ve[0] <= '9' && ve[1] == '\0')
        verb[17] = ve[0];
    gbenv[2] = verb;
    zcenv[0] = "GEMMBLAS_MIN_FLOPS=0";
    zcenv[1] = gbcpu;
    zcenv[2] = "GEMMBLAS_VERBOSE=1";
    zcenv[3] = "GEMMBLAS_ZEROCOPY=1";
    zcenv[4] = zcpre;
    npenv[0] = "GEMMBLAS_MIN_FLOPS=0";
    npenv[1] = gbcpu;
    npenv[2] = verb;
    npenv[3] = "GEMMBLAS_PANELS=0";
    nfenv[0] = "GEMMBLAS_MIN_FLOPS=0";
    nfenv[1] = gbcpu;
    nfenv[2] = verb;
    nfenv[3] = "GEMMBLAS_FILL_GEMM=0";
    nfenv[4] = "GEMMBLAS_DRAIN=0";
    bp_variant all[NVAR] = {{"openblas", ob, NULL, NULL},
                            {"nvblas", nv, nvenv[0], NULL},
                            {"nvblas-pin", nv, nvenv[1], NULL},
                            {"gemmblas", gb, gbenv, bp_gemmd_settle},
                            {"gemmblas-zc", gb, zcenv, bp_gemmd_settle},
                            {"gemmblas-np", gb, npenv, bp_gemmd_settle},
                            {"gemmblas-nf", gb, nfenv, bp_gemmd_settle}};
    bp_variant vs[NVAR];
    bool inp[NVAR] = {false};
    int nvar = 0;
    for (int i = 0; i < NVAR; i++) {
        bool nvb = strncmp(all[i].name, "nvblas", 6) == 0;
        if (crossover && (nvb || i >= 4))
            continue;
        if (!bp_listed(want, all[i].name))
            continue;
        if (all[i].lib == NULL || (nvb && !have_conf)) {
            fprintf(stderr, "bench_blas: no library for %s: skipping it\n",
                    all[i].name);
            continue;
        }
        inp[nvar] =
            !crossover && procs > 0 && bp_listed(want_procs, all[i].name);
        vs[nvar++] = all[i];
    }
    printf("# bench_blas: %s; steady: up to %d calls within %.1f s a row; "
           "budget %.0f s\n",
           crossover ? "crossover" : "full", calls, row_s, budget_s);
    bp_print_variants(vs, nvar);

    int ntypes = (int)strlen(types);
    result *res = calloc((size_t)ntypes * nsizes * NVAR, sizeof(result));
    if (res == NULL)
        return 1;
#define R(ti, si, vi) res[((ti)*nsizes + (si)) * NVAR + (vi)]
    int skipped = 0;
    for (int ti = 0; ti < ntypes; ti++)
        for (int si = 0; si < nsizes; si++)
            for (int vi = 0; vi < nvar; vi++) {
                result *r = &R(ti, si, vi);
                double left = bp_budget_left_ms();
                if (left <= 0) {
                    skipped++;
                    continue;
                }
                double row_ms = fmin(row_s * 1e3, left);
                run_single(&vs[vi], types[ti], sizes[si], calls, row_ms, r);
                if (inp[vi] && r->ok && bp_budget_left_ms() > 0) {
                    /* procs share the device: about procs x a call each */
                    int pc = procs_calls;
                    if (r->med_ms > 0 && pc * procs * r->med_ms > row_ms)
                        pc = (int)fmax(1, row_ms / (procs * r->med_ms));
                    run_procs(&vs[vi], types[ti], sizes[si], pc, procs, r);
                }
                fprintf(stderr,
                        "  %-11s %cgemm %5d: first %9.1f ms, steady "
                        "%9.2f ms (%d calls), %d procs %7.2f TFLOP/s\n",
                        vs[vi].name, types[ti], sizes[si], r->first_ms,
                        r->med_ms, r->calls, inp[vi] ? procs : 0,
                        r->procs_tflops);
            }

    FILE *cs = csv ? fopen(csv, "w") : NULL;
    if (cs != NULL)
        fprintf(cs, "type,n,variant,load_ms,first_ms,steady_ms,calls,"
                    "steady_tflops,procs,procs_tflops,max_rel_err\n");
    printf("\n%-5s %5s %-11s %10s %10s %10s %5s %9s %12s %9s\n", "type", "n",
           "variant", "load ms", "first ms", "steady ms", "calls", "TFLOP/s",
           "procs TF/s", "rel err");
    for (int ti = 0; ti < ntypes; ti++)
        for (int si = 0; si < nsizes; si++)
            for (int vi = 0; vi < nvar; vi++) {
                result *r = &R(ti, si, vi);
                if (!r->run) {
                    printf("%-5c %5d %-11s  not run: the --budget-s was "
                           "spent\n",
                           types[ti], sizes[si], vs[vi].name);
                    continue;
                }
                double tf = r->ok && r->med_ms > 0
                                ? flops(sizes[si]) / (r->med_ms * 1e-3) / 1e12
                                : 0;
                printf("%-5c %5d %-11s %10.1f %10.1f %10.2f %5d %9.2f %12.2f "
                       "%9.2g%s\n",
                       types[ti], sizes[si], vs[vi].name, r->load_ms,
                       r->first_ms, r->med_ms, r->calls, tf, r->procs_tflops,
                       r->err > r->procs_err ? r->err : r->procs_err,
                       r->ok ? "" : "  FAILED");
                if (cs != NULL)
                    fprintf(cs,
                            "%c,%d,%s,%.3f,%.3f,%.3f,%d,%.4f,%d,%.4f,%.3g\n",
                            types[ti], sizes[si], vs[vi].name, r->load_ms,
                            r->first_ms, r->med_ms, r->calls, tf,
                            inp[vi] ? procs : 0, r->procs_tflops, r->err);
            }
    if (cs != NULL)
        fclose(cs);

    /* ratios: gemmblas against the others, per type and size */
    int io = find(vs, nvar, "openblas"), in = find(vs, nvar, "nvblas");
    int ip = find(vs, nvar, "nvblas-pin"), ig = find(vs, nvar, "gemmblas");
    int iz = find(vs, nvar, "gemmblas-zc");
    int inp_ = find(vs, nvar, "gemmblas-np");
    int inf_ = find(vs, nvar, "gemmblas-nf");
    if (ig >= 0) {
        printf("\ngemmblas faster by (other's time / gemmblas's; procs: "
               "gemmblas's throughput / other's)\n");
        printf("%-5s %5s %-11s %8s %8s %8s\n", "type", "n", "vs", "first",
               "steady", "procs");
        int others[5] = {ip, in, io, inp_, inf_};
        for (int ti = 0; ti < ntypes; ti++)
            for (int si = 0; si < nsizes; si++)
                for (int k = 0; k < 5; k++) {
                    if (others[k] < 0)
                        continue;
                    result *g = &R(ti, si, ig), *o = &R(ti, si, others[k]);
                    bool ok = g->ok && o->ok;
                    char a[32], b[32], c[32];
                    printf("%-5c %5d %-11s %8s %8s %8s\n", types[ti], sizes[si],
                           vs[others[k]].name,
                           ratio(a, sizeof(a), ok, o->first_ms, g->first_ms),
                           ratio(b, sizeof(b), ok, o->med_ms, g->med_ms),
                           ratio(c, sizeof(c), ok, g->procs_tflops,
                                 o->procs_tflops));
                }
    }
    if (crossover && ig >= 0 && io >= 0) {
        /* the smallest size from which gemmblas wins at every larger one */
        double worst = 0;
        printf("\ncrossover (steady state, gemmd vs in-process OpenBLAS):\n");
        for (int ti = 0; ti < ntypes; ti++) {
            int from = -1;
            for (int si = nsizes - 1; si >= 0; si--) {
                result *g = &R(ti, si, ig), *o = &R(ti, si, io);
                if (!(g->ok && o->ok && g->med_ms < o->med_ms))
                    break;
                from = si;
            }
            if (from < 0) {
                printf("  %cgemm: OpenBLAS is faster at every size up to %d\n",
                       types[ti], sizes[nsizes - 1]);
                worst = INFINITY;
                continue;
            }
            printf("  %cgemm: gemmd faster from n = %d (2n^3 = %.3g flops)\n",
                   types[ti], sizes[from], flops(sizes[from]));
            if (flops(sizes[from]) > worst)
                worst = flops(sizes[from]);
        }
        if (isfinite(worst))
            printf("proposed GEMMBLAS_MIN_FLOPS=%.3g\n", worst);
        else
            printf("proposed GEMMBLAS_MIN_FLOPS: above the sizes tried\n");
    }
    if (!crossover && (ig >= 0 || iz >= 0)) {
        /* issue 21's targets, where the run has their rows; NVBLAS at its
         * best is the faster of its two settings */
        printf("\ntargets:\n");
        for (int ti = 0; ti < ntypes; ti++)
            for (int si = 0; si < nsizes; si++) {
                char t = types[ti];
                int n = sizes[si];
                result *g = ig >= 0 ? &R(ti, si, ig) : NULL;
                result *p = ip >= 0 ? &R(ti, si, ip) : NULL;
                result *z = iz >= 0 ? &R(ti, si, iz) : NULL;
                double nv_first = INFINITY;
                if (in >= 0 && R(ti, si, in).ok)
                    nv_first = R(ti, si, in).first_ms;
                if (p != NULL && p->ok)
                    nv_first = fmin(nv_first, p->first_ms);
                if (g != NULL && g->ok && t == 'd' && n == 4096 &&
                    isfinite(nv_first))
                    target("dgemm 4096 first call >= 3x nvblas at its best",
                           nv_first / g->first_ms, "x",
                           nv_first / g->first_ms >= 3);
                if (g != NULL && g->ok && t == 'd' && n == 8192) {
                    target("dgemm 8192 steady copying <= 45 ms", g->med_ms,
                           " ms", g->med_ms <= 45);
                    if (p != NULL && p->ok)
                        target("dgemm 8192 steady >= 5.7x nvblas-pin",
                               p->med_ms / g->med_ms, "x",
                               p->med_ms / g->med_ms >= 5.7);
                }
                if (z != NULL && z->ok && t == 'd' && n == 8192)
                    target("dgemm 8192 steady zero-copy <= 30 ms", z->med_ms,
                           " ms", z->med_ms <= 30);
                if (g != NULL && g->ok && n == 8192 && p != NULL &&
                    p->procs_tflops > 0 && g->procs_tflops > 0) {
                    char what[64];
                    snprintf(what, sizeof(what),
                             "%cgemm 8192 %d procs >= 2x nvblas-pin", t, procs);
                    double x = g->procs_tflops / p->procs_tflops;
                    target(what, x, "x", x >= 2);
                }
            }
    }
    if (iz >= 0) {
        /* the zero-copy mode against the copying path and the CPU BLAS */
        printf("\nzero-copy (gemmblas-zc): steady calls with every operand "
               "in place, bytes staged per call, ratios of steady times\n");
        printf("%-5s %5s %12s %14s %16s %16s\n", "type", "n", "in place",
               "staged/call", "vs gemmblas", "vs openblas");
        for (int ti = 0; ti < ntypes; ti++)
            for (int si = 0; si < nsizes; si++) {
                result *z = &R(ti, si, iz);
                char a[32], b[32], ip_[32] = "-", st[32] = "-";
                if (z->ok && z->zc_calls >= 0) {
                    snprintf(ip_, sizeof(ip_), "%lld/%lld", z->zc_inplace,
                             z->zc_calls);
                    snprintf(st, sizeof(st), "%.0f",
                             z->zc_calls > 0
                                 ? (double)z->zc_staged / (double)z->zc_calls
                                 : 0.0);
                }
                bool okg = ig >= 0 && z->ok && R(ti, si, ig).ok;
                bool oko = io >= 0 && z->ok && R(ti, si, io).ok;
                printf("%-5c %5d %12s %14s %16s %16s\n", types[ti], sizes[si],
                       ip_, st,
                       ratio(a, sizeof(a), okg, okg ? R(ti, si, ig).med_ms : 0,
                             z->med_ms),
                       ratio(b, sizeof(b), oko, oko ? R(ti, si, io).med_ms : 0,
                             z->med_ms));
            }
    }
    if (skipped > 0)
        printf("\n%d rows not run: the --budget-s of %g s was spent\n", skipped,
               budget_s);
    bp_cleanup();
    return 0;
}
