/*
 * bench_blas3.c: the level-3 routines besides GEMM (?syrk, ?trsm, ?symm by
 * default; ?herk, ?syr2k, ?her2k, ?trmm, ?hemm by name) from a plain C
 * program through libgemmblas (with gemmd) and NVBLAS,
 * side by side in one run:
 *   gemmblas   libgemmblas, gemmd running (GEMMBLAS_MIN_FLOPS=0)
 *   gemmblas-zc  the same in its zero-copy mode: preloaded (its malloc is
 *              the worker's) with GEMMBLAS_ZEROCOPY=1, the matrices
 *              regions gemmd reads and writes in place (--variants to
 *              add it)
 *   nvblas     NVBLAS of the CUDA toolkit, its nvblas.conf written here
 *              (NVBLAS_CPU_BLAS_LIB: the CPU BLAS given)
 *   nvblas-pin the same with NVBLAS_AUTOPIN_MEM_ENABLED
 *   openblas   the CPU BLAS itself (--variants to add it)
 * Each (variant, routine, size) runs in a fresh process that dlopens its
 * library (proc.h): the first call (library loading included), then up to
 * --calls more within --row-s, of which the best is reported (steady
 * state; for libgemmblas from when gemmd has no pin of the process's
 * memory in flight: the first call's pins run in the background, and a
 * program calling again a second later finds them done). Then --procs processes
 * (default 4; 0: none) run at once, each warmed up (calls until --procs-warm-s
 * seconds, default 2, have passed since its first began, at least one; for
 * libgemmblas then until gemmd has no pin of their memory in flight: a library
 * that pins its memory in the background, libgemmblas's staging buffers and
 * regions through gemmd or NVBLAS's autopin, has done so; the first call's own
 * column has that cost) and released together, each making the same number of
 * calls on its own problem: the "N procs" column is the slowest one's time per
 * call. The openblas variant's worker prints its configuration
 * (openblas_get_config, core, threads;
 * --openblas-coretype sets OPENBLAS_CORETYPE where a VM hides the CPU's
 * flags). Square problems: syrk, herk, syr2k, her2k L N (C n x n, A and
 * B n x n), trsm L L N N (A lower, diagonal n, alpha n: the solution
 * keeps its size call after call), trmm the same with alpha 1/n, symm and
 * hemm L L; beta 0. Random data; every worker prints 16 sampled
 * outputs of its first call and the controller checks them against the
 * first variant's (NVBLAS computes the same problem). --budget-s bounds
 * the whole run: rows that no longer fit are listed as not run.
 * --crossover times gemmblas against openblas over small sizes and
 * proposes each routine's GEMMBLAS_MIN_FLOPS_<ROUTINE> (blas/README.md),
 * in libgemmblas's own measure of a call's work.
 * Not a test: a program that prints a table (and --csv).
 */
#include "proc.h"

#include <ctype.h>
#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the worker ---- */

typedef void (*syrk_fn)(const char *, const char *, const int *, const int *,
                        const void *, const void *, const int *, const void *,
                        void *, const int *);
typedef void (*trsm_fn)(const char *, const char *, const char *, const char *,
                        const int *, const int *, const void *, const void *,
                        const int *, void *, const int *);
typedef void (*r2k_fn)(const char *, const char *, const int *, const int *,
                       const void *, const void *, const int *, const void *,
                       const int *, const void *, void *, const int *);
typedef void (*symm_fn)(const char *, const char *, const int *, const int *,
                        const void *, const void *, const int *, const void *,
                        const int *, const void *, void *, const int *);

/* Fills n values of part type (float when es4) with uniform [-1, 1). */
static void fill(void *p, size_t n, bool f32, uint64_t seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double v = ((double)(s >> 11) + 0.5) * 0x1p-52 - 1.0;
        if (f32)
            ((float *)p)[i] = (float)v;
        else
            ((double *)p)[i] = v;
    }
}

/* bench_blas3 --worker LIB ROUTINE N CALLS MAX_MS [together WARM_MS |
 * settle]: prints "RESULT load_ms first_ms best_ms" (the best of up to
 * CALLS calls after the first, made while they take less than MAX_MS in
 * all) and "SAMPLE" with 16 (re) values of the output; with "settle":
 * "SETTLE" after the first call, then waits for a byte on stdin before
 * the others; with "together": calls
 * until WARM_MS have passed since the first began (at least the first),
 * then "READY", waits for a byte on stdin, makes CALLS calls and prints
 * "RESULT4 total_ms". */
