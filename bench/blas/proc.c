/*
 * proc.c: worker processes, variants' environments and the run's budget
 * for bench_blas and bench_blas3 (proc.h).
 */
#include "proc.h"

#include <gemm/gemm.h>

#include <dlfcn.h>
#include <spawn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static char self_path[4096];
static char coretype[80]; /* "OPENBLAS_CORETYPE=X" or empty */
static char confs[2][160];
static double budget_end_ms; /* 0: no budget */

double bp_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int bp_init(void)
{
    ssize_t n = readlink("/proc/self/exe", self_path, sizeof(self_path) - 1);
    if (n <= 0)
        return -1;
    self_path[n] = '\0';
    return 0;
}

void bp_set_coretype(const char *core)
{
    if (core == NULL || core[0] == '\0')
        coretype[0] = '\0';
    else
        snprintf(coretype, sizeof(coretype), "OPENBLAS_CORETYPE=%s", core);
}

/* Whether entry e ("NAME=...") sets the variable that kv sets. */
static bool same_var(const char *e, const char *kv)
{
    size_t l = strcspn(kv, "=");
    return strncmp(e, kv, l + 1) == 0;
}

/* The caller's environment with v's extras (and the core type) in front,
 * replacing the caller's entries of the same names. Freed by the caller
 * (the array only; the strings are borrowed). */
static char **worker_env(const bp_variant *v)
{
    size_t n = 0, m = 0;
    while (environ[n] != NULL)
        n++;
    while (v->env != NULL && v->env[m] != NULL)
        m++;
    char **e = calloc(n + m + 2, sizeof(char *));
    if (e == NULL)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < m; i++)
        e[k++] = v->env[i];
    if (coretype[0] != '\0')
        e[k++] = coretype;
    size_t extras = k;
    for (size_t i = 0; i < n; i++) {
        bool dup = false;
        for (size_t j = 0; j < extras && !dup; j++)
            dup = same_var(environ[i], e[j]);
        if (!dup)
            e[k++] = environ[i];
    }
    return e;
}

pid_t bp_spawn(const bp_variant *v, char *const args[], FILE **out, int *go)
{
    char *argv[16];
    size_t a = 0;
    argv[a++] = self_path;
    argv[a++] = "--worker";
    for (size_t i = 0; args[i] != NULL && a < 15; i++)
        argv[a++] = args[i];
    argv[a] = NULL;

    int po[2], pi[2] = {-1, -1};
    if (pipe(po) != 0)
        return -1;
    if (go != NULL && pipe(pi) != 0) {
        close(po[0]);
        close(po[1]);
        return -1;
    }
    char **env = worker_env(v);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, po[1], 1);
    posix_spawn_file_actions_addclose(&fa, po[0]);
    if (go != NULL) {
        posix_spawn_file_actions_adddup2(&fa, pi[0], 0);
        posix_spawn_file_actions_addclose(&fa, pi[1]);
    }
    pid_t pid;
    int rv =
        env == NULL ? -1 : posix_spawn(&pid, self_path, &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    close(po[1]);
    if (go != NULL)
        close(pi[0]);
    if (rv != 0) {
        close(po[0]);
        if (go != NULL)
            close(pi[1]);
        return -1;
    }
    *out = fdopen(po[0], "r");
    if (go != NULL)
        *go = pi[1];
    return pid;
}

