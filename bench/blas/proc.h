/*
 * proc.h: what bench_blas and bench_blas3 share. Each runs every
 * (variant, routine, size) in fresh worker processes of its own program
 * (`PROGRAM --worker ...`), so that nothing of one BLAS library is loaded
 * in another's process:
 *   - a variant: a BLAS library and the environment its workers run in
 *     (nvblas.conf for NVBLAS, GEMMBLAS_* for libgemmblas);
 *   - spawning a worker with its stdout on a pipe and, for runs of several
 *     processes at once, its stdin on another: one byte releases it;
 *   - the worker's report of the CPU BLAS it loaded (OpenBLAS's
 *     configuration, core and threads), and OPENBLAS_CORETYPE for hosts
 *     whose VM hides the CPU's flags;
 *   - a time budget for the whole run, so that a full table fits in one
 *     call of the device machine: each steady loop stops after its share
 *     and rows that no longer fit are reported as not run.
 * Not a library: two benchmark programs link it.
 */
#ifndef BENCH_BLAS_PROC_H
#define BENCH_BLAS_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

typedef struct bp_variant {
    const char *name;
    const char *lib;
    char **env; /* extra NAME=VALUE, NULL-terminated; may be NULL */
    /* bp_together: called once every worker is READY, before they are
     * released (e.g. to wait for what the library does in the
     * background); may be NULL */
    void (*settle)(const struct bp_variant *v);
} bp_variant;

/* CLOCK_MONOTONIC in milliseconds. */
double bp_now_ms(void);

/* Records this program's path (for spawning workers). Returns 0, or -1
 * when /proc/self/exe cannot be read. */
int bp_init(void);

/*
 * Starts `PROGRAM --worker args...` (args NULL-terminated) in v's
 * environment: the caller's plus v->env, whose entries win, plus
 * OPENBLAS_CORETYPE when bp_set_coretype() named one. Its stdout comes to
 * *out; with go non-NULL its stdin is a pipe whose write end is *go (write
 * one byte to release it, close to end it). Returns the pid, or -1.
 */
pid_t bp_spawn(const bp_variant *v, char *const args[], FILE **out, int *go);

/* Waits for pid: its exit status, or 128 + the signal that ended it. */
int bp_reap(pid_t pid);

/*
 * Reads f until a line that starts with key and copies it to line. A
 * worker's "ERROR ..." line is printed on stderr under who; false on one,
 * and at EOF.
 */
bool bp_read_line(FILE *f, const char *key, char *line, size_t len,
                  const char *who);

/*
 * Writes an nvblas.conf under /tmp naming cpu_blas as NVBLAS's CPU BLAS
 * (all GPUs, tile 2048, NVBLAS_AUTOPIN_MEM_ENABLED when autopin) and puts
 * "NVBLAS_CONFIG_FILE=path" in env. Returns 0, or -1 when it cannot write.
 * bp_cleanup() removes the files.
 */
int bp_nvblas_conf(const char *prog, const char *cpu_blas, bool autopin,
                   char *env, size_t envlen);
void bp_cleanup(void);

/* OPENBLAS_CORETYPE for every worker (NULL: the environment's). */
void bp_set_coretype(const char *core);

/* Worker side: when h (a dlopen handle) is an OpenBLAS, prints
 * "CONFIG <openblas_get_config>; core X; N threads". */
void bp_print_blas_config(void *h);

/* The table's head after its first line: each variant's library and the
 * core type set for the workers. */
void bp_print_variants(const bp_variant *vs, int n);

/* Prints "#   NAME  CONFIG..." for a worker's CONFIG line, the first time
 * variant v says one. */
void bp_say_config(const bp_variant *v, const char *line);

/*
 * Runs procs workers `args` (with "together") of v at once: each
 * says "READY" after its warm-up, all are released together and each
 * prints "RESULT4 elapsed_ms [err]". Puts the slowest elapsed time in
 * *slowest_ms and the largest err (0 when none is given) in *err; false
 * when a worker failed (said on stderr under who).
 */
bool bp_together(const bp_variant *v, char *const args[], int procs,
                 const char *who, double *slowest_ms, double *err);

/* A settle hook for libgemmblas's variants: waits until gemmd (GEMM_URL)
 * has no pin in flight (at most a minute), saying how long on stderr. */
void bp_gemmd_settle(const bp_variant *v);

/* Whether name is in the comma-separated list. */
bool bp_listed(const char *list, const char *name);

/* Parses "a,b,c" of positive ints up to 65536 into out (at most max):
 * the count, or -1 on a bad list. */
int bp_parse_ints(const char *s, int *out, int max);

/* The run's budget: bp_budget_start(seconds) at the start (<= 0: none);
 * bp_budget_left_ms() is what is left (a large number without a budget). */
void bp_budget_start(double seconds);
double bp_budget_left_ms(void);

#endif
