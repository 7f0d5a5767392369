/*
 * offload.c: a request through gemmd, on the public client API only: the
 * connection, the thread's staging buffer and the rules below, shared by
 * gemm (offload_gemm.c, panels.c) and the other level-3 routines
 * (level3_offload.c).
 *
 * Policy: a call goes to gemmd when its flops (2mnk, 8mnk complex) reach
 * GEMMBLAS_MIN_FLOPS; whatever goes wrong on the way (no daemon, a
 * refusal, a timeout, a lost connection) the caller's C is untouched and
 * the CPU BLAS computes instead: never an abort, never a wait past the
 * configured timeouts.
 *
 * Connection: one gemm_client per process, opened on the first offloaded
 * call and shared by all threads (the client is thread-safe). A
 * read-write lock lets calls use it concurrently and a reconnect replace
 * it once none does. A failed connect is not retried for GEMMBLAS_RETRY_MS
 * (calls in between go to the CPU at once). When the daemon goes away
 * (restart, shutdown) the call that notices reconnects and, on success,
 * tries once more; every connection has a generation number.
 *
 * Zero-copy (GEMMBLAS_ZEROCOPY=1, zerocopy.c): an operand in one of the
 * program's memfd regions is named in place and not staged; a call whose
 * operands all are needs no buffer at all.
 *
 * Staging: each thread has one shm buffer registered on the connection,
 * grown (by a quarter more than needed) when a call needs more, freed at
 * thread exit. A call packs A,
 * B and (beta != 0) C tightly into it: the row-major problem (gemmblas.h)
 * is what gemmd computes, so a column-major call needs no transposing
 * copy, only the swap of A and B. A large call goes in row panels
 * (panels.c) so that its copies overlap the daemon's work. A request
 * that times out is canceled
 * by the client library: TIMEOUT means it never started (the buffer is
 * fine); ABANDONED means the daemon may still write into the buffer: it
 * is dropped, never reused.
 *
 * fork: nng (1.5) cannot be used in a child once the parent has used it
 * ("nng is not fork-reentrant safe": it aborts). Before every fork (an
 * atfork handler registered when the library loads) we note whether nng
 * is in use in the process: our own connection, or nng's threads (named
 * "nng:..."), which anyone else using nng (libgemmclient directly, the
 * Python package) starts. A child of such a process computes on the CPU;
 * a child of a process that never used nng connects like any process.
 * Either way the parent's buffers are unmapped in the child without a
 * word to the daemon.
 */
#include "gemmblas.h"

#include <gemm/gemm.h>

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* A thread's staging buffer. */
typedef struct gb_thread {
    gemm_buffer *buf; /* NULL: none yet */
    uint64_t gen;     /* the connection it is registered on */
    pid_t pid;        /* the process that made it */
} gb_thread;

static struct {
    pthread_rwlock_t lock;     /* read: a call uses client; write: replace it */
    gemm_client *client;       /* NULL: not connected */
    uint64_t gen;              /* bumps with every new client */
    atomic_bool broken;        /* a call saw the connection fail */
    _Atomic uint64_t retry_at; /* ns: no connect attempt before this */
    atomic_bool nng_used;      /* this process has initialised nng */
    atomic_bool disabled;      /* forked after nng use: CPU only */
    atomic_bool fork_nng;      /* nng was in use when fork() was called */
    atomic_bool inited;        /* init() has run */
} conn;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static pthread_key_t thread_key;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Drops t's buffer. Under the read lock (or in a child of fork, where
 * the parent's buffer is only unmapped: its client belongs to nng state
 * the child cannot use). */
static void drop_buffer(gb_thread *t)
{
    if (t->buf == NULL)
        return;
    if (t->pid != getpid())
        munmap(gemm_buffer_data(t->buf), gemm_buffer_size(t->buf));
    else
        gemm_buffer_free(t->buf);
    t->buf = NULL;
}

/* Thread exit: the thread's buffer goes back. */
static void thread_exit(void *arg)
{
    gb_thread *t = arg;
    if (t->buf != NULL && t->pid == getpid()) {
        pthread_rwlock_rdlock(&conn.lock);
        drop_buffer(t);
        pthread_rwlock_unlock(&conn.lock);
    }
    free(t);
}

static void lock_init(void)
{
    pthread_rwlockattr_t at;
    pthread_rwlockattr_init(&at);
    /* a reconnect must not starve behind a stream of calls */
    pthread_rwlockattr_setkind_np(&at,
                                  PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&conn.lock, &at);
    pthread_rwlockattr_destroy(&at);
}

/* Whether a thread of this process is nng's (they are named "nng:...");
 * true when /proc cannot tell (the safe answer). */
static bool nng_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    if (d == NULL)
        return true;
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) {
        char path[64], comm[8] = "";
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/proc/self/task/%.20s/comm", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        found = read(fd, comm, 4) == 4 && memcmp(comm, "nng:", 4) == 0;
        close(fd);
    }
    closedir(d);
    return found;
}

