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
 * of which the best is reported (steady state). Then --procs processes
 * (default 4; 0: none) run at once, each warmed up by one call and
 * released together, each making --calls calls on its own problem: the
 * "N procs" column is the slowest one's time per call. The openblas
 * variant's worker prints its configuration (openblas_get_config, core,
 * threads; OPENBLAS_CORETYPE from the environment says the core where a
 * VM hides the CPU's flags). Square problems: syrk L N (C n x n, A n
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

/* bench_blas3 --worker LIB ROUTINE N CALLS [together]: prints "RESULT
 * load_ms first_ms best_ms" and "SAMPLE" with 16 (re) values of the
 * output; with "together": after the first call "READY", waits for a byte
 * on stdin, makes CALLS calls and prints "RESULT4 total_ms". */
static int worker(int argc, char **argv)
{
    if (argc < 6)
        return 2;
    const char *lib = argv[2], *rt = argv[3];
    int n = atoi(argv[4]), calls = atoi(argv[5]);
    bool together = argc > 6 && strcmp(argv[6], "together") == 0;
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
    const char *(*cfg)(void) =
        (const char *(*)(void))dlsym(h, "openblas_get_config");
    const char *(*core)(void) =
        (const char *(*)(void))dlsym(h, "openblas_get_corename");
    int (*threads)(void) = (int (*)(void))dlsym(h, "openblas_get_num_threads");
    if (cfg != NULL && core != NULL && threads != NULL)
        printf("CONFIG %s; core %s; %d threads\n", cfg(), core(), threads());
    void *out = trsm ? b : c;
    double best = INFINITY, first = 0;
    int total = together ? calls + 1 : calls;
    double go = 0;
    for (int i = 0; i <= total; i++) {
        if (together && i == 1) {
            char byte;
            printf("READY\n");
            fflush(stdout);
            if (read(0, &byte, 1) != 1)
                return 1;
            go = now_ms();
        }
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
    if (together)
        printf("RESULT4 %.3f\n", now_ms() - go);
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
    double procs_ms; /* the slowest process's time per call; 0: not run */
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
        } else if (strncmp(line, "CONFIG", 6) == 0) {
            static bool said;
            if (!said)
                printf("#   %s: %s", v->name, line + 7);
            said = true;
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

/* procs workers of v at once, each warmed up, released together: the
 * slowest one's time per call into r->procs_ms (0 when one failed). */
static void run_procs(const variant *v, const char *rt, int n, int calls,
                      int procs, result *r)
{
    pid_t pid[64];
    FILE *out[64];
    int go[64];
    int started = 0;
    bool ok = true;
    char nb[16], cb[16];
    snprintf(nb, sizeof(nb), "%d", n);
    snprintf(cb, sizeof(cb), "%d", calls);
    char *argv[] = {self_path, "--worker", (char *)v->lib, (char *)rt,
                    nb,        cb,         "together",     NULL};
    r->procs_ms = 0;
    for (; started < procs; started++) {
        int po[2], pi[2];
        if (pipe(po) != 0 || pipe(pi) != 0) {
            ok = false;
            break;
        }
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, po[1], 1);
        posix_spawn_file_actions_adddup2(&fa, pi[0], 0);
        posix_spawn_file_actions_addclose(&fa, po[0]);
        posix_spawn_file_actions_addclose(&fa, pi[1]);
        int rv = posix_spawn(&pid[started], self_path, &fa, NULL, argv,
                             worker_env(v));
        posix_spawn_file_actions_destroy(&fa);
        close(po[1]);
        close(pi[0]);
        if (rv != 0) {
            close(po[0]);
            close(pi[1]);
            ok = false;
            break;
        }
        out[started] = fdopen(po[0], "r");
        go[started] = pi[1];
    }
    char line[1024];
    for (int i = 0; i < started && ok; i++) {
        bool ready = false;
        while (!ready && fgets(line, sizeof(line), out[i]) != NULL)
            ready = strncmp(line, "READY", 5) == 0;
        ok = ready;
    }
    for (int i = 0; i < started; i++) {
        if (ok && write(go[i], "g", 1) != 1)
            ok = false;
        close(go[i]);
    }
    double slowest = 0;
    for (int i = 0; i < started; i++) {
        double ms = -1;
        while (fgets(line, sizeof(line), out[i]) != NULL)
            if (strncmp(line, "RESULT4", 7) == 0)
                sscanf(line, "RESULT4 %lf", &ms);
        ok = ok && ms > 0;
        slowest = ms > slowest ? ms : slowest;
        fclose(out[i]);
        int st;
        waitpid(pid[i], &st, 0);
        ok = ok && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    if (ok && calls > 0)
        r->procs_ms = slowest / calls;
    else
        fprintf(stderr, "%s %s %d x%d: a worker failed\n", v->name, rt, n,
                procs);
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
    int calls = 3, procs = 4;
    char procs_s[128] = "gemmblas,nvblas,nvblas-pin";
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
        else if (strcmp(a, "--procs") == 0)
            procs = atoi(v);
        else if (strcmp(a, "--procs-variants") == 0)
            snprintf(procs_s, sizeof(procs_s), "%s", v);
        else {
            fputs("usage: bench_blas3 [--routines dsyrk,dtrsm,...] [--sizes "
                  "4096,8192]\n  [--variants gemmblas,nvblas,nvblas-pin,"
                  "openblas] [--calls 3]\n  [--openblas LIB] [--nvblas LIB] "
                  "[--gemmblas LIB] [--csv FILE]\n  [--procs 4] "
                  "[--procs-variants gemmblas,nvblas,nvblas-pin]\n",
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
    char *pw[8];
    int npw = split(procs_s, pw, 8);
    if (procs < 0 || procs > 64) {
        fprintf(stderr, "bench_blas3: --procs 0..64\n");
        return 2;
    }

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
    gbenv[2] = "GEMMBLAS_VERBOSE=2"; /* per call: where the time goes */
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
                    "rel_diff,procs,procs_ms\n");
    int ig = -1;
    for (int vi = 0; vi < nv_; vi++)
        if (strcmp(vs[vi].name, "gemmblas") == 0)
            ig = vi;
    bool inp[4] = {false};
    for (int vi = 0; vi < nv_; vi++)
        for (int w = 0; w < npw && procs > 0; w++)
            inp[vi] = inp[vi] || strcmp(pw[w], vs[vi].name) == 0;
    /* the table, a row as soon as its variants have run: each variant's
     * first call, steady (best) and procs-at-once time per call, then
     * each other variant's steady and procs time over gemmblas's */
    printf("\n%-7s %5s", "routine", "n");
    for (int vi = 0; vi < nv_; vi++)
        printf(" %30s", vs[vi].name);
    if (ig >= 0)
        for (int vi = 0; vi < nv_; vi++)
            if (vi != ig)
                printf(" %17s", vs[vi].name);
    printf("  %s\n", "check");
    printf("%-7s %5s", "", "");
    for (int vi = 0; vi < nv_; vi++)
        printf(" %9s %9s %8s%-2d", "first ms", "steady", "procs x",
               inp[vi] ? procs : 0);
    if (ig >= 0)
        for (int vi = 0; vi < nv_; vi++)
            if (vi != ig)
                printf(" %8s %8s", "/steady", "/procs");
    printf("\n");
    fflush(stdout);
    int wrong = 0;
    for (int ri = 0; ri < nr; ri++)
        for (int si = 0; si < ns; si++) {
            int n = atoi(szs[si]);
            for (int vi = 0; vi < nv_; vi++) {
                result *r = &R(ri, si, vi);
                run_one(&vs[vi], rts[ri], n, calls, r);
                if (inp[vi] && r->ok)
                    run_procs(&vs[vi], rts[ri], n, calls, procs, r);
                fprintf(stderr,
                        "  %-10s %-6s %5d: first %9.1f ms, best %9.2f ms, "
                        "%d procs %9.2f ms\n",
                        vs[vi].name, rts[ri], n, r->first_ms, r->best_ms,
                        inp[vi] ? procs : 0, r->procs_ms);
            }
            printf("%-7s %5d", rts[ri], n);
            for (int vi = 0; vi < nv_; vi++) {
                result *r = &R(ri, si, vi);
                if (r->ok)
                    printf(" %9.1f %9.2f %10.2f", r->first_ms, r->best_ms,
                           r->procs_ms);
                else
                    printf(" %30s", "FAILED");
            }
            if (ig >= 0)
                for (int vi = 0; vi < nv_; vi++) {
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
    unlink(conf[0]);
    unlink(conf[1]);
    printf("%s\n", wrong ? "SOME RESULTS WRONG" : "all results agree");
    return wrong ? 1 : 0;
}
