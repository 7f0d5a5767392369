/*
 * copy.c: the staging copies between the caller's matrices and the shared
 * buffer, split over threads when large. One memcpy stream reaches ~10
 * GB/s; a 8192^2 fp64 GEMM moves 2 GiB through the staging buffer, so the
 * copies are shared by the calling thread and up to GEMMBLAS_COPY_THREADS
 * - 1 helpers (made on the first large copy, all signals blocked, never
 * joined: they sleep on a condition variable between copies). One copy at
 * a time uses the helpers; a thread that finds them busy copies alone.
 * A copy takes only as many helpers as the host has idle CPUs
 * (common/host.h): four processes each copying with 16 threads on
 * 16 cores starved gemmd's own threads, and a dsyrk 8192 of four
 * processes at once took 440 ms a call, 140 ms with 2 threads each.
 * After fork the child forgets them (they do not exist there) and makes
 * new ones when needed.
 */
#include "gemmblas.h"

#include <host.h>

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

/* Copies below this many bytes run on the calling thread alone. */
#define GB_PAR_BYTES (4u << 20)
/* Work is cut into pieces of about this many bytes. */
#define GB_PIECE_BYTES (2u << 20)

/* One copy being shared out: pieces 0..npieces-1, taken in order. */
typedef struct batch {
    char *dst;
    const char *src;
    size_t ldd, lds;    /* bytes between rows */
    size_t rows, width; /* rows of width bytes; 1 row when contiguous */
    size_t rows_per;    /* rows per piece (strided) */
    size_t bytes_per;   /* bytes per piece (contiguous) */
    unsigned npieces;
    unsigned limit; /* helpers that may join (under pool.mu) */
    atomic_uint next;
    atomic_uint done;
    unsigned refs;   /* helpers working on it (under pool.mu) */
    unsigned joined; /* helpers that joined it (under pool.mu) */
} batch;

static struct {
    pthread_mutex_t mu;  /* guards what follows */
    pthread_cond_t work; /* a new batch was posted */
    pthread_cond_t idle; /* a helper let go of a batch */
    pthread_mutex_t use; /* held by the thread whose copy uses the helpers */
    unsigned helpers;    /* started */
    bool tried;          /* helpers were started (or failed to) */
    uint64_t seq;        /* batch number */
    batch *cur;          /* the batch helpers may join, or NULL */
} pool = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .work = PTHREAD_COND_INITIALIZER,
    .idle = PTHREAD_COND_INITIALIZER,
    .use = PTHREAD_MUTEX_INITIALIZER,
};

static void do_piece(batch *b, unsigned i)
{
    if (b->rows == 1) {
        size_t off = (size_t)i * b->bytes_per;
        size_t len =
            b->width - off < b->bytes_per ? b->width - off : b->bytes_per;
        memcpy(b->dst + off, b->src + off, len);
    } else {
        size_t r0 = (size_t)i * b->rows_per;
        size_t r1 = r0 + b->rows_per < b->rows ? r0 + b->rows_per : b->rows;
        for (size_t r = r0; r < r1; r++)
            memcpy(b->dst + r * b->ldd, b->src + r * b->lds, b->width);
    }
}

/* Takes pieces of b until none is left. */
static void work_on(batch *b)
{
    unsigned i;
    while ((i = atomic_fetch_add(&b->next, 1)) < b->npieces) {
        do_piece(b, i);
        atomic_fetch_add(&b->done, 1);
    }
}

static void *helper(void *arg)
{
    (void)arg;
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&pool.mu);
        while (pool.seq == seen)
            pthread_cond_wait(&pool.work, &pool.mu);
        seen = pool.seq;
        batch *b = pool.cur;
        if (b != NULL && b->joined < b->limit) {
            b->refs++;
            b->joined++;
        } else {
            b = NULL;
        }
        pthread_mutex_unlock(&pool.mu);
        if (b == NULL)
            continue;
        work_on(b);
        pthread_mutex_lock(&pool.mu);
        if (--b->refs == 0)
            pthread_cond_broadcast(&pool.idle);
        pthread_mutex_unlock(&pool.mu);
    }
    return NULL;
}

/* Starts the helpers once (under pool.use). */
static void start_helpers(void)
{
    if (pool.tried)
        return;
    pool.tried = true;
    unsigned want = (unsigned)gb_cfg()->copy_threads - 1;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 64 << 10);
    for (unsigned i = 0; i < want; i++) {
        pthread_t t;
        if (pthread_create(&t, &at, helper, NULL) != 0)
            break; /* fewer helpers: still correct */
        pool.helpers++;
    }
    pthread_attr_destroy(&at);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void gb_copy2d(void *dst, size_t ldd, const void *src, size_t lds, size_t rows,
               size_t cols, size_t es)
{
    size_t width = cols * es, total = rows * width;
    bool tight = (ldd == cols && lds == cols) || rows == 1;
    if (total == 0)
        return;
    if (total < GB_PAR_BYTES || gb_cfg()->copy_threads <= 1 ||
        pthread_mutex_trylock(&pool.use) != 0) {
        if (tight)
            memcpy(dst, src, total);
        else
            for (size_t r = 0; r < rows; r++)
                memcpy((char *)dst + r * ldd * es,
                       (const char *)src + r * lds * es, width);
        return;
    }
    start_helpers();
    batch b = {.dst = dst, .src = src, .ldd = ldd * es, .lds = lds * es};
    if (tight) {
        b.rows = 1;
        b.width = total;
        b.bytes_per = GB_PIECE_BYTES;
        b.npieces = (unsigned)((total + GB_PIECE_BYTES - 1) / GB_PIECE_BYTES);
    } else {
        b.rows = rows;
        b.width = width;
        b.rows_per = GB_PIECE_BYTES / width ? GB_PIECE_BYTES / width : 1;
        b.npieces = (unsigned)((rows + b.rows_per - 1) / b.rows_per);
    }
    atomic_init(&b.next, 0);
    atomic_init(&b.done, 0);
    int idle = host_idle_cpus();
    b.limit = idle > 1 ? (unsigned)idle - 1 : 0; /* the caller takes one */
    pthread_mutex_lock(&pool.mu);
    pool.cur = &b;
    pool.seq++;
    pthread_cond_broadcast(&pool.work);
    pthread_mutex_unlock(&pool.mu);
    work_on(&b);
    pthread_mutex_lock(&pool.mu);
    pool.cur = NULL; /* no helper joins from now on */
    while (b.refs > 0)
        pthread_cond_wait(&pool.idle, &pool.mu);
    pthread_mutex_unlock(&pool.mu);
    pthread_mutex_unlock(&pool.use);
}

void gb_copy_atfork_child(void)
{
    pthread_mutex_init(&pool.mu, NULL);
    pthread_cond_init(&pool.work, NULL);
    pthread_cond_init(&pool.idle, NULL);
    pthread_mutex_init(&pool.use, NULL);
    pool.helpers = 0;
    pool.tried = false;
    pool.cur = NULL;
}
