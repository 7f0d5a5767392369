/*
 * bench_blas3.c: the level-3 routines besides GEMM (?syrk, ?trsm, ?symm)
 * from a plain C program through libgemmblas (with gemmd) and NVBLAS,
 * side by side in one run:
 *   gemmblas   libgemmblas, gemmd running (GEMMBLAS_MIN_FLOPS=0)
 *   nvblas     NVBLAS of the CUDA toolkit, its nvblas.conf written here
 *              (NVBLAS_CPU_BLAS_LIB: the CPU BLAS given)
 *   nvblas-pin the same with NVBLAS_AUTOPIN_MEM_ENABLED
 *   openblas   the CPU BLAS itself (--variants to add it)
 * Each (variant, routine, size) runs in a fresh process that dlopens its
 * library: the first call (library loading included), then --calls more,
 * of which the best is reported. Square problems: syrk L N (C n x n, A n
 * x n), trsm L L N N (A lower, diagonal n, alpha n: the solution keeps
 * its size call after call), symm L L; beta 0. Random data; every worker
 * prints 16 sampled outputs of its first call and the controller checks
 * them against the first variant's (NVBLAS computes the same problem).
 * Not a test: a program that prints a table (and --csv).
 */
#include <dlfcn.h>
#include <math.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- the worker ---- */

typedef void (*syrk_fn)(const char *, const char *, const int *, const int *,
                        const void *, const void *, const int *, const void *,
                        void *, const int *);
typedef void (*trsm_fn)(const char *, const char *, const char *, const char *,
                        const int *, const int *, const void *, const void *,
                        const int *, void *, const int *);
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

/* bench_blas3 --worker LIB ROUTINE N CALLS: prints "RESULT load_ms
 * first_ms best_ms" and "SAMPLE" with 16 (re) values of the output. */
static int worker(int argc, char **argv)
{
    if (argc < 6)
        return 2;
    const char *lib = argv[2], *rt = argv[3];
    int n = atoi(argv[4]), calls = atoi(argv[5]);
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
    bool trsm = strcmp(what, "trsm") == 0;
    if (trsm) { /* a well-conditioned lower triangle: diagonal n, alpha n */
        for (int i = 0; i < n; i++) {
            size_t d = ((size_t)i * n + i) * parts;
            if (f32)
                ((float *)a)[d] = (float)n;
            else
                ((double *)a)[d] = n;
        }
        alpha_d[0] = n;
        alpha_f[0] = (float)n;
    }
    const void *alpha = f32 ? (void *)alpha_f : (void *)alpha_d;
    const void *beta = f32 ? (void *)beta_f : (void *)beta_d;
    char name[16];
    snprintf(name, sizeof(name), "%s_", rt);

    double t0 = now_ms();
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
    double t1 = now_ms();
    void *out = trsm ? b : c;
    double best = INFINITY, first = 0;
    for (int i = 0; i <= calls; i++) {
        double s0 = now_ms();
        if (strcmp(what, "syrk") == 0)
            ((syrk_fn)f)("L", "N", &n, &n, alpha, a, &n, beta, c, &n);
        else if (trsm)
            ((trsm_fn)f)("L", "L", "N", "N", &n, &n, alpha, a, &n, b, &n);
        else
            ((symm_fn)f)("L", "L", &n, &n, alpha, a, &n, b, &n, beta, c, &n);
        double s1 = now_ms();
        if (i == 0) {
            first = s1 - t0;
            printf("SAMPLE");
            for (int s = 0; s < 16; s++) {
                size_t r = (s * 7919u + 13) % (unsigned)n;
                size_t q = (s * 104729u + 7) % (unsigned)n;
                if (r < q) { /* syrk writes the lower triangle */
                    size_t x = r;
                    r = q;
                    q = x;
                }
                size_t at = (q * (size_t)n + r) * parts; /* column-major */
                printf(" %.17g",
                       f32 ? ((float *)out)[at] : ((double *)out)[at]);
            }
            printf("\n");
        } else if (s1 - s0 < best) {
            best = s1 - s0;
        }
    }
    printf("RESULT %.3f %.3f %.3f\n", t1 - t0, first, calls ? best : first);
    return 0;
}

/* ---- the controller ---- */

typedef struct variant {
    const char *name;
    const char *lib;
    char **env;
} variant;

static char self_path[4096];

static char **worker_env(const variant *v)
{
    size_t n = 0, m = 0;
    while (environ[n] != NULL)
        n++;
    while (v->env != NULL && v->env[m] != NULL)
        m++;
    char **e = calloc(n + m + 1, sizeof(char *));
    size_t k = 0;
    for (size_t i = 0; i < m; i++)
        e[k++] = v->env[i];
    for (size_t i = 0; i < n; i++) {
        bool dup = false;
        for (size_t j = 0; j < m && !dup; j++) {
            size_t l = strcspn(v->env[j], "=");
            dup = strncmp(environ[i], v->env[j], l + 1) == 0;
        }
        if (!dup)
            e[k++] = environ[i];
    }
    return e;
}

