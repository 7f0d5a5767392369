/*
 * real.c: the real CPU BLAS behind libgemmblas. On the first forwarded
 * call (or the first GEMM the CPU must compute) it is dlopened with
 * RTLD_LOCAL, so its symbols do not leak into the program:
 * $GEMMBLAS_CPU_BLAS when set, else the first of the Debian BLAS builds
 * that exists (OpenBLAS pthread, openmp, serial, BLIS, ATLAS, netlib),
 * else libopenblas.so.0 by soname. Never the alternative's
 * /usr/lib/<multiarch>/libblas.so.3, which may be this very library; and
 * any candidate whose dgemm_ turns out to be ours is closed again.
 * Netlib's libblas.so.3, when present and not the one loaded, serves the
 * few names the loaded BLAS lacks (OpenBLAS has no cdotcsub_, for one).
 *
 * Not RTLD_DEEPBIND by default (GEMMBLAS_DEEPBIND=1 asks for it): with it
 * the real BLAS's references to xerbla_ and RowMajorStrg bind to its own
 * copies, so a program's own xerbla_ is never called for a forwarded
 * routine and reference CBLAS's row-major error numbers go wrong. Measured
 * with libgemmblas as libblas.so.3 (LD_LIBRARY_PATH): netlib's xblat3d
 * fails 139 error-exit checks and xzcblat3/xdcblat3 crash with DEEPBIND
 * over netlib's BLAS, and DSYMM's error exits go unseen over OpenBLAS;
 * without it all pass over both. Without DEEPBIND the real BLAS's calls of
 * standard names (netlib's cblas_dgemm -> dgemm_) come back through
 * libgemmblas's exports, which end in the real functions again: no loop.
 *
 * gb_fwd_table holds one function pointer per forwarded name (NULL until
 * its first call); the trampolines of forward_x86_64.S read it.
 */
#include "gemmblas.h"

#include "forward_names.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef GB_MULTIARCH
#define GB_MULTIARCH "x86_64-linux-gnu"
#endif
#define GB_LIBDIR "/usr/lib/" GB_MULTIARCH

GB_HIDDEN void *gb_fwd_table[GB_NFWD];

static const char *const candidates[] = {
    GB_LIBDIR "/openblas-pthread/libblas.so.3",
    GB_LIBDIR "/openblas-openmp/libblas.so.3",
    GB_LIBDIR "/openblas-serial/libblas.so.3",
    GB_LIBDIR "/blis-pthread/libblas.so.3",
    GB_LIBDIR "/blis-openmp/libblas.so.3",
    GB_LIBDIR "/blis-serial/libblas.so.3",
    GB_LIBDIR "/atlas/libblas.so.3",
    GB_LIBDIR "/blas/libblas.so.3",
    "libopenblas.so.0",
};
#define NETLIB GB_LIBDIR "/blas/libblas.so.3"

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static void *real_h;  /* the CPU BLAS */
static void *spare_h; /* netlib's, for the names real_h lacks */
static char real_path[PATH_MAX];
static void *self_base; /* where this library is mapped */

/* dlopen flags: RTLD_LOCAL, and RTLD_DEEPBIND only when asked for
 * (GEMMBLAS_DEEPBIND=1; never under AddressSanitizer, which refuses it). */
static int open_flags(void)
{
    int flags = RTLD_LAZY | RTLD_LOCAL;
#if !defined(__SANITIZE_ADDRESS__)
    const char *d = getenv("GEMMBLAS_DEEPBIND");
    if (d != NULL && strcmp(d, "1") == 0)
        flags |= RTLD_DEEPBIND;
#endif
    return flags;
}

/* Whether function f lives in this library. */
static bool is_self(void *f)
{
    Dl_info di;
    return f != NULL && dladdr(f, &di) != 0 && di.dli_fbase == self_base;
}

/* Opens path as a CPU BLAS: NULL when it cannot be loaded, has no dgemm_
 * or is this library. */
