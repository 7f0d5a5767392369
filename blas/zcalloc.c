/*
 * zcalloc.c: the zero-copy mode's allocator. libgemmblas.so.0 exports malloc,
 * free, calloc, realloc, reallocarray, posix_memalign, aligned_alloc,
 * memalign, valloc, pvalloc, malloc_usable_size (and free_sized,
 * free_aligned_sized). With GEMMBLAS_ZEROCOPY unset they cost one
 * predictable branch and call glibc's __libc_* functions, never dlsym
 * (which allocates). With GEMMBLAS_ZEROCOPY=1, and only when these
 * definitions are the ones the whole program uses (checked once, when the
 * library loads: libgemmblas.so.0 preloaded), an
 * allocation of GEMMBLAS_ZEROCOPY_MIN_BYTES or more is a region: an
 * anonymous memfd (MFD_CLOEXEC | MFD_ALLOW_SEALING) mapped MAP_SHARED at a
 * 2 MiB-aligned address, which zerocopy.c registers with gemmd at the
 * first GEMM that reads or writes it there, so that GEMM needs no staging
 * copy. Anything that fails on the way (memfd_create refused, no address
 * space, the table full: 1024 regions, or a quarter of the descriptor limit,
 * since each region holds a descriptor) gives the allocation to glibc
 * instead.
 *
 * The table: region records in a fixed array, the live ones listed in
 * `live` and the freed ones still registered with gemmd in `pend`, all
 * under one mutex. free() of a pointer that is not 2 MiB-aligned never
 * looks at it (one AND); only an aligned one is looked up (rare outside
 * regions: glibc's own chunks are 16-byte aligned). free() never calls the
 * client or nng: a region without a registration is unmapped at once;
 * a registered one moves to `pend`, stays mapped, and zerocopy.c releases
 * it (its background thread, woken here, or the next offloaded call),
 * then unmaps it. The array bounds both: when it is full, allocations go
 * to glibc.
 *
 * realloc: a region keeps its address when the new size still fits its
 * mapping; an unregistered one grows by resizing its memfd (mremap, no
 * copy); a registered one (sealed by gemmd: its size is fixed) or a shrink
 * below the threshold moves, contents copied. A glibc chunk that grows
 * past the threshold becomes a region.
 *
 * fork: a MAP_SHARED region would be shared between parent and child,
 * against fork's copy-on-write promise. The prepare handler snapshots
 * each region into private anonymous memory; the child moves the
 * snapshots over its regions with mremap (the addresses stay) and
 * forgets every registration (the parent's connection is not the
 * child's), the parent drops them. (Copying in the child would race with
 * the parent, which writes its regions again as soon as fork returns.)
 * When there is no memory for a snapshot, the child maps that memfd
 * privately (copy-on-write), whose pages it sees as the parent leaves
 * them until it writes them. The cost is a copy of every live region at
 * every fork, paid by the forking thread before the fork.
 *
 * Built with GB_NO_INTERPOSE the allocator is left out and the mode stays
 * off: in libblas.so.3, the library the Debian alternative puts under
 * every BLAS program of the host (which must never stand in front of a
 * program's own allocator), and in a program that links the objects into
 * itself (blas_unit_test). The mode is libgemmblas.so.0's, preloaded.
 */
#include "gemmblas.h"

#ifdef GB_NO_INTERPOSE /* the table without the allocator: half of it idle */
#pragma GCC diagnostic ignored "-Wunused-function"
#endif

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* glibc's allocator under its internal names (exported by libc.so.6). */
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

#define ZC_ALIGN    ((uintptr_t)2 << 20)
#define ZC_MAX      1024 /* regions live or waiting for their release */
#define ZC_CACHE    4    /* freed registered regions kept for reuse */
#define ZC_CACHE_NS ((uint64_t)1000000000) /* ... for at most 1 s */

