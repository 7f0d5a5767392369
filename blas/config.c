/*
 * config.c: libgemmblas's settings, read from the environment once (the
 * first BLAS call), and its one-line diagnostics. A malformed value is
 * reported (with GEMMBLAS_VERBOSE) and the default kept: a library in
 * someone else's program does not fail over a typo. The zero-copy mode's
 * two settings are read earlier, when the library loads (gb_zc_env), and
 * logged at the first BLAS call.
 */
#include "gemmblas.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static gb_config cfg;
static pthread_once_t cfg_once = PTHREAD_ONCE_INIT;

/* A number from variable name, within [lo, hi]; def when unset or bad
 * (NAN: the caller's defaults, said as "the default"). */
static double env_num(const char *name, double def, double lo, double hi)
{
    const char *s = getenv(name);
    if (s == NULL || s[0] == '\0')
        return def;
    if (strcasecmp(s, "inf") == 0 || strcasecmp(s, "never") == 0)
        return hi;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || isnan(v) || v < lo ||
        v > hi) {
        char use[48] = "the default";
        if (!isnan(def))
            snprintf(use, sizeof(use), "%g", def);
        fprintf(stderr,
                "gemmblas: %s='%s' is not a number in [%g, %g]; using %s\n",
                name, s, lo, hi, use);
        return def;
    }
    return v;
}

static void cfg_read(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    cfg.verbose = (int)env_num("GEMMBLAS_VERBOSE", 0, 0, 9);
    /* -1 (or "never"): nothing goes to gemmd; unset: each type's
     * default */
    static const double defaults[4] = GB_DEFAULT_MIN_FLOPS;
    const double all_v = env_num("GEMMBLAS_MIN_FLOPS", NAN, -1, INFINITY);
    for (int t = 0; t < 4; t++) {
        double x = isnan(all_v) ? defaults[t] : all_v;
        cfg.min_flops[t] = isinf(x) ? -1 : x;
    }
    static const char *const names[GB_NROUTINES] = {
        NULL, "SYMM", "HEMM", "SYRK", "HERK", "SYR2K", "HER2K", "TRMM", "TRSM"};
    static const double defaults3[GB_NROUTINES][4] = GB_DEFAULT_MIN_FLOPS3;
    const bool all_set = !isnan(all_v);
    for (int r = 1; r < GB_NROUTINES; r++) {
        char var[48];
        snprintf(var, sizeof(var), "GEMMBLAS_MIN_FLOPS_%s", names[r]);
        /* read once (a bad value is reported once): NAN when unset or
         * bad, and then each type's default */
        double v = env_num(var, NAN, -1, INFINITY);
        for (int t = 0; t < 4; t++) {
            double x = !isnan(v) ? v
                       : all_set ? cfg.min_flops[t]
                                 : defaults3[r][t];
            cfg.min_flops3[r][t] = isinf(x) ? -1 : x;
        }
    }
    cfg.timeout_ms = (int)env_num("GEMMBLAS_TIMEOUT_MS", 60000, 1, 3.6e6);
    cfg.connect_ms =
        (int)env_num("GEMMBLAS_CONNECT_TIMEOUT_MS", 2000, 1, 600000);
    cfg.retry_ms = (int)env_num("GEMMBLAS_RETRY_MS", 1000, 0, 3.6e6);
    cfg.queue_ms = (int)env_num("GEMMBLAS_QUEUE_MS", 10000, 0, 3.6e6);
    double ct = cpus > 16 ? 16 : cpus > 0 ? (double)cpus : 1;
    cfg.copy_threads = (int)env_num("GEMMBLAS_COPY_THREADS", ct, 1, 256);
    cfg.copy_nt = env_num("GEMMBLAS_COPY_NT", 1, 0, 1) != 0;
    if (cfg.verbose >= 1 && getenv("GEMMBLAS_COPY_NT"))
        fprintf(stderr, "gemmblas[%d]: streaming stores in large copies: %s\n",
                (int)getpid(), cfg.copy_nt ? "on" : "off");
    cfg.fill_parts = (int)env_num("GEMMBLAS_FILL_PARTS", 8, 0, 64);
    cfg.fill_min_bytes =
        env_num("GEMMBLAS_FILL_MIN_BYTES", 32.0 * 1024 * 1024, 0, 0x1p62);
    cfg.fill_gemm = env_num("GEMMBLAS_FILL_GEMM", 1, 0, 1) != 0;
    cfg.drain = env_num("GEMMBLAS_DRAIN", 1, 0, 1) != 0;
    if (cfg.verbose >= 1 && getenv("GEMMBLAS_DRAIN"))
        fprintf(stderr,
                "gemmblas[%d]: ?gemm's D copied out as gemmd says its rows "
                "land: %s\n",
                (int)getpid(), cfg.drain ? "on" : "off");
    if (cfg.verbose >= 1 &&
        (getenv("GEMMBLAS_FILL_PARTS") || getenv("GEMMBLAS_FILL_MIN_BYTES") ||
         getenv("GEMMBLAS_FILL_GEMM")))
        fprintf(stderr,
                "gemmblas[%d]: level-3 operands filled by parts while gemmd "
                "works: %d parts (%s, ?gemm %s), from %.3g staged bytes\n",
                (int)getpid(), cfg.fill_parts,
                cfg.fill_parts > 1 ? "on" : "off",
                cfg.fill_gemm ? "too" : "not", cfg.fill_min_bytes);
    cfg.panels = (int)env_num("GEMMBLAS_PANELS", GB_DEFAULT_PANELS, 0, 64);
    cfg.panels_inflight = (int)env_num("GEMMBLAS_PANELS_INFLIGHT", 2, 1, 16);
    cfg.panel_min_flops = env_num("GEMMBLAS_PANEL_MIN_FLOPS",
                                  GB_DEFAULT_PANEL_MIN_FLOPS, 0, INFINITY);
    if (cfg.verbose >= 1 &&
        (getenv("GEMMBLAS_PANELS") || getenv("GEMMBLAS_PANELS_INFLIGHT") ||
         getenv("GEMMBLAS_PANEL_MIN_FLOPS")))
        fprintf(stderr,
                "gemmblas[%d]: panels: %d (%s), %d in flight, from %.3g flops "
                "a panel\n",
                (int)getpid(), cfg.panels, cfg.panels > 1 ? "on" : "off",
                cfg.panels_inflight, cfg.panel_min_flops);
    const char *p = getenv("GEMMBLAS_PRECISION");
    cfg.tf32 = p != NULL && strcasecmp(p, "tf32") == 0;
    if (p != NULL && !cfg.tf32 && strcasecmp(p, "fp32") != 0 && p[0] != '\0')
        fprintf(stderr,
                "gemmblas: GEMMBLAS_PRECISION='%s': fp32 or tf32; using "
                "fp32\n",
                p);
    const char *blas = getenv("GEMMBLAS_CPU_BLAS");
    cfg.cpu_blas = blas != NULL && blas[0] != '\0' ? blas : NULL;
}

