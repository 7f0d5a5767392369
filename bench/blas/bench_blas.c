/*
 * bench_blas.c: dgemm_ and sgemm_ from a plain C program through three
 * BLAS libraries, side by side in one run:
 *   openblas  the host's OpenBLAS (libblas.so.3, all its cores)
 *   nvblas    NVBLAS from the CUDA toolkit (libnvblas.so, with an
 *             nvblas.conf written here that names the CPU BLAS)
 *   gemmblas  libgemmblas with gemmd running (GEMMBLAS_MIN_FLOPS=0)
 *   gemmblas-zc  the same in its zero-copy mode: preloaded (so its malloc
 *             is the worker's) with GEMMBLAS_ZEROCOPY=1, the worker's
 *             matrices (malloc'd before the library is opened) are memfd
 *             regions its GEMMs use in place; its load time is the
 *             preload's, not measured; the worker reports the calls that
 *             ran with every operand in place and the bytes still staged
 *             (gemmblas_zerocopy_counters)
 * For each type and size: a fresh process times its first call (from
 * before loading the library to the first result: what a short script
 * pays) and then --calls more (steady state: median); then --procs fresh
 * processes call at once after a barrier (each warmed up by one call) and
 * their total throughput is reported. Every worker checks 16 elements of
 * its C against a long double dot product (random data, never zeros).
 * --crossover instead times steady-state openblas against gemmblas over
 * small sizes and prints where gemmd starts to win: the measurement
 * behind GEMMBLAS_MIN_FLOPS.
 *
 * The libraries are dlopened by the workers (RTLD_LOCAL), each in its own
 * process, so nothing of one variant is loaded in another's. Not a test:
 * a program that prints a table (and --csv).
 */
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
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

typedef void (*gemm_fn)(const char *, const char *, const int *, const int *,
                        const int *, const void *, const void *, const int *,
                        const void *, const int *, const void *, void *,
                        const int *);

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

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

/* bench_blas --worker LIB TYPE N CALLS [SYNC_FD]: prints
 * "RESULT load_ms first_ms median_ms min_ms err" (no SYNC_FD), or, with
 * SYNC_FD, calls once, writes "r" to stdout, waits for a byte on SYNC_FD,
 * then times CALLS calls and prints "RESULT4 elapsed_ms err". */