static struct {
    atomic_bool on;               /* regions are being made */
    atomic_bool probe, probe_hit; /* reaches_us() */
    bool shadowed;        /* another malloc follows ours (jemalloc, ...) */
    size_t min_bytes;     /* GEMMBLAS_ZEROCOPY_MIN_BYTES */
    const char *why_off;  /* asked for but off: why (static string) */
    size_t page;          /* the page size */
    pthread_mutex_t lock; /* guards the table (zc_lock) */
    atomic_bool forking;  /* fork_owner is forking, holding lock */
    pthread_t fork_owner;
    gb_zc_region r[ZC_MAX];
    int freelist[ZC_MAX]; /* unused records */
    int nfree;
    int max_regions;  /* live and pending: each holds a descriptor */
    int live[ZC_MAX]; /* records of live regions */
    int nlive;
    int pend[ZC_MAX]; /* freed regions whose registration is not released */
    int npend;
    int cache[ZC_CACHE]; /* freed registered regions kept for reuse, oldest
                            first */
    int ncache;
    void (*wake)(void); /* zerocopy.c's: releases are due */
    /* zerocopy.c's fork handlers, around this file's (gb_zc_set_fork_hooks) */
    void (*fork_prepare)(void), (*fork_parent)(void), (*fork_child)(void);
    size_t (*usable)(void *);             /* glibc's malloc_usable_size */
    _Atomic uint64_t count[GB_ZC_NCOUNT]; /* gemmblas_zerocopy_counters */
} zc = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The table's lock. The thread that is forking holds it from the prepare
 * handler to the parent's or child's: fork's other handlers (run in
 * between, on that thread) may allocate or free a region, and pass. */
static void zc_lock(void)
{
    if (atomic_load_explicit(&zc.forking, memory_order_relaxed) &&
        pthread_equal(zc.fork_owner, pthread_self()))
        return;
    pthread_mutex_lock(&zc.lock);
}

static void zc_unlock(void)
{
    if (atomic_load_explicit(&zc.forking, memory_order_relaxed) &&
        pthread_equal(zc.fork_owner, pthread_self()))
        return;
    pthread_mutex_unlock(&zc.lock);
}

void gb_zc_count(int which, uint64_t n)
{
    atomic_fetch_add_explicit(&zc.count[which], n, memory_order_relaxed);
}

/* The calling program's view of the counters (exported: tests and
 * benchmarks). Fills out[0 .. min(n, GB_ZC_NCOUNT)) and returns how many
 * there are; out[GB_ZC_ON] is 1 when the mode is on. */
__attribute__((visibility("default"))) int
gemmblas_zerocopy_counters(uint64_t *out, int n)
{
    for (int i = 0; i < n && i < GB_ZC_NCOUNT; i++)
        out[i] = atomic_load_explicit(&zc.count[i], memory_order_relaxed);
    if (n > GB_ZC_ON)
        out[GB_ZC_ON] = atomic_load(&zc.on);
    return GB_ZC_NCOUNT;
}

bool gb_zc_shadows(void)
{
    return zc.shadowed;
}

bool gb_zc_on(size_t *min_bytes, const char **why_off)
{
    *min_bytes = zc.min_bytes;
    *why_off = zc.why_off;
    return atomic_load(&zc.on);
}

/* ---- the table (zc.lock held) ---- */

/* The live region whose start is p, as an index into zc.live, or -1. */
static int find_start(uintptr_t p)
{
    for (int i = 0; i < zc.nlive; i++)
        if (zc.r[zc.live[i]].start == p)
            return i;
    return -1;
}

/* Removes live entry i (an index into zc.live); returns its record. */
static int unlist(int i)
{
    int rec = zc.live[i];
    zc.live[i] = zc.live[--zc.nlive];
    return rec;
}

/* ---- regions ---- */

/* Maps a new region of at least size bytes: its record (listed live), or
 * NULL (nothing made) when anything fails. errno is kept. */
static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A cached region that fits len bytes without wasting more than half of
 * itself, moved back to the live list (lock held): its address, or NULL. */
static void *cache_take(size_t len)
{
    int best = -1;
    for (int i = 0; i < zc.ncache; i++) {
        gb_zc_region *r = &zc.r[zc.cache[i]];
        if (r->len >= len && r->len / 2 <= len &&
            (best < 0 || r->len < zc.r[zc.cache[best]].len))
            best = i;
    }
    if (best < 0)
        return NULL;
    int rec = zc.cache[best];
    memmove(&zc.cache[best], &zc.cache[best + 1],
            (size_t)(zc.ncache - best - 1) * sizeof(int));
    zc.ncache--;
    zc.live[zc.nlive++] = rec;
    gb_zc_count(GB_ZC_REUSES, 1);
    return (void *)zc.r[rec].start;
}