int bp_reap(pid_t pid)
{
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

bool bp_read_line(FILE *f, const char *key, char *line, size_t len,
                  const char *who)
{
    size_t kl = strlen(key);
    while (fgets(line, (int)len, f) != NULL) {
        if (strncmp(line, key, kl) == 0)
            return true;
        if (strncmp(line, "ERROR", 5) == 0) {
            fprintf(stderr, "%s: %s", who, line);
            return false;
        }
    }
    fprintf(stderr, "%s: no %s line\n", who, key);
    return false;
}

void bp_print_variants(const bp_variant *vs, int n)
{
    for (int i = 0; i < n; i++)
        printf("#   %-11s %s\n", vs[i].name, vs[i].lib);
    if (coretype[0] != '\0')
        printf("#   %s for every worker\n", coretype);
    fflush(stdout);
}

void bp_say_config(const bp_variant *v, const char *line)
{
    static char said[8][16];
    for (int i = 0; i < 8; i++) {
        if (strcmp(said[i], v->name) == 0)
            return;
        if (said[i][0] == '\0') {
            snprintf(said[i], sizeof(said[i]), "%s", v->name);
            break;
        }
    }
    printf("#   %-11s %s", v->name, line + 7);
    fflush(stdout);
}

bool bp_together(const bp_variant *v, char *const args[], int procs,
                 const char *who, double *slowest_ms, double *err)
{
    pid_t pid[64];
    FILE *out[64];
    int go[64];
    int started = 0;
    bool ok = procs > 0 && procs <= 64;
    char line[1024];
    for (; ok && started < procs; started++) {
        pid[started] = bp_spawn(v, args, &out[started], &go[started]);
        if (pid[started] < 0) {
            ok = false;
            break;
        }
    }
    for (int i = 0; i < started && ok; i++)
        ok = bp_read_line(out[i], "READY", line, sizeof(line), who);
    if (ok && v->settle != NULL)
        v->settle(v);
    for (int i = 0; i < started; i++) { /* go (or EOF: they exit) */
        if (ok && write(go[i], "g", 1) != 1)
            ok = false;
        close(go[i]);
    }
    *slowest_ms = 0;
    *err = 0;
    for (int i = 0; i < started; i++) {
        double ms = -1, e = 0;
        if (ok && bp_read_line(out[i], "RESULT4", line, sizeof(line), who) &&
            sscanf(line, "RESULT4 %lf %lf", &ms, &e) >= 1 && ms > 0) {
            *slowest_ms = ms > *slowest_ms ? ms : *slowest_ms;
            *err = e > *err ? e : *err;
        } else {
            ok = false;
        }
        fclose(out[i]);
        if (bp_reap(pid[i]) != 0)
            ok = false;
    }
    if (!ok)
        fprintf(stderr, "%s: a worker failed\n", who);
    return ok;
}

int bp_nvblas_conf(const char *prog, const char *cpu_blas, bool autopin,
                   char *env, size_t envlen)
{
    char *path = confs[autopin ? 1 : 0];
    snprintf(path, sizeof(confs[0]), "/tmp/%s_nvblas%d_%d.conf", prog,
             autopin ? 1 : 0, (int)getpid());
    FILE *cf = fopen(path, "w");
    if (cf == NULL)
        return -1;
    fprintf(cf,
            "NVBLAS_LOGFILE /tmp/%s_nvblas_%d.log\nNVBLAS_CPU_BLAS_LIB %s\n"
            "NVBLAS_GPU_LIST ALL\nNVBLAS_TILE_DIM 2048\n%s",
            prog, (int)getpid(), cpu_blas,
            autopin ? "NVBLAS_AUTOPIN_MEM_ENABLED\n" : "");
    if (fclose(cf) != 0)
        return -1;
    snprintf(env, envlen, "NVBLAS_CONFIG_FILE=%s", path);
    return 0;
}

void bp_cleanup(void)
{
    for (int i = 0; i < 2; i++)
        if (confs[i][0] != '\0')
            unlink(confs[i]);
}

void bp_print_blas_config(void *h)
{
    const char *(*cfg)(void) =
        (const char *(*)(void))dlsym(h, "openblas_get_config");
    const char *(*core)(void) =
        (const char *(*)(void))dlsym(h, "openblas_get_corename");
    int (*threads)(void) = (int (*)(void))dlsym(h, "openblas_get_num_threads");
    if (cfg != NULL && core != NULL && threads != NULL)
        printf("CONFIG %s; core %s; %d threads\n", cfg(), core(), threads());
}

bool bp_listed(const char *list, const char *name)
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

int bp_parse_ints(const char *s, int *out, int max)
{
    int n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v <= 0 || v > 65536 || n == max ||
            (*end != ',' && *end != '\0'))
            return -1;
        out[n++] = (int)v;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

void bp_budget_start(double seconds)
{
    budget_end_ms = seconds > 0 ? bp_now_ms() + seconds * 1e3 : 0;
}

double bp_budget_left_ms(void)
{
    return budget_end_ms > 0 ? budget_end_ms - bp_now_ms() : 1e300;
}

/* Before workers of libgemmblas are released together: until gemmd
 * (GEMM_URL) has no pin of their buffers or regions in flight, at most a
 * minute. Four processes starting at once have gemmd pin several GB, and
 * each pin stalls every copy of the daemon while it runs (0.3-1 s a GB
 * on the H200 host): steady state is after them. */
void bp_gemmd_settle(const bp_variant *v)
{
    gemm_client *c;
    if (gemm_client_open_timeout(&c, NULL, 2000) != GEMM_OK) {
        fprintf(stderr, "%s: gemmd not reached: %s\n", v->name,
                gemm_last_error_message());
        return;
    }
    double t0 = bp_now_ms();
    gemm_status st;
    while (gemm_get_status(c, &st) == GEMM_OK && st.pins_pending > 0 &&
           bp_now_ms() - t0 < 60e3)
        nanosleep(&(struct timespec){0, 20000000}, NULL);
    fprintf(stderr, "%s: gemmd's pins settled after %.2f s (%u pending)\n",
            v->name, (bp_now_ms() - t0) / 1e3, st.pins_pending);
    gemm_client_close(c);
}
