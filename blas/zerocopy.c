/*
 * zerocopy.c: the zero-copy mode's side of an offloaded call. For each
 * operand of a GEMM or level-3 call, whether it lies in a region
 * (zcalloc.c: the program's large allocations served from memfds); such a
 * region is registered with gemmd (gemm_buffer_import) the first time a
 * call on the current connection needs it, once, and the request then
 * names the operand in place with its leading dimension: no staging copy
 * in or out. The other operands are staged in the thread's buffer as
 * before (a call may mix both). The written operand is staged when it
 * shares a region with an input whose span it overlaps (gemmd refuses
 * that, even when the elements interleave without touching). When its
 * old value is read (beta != 0, trmm, trsm) it is in place too, backed
 * up: the old value is copied into the thread's buffer first (one copy,
 * where staging takes two), because the CPU computes a failed call from
 * the caller's memory, which gemmd may have written in part by then;
 * offload.c puts the backup back before the CPU runs. A request gemmd
 * may still run after the call gave up on it (GEMM_ERR_ABANDONED, or a
 * connection lost under a backed-up output) would write the output in
 * place later: its region gets a private copy first (gb_zc_detach), so
 * those writes reach only the memfd.
 *
 * gemmd seals what it registers, so a region is registered at most once:
 * after a reconnect (a daemon restart) its GEMMs are staged. A refused
 * registration (GEMMBLAS_VERBOSE says why) is not tried again for that
 * region.
 *
 * Releases: free() (zcalloc.c) never calls the client. A freed region
 * that is registered is kept for reuse (up to 4 of them, 1 s each: a
 * program that allocates a result per product gets the last one's
 * registered memory again), then waits, mapped, in zcalloc.c's table
 * until its registration is released here: by a background thread
 * (started with the first registration, woken by free() and when a kept
 * region's time is up, all signals blocked), and at every offloaded
 * call; then it is unmapped. One registration at a time
 * (the import lock), so two threads never register one region twice.
 */
#include "gemmblas.h"

#include <gemm/gemm.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

static struct {
    pthread_mutex_t import; /* one registration at a time */
    pthread_mutex_t mu;     /* guards what follows */
    pthread_cond_t cv;      /* releases are due */
    bool due;
    bool started; /* the release thread runs (this process) */
    /* the connection's read lock (offload.c's, gb_zc_use_conn_lock) */
    void (*rdlock)(void);
    void (*unlock)(void);
} zr = {
    .import = PTHREAD_MUTEX_INITIALIZER,
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .cv = PTHREAD_COND_INITIALIZER, /* CLOCK_MONOTONIC from cv_init */
};

/* free() of a registered region: wake the release thread. Called from
 * inside free(): locks and signals only. */
static void wake(void)
{
    pthread_mutex_lock(&zr.mu);
    zr.due = true;
    pthread_cond_signal(&zr.cv);
    pthread_mutex_unlock(&zr.mu);
}

void gb_zc_drain(void)
{
    gb_zc_region r[16];
    int n;
    while ((n = gb_zc_take_pending(r, 16)) > 0)
        for (int i = 0; i < n; i++) {
            /* on the current connection: released there; on one that was
             * replaced (closed): only the handle is freed */
            gemm_buffer_free(r[i].buf);
            gb_zc_pending_done(&r[i]);
        }
}

/* The release thread: releases (under the connection's read lock) the
 * registrations of freed regions, and of regions kept for reuse past
 * their time; waits for free() or that time. Never exits. */
static void *release_main(void *arg)
{
    (void)arg;
    for (;;) {
        uint64_t next = gb_zc_evict();
        pthread_mutex_lock(&zr.mu);
        void (*rdlock)(void) = zr.rdlock, (*unlock)(void) = zr.unlock;
        pthread_mutex_unlock(&zr.mu);
        if (rdlock != NULL) {
            rdlock();
            gb_zc_drain();
            unlock();
        }
        pthread_mutex_lock(&zr.mu);
        while (!zr.due) {
            if (next == 0) {
                pthread_cond_wait(&zr.cv, &zr.mu);
                continue;
            }
            struct timespec ts = {(time_t)(next / 1000000000u),
                                  (long)(next % 1000000000u)};
            if (pthread_cond_timedwait(&zr.cv, &zr.mu, &ts) == ETIMEDOUT)
                break;
        }
        zr.due = false;
        pthread_mutex_unlock(&zr.mu);
    }
    return NULL;
}

/* The condition variable on CLOCK_MONOTONIC (gb_zc_evict's clock). */
static void cv_init(void)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&zr.cv, &ca);
    pthread_condattr_destroy(&ca);
}

/* Starts the release thread once per process (after a registration; not
 * inside malloc). Without it, releases wait for the next offloaded call. */
static void start_releaser(void)
{
    pthread_mutex_lock(&zr.mu);
    if (!zr.started) {
        cv_init(); /* nobody waits on it yet */
        sigset_t all, old;
        pthread_t th;
        pthread_attr_t at;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&at, 256 << 10);
        if (pthread_create(&th, &at, release_main, NULL) == 0) {
            zr.started = true;
            pthread_setname_np(th, "gemmblas-zc");
        }
        pthread_attr_destroy(&at);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        gb_zc_set_wake(wake);
    }
    pthread_mutex_unlock(&zr.mu);
}

/* Registers r on c (connection gen), the import lock held; updates its
 * record. Returns whether r is registered there now. */