void gb_zc_env(bool *on, size_t *min_bytes)
{
    const char *z = getenv("GEMMBLAS_ZEROCOPY");
    *on = z != NULL && strcmp(z, "1") == 0;
    if (z != NULL && z[0] != '\0' && !*on && strcmp(z, "0") != 0)
        fprintf(stderr, "gemmblas: GEMMBLAS_ZEROCOPY='%s': 0 or 1; using 0\n",
                z);
    *min_bytes = (size_t)env_num("GEMMBLAS_ZEROCOPY_MIN_BYTES",
                                 (double)GB_ZC_DEFAULT_MIN_BYTES, 1, 0x1p62);
}

/* Run once at the first BLAS call after it is installed
 * (gb_cfg_on_first_call): zcalloc.c's log of the zero-copy settings,
 * installed by its constructor once it has read them. */
static void (*_Atomic first_call)(void);

void gb_cfg_on_first_call(void (*fn)(void))
{
    atomic_store(&first_call, fn);
}

const gb_config *gb_cfg(void)
{
    static atomic_bool ran;
    pthread_once(&cfg_once, cfg_read);
    void (*fn)(void) = atomic_load_explicit(&first_call, memory_order_acquire);
    if (fn != NULL && !atomic_load_explicit(&ran, memory_order_relaxed) &&
        !atomic_exchange(&ran, true))
        fn();
    return &cfg;
}

double gb_ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void gb_log(int level, const char *fmt, ...)
{
    if (gb_cfg()->verbose < level)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "gemmblas[%d]: %s\n", (int)getpid(), line);
}