/* The routine kinds: syrk, herk (rank k), syr2k, her2k (rank 2k), trsm,
 * trmm (triangular), symm, hemm. */
static const char *const kinds[] = {"syrk", "herk", "syr2k", "her2k",
                                    "trsm", "trmm", "symm",  "hemm"};
enum { NKINDS = 8 };

static int kind_of(const char *what)
{
    for (int k = 0; k < NKINDS; k++)
        if (strcmp(what, kinds[k]) == 0)
            return k;
    return -1;
}

/* One call of routine `what` through f: L N for the rank updates (C
 * lower), L L N N for the triangular ones, L L for symm and hemm. */
static void call_once(void *f, const char *what, int n, const void *alpha,
                      const void *beta, void *a, void *b, void *c)
{
    int k = kind_of(what);
    if (k == 0 || k == 1)
        ((syrk_fn)f)("L", "N", &n, &n, alpha, a, &n, beta, c, &n);
    else if (k == 2 || k == 3)
        ((r2k_fn)f)("L", "N", &n, &n, alpha, a, &n, b, &n, beta, c, &n);
    else if (k == 4 || k == 5)
        ((trsm_fn)f)("L", "L", "N", "N", &n, &n, alpha, a, &n, b, &n);
    else
        ((symm_fn)f)("L", "L", &n, &n, alpha, a, &n, b, &n, beta, c, &n);
}

static int worker(int argc, char **argv)
{
    if (argc < 6)
        return 2;
    const char *lib = argv[2], *rt = argv[3];
    int n = atoi(argv[4]), calls = atoi(argv[5]);
    double max_ms = argc > 6 ? atof(argv[6]) : INFINITY;
    bool together = argc > 7 && strcmp(argv[7], "together") == 0;
    double warm_ms = together && argc > 8 ? atof(argv[8]) : 0;
    bool settle = argc > 7 && strcmp(argv[7], "settle") == 0;
    char t = rt[0];
    const char *what = rt + 1;
    bool cplx = t == 'c' || t == 'z', f32 = t == 's' || t == 'c';
    size_t part = f32 ? 4 : 8, parts = cplx ? 2 : 1;
    size_t es = part * parts, nn = (size_t)n * n;
    void *a = malloc(nn * es), *b = malloc(nn * es), *c = calloc(nn, es);
    if (a == NULL || b == NULL || c == NULL) {
        printf("ERROR out of memory\n");
        return 1;
    }
    fill(a, nn * parts, f32, 1);
    fill(b, nn * parts, f32, 2);
    double alpha_d[2] = {1, 0}, beta_d[2] = {0, 0};
    float alpha_f[2] = {1, 0}, beta_f[2] = {0, 0};
    if (kind_of(what) < 0) {
        printf("ERROR no such routine: %s\n", rt);
        return 1;
    }
    bool trsm = strcmp(what, "trsm") == 0, trmm = strcmp(what, "trmm") == 0;
    /* a well-conditioned lower triangle, diagonal n; alpha n for trsm and
     * 1/n for trmm, so that B keeps its size call after call */
    if (trsm || trmm) {
        for (int i = 0; i < n; i++) {
            size_t d = ((size_t)i * n + i) * parts;
            if (f32)
                ((float *)a)[d] = (float)n;
            else
                ((double *)a)[d] = n;
        }
        alpha_d[0] = trsm ? n : 1.0 / n;
        alpha_f[0] = (float)alpha_d[0];
    }
    const void *alpha = f32 ? (void *)alpha_f : (void *)alpha_d;
    const void *beta = f32 ? (void *)beta_f : (void *)beta_d;
    char name[16];
    snprintf(name, sizeof(name), "%s_", rt);

    double t0 = bp_now_ms();
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        printf("ERROR dlopen %s: %s\n", lib, dlerror());
        return 1;
    }
    void *f = dlsym(h, name);
    if (f == NULL) {
        printf("ERROR %s has no %s\n", lib, name);
        return 1;
    }
    double t1 = bp_now_ms();
    bp_print_blas_config(h);
    void *out = trsm || trmm ? b : c;
    double best = INFINITY, first = 0;
    int total = calls;
    double go = 0, steady = 0;
    for (int i = 0; i <= total; i++) {
        if (!together && i > 1 && bp_now_ms() - steady >= max_ms)
            break;
        if (i == 1)
            steady = bp_now_ms();
        if (together && i == 1) {
            while (bp_now_ms() - t1 < warm_ms)
                call_once(f, what, n, alpha, beta, a, b, c);
            char byte;
            printf("READY\n");
            fflush(stdout);
            if (read(0, &byte, 1) != 1)
                return 1;
            go = bp_now_ms();
        }
        double s0 = bp_now_ms();
        call_once(f, what, n, alpha, beta, a, b, c);
        double s1 = bp_now_ms();
        if (i == 0) {
            first = s1 - t0;
            printf("SAMPLE");
            for (int s = 0; s < 16; s++) {
                size_t r = (s * 7919u + 13) % (unsigned)n;
                size_t q = (s * 104729u + 7) % (unsigned)n;
                if (r < q) { /* the rank updates write the lower triangle */
                    size_t x = r;
                    r = q;
                    q = x;
                }
                size_t at = (q * (size_t)n + r) * parts; /* column-major */
                printf(" %.17g",
                       f32 ? ((float *)out)[at] : ((double *)out)[at]);
            }
            printf("\n");
            if (settle && total > 0) {
                char byte;
                printf("SETTLE\n");
                fflush(stdout);
                if (read(0, &byte, 1) != 1)
                    return 1;
            }
        } else if (s1 - s0 < best) {
            best = s1 - s0;
        }
    }
    printf("RESULT %.3f %.3f %.3f\n", t1 - t0, first, calls ? best : first);
    if (together)
        printf("RESULT4 %.3f\n", bp_now_ms() - go);
    return 0;
}