static int worker(int argc, char **argv)
{
    if (argc < 6)
        return 2;
    const char *lib = argv[2];
    char t = argv[3][0];
    int n = atoi(argv[4]), calls = atoi(argv[5]);
    int sync = argc > 6 ? atoi(argv[6]) : -1;
    size_t es = t == 'd' ? 8 : 4, nn = (size_t)n * n;
    void *a = malloc(nn * es), *b = malloc(nn * es), *c = malloc(nn * es);
    if (a == NULL || b == NULL || c == NULL) {
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

    double t0 = now_ms();
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
    double t1 = now_ms();
    f("N", "N", &n, &n, &n, one, a, &n, b, &n, zero, c, &n);
    double t2 = now_ms();
    double err = sample_error(t, n, a, b, c);
    if (sync >= 0) {
        char x;
        printf("r\n");
        fflush(stdout);
        if (read(sync, &x, 1) != 1)
            return 1;
        double s0 = now_ms();
        for (int i = 0; i < calls; i++)
            f("N", "N", &n, &n, &n, one, a, &n, b, &n, zero, c, &n);
        double s1 = now_ms();
        double e2 = sample_error(t, n, a, b, c);
        printf("RESULT4 %.3f %.3g\n", s1 - s0, e2 > err ? e2 : err);
        return 0;
    }
    int (*zc)(uint64_t *, int) =
        (int (*)(uint64_t *, int))dlsym(h, "gemmblas_zerocopy_counters");
    uint64_t z[10] = {0};
    if (zc != NULL) /* the counters' order: blas/gemmblas.h */
        zc(z, 10);
    double *ms = calloc((size_t)calls + 1, sizeof(double));
    for (int i = 0; i < calls; i++) {
        double s0 = now_ms();
        f("N", "N", &n, &n, &n, one, a, &n, b, &n, zero, c, &n);
        ms[i] = now_ms() - s0;
    }
    double e2 = sample_error(t, n, a, b, c);
    if (zc != NULL && z[0] != 0) { /* the mode is on: steady calls' use */
        uint64_t z2[10] = {0};
        zc(z2, 10);
        printf("ZC %llu %llu %llu\n", (unsigned long long)(z2[5] - z[5]),
               (unsigned long long)(z2[6] - z[6]),
               (unsigned long long)(z2[9] - z[9]));
    }
    qsort(ms, (size_t)calls, sizeof(double), cmp_d);
    printf("RESULT %.3f %.3f %.3f %.3f %.3g\n", t1 - t0, t2 - t0,
           calls ? ms[calls / 2] : 0, calls ? ms[0] : 0, e2 > err ? e2 : err);
    return 0;
}

/* ---- the controller ---- */

typedef struct variant {
    const char *name;
    const char *lib;
    char **env; /* extra NAME=VALUE, NULL-terminated */
} variant;

static char self_path[4096];

/* The environment for a worker: ours plus v's extras. Leaked (small). */
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

/* Starts a worker with its stdout on a pipe (*out) and, when sync is
 * non-NULL, a pipe to release it (*sync = write end). */
static pid_t spawn_worker(const variant *v, char t, int n, int calls,
                          FILE **out, int *sync)
{
    int po[2], ps[2] = {-1, -1};
    if (pipe(po) != 0 || (sync != NULL && pipe(ps) != 0))
        return -1;
    char tb[2] = {t, 0}, nb[16], cb[16], sb[16];
    snprintf(nb, sizeof(nb), "%d", n);
    snprintf(cb, sizeof(cb), "%d", calls);
    snprintf(sb, sizeof(sb), "%d", ps[0]);
    char *argv[] = {self_path, "--worker", (char *)v->lib,   tb,
                    nb,        cb,         sync ? sb : NULL, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, po[1], 1);
    posix_spawn_file_actions_addclose(&fa, po[0]);
    if (sync != NULL)
        posix_spawn_file_actions_addclose(&fa, ps[1]);
    pid_t pid;
    int rv = posix_spawn(&pid, self_path, &fa, NULL, argv, worker_env(v));
    posix_spawn_file_actions_destroy(&fa);
    close(po[1]);
    if (sync != NULL) {
        close(ps[0]);
        *sync = ps[1];
    }
    if (rv != 0) {
        close(po[0]);
        return -1;
    }
    *out = fdopen(po[0], "r");
    return pid;
}

/* Reads the worker's lines until one starting with key; copies it to
 * line. Returns false on EOF or an ERROR line (printed). */
static bool read_line(FILE *f, const char *key, char *line, size_t len,
                      const char *who)
{
    while (fgets(line, (int)len, f) != NULL) {
        if (strncmp(line, key, strlen(key)) == 0 ||
            (strcmp(key, "RESULT ") == 0 && strncmp(line, "ZC ", 3) == 0))
            return true;
        if (strncmp(line, "ERROR", 5) == 0) {
            fprintf(stderr, "%s: %s", who, line);
            return false;
        }
    }
    fprintf(stderr, "%s: no %s line\n", who, key);
    return false;
}

static int reap(pid_t pid)
{
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

typedef struct result {
    bool ok;
    double load_ms, first_ms, med_ms, min_ms, err;
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

/* One fresh process: first call and calls more. */
static void run_single(const variant *v, char t, int n, int calls, result *r)
{
    char who[96], line[256];
    snprintf(who, sizeof(who), "%s %cgemm %d", v->name, t, n);
    FILE *out;
    pid_t pid = spawn_worker(v, t, n, calls, &out, NULL);
    r->ok = false;
    r->zc_calls = -1;
    if (pid < 0) {
        fprintf(stderr, "%s: cannot start a worker\n", who);
        return;
    }
    bool got = read_line(out, "RESULT ", line, sizeof(line), who);
    if (got && strncmp(line, "ZC ", 3) == 0) {
        if (sscanf(line, "ZC %lld %lld %lld", &r->zc_calls, &r->zc_inplace,
                   &r->zc_staged) != 3)
            r->zc_calls = -1;
        got = read_line(out, "RESULT ", line, sizeof(line), who);
    }
    if (got && sscanf(line, "RESULT %lf %lf %lf %lf %lf", &r->load_ms,
                      &r->first_ms, &r->med_ms, &r->min_ms, &r->err) == 5)
        r->ok = true;
    fclose(out);
    int st = reap(pid);
    if (st != 0) {
        fprintf(stderr, "%s: worker exit status %d\n", who, st);
        r->ok = false;
    }
    if (r->ok && !(r->err <= tol(t)))
        fprintf(stderr, "%s: WRONG RESULT (sampled relative error %.3g)\n", who,
                r->err);
}

/* procs processes at once, each warmed up, released together. */
static void run_procs(const variant *v, char t, int n, int calls, int procs,
                      result *r)
{
    char who[96], line[256];
    snprintf(who, sizeof(who), "%s %cgemm %d x%d", v->name, t, n, procs);
    pid_t pid[64];
    FILE *out[64];
    int sync[64];
    int started = 0;
    bool ok = true;
    for (; started < procs; started++) {
        pid[started] =
            spawn_worker(v, t, n, calls, &out[started], &sync[started]);
        if (pid[started] < 0) {
            ok = false;
            break;
        }
    }
    for (int i = 0; i < started && ok; i++)
        ok = read_line(out[i], "r", line, sizeof(line), who);
    for (int i = 0; i < started; i++) { /* go (or EOF: they exit) */
        if (ok && write(sync[i], "g", 1) != 1)
            ok = false;
        close(sync[i]);
    }
    double slowest = 0, err = 0;
    for (int i = 0; i < started; i++) {
        double ms, e;
        if (ok && read_line(out[i], "RESULT4", line, sizeof(line), who) &&
            sscanf(line, "RESULT4 %lf %lf", &ms, &e) == 2) {
            slowest = ms > slowest ? ms : slowest;
            err = e > err ? e : err;
        } else {
            ok = false;
        }
        fclose(out[i]);
        if (reap(pid[i]) != 0)
            ok = false;
    }
    r->procs_tflops = ok && slowest > 0
                          ? procs * calls * flops(n) / (slowest * 1e-3) / 1e12
                          : 0;
    r->procs_err = err;
    if (ok && !(err <= tol(t)))
        fprintf(stderr, "%s: WRONG RESULT (sampled relative error %.3g)\n", who,
                err);
}

/* Whether name is one of the comma-separated list. */
static bool listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        size_t l = strcspn(p, ",");
        if (l == n && strncmp(p, name, n) == 0)
            return true;
        p = p[l] == ',' ? p + l + 1 : p + l;
    }
    return false;
}

static void usage(void)
{
    fputs("usage: bench_blas [--sizes 1024,2048,4096,8192] [--types d,s]\n"
          "                  [--calls 10] [--procs 4] [--procs-calls 5]\n"
          "                  [--openblas LIB] [--nvblas LIB] [--gemmblas LIB]\n"
          "                  [--variants openblas,nvblas,gemmblas,"
          "gemmblas-zc]\n"
          "                  [--nvblas-autopin] [--csv FILE]\n"
          "       bench_blas --crossover [--sizes 256,384,...] [--types d,s]\n"
          "--procs 0: no runs of several processes. gemmblas-zc (the\n"
          "zero-copy mode) runs only when named in --variants.\n"
          "gemmd must be running for gemmblas (GEMM_URL, else the default\n"
          "socket). Defaults: Debian's OpenBLAS, /usr/local/cuda's NVBLAS,\n"
          "libgemmblas.so.0 beside this program's build or installed.\n",
          stderr);
}

/* Parses "a,b,c" of ints into out (at most max); returns the count. */
static int parse_list(const char *s, int *out, int max)
{
    int n = 0;
    while (*s && n < max) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v <= 0 || v > 65536)
            return -1;
        out[n++] = (int)v;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

static const char *first_existing(const char *const *paths)
{
    for (; *paths != NULL; paths++)
        if (access(*paths, R_OK) == 0)
            return *paths;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--worker") == 0)
        return worker(argc, argv);

    int sizes[32] = {1024, 2048, 4096, 8192}, nsizes = 4;
    char types[8] = "ds";
    int calls = 10, procs = 4, procs_calls = 5;
    bool crossover = false, autopin = false;
    const char *csv = NULL, *want = "openblas,nvblas,gemmblas";
    static const char *const ob_paths[] = {
        "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3",
        "/usr/lib/x86_64-linux-gnu/libopenblas.so.0", NULL};
    static const char *const nv_paths[] = {
        "/usr/local/cuda/lib64/libnvblas.so",
        "/usr/local/cuda/targets/x86_64-linux/lib/libnvblas.so", NULL};
    const char *ob = first_existing(ob_paths), *nv = first_existing(nv_paths);
    const char *gb = NULL;
    if (readlink("/proc/self/exe", self_path, sizeof(self_path) - 1) < 0)
        return 1;
    char gbdef[4200];
    snprintf(gbdef, sizeof(gbdef), "%.4000s", self_path);
    char *slash = strrchr(gbdef, '/');
    if (slash != NULL) { /* build tree: bench/blas/ -> blas/ */
        snprintf(slash + 1, sizeof(gbdef) - (size_t)(slash + 1 - gbdef),
                 "../../blas/libgemmblas.so.0");
        gb = access(gbdef, R_OK) == 0 ? gbdef : "libgemmblas.so.0";
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--sizes") == 0 && v && (i++, 1)) {
            if ((nsizes = parse_list(v, sizes, 32)) <= 0)
                return usage(), 2;
        } else if (strcmp(a, "--types") == 0 && v && (i++, 1)) {
            int k = 0;
            for (const char *p = v; *p && k < 4; p++)
                if (*p == 'd' || *p == 's')
                    types[k++] = *p;
            types[k] = 0;
        } else if (strcmp(a, "--calls") == 0 && v && (i++, 1)) {
            calls = atoi(v);
        } else if (strcmp(a, "--procs") == 0 && v && (i++, 1)) {
            procs = atoi(v);
        } else if (strcmp(a, "--procs-calls") == 0 && v && (i++, 1)) {
            procs_calls = atoi(v);
        } else if (strcmp(a, "--openblas") == 0 && v && (i++, 1)) {
            ob = v;
        } else if (strcmp(a, "--nvblas") == 0 && v && (i++, 1)) {
            nv = v;
        } else if (strcmp(a, "--gemmblas") == 0 && v && (i++, 1)) {
            gb = v;
        } else if (strcmp(a, "--variants") == 0 && v && (i++, 1)) {
            want = v;
        } else if (strcmp(a, "--csv") == 0 && v && (i++, 1)) {
            csv = v;
        } else if (strcmp(a, "--crossover") == 0) {
            crossover = true;
        } else if (strcmp(a, "--nvblas-autopin") == 0) {
            autopin = true;
        } else {
            return usage(), 2;
        }
    }
    if (calls < 1 || procs < 0 || procs > 64 || procs_calls < 1)
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

    /* nvblas.conf: the CPU BLAS for what NVBLAS does not take, all GPUs */
    char conf[256], log[256], confenv[300], gbcpu[4200];
    snprintf(conf, sizeof(conf), "/tmp/bench_blas_nvblas_%d.conf",
             (int)getpid());
    snprintf(log, sizeof(log), "/tmp/bench_blas_nvblas_%d.log", (int)getpid());
    FILE *cf = fopen(conf, "w");
    if (cf != NULL) {
        fprintf(cf,
                "NVBLAS_LOGFILE %s\nNVBLAS_CPU_BLAS_LIB %s\n"
                "NVBLAS_GPU_LIST ALL\nNVBLAS_TILE_DIM 2048\n%s",
                log, ob, autopin ? "NVBLAS_AUTOPIN_MEM_ENABLED\n" : "");
        fclose(cf);
    }
    snprintf(confenv, sizeof(confenv), "NVBLAS_CONFIG_FILE=%s", conf);
    snprintf(gbcpu, sizeof(gbcpu), "GEMMBLAS_CPU_BLAS=%.4000s", ob);
    static char *nvenv[2], *gbenv[4], *zcenv[8], zcpre[4200];
    nvenv[0] = confenv;
    gbenv[0] = "GEMMBLAS_MIN_FLOPS=0";
    gbenv[1] = gbcpu;
    gbenv[2] = "GEMMBLAS_VERBOSE=1"; /* says so if gemmd is not there */
    snprintf(zcpre, sizeof(zcpre), "LD_PRELOAD=%.4000s", gb ? gb : "");
    zcenv[0] = "GEMMBLAS_MIN_FLOPS=0";
    zcenv[1] = gbcpu;
    zcenv[2] = "GEMMBLAS_VERBOSE=1";
    zcenv[3] = "GEMMBLAS_ZEROCOPY=1";
    zcenv[4] = zcpre;
    variant all[4] = {{"openblas", ob, NULL},
                      {"nvblas", nv, nvenv},
                      {"gemmblas", gb, gbenv},
                      {"gemmblas-zc", gb, zcenv}};
    variant vs[4];
    int nv_count = 0;
    for (int i = 0; i < 4; i++) {
        if (crossover && (i == 1 || i == 3))
            continue;
        if (!listed(want, all[i].name))
            continue;
        if (all[i].lib == NULL) {
            fprintf(stderr, "bench_blas: no library for %s: skipping it\n",
                    all[i].name);
            continue;
        }
        vs[nv_count++] = all[i];
    }
    printf("# bench_blas: %s\n", crossover ? "crossover" : "full");
    for (int i = 0; i < nv_count; i++)
        printf("#   %-9s %s\n", vs[i].name, vs[i].lib);
    fflush(stdout);

    int ntypes = (int)strlen(types);
    result *res = calloc((size_t)ntypes * nsizes * 4, sizeof(result));
#define R(ti, si, vi) res[((ti)*nsizes + (si)) * 4 + (vi)]
    for (int ti = 0; ti < ntypes; ti++)
        for (int si = 0; si < nsizes; si++)
            for (int vi = 0; vi < nv_count; vi++) {
                result *r = &R(ti, si, vi);
                run_single(&vs[vi], types[ti], sizes[si], calls, r);
                if (!crossover && r->ok && procs > 0)
                    run_procs(&vs[vi], types[ti], sizes[si], procs_calls, procs,
                              r);
                fprintf(stderr,
                        "  %-11s %cgemm %5d: first %9.1f ms, steady "
                        "%9.2f ms, %d procs %7.2f TFLOP/s\n",
                        vs[vi].name, types[ti], sizes[si], r->first_ms,
                        r->med_ms, procs, r->procs_tflops);
            }

    FILE *cs = csv ? fopen(csv, "w") : NULL;
    if (cs != NULL)
        fprintf(cs, "type,n,variant,load_ms,first_ms,steady_ms,"
                    "steady_tflops,procs,procs_tflops,max_rel_err\n");
    printf("\n%-5s %5s %-11s %10s %10s %10s %9s %12s %9s\n", "type", "n",
           "variant", "load ms", "first ms", "steady ms", "TFLOP/s",
           "procs TF/s", "rel err");
    for (int ti = 0; ti < ntypes; ti++)
        for (int si = 0; si < nsizes; si++)
            for (int vi = 0; vi < nv_count; vi++) {
                result *r = &R(ti, si, vi);
                double tf = r->ok && r->med_ms > 0
                                ? flops(sizes[si]) / (r->med_ms * 1e-3) / 1e12
                                : 0;
                printf("%-5c %5d %-11s %10.1f %10.1f %10.2f %9.2f %12.2f "
                       "%9.2g%s\n",
                       types[ti], sizes[si], vs[vi].name, r->load_ms,
                       r->first_ms, r->med_ms, tf, r->procs_tflops,
                       r->err > r->procs_err ? r->err : r->procs_err,
                       r->ok ? "" : "  FAILED");
                if (cs != NULL)
                    fprintf(cs, "%c,%d,%s,%.3f,%.3f,%.3f,%.4f,%d,%.4f,%.3g\n",
                            types[ti], sizes[si], vs[vi].name, r->load_ms,
                            r->first_ms, r->med_ms, tf, procs, r->procs_tflops,
                            r->err);
            }
    if (cs != NULL)
        fclose(cs);

    /* ratios: gemmblas against the others, per type and size */
    int io = -1, in = -1, ig = -1, iz = -1;
    for (int vi = 0; vi < nv_count; vi++) {
        if (strcmp(vs[vi].name, "openblas") == 0)
            io = vi;
        if (strcmp(vs[vi].name, "nvblas") == 0)
            in = vi;
        if (strcmp(vs[vi].name, "gemmblas") == 0)
            ig = vi;
        if (strcmp(vs[vi].name, "gemmblas-zc") == 0)
            iz = vi;
    }
    if (ig >= 0) {
        printf("\nratios (gemmblas faster by): first call, steady, %d procs\n",
               procs);
        printf("%-5s %5s %22s %22s\n", "type", "n", "vs nvblas", "vs openblas");
        for (int ti = 0; ti < ntypes; ti++)
            for (int si = 0; si < nsizes; si++) {
                result *g = &R(ti, si, ig);
                char a[64] = "-", b[64] = "-";
                if (in >= 0 && g->ok && R(ti, si, in).ok) {
                    result *o = &R(ti, si, in);
                    snprintf(a, sizeof(a), "%5.2f %5.2f %5.2f",
                             o->first_ms / g->first_ms, o->med_ms / g->med_ms,
                             o->procs_tflops > 0
                                 ? g->procs_tflops / o->procs_tflops
                                 : 0);
                }
                if (io >= 0 && g->ok && R(ti, si, io).ok) {
                    result *o = &R(ti, si, io);
                    snprintf(b, sizeof(b), "%5.2f %5.2f %5.2f",
                             o->first_ms / g->first_ms, o->med_ms / g->med_ms,
                             o->procs_tflops > 0
                                 ? g->procs_tflops / o->procs_tflops
                                 : 0);
                }
                printf("%-5c %5d %22s %22s\n", types[ti], sizes[si], a, b);
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
    if (!crossover && ig >= 0) {
        /* the targets, where the run has them */
        printf("\ntargets:\n");
        for (int ti = 0; ti < ntypes; ti++)
            for (int si = 0; si < nsizes; si++) {
                result *g = &R(ti, si, ig);
                if (!g->ok)
                    continue;
                if (in >= 0 && types[ti] == 'd' && sizes[si] == 4096 &&
                    R(ti, si, in).ok)
                    printf("  dgemm 4096 first call >= 2x nvblas: %.2fx %s\n",
                           R(ti, si, in).first_ms / g->first_ms,
                           R(ti, si, in).first_ms / g->first_ms >= 2
                               ? "MET"
                               : "MISSED");
                if (sizes[si] == 8192 && in >= 0 && R(ti, si, in).ok) {
                    double x = R(ti, si, in).med_ms / g->med_ms;
                    printf("  %cgemm 8192 steady >= 1.2x nvblas: %.2fx %s\n",
                           types[ti], x, x >= 1.2 ? "MET" : "MISSED");
                }
                if (sizes[si] == 8192 && io >= 0 && R(ti, si, io).ok) {
                    double x = R(ti, si, io).med_ms / g->med_ms;
                    printf("  %cgemm 8192 steady >= 4x openblas: %.2fx %s\n",
                           types[ti], x, x >= 4 ? "MET" : "MISSED");
                }
                if (in >= 0 && R(ti, si, in).procs_tflops > 0 &&
                    sizes[si] == 8192) {
                    double x = g->procs_tflops / R(ti, si, in).procs_tflops;
                    printf("  %cgemm 8192 %d procs >= 2x nvblas: %.2fx %s\n",
                           types[ti], procs, x, x >= 2 ? "MET" : "MISSED");
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
                char a[32] = "-", b[32] = "-", ip[32] = "-", st[32] = "-";
                if (z->ok && z->zc_calls >= 0) {
                    snprintf(ip, sizeof(ip), "%lld/%lld", z->zc_inplace,
                             z->zc_calls);
                    snprintf(st, sizeof(st), "%.0f",
                             z->zc_calls > 0
                                 ? (double)z->zc_staged / (double)z->zc_calls
                                 : 0.0);
                }
                if (ig >= 0 && z->ok && R(ti, si, ig).ok)
                    snprintf(a, sizeof(a), "%.2fx",
                             R(ti, si, ig).med_ms / z->med_ms);
                if (io >= 0 && z->ok && R(ti, si, io).ok)
                    snprintf(b, sizeof(b), "%.2fx",
                             R(ti, si, io).med_ms / z->med_ms);
                printf("%-5c %5d %12s %14s %16s %16s\n", types[ti], sizes[si],
                       ip, st, a, b);
                if (types[ti] == 'd' && sizes[si] == 8192 && z->ok)
                    printf("  dgemm 8192 steady zero-copy <= 30 ms: %.1f ms "
                           "%s\n",
                           z->med_ms, z->med_ms <= 30 ? "MET" : "MISSED");
                if (types[ti] == 'd' && sizes[si] == 8192 && ig >= 0 &&
                    R(ti, si, ig).ok)
                    printf("  dgemm 8192 steady copying <= 45 ms: %.1f ms %s\n",
                           R(ti, si, ig).med_ms,
                           R(ti, si, ig).med_ms <= 45 ? "MET" : "MISSED");
            }
    }
    unlink(conf);
    return 0;
}