static void *region_new(size_t size, bool *fresh)
{
    if (atomic_load(&zc.probe)) { /* reaches_us() */
        atomic_store(&zc.probe_hit, true);
        return NULL;
    }
    int saved = errno;
    size_t len = (size + zc.page - 1) / zc.page * zc.page;
    if (len < size || len > SIZE_MAX - ZC_ALIGN)
        return NULL;
    if (fresh != NULL)
        *fresh = true;
    zc_lock();
    void *again = zc.ncache > 0 ? cache_take(len) : NULL;
    zc_unlock();
    if (again != NULL) {
        if (fresh != NULL)
            *fresh = false;
        errno = saved;
        return again;
    }
    int fd = memfd_create("gemmblas-zerocopy", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        goto fail;
    if (ftruncate(fd, (off_t)len) != 0)
        goto fail_fd;
    char *res = mmap(NULL, len + ZC_ALIGN, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (res == MAP_FAILED)
        goto fail_fd;
    uintptr_t at = ((uintptr_t)res + ZC_ALIGN - 1) & ~(ZC_ALIGN - 1);
    void *p = mmap((void *)at, len, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_FIXED, fd, 0);
    if (p == MAP_FAILED) {
        munmap(res, len + ZC_ALIGN);
        goto fail_fd;
    }
    if (at > (uintptr_t)res)
        munmap(res, at - (uintptr_t)res);
    if ((uintptr_t)res + len + ZC_ALIGN > at + len)
        munmap((void *)(at + len), (uintptr_t)res + len + ZC_ALIGN - at - len);
    zc_lock();
    if (zc.nfree == 0 || zc.nlive + zc.npend + zc.ncache >= zc.max_regions) {
        zc_unlock();
        munmap(p, len);
        goto fail_fd;
    }
    int rec = zc.freelist[--zc.nfree];
    gb_zc_region *r = &zc.r[rec];
    uint32_t seq = r->seq + 1;
    memset(r, 0, sizeof(*r));
    r->start = at;
    r->len = len;
    r->fd = fd;
    r->seq = seq;
    zc.live[zc.nlive++] = rec;
    zc_unlock();
    gb_zc_count(GB_ZC_REGIONS, 1);
    errno = saved;
    return p;

fail_fd:
    close(fd);
fail:
    errno = saved;
    return NULL;
}

/* Unmaps a region that has no registration (its record already off the
 * lists). */
static void region_unmap(uintptr_t start, size_t len, int fd)
{
    munmap((void *)start, len);
    if (fd >= 0)
        close(fd);
}

/* Frees live entry i (zc.lock held; released here). */
static void region_free_locked(int i)
{
    int rec = unlist(i);
    gb_zc_region *r = &zc.r[rec];
    if (r->buf != NULL) { /* registered: kept for reuse, or zerocopy.c
                             releases it first */
        if (r->fd >= 0 && !r->refused) {
            if (zc.ncache == ZC_CACHE) { /* the oldest goes */
                zc.pend[zc.npend++] = zc.cache[0];
                memmove(&zc.cache[0], &zc.cache[1],
                        (ZC_CACHE - 1) * sizeof(int));
                zc.ncache--;
            }
            r->freed_ns = now_ns();
            zc.cache[zc.ncache++] = rec;
        } else {
            zc.pend[zc.npend++] = rec;
        }
        void (*wake)(void) = zc.wake;
        zc_unlock();
        if (wake != NULL)
            wake();
        return;
    }
    uintptr_t start = r->start;
    size_t len = r->len;
    int fd = r->fd;
    zc.freelist[zc.nfree++] = rec;
    zc_unlock();
    region_unmap(start, len, fd);
}

/* Whether p is a region (its live entry index in *i, lock held on true). */
static bool region_lookup(void *p, int *i)
{
    if (p == NULL && atomic_load(&zc.probe)) /* reaches_us() */
        atomic_store(&zc.probe_hit, true);
    if (((uintptr_t)p & (ZC_ALIGN - 1)) != 0 || p == NULL ||
        !atomic_load_explicit(&zc.on, memory_order_relaxed))
        return false;
    zc_lock();
    if ((*i = find_start((uintptr_t)p)) >= 0)
        return true;
    zc_unlock();
    return false;
}

bool gb_zc_find(const void *p, size_t extent, gb_zc_region *out)
{
    if (!atomic_load_explicit(&zc.on, memory_order_relaxed) || p == NULL)
        return false;
    uintptr_t a = (uintptr_t)p;
    bool found = false;
    zc_lock();
    for (int i = 0; i < zc.nlive && !found; i++) {
        gb_zc_region *r = &zc.r[zc.live[i]];
        if (a >= r->start && a - r->start <= r->len &&
            extent <= r->len - (a - r->start)) {
            *out = *r;
            out->rec = zc.live[i];
            found = true;
        }
    }
    zc_unlock();
    return found;
}

/* Replaces r's mapping by a private copy at the same address (anonymous
 * memory, copied, moved over it with mremap) and closes its memfd: from
 * then on nobody else's writes to the memfd reach it. Returns false (r
 * unchanged) without memory for the copy. */
static bool region_privatize(gb_zc_region *r)
{
    void *copy = mmap(NULL, r->len, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (copy == MAP_FAILED)
        return false;
    memcpy(copy, (void *)r->start, r->len);
    if (mremap(copy, r->len, r->len, MREMAP_MAYMOVE | MREMAP_FIXED,
               (void *)r->start) == MAP_FAILED) {
        munmap(copy, r->len);
        return false;
    }
    close(r->fd);
    r->fd = -1;
    return true;
}

bool gb_zc_detach(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    bool ok = false;
    zc_lock();
    for (int i = 0; i < zc.nlive; i++) {
        gb_zc_region *r = &zc.r[zc.live[i]];
        if (a >= r->start && a - r->start < r->len) {
            ok = r->fd < 0 || region_privatize(r);
            if (ok)
                gb_zc_count(GB_ZC_DETACHES, 1);
            break;
        }
    }
    zc_unlock();
    return ok;
}

bool gb_zc_update(const gb_zc_region *r)
{
    bool ok = false;
    zc_lock();
    gb_zc_region *t = &zc.r[r->rec];
    for (int i = 0; i < zc.nlive && !ok; i++)
        ok = zc.live[i] == r->rec;
    if (ok && t->seq == r->seq && t->start == r->start) {
        t->buf = r->buf;
        t->gen = r->gen;
        t->sealed = r->sealed;
        t->refused = r->refused;
    } else {
        ok = false;
    }
    zc_unlock();
    return ok;
}

int gb_zc_take_pending(gb_zc_region *out, int max)
{
    int n = 0;
    zc_lock();
    while (n < max && zc.npend > 0) {
        int rec = zc.pend[--zc.npend];
        out[n] = zc.r[rec];
        out[n].rec = rec;
        n++;
    }
    zc_unlock();
    return n;
}

void gb_zc_pending_done(const gb_zc_region *r)
{
    region_unmap(r->start, r->len, r->fd);
    zc_lock();
    zc.freelist[zc.nfree++] = r->rec;
    zc_unlock();
    gb_zc_count(GB_ZC_RELEASES, 1);
}

uint64_t gb_zc_evict(void)
{
    uint64_t now = now_ns(), next = 0;
    zc_lock();
    while (zc.ncache > 0 && now - zc.r[zc.cache[0]].freed_ns >= ZC_CACHE_NS) {
        zc.pend[zc.npend++] = zc.cache[0];
        memmove(&zc.cache[0], &zc.cache[1],
                (size_t)(zc.ncache - 1) * sizeof(int));
        zc.ncache--;
    }
    if (zc.ncache > 0)
        next = zc.r[zc.cache[0]].freed_ns + ZC_CACHE_NS;
    zc_unlock();
    return next;
}

bool gb_zc_any_pending(void)
{
    if (!atomic_load_explicit(&zc.on, memory_order_relaxed))
        return false;
    zc_lock();
    bool any = zc.npend > 0;
    zc_unlock();
    return any;
}

void gb_zc_set_wake(void (*wake)(void))
{
    zc_lock();
    zc.wake = wake;
    zc_unlock();
}

void gb_zc_set_fork_hooks(void (*prepare)(void), void (*parent)(void),
                          void (*child)(void))
{
    zc_lock();
    zc.fork_prepare = prepare;
    zc.fork_parent = parent;
    zc.fork_child = child;
    zc_unlock();
}

/* The mode's settings, logged (GEMMBLAS_VERBOSE) at the first BLAS call
 * after the constructor read them: config.c runs it, installed below. */
static void zc_log(void)
{
    size_t min;
    const char *why;
    bool want, on = gb_zc_on(&min, &why);
    gb_zc_env(&want, &min);
    if (gb_zc_shadows())
        gb_log(1, "another malloc (jemalloc, tcmalloc, ...) comes after "
                  "libgemmblas in the search order: libgemmblas's malloc "
                  "gives the program glibc's; load that allocator first "
                  "(LD_PRELOAD=its library before libgemmblas)");
    if (on)
        gb_log(1,
               "GEMMBLAS_ZEROCOPY=1: allocations of %zu bytes "
               "(GEMMBLAS_ZEROCOPY_MIN_BYTES) and more are memfds that "
               "GEMMs use in place",
               min);
    else if (want)
        gb_log(1, "GEMMBLAS_ZEROCOPY=1 has no effect: %s",
               why != NULL ? why : "set after the library was loaded");
}

#ifndef GB_NO_INTERPOSE /* not in a program that links the objects */

/* ---- glibc's malloc_usable_size ---- */

/* glibc's own malloc_usable_size (libc.so.6's, not the next definition
 * in the search order, which may be another allocator's). */
static size_t (*find_libc_usable(void))(void *)
{
    void *h = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    return h != NULL ? (size_t(*)(void *))dlsym(h, "malloc_usable_size") : NULL;
}

static size_t libc_usable(void *p)
{
    size_t (*f)(void *) = zc.usable;
    if (f == NULL) /* before the constructor (dlsym's own allocations are
                      glibc's: nothing is on yet) */
        zc.usable = f = find_libc_usable();
    return f != NULL ? f(p) : 0;
}

/* ---- the interposed functions ----
 *
 * Each is defined under this file's prefix (zc_malloc, ...) and exported
 * under the C library's name as an alias: the names the program calls
 * are the aliases, and this file's own code keeps calling the program's
 * allocator by name. */

#define GB_EXPORT   __attribute__((visibility("default")))
#define unlikely(x) __builtin_expect(!!(x), 0)

static inline bool big(size_t n)
{
    return unlikely(atomic_load_explicit(&zc.on, memory_order_relaxed)) &&
           n >= zc.min_bytes;
}

static void *zc_malloc(size_t n)
{
    if (big(n)) {
        void *p = region_new(n, NULL);
        if (p != NULL)
            return p;
    }
    return __libc_malloc(n);
}
GB_EXPORT void *malloc(size_t n) __attribute__((alias("zc_malloc")));

static void zc_free(void *p)
{
    int i;
    if (((uintptr_t)p & (ZC_ALIGN - 1)) != 0 || !region_lookup(p, &i)) {
        __libc_free(p);
        return;
    }
    region_free_locked(i);
}
GB_EXPORT void free(void *p) __attribute__((alias("zc_free")));

static void zc_free_sized(void *p, size_t size)
{
    (void)size;
    free(p);
}
GB_EXPORT void free_sized(void *p, size_t size)
    __attribute__((alias("zc_free_sized")));

static void zc_free_aligned_sized(void *p, size_t align, size_t size)
{
    (void)align;
    (void)size;
    free(p);
}
GB_EXPORT void free_aligned_sized(void *p, size_t align, size_t size)
    __attribute__((alias("zc_free_aligned_sized")));

static void *zc_calloc(size_t nmemb, size_t size)
{
    size_t n;
    if (__builtin_mul_overflow(nmemb, size, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    if (big(n)) {
        bool fresh;
        void *p = region_new(n, &fresh);
        if (p != NULL && !fresh) /* reused; a new memfd reads as zero */
            memset(p, 0, n);
        if (p != NULL)
            return p;
    }
    return __libc_calloc(nmemb, size);
}
GB_EXPORT void *calloc(size_t nmemb, size_t size)
    __attribute__((alias("zc_calloc")));

static size_t zc_malloc_usable_size(void *p)
{
    int i;
    if (((uintptr_t)p & (ZC_ALIGN - 1)) != 0 || !region_lookup(p, &i))
        return p != NULL ? libc_usable(p) : 0;
    size_t len = zc.r[zc.live[i]].len;
    zc_unlock();
    return len;
}
GB_EXPORT size_t malloc_usable_size(void *p)
    __attribute__((alias("zc_malloc_usable_size")));

/* Grows live region i in place or to a new aligned address by resizing
 * its memfd (unregistered only; lock held, released here). Returns the
 * new address or NULL (the region unchanged). */
static void *region_grow(int i, size_t n)
{
    gb_zc_region *r = &zc.r[zc.live[i]];
    size_t len = (n + zc.page - 1) / zc.page * zc.page;
    if (r->buf != NULL || r->sealed || r->fd < 0 || len < n ||
        len > SIZE_MAX - ZC_ALIGN) {
        zc_unlock();
        return NULL;
    }
    if (ftruncate(r->fd, (off_t)len) != 0) {
        zc_unlock();
        return NULL;
    }
    void *q = mremap((void *)r->start, r->len, len, 0); /* in place */
    if (q == MAP_FAILED) {
        char *res = mmap(NULL, len + ZC_ALIGN, PROT_NONE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (res == MAP_FAILED) {
            zc_unlock();
            return NULL;
        }
        uintptr_t at = ((uintptr_t)res + ZC_ALIGN - 1) & ~(ZC_ALIGN - 1);
        q = mremap((void *)r->start, r->len, len, MREMAP_MAYMOVE | MREMAP_FIXED,
                   (void *)at);
        if (q == MAP_FAILED) {
            munmap(res, len + ZC_ALIGN);
            zc_unlock();
            return NULL;
        }
        /* the reservation's slack around the moved mapping */
        if (at > (uintptr_t)res)
            munmap(res, at - (uintptr_t)res);
        if ((uintptr_t)res + len + ZC_ALIGN > at + len)
            munmap((void *)(at + len),
                   (uintptr_t)res + len + ZC_ALIGN - at - len);
    }
    r->start = (uintptr_t)q;
    r->len = len;
    zc_unlock();
    return q;
}

static void *zc_realloc(void *p, size_t n)
{
    int i;
    if (p == NULL)
        return malloc(n);
    if (((uintptr_t)p & (ZC_ALIGN - 1)) != 0 || !region_lookup(p, &i)) {
        if (!big(n))
            return __libc_realloc(p, n);
        /* a glibc chunk growing past the threshold becomes a region */
        size_t old = libc_usable(p);
        void *q = region_new(n, NULL);
        if (q == NULL)
            return __libc_realloc(p, n);
        memcpy(q, p, old < n ? old : n);
        __libc_free(p);
        return q;
    }
    if (n == 0) { /* as glibc: frees, returns NULL */
        region_free_locked(i);
        return NULL;
    }
    size_t len = zc.r[zc.live[i]].len;
    if (n <= len && big(n)) { /* still fits, still large: stays */
        zc_unlock();
        return p;
    }
    if (n > len) {
        void *q = region_grow(i, n); /* releases the lock */
        if (q != NULL)
            return q;
    } else {
        zc_unlock();
    }
    /* moves: to a new region, or to glibc below the threshold */
    void *q = big(n) ? region_new(n, NULL) : NULL;
    if (q == NULL && (q = __libc_malloc(n)) == NULL)
        return NULL; /* p stays valid, as realloc promises */
    memcpy(q, p, len < n ? len : n);
    free(p);
    return q;
}
GB_EXPORT void *realloc(void *p, size_t n) __attribute__((alias("zc_realloc")));

static void *zc_reallocarray(void *p, size_t nmemb, size_t size)
{
    size_t n;
    if (__builtin_mul_overflow(nmemb, size, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, n);
}
GB_EXPORT void *reallocarray(void *p, size_t nmemb, size_t size)
    __attribute__((alias("zc_reallocarray")));

/* An allocation aligned to align: a region when large and align <= 2 MiB,
 * else glibc's memalign. */
static void *aligned(size_t align, size_t n)
{
    if (big(n) && align <= ZC_ALIGN) {
        void *p = region_new(n, NULL);
        if (p != NULL)
            return p;
    }
    return __libc_memalign(align, n);
}

static int zc_posix_memalign(void **out, size_t align, size_t n)
{
    if (align % sizeof(void *) != 0 || (align & (align - 1)) != 0 || align == 0)
        return EINVAL;
    int saved = errno;
    void *p = aligned(align, n);
    if (p == NULL) {
        int e = errno;
        errno = saved;
        return e != 0 ? e : ENOMEM;
    }
    errno = saved;
    *out = p;
    return 0;
}
GB_EXPORT int posix_memalign(void **out, size_t align, size_t n)
    __attribute__((alias("zc_posix_memalign")));

static void *zc_aligned_alloc(size_t align, size_t n)
{
    return aligned(align, n);
}
GB_EXPORT void *aligned_alloc(size_t align, size_t n)
    __attribute__((alias("zc_aligned_alloc")));

static void *zc_memalign(size_t align, size_t n)
{
    return aligned(align, n);
}
GB_EXPORT void *memalign(size_t align, size_t n)
    __attribute__((alias("zc_memalign")));

static void *zc_valloc(size_t n)
{
    if (big(n)) {
        void *p = region_new(n, NULL);
        if (p != NULL)
            return p;
    }
    return __libc_valloc(n);
}
GB_EXPORT void *valloc(size_t n) __attribute__((alias("zc_valloc")));

static void *zc_pvalloc(size_t n)
{
    if (big(n)) {
        void *p = region_new(n, NULL); /* whole pages: its usable size */
        if (p != NULL)
            return p;
    }
    return __libc_pvalloc(n);
}
GB_EXPORT void *pvalloc(size_t n) __attribute__((alias("zc_pvalloc")));

#endif /* GB_NO_INTERPOSE */

/* ---- fork ---- */

/* Before fork (the forking thread; registered first, so it runs after
 * the other prepare handlers): the table locked, and a private snapshot of
 * every live region (anonymous memory). The child takes the snapshots as
 * its regions; copying in the child instead would race with the parent,
 * which goes on writing its shared regions as soon as fork returns. */
static void atfork_prepare(void)
{
    if (zc.fork_prepare != NULL)
        zc.fork_prepare();
    zc_lock();
    zc.fork_owner = pthread_self();
    atomic_store(&zc.forking, true);
    for (int i = 0; i < zc.nlive; i++) {
        gb_zc_region *r = &zc.r[zc.live[i]];
        r->snap = NULL;
        if (r->fd < 0)
            continue;
        void *s = mmap(NULL, r->len, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (s != MAP_FAILED) {
            memcpy(s, (void *)r->start, r->len);
            r->snap = s;
        }
    }
}

/* After fork, in the parent: the snapshots go. */
static void atfork_parent(void)
{
    for (int i = 0; i < zc.nlive; i++) {
        gb_zc_region *r = &zc.r[zc.live[i]];
        if (r->snap != NULL)
            munmap(r->snap, r->len);
        r->snap = NULL;
    }
    atomic_store(&zc.forking, false);
    zc_unlock();
    if (zc.fork_parent != NULL)
        zc.fork_parent();
}

/* The child: each region replaced by its snapshot at the same address
 * (mremap), its memfd closed and its registration forgotten; freed
 * regions waiting for their release or kept for reuse unmapped.
 * Single-threaded. */
static void atfork_child(void)
{
    atomic_store(&zc.forking, false);
    pthread_mutex_init(&zc.lock, NULL);
    for (int i = 0; i < zc.nlive; i++) {
        gb_zc_region *r = &zc.r[zc.live[i]];
        r->buf = NULL;
        r->gen = 0;
        if (r->fd < 0)
            continue;
        if (r->snap == NULL ||
            mremap(r->snap, r->len, r->len, MREMAP_MAYMOVE | MREMAP_FIXED,
                   (void *)r->start) == MAP_FAILED)
            /* no memory for the snapshot: copy-on-write of the memfd */
            mmap((void *)r->start, r->len, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_FIXED, r->fd, 0);
        r->snap = NULL;
        close(r->fd);
        r->fd = -1;
    }
    for (int i = 0; i < zc.npend; i++) {
        gb_zc_region *r = &zc.r[zc.pend[i]];
        region_unmap(r->start, r->len, r->fd);
        zc.freelist[zc.nfree++] = zc.pend[i];
    }
    zc.npend = 0;
    for (int i = 0; i < zc.ncache; i++) {
        gb_zc_region *r = &zc.r[zc.cache[i]];
        region_unmap(r->start, r->len, r->fd);
        zc.freelist[zc.nfree++] = zc.cache[i];
    }
    zc.ncache = 0;
    if (zc.fork_child != NULL)
        zc.fork_child();
}

/* At exit, with GEMMBLAS_VERBOSE: what the mode did. */
__attribute__((destructor)) static void zc_unload(void)
{
    if (!atomic_load(&zc.on))
        return;
    uint64_t c[GB_ZC_NCOUNT];
    gemmblas_zerocopy_counters(c, GB_ZC_NCOUNT);
    gb_log(1,
           "zero-copy: %llu regions (%llu reused), %llu registered (%llu "
           "refused, %llu released, %llu detached); %llu calls, %llu with "
           "every operand in place; operands in place %llu, staged %llu "
           "(%llu bytes); outputs backed up %llu (%llu bytes), restored "
           "%llu",
           (unsigned long long)c[GB_ZC_REGIONS],
           (unsigned long long)c[GB_ZC_REUSES],
           (unsigned long long)c[GB_ZC_IMPORTS],
           (unsigned long long)c[GB_ZC_IMPORT_FAILS],
           (unsigned long long)c[GB_ZC_RELEASES],
           (unsigned long long)c[GB_ZC_DETACHES],
           (unsigned long long)c[GB_ZC_CALLS],
           (unsigned long long)c[GB_ZC_CALLS_IN_PLACE],
           (unsigned long long)c[GB_ZC_OPERANDS_IN_PLACE],
           (unsigned long long)c[GB_ZC_OPERANDS_STAGED],
           (unsigned long long)c[GB_ZC_BYTES_STAGED],
           (unsigned long long)c[GB_ZC_BACKUPS],
           (unsigned long long)c[GB_ZC_BYTES_BACKED_UP],
           (unsigned long long)c[GB_ZC_RESTORES]);
}

/* Whether the program's malloc, calloc, realloc and free (the global
 * scope's) are these: each is called through dlsym's pointer with an odd
 * size that only this probe makes a region (min_bytes set to it, and
 * region_new marks the hit and declines, so glibc serves it), and free
 * with NULL (2 MiB-aligned: region_lookup marks it); whichever allocator
 * answers, what it gave is freed through its own free. Runs in the
 * constructor. */
static bool reaches_us(void)
{
    void *(*m)(size_t) = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "malloc");
    void *(*c)(size_t, size_t) =
        (void *(*)(size_t, size_t))dlsym(RTLD_DEFAULT, "calloc");
    void *(*r)(void *, size_t) =
        (void *(*)(void *, size_t))dlsym(RTLD_DEFAULT, "realloc");
    void (*f)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "free");
    if (m == NULL || c == NULL || r == NULL || f == NULL)
        return false;
    const size_t n = ((size_t)1 << 20) + 12345;
    size_t min = zc.min_bytes;
    zc.min_bytes = n;
    atomic_store(&zc.probe, true);
    atomic_store(&zc.probe_hit, false);
    atomic_store(&zc.on, true);
    int hits = 0;
    f(m(n));
    hits += atomic_exchange(&zc.probe_hit, false);
    f(c(1, n));
    hits += atomic_exchange(&zc.probe_hit, false);
    f(r(NULL, n));
    hits += atomic_exchange(&zc.probe_hit, false);
    f(NULL);
    hits += atomic_exchange(&zc.probe_hit, false);
    atomic_store(&zc.on, false);
    atomic_store(&zc.probe, false);
    zc.min_bytes = min;
    return hits == 4;
}

/* The constructor's work: limits, the shadowing check, the mode's
 * settings and, with the mode on, the fork handlers. */
static void zc_setup(void)
{
    long page = sysconf(_SC_PAGESIZE);
    zc.page = page > 0 ? (size_t)page : 4096;
    for (int i = 0; i < ZC_MAX; i++)
        zc.freelist[i] = ZC_MAX - 1 - i;
    zc.nfree = ZC_MAX;
    /* each region holds a descriptor of the program's: a quarter of its
     * limit at most */
    struct rlimit rl;
    zc.max_regions = ZC_MAX;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur / 4 < (rlim_t)ZC_MAX)
        zc.max_regions = rl.rlim_cur / 4 > 16 ? (int)(rl.rlim_cur / 4) : 16;
#ifdef GB_NO_INTERPOSE
    zc.why_off = "this libgemmblas carries no allocator (libblas.so.3, the "
                 "system's BLAS, never replaces a program's malloc): "
                 "preload libgemmblas.so.0 (LD_PRELOAD) for the mode";
#else
    zc.usable = find_libc_usable();
    /* another allocator after this library in the search order is
     * shadowed: glibc's serves the program (said with GEMMBLAS_VERBOSE) */
    void *next = dlsym(RTLD_NEXT, "malloc");
    if (next != NULL && next != (void *)__libc_malloc)
        zc.shadowed = true;
    bool want;
    gb_zc_env(&want, &zc.min_bytes);
    if (!want)
        return;
    if (!reaches_us()) {
        zc.why_off = "libgemmblas's malloc is not the program's (loaded "
                     "with RTLD_LOCAL, after libc in the search order, or "
                     "under another allocator such as AddressSanitizer's): "
                     "preload it (LD_PRELOAD)";
        return;
    }
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    atomic_store(&zc.on, true);
#endif
}

/* Before the library's other constructors (priority), so that its fork
 * handlers are registered first and its prepare handler runs last; the
 * settings' log is installed once they are final. */
__attribute__((constructor(101))) static void zc_load(void)
{
    zc_setup();
    gb_cfg_on_first_call(zc_log);
}