/* ---- the controller ---- */

typedef struct result {
    bool run; /* false: the budget left it out */
    bool ok;
    double load_ms, first_ms, best_ms;
    double sample[16];
    double procs_ms; /* the slowest process's time per call; 0: not run */
} result;

static void run_one(const bp_variant *v, const char *rt, int n, int calls,
                    double max_ms, result *r)
{
    char nb[16], cb[16], mb[32], line[1024];
    snprintf(nb, sizeof(nb), "%d", n);
    snprintf(cb, sizeof(cb), "%d", calls);
    snprintf(mb, sizeof(mb), "%.0f", max_ms);
    char *args[] = {(char *)v->lib,
                    (char *)rt,
                    nb,
                    cb,
                    mb,
                    v->settle != NULL ? "settle" : NULL,
                    NULL};
    memset(r, 0, sizeof(*r));
    r->run = true;
    FILE *f;
    int go = -1;
    pid_t pid = bp_spawn(v, args, &f, v->settle != NULL ? &go : NULL);
    if (pid < 0) {
        fprintf(stderr, "%s %s %d: cannot start a worker\n", v->name, rt, n);
        return;
    }
    bool got_s = false, got_r = false;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "SETTLE", 6) == 0 && go >= 0) {
            v->settle(v);
            if (write(go, "g", 1) != 1)
                fprintf(stderr, "%s %s %d: the worker left\n", v->name, rt, n);
        } else if (strncmp(line, "SAMPLE", 6) == 0) {
            char *p = line + 6;
            got_s = true;
            for (int i = 0; i < 16; i++)
                r->sample[i] = strtod(p, &p);
        } else if (strncmp(line, "RESULT", 6) == 0) {
            got_r = sscanf(line, "RESULT %lf %lf %lf", &r->load_ms,
                           &r->first_ms, &r->best_ms) == 3;
        } else if (strncmp(line, "CONFIG", 6) == 0) {
            bp_say_config(v, line);
        } else if (strncmp(line, "ERROR", 5) == 0) {
            fprintf(stderr, "%s %s %d: %s", v->name, rt, n, line);
        }
    }
    fclose(f);
    if (go >= 0)
        close(go);
    r->ok = got_s && got_r && bp_reap(pid) == 0;
    if (!r->ok)
        fprintf(stderr, "%s %s %d: worker failed\n", v->name, rt, n);
}