static bool import(gemm_client *c, uint64_t gen, gb_zc_region *r)
{
    gemm_buffer *b = NULL;
    int rv = gemm_buffer_import(c, r->fd, r->len, (void *)r->start, &b);
    if (rv != GEMM_OK) {
        gb_zc_count(GB_ZC_IMPORT_FAILS, 1);
        gb_log(1, "zero-copy: registering %zu bytes at %p: %s: %s; staged",
               r->len, (void *)r->start, gemm_strerror(rv),
               gemm_last_error_message());
        /* a lost connection is the call's to notice; anything else is
         * this region's for good */
        if (rv != GEMM_ERR_CLOSED && rv != GEMM_ERR_TIMEOUT &&
            rv != GEMM_ERR_SHUTDOWN) {
            r->refused = true;
            gb_zc_update(r);
        }
        return false;
    }
    r->buf = b;
    r->gen = gen;
    r->sealed = true;
    if (!gb_zc_update(r)) { /* freed meanwhile (the program's race) */
        gemm_buffer_free(b);
        return false;
    }
    gb_zc_count(GB_ZC_IMPORTS, 1);
    gb_log(2, "zero-copy: registered %zu bytes at %p", r->len,
           (void *)r->start);
    start_releaser();
    return true;
}

/* Whether o lies in a region registered on c (registering it now if
 * need be); fills o->m. */
static bool in_place(gemm_client *c, uint64_t gen, gb_opnd *o, size_t es)
{
    size_t extent = ((o->rows - 1) * o->ld + o->cols) * es;
    gb_zc_region r;
    if (!gb_zc_find(o->p, extent, &r))
        return false;
    uint64_t off = (uintptr_t)o->p - r.start;
    if (off % es != 0)
        return false;
    if (r.buf == NULL || r.gen != gen) {
        if (r.sealed || r.refused || r.fd < 0)
            return false;
        pthread_mutex_lock(&zr.import);
        bool ok = gb_zc_find(o->p, extent, &r); /* another thread's? */
        if (ok && (r.buf == NULL || r.gen != gen))
            ok = !r.sealed && !r.refused && r.fd >= 0 && import(c, gen, &r);
        pthread_mutex_unlock(&zr.import);
        if (!ok)
            return false;
    }
    o->m = (gemm_matrix){r.buf, off, o->ld, 0};
    return true;
}

size_t gb_zc_plan(gemm_client *c, uint64_t gen, gb_opnd *ops, size_t es,
                  bool out_read)
{
    size_t min;
    const char *why;
    bool on = gb_zc_on(&min, &why);
    for (int i = 0; i < GB_NOPND; i++) {
        gb_opnd *o = &ops[i];
        o->in_place = false;
        o->backup = false;
        if (o->p == NULL)
            continue;
        o->in_place = on && in_place(c, gen, o, es);
    }
    /* gemmd refuses a written operand whose span overlaps an input's in
     * the same buffer: stage it then */
    gb_opnd *d = &ops[GB_OPND_OUT];
    for (int i = 0; i < GB_OPND_OUT && d->in_place; i++) {
        gb_opnd *o = &ops[i];
        if (o->p == NULL || !o->in_place || o->m.buf != d->m.buf)
            continue;
        uint64_t oe = o->m.offset + ((o->rows - 1) * o->ld + o->cols) * es;
        uint64_t de = d->m.offset + ((d->rows - 1) * d->ld + d->cols) * es;
        if (o->m.offset < de && d->m.offset < oe)
            d->in_place = false;
    }
    d->backup = d->in_place && out_read;
    size_t need = 0;
    for (int i = 0; i < GB_NOPND; i++) {
        gb_opnd *o = &ops[i];
        if (o->p == NULL || (o->in_place && !o->backup))
            continue;
        o->off = need;
        need = gb_align_up(need + o->rows * o->cols * es, 4096);
    }
    return need;
}

void gb_zc_done(const gb_opnd *ops, size_t es)
{
    size_t min;
    const char *why;
    if (!gb_zc_on(&min, &why))
        return;
    uint64_t used = 0, placed = 0, staged = 0;
    for (int i = 0; i < GB_NOPND; i++) {
        if (ops[i].p == NULL)
            continue;
        used++;
        if (ops[i].in_place)
            placed++;
        else
            staged += ops[i].rows * ops[i].cols * es;
        if (ops[i].backup) {
            gb_zc_count(GB_ZC_BACKUPS, 1);
            gb_zc_count(GB_ZC_BYTES_BACKED_UP, ops[i].rows * ops[i].cols * es);
        }
    }
    gb_zc_count(GB_ZC_CALLS, 1);
    gb_zc_count(GB_ZC_CALLS_IN_PLACE, placed == used);
    gb_zc_count(GB_ZC_OPERANDS_IN_PLACE, placed);
    gb_zc_count(GB_ZC_OPERANDS_STAGED, used - placed);
    gb_zc_count(GB_ZC_BYTES_STAGED, staged);
}

static void atfork_prepare(void)
{
    pthread_mutex_lock(&zr.import);
}

static void atfork_parent(void)
{
    pthread_mutex_unlock(&zr.import);
}

/* The child: no release thread (it was the parent's), fresh locks. */
static void atfork_child(void)
{
    pthread_mutex_init(&zr.import, NULL);
    pthread_mutex_init(&zr.mu, NULL);
    cv_init();
    zr.due = false;
    zr.started = false;
}

void gb_zc_use_conn_lock(void (*rdlock)(void), void (*unlock)(void))
{
    pthread_mutex_lock(&zr.mu);
    zr.rdlock = rdlock;
    zr.unlock = unlock;
    pthread_mutex_unlock(&zr.mu);
}

/* zcalloc.c's fork handlers run these around its own (its table's lock
 * and snapshots): installed when the library loads, before any fork can
 * see a region. */
__attribute__((constructor)) static void zr_load(void)
{
    gb_zc_set_fork_hooks(atfork_prepare, atfork_parent, atfork_child);
}