typedef struct result {
    bool ok;
    double load_ms, first_ms, best_ms;
    double sample[16];
} result;

static void run_one(const variant *v, const char *rt, int n, int calls,
                    result *r)
{
    int po[2];
    memset(r, 0, sizeof(*r));
    if (pipe(po) != 0)
        return;
    char nb[16], cb[16];
    snprintf(nb, sizeof(nb), "%d", n);
    snprintf(cb, sizeof(cb), "%d", calls);
    char *argv[] = {self_path, "--worker", (char *)v->lib, (char *)rt, nb,
                    cb,        NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, po[1], 1);
    posix_spawn_file_actions_addclose(&fa, po[0]);
    pid_t pid;
    int rv = posix_spawn(&pid, self_path, &fa, NULL, argv, worker_env(v));
    posix_spawn_file_actions_destroy(&fa);
    close(po[1]);
    if (rv != 0) {
        close(po[0]);
        return;
    }
    FILE *f = fdopen(po[0], "r");
    char line[1024];
    bool got_s = false, got_r = false;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "SAMPLE", 6) == 0) {
            char *p = line + 6;
            got_s = true;
            for (int i = 0; i < 16; i++)
                r->sample[i] = strtod(p, &p);
        } else if (strncmp(line, "RESULT", 6) == 0) {
            got_r = sscanf(line, "RESULT %lf %lf %lf", &r->load_ms,
                           &r->first_ms, &r->best_ms) == 3;
        } else if (strncmp(line, "ERROR", 5) == 0) {
            fprintf(stderr, "%s %s %d: %s", v->name, rt, n, line);
        }
    }
    fclose(f);
    int st;
    waitpid(pid, &st, 0);
    r->ok = got_s && got_r && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    if (!r->ok)
        fprintf(stderr, "%s %s %d: worker failed\n", v->name, rt, n);
}

/* Work of routine rt at n (flops; complex counts 4 real products). */
static double flops(const char *rt, int n)
{
    double x = (double)n * n * n;
    double f = strcmp(rt + 1, "symm") == 0 ? 2 * x : x; /* syrk, trsm: n^3 */
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

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--worker") == 0)
        return worker(argc, argv);
    char rts_s[256] = "dsyrk,dtrsm,dsymm,ssyrk,strsm,ssymm,zsyrk,ztrsm,zsymm";
    char sizes_s[128] = "4096,8192";
    char want_s[128] = "gemmblas,nvblas,nvblas-pin";
    const char *ob = "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3";
    const char *nv = "/usr/local/cuda/lib64/libnvblas.so";
    const char *gb = "libgemmblas.so.0", *csv = NULL;
    int calls = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL) {
            fprintf(stderr, "bench_blas3: %s needs a value\n", a);
            return 2;
        }
        if (strcmp(a, "--routines") == 0)
            snprintf(rts_s, sizeof(rts_s), "%s", v);
        else if (strcmp(a, "--sizes") == 0)
            snprintf(sizes_s, sizeof(sizes_s), "%s", v);
        else if (strcmp(a, "--variants") == 0)
            snprintf(want_s, sizeof(want_s), "%s", v);
        else if (strcmp(a, "--openblas") == 0)
            ob = v;
        else if (strcmp(a, "--nvblas") == 0)
            nv = v;
        else if (strcmp(a, "--gemmblas") == 0)
            gb = v;
        else if (strcmp(a, "--calls") == 0)
            calls = atoi(v);
        else if (strcmp(a, "--csv") == 0)
            csv = v;
        else {
            fputs("usage: bench_blas3 [--routines dsyrk,dtrsm,...] [--sizes "
                  "4096,8192]\n  [--variants gemmblas,nvblas,nvblas-pin,"
                  "openblas] [--calls 3]\n  [--openblas LIB] [--nvblas LIB] "
                  "[--gemmblas LIB] [--csv FILE]\n",
                  stderr);
            return 2;
        }
        i++;
    }
    if (readlink("/proc/self/exe", self_path, sizeof(self_path) - 1) < 0)
        return 1;
    char *rts[16], *szs[16], *want[8];
    int nr = split(rts_s, rts, 16), ns = split(sizes_s, szs, 16);
    int nw = split(want_s, want, 8);

    /* nvblas.conf, without and with autopin */
    static char conf[2][128], confenv[2][160], gbcpu[4200];
    for (int p = 0; p < 2; p++) {
        snprintf(conf[p], sizeof(conf[p]), "/tmp/bench_blas3_nvblas%d_%d.conf",
                 p, (int)getpid());
        FILE *cf = fopen(conf[p], "w");
        if (cf != NULL) {
            fprintf(cf,
                    "NVBLAS_LOGFILE /tmp/bench_blas3_nvblas_%d.log\n"
                    "NVBLAS_CPU_BLAS_LIB %s\nNVBLAS_GPU_LIST ALL\n"
                    "NVBLAS_TILE_DIM 2048\n%s",
                    (int)getpid(), ob, p ? "NVBLAS_AUTOPIN_MEM_ENABLED\n" : "");
            fclose(cf);
        }
        snprintf(confenv[p], sizeof(confenv[p]), "NVBLAS_CONFIG_FILE=%s",
                 conf[p]);
    }
    snprintf(gbcpu, sizeof(gbcpu), "GEMMBLAS_CPU_BLAS=%.4000s", ob);
    static char *nvenv0[2], *nvenv1[2], *gbenv[4];
    nvenv0[0] = confenv[0];
    nvenv1[0] = confenv[1];
    gbenv[0] = "GEMMBLAS_MIN_FLOPS=0";
    gbenv[1] = gbcpu;
    gbenv[2] = "GEMMBLAS_VERBOSE=1";
    variant all[4] = {{"nvblas", nv, nvenv0},
                      {"nvblas-pin", nv, nvenv1},
                      {"gemmblas", gb, gbenv},
                      {"openblas", ob, NULL}};
    variant vs[4];
    int nv_ = 0;
    for (int i = 0; i < 4; i++)
        for (int w = 0; w < nw; w++)
            if (strcmp(want[w], all[i].name) == 0)
                vs[nv_++] = all[i];
    printf("# bench_blas3: best of %d calls after the first; fresh process "
           "each\n",
           calls);
    for (int i = 0; i < nv_; i++)
        printf("#   %-10s %s\n", vs[i].name, vs[i].lib);
    fflush(stdout);

    result *res = calloc((size_t)nr * ns * nv_, sizeof(result));