/* procs workers of v at once, each warmed up, released together: the
 * slowest one's time per call into r->procs_ms (0 when one failed). */
static void run_procs(const bp_variant *v, const char *rt, int n, int calls,
                      int procs, double warm_s, result *r)
{
    char nb[16], cb[16], wb[32], who[96];
    snprintf(nb, sizeof(nb), "%d", n);
    snprintf(cb, sizeof(cb), "%d", calls);
    snprintf(wb, sizeof(wb), "%.0f", warm_s * 1e3);
    snprintf(who, sizeof(who), "%s %s %d x%d", v->name, rt, n, procs);
    char *args[] = {(char *)v->lib, (char *)rt, nb,  cb, "0",
                    "together",     wb,         NULL};
    double slowest, err;
    r->procs_ms = 0;
    if (bp_together(v, args, procs, who, &slowest, &err) && calls > 0)
        r->procs_ms = slowest / calls;
}

/* Work of routine rt at n as the table counts it (flops; complex counts 4
 * real products): n^3 for the rank-k updates and the triangular ones,
 * 2 n^3 for the rank-2k updates, symm and hemm. */
static double flops(const char *rt, int n)
{
    double x = (double)n * n * n;
    int k = kind_of(rt + 1);
    double f = k == 2 || k == 3 || k >= 6 ? 2 * x : x;
    return rt[0] == 'c' || rt[0] == 'z' ? 4 * f : f;
}

/* The same call's work as libgemmblas measures it against its thresholds
 * (blas/level3_offload.c): syrk/herk n (n + 1) k, syr2k/her2k twice that,
 * symm/hemm 2 m n m, trsm/trmm m n m. */
static double lib_flops(const char *rt, int n)
{
    double x = (double)n * n * n, r = (double)n * (n + 1) * n;
    int k = kind_of(rt + 1);
    double f = k <= 1 ? r : k <= 3 ? 2 * r : k >= 6 ? 2 * x : x;
    return rt[0] == 'c' || rt[0] == 'z' ? 4 * f : f;
}

/* Largest relative difference of two sample sets, against the largest
 * reference magnitude. */
static double sample_diff(const result *x, const result *ref)
{
    double mag = 0, d = 0;
    for (int i = 0; i < 16; i++) {
        mag = fmax(mag, fabs(ref->sample[i]));
        double e = fabs(x->sample[i] - ref->sample[i]);
        d = isnan(e) ? INFINITY : fmax(d, e);
    }
    return d / (mag > 0 ? mag : 1);
}

static int split(char *s, char **out, int max)
{
    int n = 0;
    for (char *tok = strtok(s, ","); tok && n < max; tok = strtok(NULL, ","))
        out[n++] = tok;
    return n;
}

static void usage(void)
{
    fputs("usage: bench_blas3 [--routines dsyrk,dtrsm,...] [--sizes "
          "4096,8192]\n  [--variants gemmblas,gemmblas-zc,nvblas,nvblas-pin,"
          "openblas] "
          "[--calls 3] [--row-s 5]\n  [--budget-s 480] [--openblas LIB] "
          "[--openblas-coretype CORE]\n  [--nvblas LIB] [--gemmblas LIB] "
          "[--csv FILE]\n  [--procs 4] [--procs-variants "
          "gemmblas,nvblas,nvblas-pin] [--procs-warm-s 2]\n"
          "       bench_blas3 --crossover [--routines ...] [--sizes "
          "256,...,4096]\n",
          stderr);
}

/* Per routine kind, over its types: the smallest size from which
 * gemmblas beats openblas at every larger size tried, as the threshold
 * libgemmblas would need. */