/* Before fork (the forking thread): note whether nng is in use. */
static void atfork_prepare(void)
{
    atomic_store(&conn.fork_nng, atomic_load(&conn.nng_used) || nng_threads());
}

/* In the child after fork: fresh locks and no connection; the parent's
 * client is forgotten, not closed (closing needs nng); no nng at all if
 * the parent had it running. */
static void atfork_child(void)
{
    if (atomic_load(&conn.inited))
        lock_init();
    else
        init_once = (pthread_once_t)PTHREAD_ONCE_INIT; /* not half-run */
    conn.client = NULL;
    conn.gen++;
    atomic_store(&conn.broken, false);
    atomic_store(&conn.retry_at, 0);
    if (atomic_load(&conn.fork_nng)) {
        atomic_store(&conn.disabled, true);
        atomic_store(&conn.nng_used, true);
    }
    gb_copy_atfork_child();
}

/* When the library is loaded: the fork handlers, so that even a process
 * that forks before its first GEMM is covered. */
__attribute__((constructor)) static void gb_load(void)
{
    pthread_atfork(atfork_prepare, NULL, atfork_child);
}

static void conn_rdlock(void);
static void conn_unlock(void);

static void init(void)
{
    lock_init();
    pthread_key_create(&thread_key, thread_exit);
    gb_zc_use_conn_lock(conn_rdlock, conn_unlock);
    atomic_store(&conn.inited, true);
}

/* The calling thread's state (made on first use), or NULL without
 * memory. */
static gb_thread *thread_state(void)
{
    gb_thread *t = pthread_getspecific(thread_key);
    if (t == NULL) {
        if ((t = calloc(1, sizeof(*t))) == NULL)
            return NULL;
        t->pid = getpid();
        if (pthread_setspecific(thread_key, t) != 0) {
            free(t);
            return NULL;
        }
    }
    if (t->pid != getpid()) { /* this thread forked: the buffer is the
                                 parent's */
        drop_buffer(t);
        t->pid = getpid();
    }
    return t;
}

/* Replaces a missing or broken connection (write lock). Returns true
 * when a working one is there afterwards. */
static bool reconnect(void)
{
    const gb_config *cfg = gb_cfg();
    if (atomic_load(&conn.disabled) || now_ns() < atomic_load(&conn.retry_at))
        return false;
    pthread_rwlock_wrlock(&conn.lock);
    bool ok = conn.client != NULL && !atomic_load(&conn.broken);
    if (ok || now_ns() < atomic_load(&conn.retry_at)) {
        pthread_rwlock_unlock(&conn.lock);
        return ok;
    }
    if (conn.client != NULL) { /* every call on it is over (write lock) */
        gemm_client_close(conn.client);
        conn.client = NULL;
    }
    atomic_store(&conn.broken, false);
    atomic_store(&conn.nng_used, true);
    gemm_client *c = NULL;
    int rv = gemm_client_open_timeout(&c, NULL, cfg->connect_ms);
    if (rv == GEMM_OK) {
        gemm_client_set_timeout(c, cfg->connect_ms);
        rv = gemm_ping(c, NULL);
        gemm_client_set_timeout(c, cfg->timeout_ms);
    }
    if (rv != GEMM_OK) {
        gb_log(1, "no gemmd (%s): CPU BLAS; next try in %d ms",
               gemm_last_error_message()[0] ? gemm_last_error_message()
                                            : gemm_strerror(rv),
               cfg->retry_ms);
        gemm_client_close(c);
        atomic_store(&conn.retry_at,
                     now_ns() + (uint64_t)cfg->retry_ms * 1000000u);
        pthread_rwlock_unlock(&conn.lock);
        return false;
    }
    conn.client = c;
    conn.gen++;
    gb_log(2, "connected to gemmd (connection %llu)",
           (unsigned long long)conn.gen);
    pthread_rwlock_unlock(&conn.lock);
    return true;
}

/* The connection with the read lock held (release with
 * pthread_rwlock_unlock), or NULL (no lock held). */
static gemm_client *acquire(uint64_t *gen)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        pthread_rwlock_rdlock(&conn.lock);
        if (conn.client != NULL && !atomic_load(&conn.broken)) {
            *gen = conn.gen;
            return conn.client;
        }
        pthread_rwlock_unlock(&conn.lock);
        if (attempt == 1 || !reconnect())
            break;
    }
    return NULL;
}

gemm_dtype gb_wire_type(gb_type t)
{
    static const gemm_dtype ty[] = {GEMM_FP32, GEMM_FP64, GEMM_COMPLEX64,
                                    GEMM_COMPLEX128};
    return ty[t];
}

void gb_scalar(gb_type t, const void *s, double out[2])
{
    out[0] = out[1] = 0;
    for (int i = 0; i < (t >= GB_C ? 2 : 1); i++)
        out[i] = t == GB_S || t == GB_C ? ((const float *)s)[i]
                                        : ((const double *)s)[i];
}