static void *try_open(const char *path)
{
    void *h = dlopen(path, open_flags());
    if (h == NULL) {
        const char *e = dlerror();
        gb_log(2, "CPU BLAS candidate %s: %s", path, e ? e : "?");
        return NULL;
    }
    void *f = dlsym(h, "dgemm_");
    if (f == NULL || is_self(f)) {
        gb_log(2, "CPU BLAS candidate %s: %s", path,
               f == NULL ? "has no dgemm_" : "is libgemmblas itself");
        dlclose(h);
        return NULL;
    }
    Dl_info di;
    snprintf(real_path, sizeof(real_path), "%s",
             dladdr(f, &di) && di.dli_fname ? di.dli_fname : path);
    return h;
}

static void load(void)
{
    Dl_info di;
    if (dladdr((void *)load, &di) != 0)
        self_base = di.dli_fbase;
    const char *want = gb_cfg()->cpu_blas;
    if (want != NULL) {
        real_h = try_open(want);
        if (real_h == NULL)
            fprintf(stderr,
                    "gemmblas: GEMMBLAS_CPU_BLAS=%s cannot serve as the CPU "
                    "BLAS (GEMMBLAS_VERBOSE=2 says why)\n",
                    want);
    } else {
        for (size_t i = 0;
             real_h == NULL && i < sizeof(candidates) / sizeof(candidates[0]);
             i++)
            real_h = try_open(candidates[i]);
        if (real_h == NULL)
            fprintf(stderr,
                    "gemmblas: no CPU BLAS found (OpenBLAS, BLIS, ATLAS or "
                    "netlib under %s, or libopenblas.so.0): set "
                    "GEMMBLAS_CPU_BLAS\n",
                    GB_LIBDIR);
    }
    if (real_h != NULL) {
        /* the file itself: real_path may be a link (an alternative's) */
        char file[PATH_MAX];
        if (realpath(real_path, file) != NULL && strcmp(file, real_path) != 0)
            gb_log(1, "CPU BLAS: %s (loaded as %s)", file, real_path);
        else
            gb_log(1, "CPU BLAS: %s", real_path);
    }
    if (real_h != NULL && strcmp(real_path, NETLIB) != 0) {
        char keep[PATH_MAX];
        memcpy(keep, real_path, sizeof(keep));
        spare_h = try_open(NETLIB); /* may be absent: fine */
        memcpy(real_path, keep, sizeof(keep));
    }
}

/* name from the CPU BLAS (or netlib's for what it lacks); NULL if none
 * has it. */
static void *lookup(const char *name)
{
    pthread_once(&load_once, load);
    void *f = real_h != NULL ? dlsym(real_h, name) : NULL;
    if (f == NULL && spare_h != NULL)
        f = dlsym(spare_h, name);
    return is_self(f) ? NULL : f;
}

void *gb_fwd_resolve(unsigned i)
{
    void *f = i < GB_NFWD ? lookup(gb_fwd_names[i]) : NULL;
    if (f == NULL) {
        /* as the dynamic linker does for a symbol no library has */
        fprintf(stderr,
                "gemmblas: %s: not provided by the CPU BLAS (%s): cannot "
                "run it\n",
                i < GB_NFWD ? gb_fwd_names[i] : "?",
                real_h != NULL ? real_path : "none loaded");
        abort();
    }
    __atomic_store_n(&gb_fwd_table[i], f, __ATOMIC_RELEASE);
    return f;
}

gb_f77_gemm gb_real_gemm(gb_type t)
{
    static const char *const names[] = {"sgemm_", "dgemm_", "cgemm_", "zgemm_"};
    static gb_f77_gemm cache[4];
    gb_f77_gemm f = __atomic_load_n(&cache[t], __ATOMIC_ACQUIRE);
    if (f == NULL) {
        f = (gb_f77_gemm)lookup(names[t]);
        __atomic_store_n(&cache[t], f, __ATOMIC_RELEASE);
    }
    return f;
}

void *gb_real_sym(const char *name)
{
    return lookup(name);
}