#define R(ri, si, vi) res[((ri)*ns + (si)) * nv_ + (vi)]
    FILE *cs = csv ? fopen(csv, "w") : NULL;
    if (cs)
        fprintf(cs, "routine,n,variant,load_ms,first_ms,best_ms,gflops,"
                    "rel_diff\n");
    int ig = -1;
    for (int vi = 0; vi < nv_; vi++)
        if (strcmp(vs[vi].name, "gemmblas") == 0)
            ig = vi;
    /* the table, a row as soon as its variants have run */
    printf("\n%-7s %5s", "routine", "n");
    for (int vi = 0; vi < nv_; vi++)
        printf(" %12s", vs[vi].name);
    if (ig >= 0)
        for (int vi = 0; vi < nv_; vi++)
            if (vi != ig)
                printf(" %14s", vs[vi].name);
    printf("  %s\n", "check");
    printf("%-7s %5s", "", "");
    for (int vi = 0; vi < nv_; vi++)
        printf(" %12s", "best ms");
    if (ig >= 0)
        for (int vi = 0; vi < nv_; vi++)
            if (vi != ig)
                printf(" %14s", "/ gemmblas");
    printf("\n");
    fflush(stdout);
    int wrong = 0;
    for (int ri = 0; ri < nr; ri++)
        for (int si = 0; si < ns; si++) {
            int n = atoi(szs[si]);
            for (int vi = 0; vi < nv_; vi++) {
                result *r = &R(ri, si, vi);
                run_one(&vs[vi], rts[ri], n, calls, r);
                fprintf(stderr,
                        "  %-10s %-6s %5d: first %9.1f ms, best %9.2f ms\n",
                        vs[vi].name, rts[ri], n, r->first_ms, r->best_ms);
            }
            printf("%-7s %5d", rts[ri], n);
            for (int vi = 0; vi < nv_; vi++) {
                result *r = &R(ri, si, vi);
                if (r->ok)
                    printf(" %12.2f", r->best_ms);
                else
                    printf(" %12s", "FAILED");
            }
            if (ig >= 0)
                for (int vi = 0; vi < nv_; vi++) {
                    if (vi == ig)
                        continue;
                    result *r = &R(ri, si, vi), *g = &R(ri, si, ig);
                    if (r->ok && g->ok)
                        printf(" %13.2fx", r->best_ms / g->best_ms);
                    else
                        printf(" %14s", "-");
                }
            /* every variant against the first that ran */
            double tol = rts[ri][0] == 's' || rts[ri][0] == 'c' ? 1e-3 : 1e-9;
            double worst = 0;
            result *ref = NULL;
            for (int vi = 0; vi < nv_; vi++) {
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
            for (int vi = 0; vi < nv_ && cs; vi++) {
                result *r = &R(ri, si, vi);
                fprintf(cs, "%s,%d,%s,%.3f,%.3f,%.3f,%.1f,%.3g\n", rts[ri], n,
                        vs[vi].name, r->load_ms, r->first_ms, r->best_ms,
                        r->ok ? flops(rts[ri], n) / r->best_ms / 1e6 : 0,
                        ref && r->ok ? sample_diff(r, ref) : -1.0);
            }
            if (cs)
                fflush(cs);
        }
    if (cs)
        fclose(cs);
    unlink(conf[0]);
    unlink(conf[1]);
    printf("%s\n", wrong ? "SOME RESULTS WRONG" : "all results agree");
    return wrong ? 1 : 0;
}