/* Why an attempt ended: what becomes of the connection and the buffer. */
enum outcome { DONE, CPU, CPU_DROP_BUFFER, RETRY_CONNECTION };

/* The connection's read lock, for zerocopy.c's release thread: held, the
 * connection is not replaced or closed. */
static void conn_rdlock(void)
{
    pthread_rwlock_rdlock(&conn.lock);
}

static void conn_unlock(void)
{
    pthread_rwlock_unlock(&conn.lock);
}

/* One attempt of call on connection c (read lock held): the zero-copy
 * regions' releases that are due, the call's plan (which operands are in
 * place), the thread's buffer made or grown to call->need, then the
 * call's own staging and request. */
static enum outcome attempt(gemm_client *c, uint64_t gen, gb_thread *t,
                            gb_call *call, int *err)
{
    *err = GEMM_OK;
    if (gb_zc_any_pending())
        gb_zc_drain();
    if (call->prepare != NULL)
        call->prepare(c, gen, call);
    size_t need = call->need;
    call->fresh = false;

    if (t->buf != NULL && t->gen != gen)
        drop_buffer(t); /* registered on a connection that is gone */
    bool grow = need > 0 && t->buf != NULL && gemm_buffer_size(t->buf) < need;
    if (grow)
        drop_buffer(t);
    if (t->buf == NULL && need > 0) {
        /* the first buffer fits this call (making and pinning it is the
         * first call's main cost); a thread that needed more once gets a
         * quarter extra, so a slowly growing size does not re-register
         * every time */
        size_t size = gb_align_up(grow ? need + need / 4 : need, 2u << 20);
        int rv = gemm_buffer_alloc(c, size, &t->buf);
        if (rv != GEMM_OK) {
            t->buf = NULL;
            *err = rv;
            return rv == GEMM_ERR_CLOSED ? RETRY_CONNECTION : CPU;
        }
        t->gen = gen;
        call->fresh = !gemm_buffer_lent(t->buf); /* a spare is pinned */
    }
    int rv = call->run(c, need > 0 ? t->buf : NULL, call->arg);
    if (rv == GEMM_OK)
        return DONE;
    *err = rv;
    enum outcome o;
    switch (rv) {
    case GEMM_ERR_CLOSED:
    case GEMM_ERR_CONNECT:
    case GEMM_ERR_PROTOCOL:
    case GEMM_ERR_VERSION:
    case GEMM_ERR_SHUTDOWN:
        o = RETRY_CONNECTION;
        break;
    case GEMM_ERR_ABANDONED:    /* the daemon may still write into it */
    case GEMM_ERR_BUFFER_FAULT: /* lost on the daemon's side */
    case GEMM_ERR_NO_BUFFER:
        o = CPU_DROP_BUFFER;
        break;
    default: /* busy, limits, device errors, ...: this call only */
        o = CPU;
    }
    const gb_opnd *out = call->ops != NULL ? &call->ops[GB_OPND_OUT] : NULL;
    bool late = rv == GEMM_ERR_ABANDONED ||
                (o == RETRY_CONNECTION && out != NULL && out->backup);
    if (late && out != NULL && out->p != NULL && out->in_place &&
        !gb_zc_detach(out->p))
        gb_log(1,
               "%s: no memory to detach its output's region from gemmd, "
               "which may still write it",
               call->what);
    if (out != NULL && out->p != NULL && out->backup) {
        call->restore(t->buf, call->arg); /* gemmd may have written part */
        gb_zc_count(GB_ZC_RESTORES, 1);
    }
    return o;
}

bool gb_offload_call(gb_call *call)
{
    if (atomic_load(&conn.disabled)) {
        gb_log(2,
               "%s on the CPU: forked from a process using nng, which "
               "cannot be used in a child of fork",
               call->what);
        return false;
    }
    pthread_once(&init_once, init);
    gb_thread *t = thread_state();
    if (t == NULL)
        return false;
    int err = GEMM_OK;
    for (int round = 0; round < 2; round++) {
        uint64_t gen;
        gemm_client *c = acquire(&gen);
        if (c == NULL)
            return false; /* acquire said why (verbose) */
        enum outcome o = attempt(c, gen, t, call, &err);
        if (o == CPU_DROP_BUFFER || o == RETRY_CONNECTION)
            drop_buffer(t);
        if (o == RETRY_CONNECTION)
            atomic_store(&conn.broken, true);
        pthread_rwlock_unlock(&conn.lock);
        if (o == DONE) {
            if (call->ops != NULL)
                gb_zc_done(call->ops, call->es);
            return true;
        }
        gb_log(1, "%s %s: gemmd: %s: %s", call->what,
               call->partial ? "in part on the CPU" : "on the CPU",
               gemm_strerror(err), gemm_last_error_message());
        if (o != RETRY_CONNECTION || call->partial)
            return false; /* partial: the caller finishes on the CPU */
        /* the daemon went away (a restart?): reconnect and try once more */
    }
    return false;
}