static void print_crossover(char **rts, int nr, char **szs, int ns,
                            const result *res, int nvar, int ig, int io)
{
    printf("\ncrossover (best steady call, gemmd vs in-process OpenBLAS):\n");
    for (int k = 0; k < NKINDS; k++) {
        double worst = 0;
        bool any = false;
        for (int ri = 0; ri < nr; ri++) {
            if (strcmp(rts[ri] + 1, kinds[k]) != 0)
                continue;
            any = true;
            int from = -1;
            for (int si = ns - 1; si >= 0; si--) {
                const result *g = &res[(ri * ns + si) * nvar + ig];
                const result *o = &res[(ri * ns + si) * nvar + io];
                if (!(g->ok && o->ok && g->best_ms < o->best_ms))
                    break;
                from = si;
            }
            if (from < 0) {
                printf("  %-6s OpenBLAS is faster at every size up to %s\n",
                       rts[ri], szs[ns - 1]);
                worst = INFINITY;
                continue;
            }
            double f = lib_flops(rts[ri], atoi(szs[from]));
            printf("  %-6s gemmd faster from n = %s (%.3g flops)\n", rts[ri],
                   szs[from], f);
            worst = fmax(worst, f);
        }
        if (!any)
            continue;
        char up[8] = "";
        for (int i = 0; kinds[k][i] != '\0' && i < 7; i++)
            up[i] = (char)toupper((unsigned char)kinds[k][i]);
        if (isfinite(worst))
            printf("proposed GEMMBLAS_MIN_FLOPS_%s=%.3g\n", up, worst);
        else
            printf("proposed GEMMBLAS_MIN_FLOPS_%s: above the sizes tried\n",
                   up);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--worker") == 0)
        return worker(argc, argv);
    char rts_s[256] = "dsyrk,dtrsm,dsymm,ssyrk,strsm,ssymm,zsyrk,ztrsm,zsymm";
    char sizes_s[128] = "4096,8192";
    char want_s[128] = "gemmblas,nvblas,nvblas-pin";
    const char *ob = "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3";
    const char *nv = "/usr/local/cuda/lib64/libnvblas.so";
    const char *gb = "libgemmblas.so.0", *csv = NULL, *core = NULL;
    int calls = 3, procs = 4;
    double row_s = 5, budget_s = 480, warm_s = 2;
    bool crossover = false, sizes_given = false, want_given = false;
    char procs_s[128] = "gemmblas,nvblas,nvblas-pin";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--crossover") == 0) {
            crossover = true;
            continue;
        }
        if (v == NULL) {
            fprintf(stderr, "bench_blas3: %s needs a value\n", a);
            return 2;
        }
        if (strcmp(a, "--routines") == 0)
            snprintf(rts_s, sizeof(rts_s), "%s", v);
        else if (strcmp(a, "--sizes") == 0)
            sizes_given = snprintf(sizes_s, sizeof(sizes_s), "%s", v) > 0;
        else if (strcmp(a, "--variants") == 0)
            want_given = snprintf(want_s, sizeof(want_s), "%s", v) > 0;
        else if (strcmp(a, "--openblas") == 0)
            ob = v;
        else if (strcmp(a, "--openblas-coretype") == 0)
            core = v;
        else if (strcmp(a, "--nvblas") == 0)
            nv = v;
        else if (strcmp(a, "--gemmblas") == 0)
            gb = v;
        else if (strcmp(a, "--calls") == 0)
            calls = atoi(v);
        else if (strcmp(a, "--row-s") == 0)
            row_s = atof(v);
        else if (strcmp(a, "--budget-s") == 0)
            budget_s = atof(v);
        else if (strcmp(a, "--csv") == 0)
            csv = v;
        else if (strcmp(a, "--procs") == 0)
            procs = atoi(v);
        else if (strcmp(a, "--procs-variants") == 0)
            snprintf(procs_s, sizeof(procs_s), "%s", v);
        else if (strcmp(a, "--procs-warm-s") == 0)
            warm_s = atof(v);
        else
            return usage(), 2;
        i++;
    }
    if (bp_init() != 0)
        return 1;
    if (procs < 0 || procs > 64 || calls < 1 || !(row_s > 0) || budget_s < 0 ||
        !(warm_s >= 0))
        return usage(), 2;
    if (crossover) {
        if (!sizes_given)
            snprintf(sizes_s, sizeof(sizes_s),
                     "256,384,512,768,1024,1536,2048,3072,4096");
        if (!want_given)
            snprintf(want_s, sizeof(want_s), "gemmblas,openblas");
        procs = 0;
    }
    char *rts[16], *szs[16], *want[8];
    int nr = split(rts_s, rts, 16), ns = split(sizes_s, szs, 16);
    int nw = split(want_s, want, 8);
    bp_set_coretype(core);
    bp_budget_start(budget_s);

    static char nvconf[2][300], gbcpu[4200], zcpre[4200];
    bool have_conf = bp_nvblas_conf("bench_blas3", ob, false, nvconf[0],
                                    sizeof(nvconf[0])) == 0 &&
                     bp_nvblas_conf("bench_blas3", ob, true, nvconf[1],
                                    sizeof(nvconf[1])) == 0;
    snprintf(gbcpu, sizeof(gbcpu), "GEMMBLAS_CPU_BLAS=%.4000s", ob);
    snprintf(zcpre, sizeof(zcpre), "LD_PRELOAD=%.4000s", gb);
    static char *nvenv0[2], *nvenv1[2], *gbenv[4], *zcenv[6];
    nvenv0[0] = nvconf[0];
    nvenv1[0] = nvconf[1];
    gbenv[0] = "GEMMBLAS_MIN_FLOPS=0";
    gbenv[1] = gbcpu;
    gbenv[2] = crossover ? "GEMMBLAS_VERBOSE=1"
                         : "GEMMBLAS_VERBOSE=2"; /* per call: the time */
    /* the zero-copy mode: preloaded, so that its malloc is the worker's
     * (the matrices, n^2 elements each, are regions from n = 2048) */
    zcenv[0] = gbenv[0];
    zcenv[1] = gbcpu;
    zcenv[2] = gbenv[2];
    zcenv[3] = "GEMMBLAS_ZEROCOPY=1";
    zcenv[4] = zcpre;
    bp_variant all[5] = {{"nvblas", nv, nvenv0, NULL},
                         {"nvblas-pin", nv, nvenv1, NULL},
                         {"gemmblas", gb, gbenv, bp_gemmd_settle},
                         {"gemmblas-zc", gb, zcenv, bp_gemmd_settle},
                         {"openblas", ob, NULL, NULL}};
    bp_variant vs[5];
    int nvar = 0;
    for (int i = 0; i < 5; i++)
        for (int w = 0; w < nw; w++)
            if (strcmp(want[w], all[i].name) == 0) {
                if (i < 2 && !have_conf)
                    fprintf(stderr,
                            "bench_blas3: cannot write nvblas.conf: "
                            "no %s\n",
                            all[i].name);
                else
                    vs[nvar++] = all[i];
            }
    printf("# bench_blas3: %s; best of up to %d calls after the first within "
           "%.1f s; fresh process each; budget %.0f s\n",
           crossover ? "crossover" : "full", calls, row_s, budget_s);
    bp_print_variants(vs, nvar);

    result *res = calloc((size_t)nr * ns * (nvar ? nvar : 1), sizeof(result));
    if (res == NULL)
        return 1;
#define R(ri, si, vi) res[((ri)*ns + (si)) * nvar + (vi)]
    FILE *cs = csv ? fopen(csv, "w") : NULL;
    if (cs)
        fprintf(cs, "routine,n,variant,load_ms,first_ms,best_ms,gflops,"
                    "rel_diff,procs,procs_ms\n");
    int ig = -1, io = -1;
    for (int vi = 0; vi < nvar; vi++) {
        if (strcmp(vs[vi].name, "gemmblas") == 0)
            ig = vi;
        if (strcmp(vs[vi].name, "openblas") == 0)
            io = vi;
    }
    bool inp[5] = {false};
    for (int vi = 0; vi < nvar; vi++)
        inp[vi] = procs > 0 && bp_listed(procs_s, vs[vi].name);
    /* the table, a row as soon as its variants have run: each variant's
     * first call, steady (best) and procs-at-once time per call, then
     * each other variant's steady and procs time over gemmblas's */
    printf("\n%-7s %5s", "routine", "n");
    for (int vi = 0; vi < nvar; vi++)
        printf(" %30s", vs[vi].name);
    if (ig >= 0)
        for (int vi = 0; vi < nvar; vi++)
            if (vi != ig)
                printf(" %17s", vs[vi].name);
    printf("  %s\n", "check");
    printf("%-7s %5s", "", "");
    for (int vi = 0; vi < nvar; vi++)
        printf(" %9s %9s %8s%-2d", "first ms", "steady", "procs x",
               inp[vi] ? procs : 0);
    if (ig >= 0)
        for (int vi = 0; vi < nvar; vi++)
            if (vi != ig)
                printf(" %8s %8s", "/steady", "/procs");
    printf("\n");
    fflush(stdout);
    int wrong = 0, skipped = 0;
    for (int ri = 0; ri < nr; ri++)
        for (int si = 0; si < ns; si++) {
            int n = atoi(szs[si]);
            bool any = false;
            for (int vi = 0; vi < nvar; vi++) {
                result *r = &R(ri, si, vi);
                double left = bp_budget_left_ms();
                if (left <= 0) {
                    skipped++;
                    continue;
                }
                double row_ms = fmin(row_s * 1e3, left);
                any = true;
                run_one(&vs[vi], rts[ri], n, calls, row_ms, r);
                if (inp[vi] && r->ok && bp_budget_left_ms() > 0) {
                    int pc = calls;
                    if (r->best_ms > 0 && pc * procs * r->best_ms > row_ms)
                        pc = (int)fmax(1, row_ms / (procs * r->best_ms));
                    run_procs(&vs[vi], rts[ri], n, pc, procs, warm_s, r);
                }
                fprintf(stderr,
                        "  %-10s %-6s %5d: first %9.1f ms, best %9.2f ms, "
                        "%d procs %9.2f ms\n",
                        vs[vi].name, rts[ri], n, r->first_ms, r->best_ms,
                        inp[vi] ? procs : 0, r->procs_ms);
            }
            if (!any) {
                printf("%-7s %5d  not run: the --budget-s was spent\n", rts[ri],
                       n);
                continue;
            }
            printf("%-7s %5d", rts[ri], n);
            for (int vi = 0; vi < nvar; vi++) {
                result *r = &R(ri, si, vi);
                if (r->ok)
                    printf(" %9.1f %9.2f %10.2f", r->first_ms, r->best_ms,
                           r->procs_ms);
                else
                    printf(" %30s", r->run ? "FAILED" : "not run");
            }
            if (ig >= 0)
                for (int vi = 0; vi < nvar; vi++) {
                    if (vi == ig)
                        continue;
                    result *r = &R(ri, si, vi), *g = &R(ri, si, ig);
                    if (r->ok && g->ok)
                        printf(" %7.2fx", r->best_ms / g->best_ms);
                    else
                        printf(" %8s", "-");
                    if (r->procs_ms > 0 && g->procs_ms > 0)
                        printf(" %7.2fx", r->procs_ms / g->procs_ms);
                    else
                        printf(" %8s", "-");
                }
            /* every variant against the first that ran */
            double tol = rts[ri][0] == 's' || rts[ri][0] == 'c' ? 1e-3 : 1e-9;
            double worst = 0;
            result *ref = NULL;
            for (int vi = 0; vi < nvar; vi++) {
                result *r = &R(ri, si, vi);
                if (!r->ok)
                    continue;
                if (ref == NULL)
                    ref = r;
                else
                    worst = fmax(worst, sample_diff(r, ref));
            }
            bool ok = worst <= tol;
            wrong += !ok;
            printf("  %s (%.1e)\n", ok ? "ok" : "WRONG", worst);
            fflush(stdout);
            for (int vi = 0; vi < nvar && cs; vi++) {
                result *r = &R(ri, si, vi);
                fprintf(cs, "%s,%d,%s,%.3f,%.3f,%.3f,%.1f,%.3g,%d,%.3f\n",
                        rts[ri], n, vs[vi].name, r->load_ms, r->first_ms,
                        r->best_ms,
                        r->ok ? flops(rts[ri], n) / r->best_ms / 1e6 : 0,
                        ref && r->ok ? sample_diff(r, ref) : -1.0,
                        inp[vi] ? procs : 0, r->procs_ms);
            }
            if (cs)
                fflush(cs);
        }
    if (cs)
        fclose(cs);
    if (crossover && ig >= 0 && io >= 0)
        print_crossover(rts, nr, szs, ns, res, nvar, ig, io);
    if (skipped > 0)
        printf("%d runs not made: the --budget-s of %g s was spent\n", skipped,
               budget_s);
    bp_cleanup();
    printf("%s\n", wrong ? "SOME RESULTS WRONG" : "all results agree");
    return wrong ? 1 : 0;
}
