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
 * Large copies store with non-temporal (streaming) stores on x86-64
 * (GEMMBLAS_COPY_NT, on by default): a plain store first reads the
 * destination's line, so a copy moves three bytes for each byte copied;
 * a streaming store moves two, and a staged matrix is far larger than
 * the caches anyway.
 * After fork the child forgets them (they do not exist there) and makes
 * new ones when needed.
 */
#include "gemmblas.h"

#include <host.h>

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

/* Copies below this many bytes run on the calling thread alone. */
#define GB_PAR_BYTES (4u << 20)
/* Work is cut into pieces of about this many bytes. */
#define GB_PIECE_BYTES (2u << 20)

/* Copies of at least this many bytes in all stream their stores. */
#define GB_NT_BYTES (16u << 20)

/* One copy being shared out: pieces 0..npieces-1, taken in order. */
typedef struct batch {
    char *dst;
    const char *src;
    size_t ldd, lds;    /* bytes between rows */
    size_t rows, width; /* rows of width bytes; 1 row when contiguous */
    size_t es;          /* bytes per element */
    char tri;           /* 'L', 'U': only that triangle of a square; or 0 */
    size_t rows_per;    /* rows per piece (strided) */
    size_t bytes_per;   /* bytes per piece (contiguous) */
    unsigned npieces;
    bool nt;        /* streaming stores */
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

/* memcpy with streaming stores where the target has them; the caller
 * fences (sfence) before anyone else reads dst. */
static void copy_nt(char *dst, const char *src, size_t n)
{
#if defined(__x86_64__)
    size_t head = (16 - ((uintptr_t)dst & 15)) & 15;
    if (n < head + 64) {
        memcpy(dst, src, n);
        return;
    }
    memcpy(dst, src, head);
    dst += head, src += head, n -= head;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m128i x0 = _mm_loadu_si128((const __m128i *)(src + i));
        __m128i x1 = _mm_loadu_si128((const __m128i *)(src + i + 16));
        __m128i x2 = _mm_loadu_si128((const __m128i *)(src + i + 32));
        __m128i x3 = _mm_loadu_si128((const __m128i *)(src + i + 48));
        _mm_stream_si128((__m128i *)(dst + i), x0);
        _mm_stream_si128((__m128i *)(dst + i + 16), x1);
        _mm_stream_si128((__m128i *)(dst + i + 32), x2);
        _mm_stream_si128((__m128i *)(dst + i + 48), x3);
    }
    memcpy(dst + i, src + i, n - i);
#else
    memcpy(dst, src, n);
#endif
}

static void copy_bytes(bool nt, char *dst, const char *src, size_t n)
{
    if (nt)
        copy_nt(dst, src, n);
    else
        memcpy(dst, src, n);
}

static void do_piece(batch *b, unsigned i)
{
    if (b->rows == 1) {
        size_t off = (size_t)i * b->bytes_per;
        size_t len =
            b->width - off < b->bytes_per ? b->width - off : b->bytes_per;
        copy_bytes(b->nt, b->dst + off, b->src + off, len);
    } else {
        size_t r0 = (size_t)i * b->rows_per;
        size_t r1 = r0 + b->rows_per < b->rows ? r0 + b->rows_per : b->rows;
        for (size_t r = r0; r < r1; r++) {
            /* columns [j0, j1) of row r, as bytes */
            size_t j0 = b->tri == 'U' ? r * b->es : 0;
            size_t j1 = b->tri == 'L' ? (r + 1) * b->es : b->width;
            copy_bytes(b->nt, b->dst + r * b->ldd + j0,
                       b->src + r * b->lds + j0, j1 - j0);
        }
    }
#if defined(__x86_64__)
    if (b->nt)
        _mm_sfence(); /* the stores are seen before the piece counts done */
#endif
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

/* gb_copy2d and gb_copy_tri: rows x cols, or only the tri triangle of
 * the square rows x rows (tri 'L' or 'U'). */
static void copy_shape(void *dst, size_t ldd, const void *src, size_t lds,
                       size_t rows, size_t cols, size_t es, char tri)
{
    size_t width = cols * es;
    size_t total = tri ? rows * (rows + 1) / 2 * es : rows * width;
    bool tight = !tri && ((ldd == cols && lds == cols) || rows == 1);
    if (total == 0)
        return;
    batch b = {.dst = dst,
               .src = src,
               .ldd = ldd * es,
               .lds = lds * es,
               .rows = tight ? 1 : rows,
               .width = tight ? total : width,
               .es = es,
               .tri = tri,
               .nt = gb_cfg()->copy_nt && total >= GB_NT_BYTES};
    if (total < GB_PAR_BYTES || gb_cfg()->copy_threads <= 1 ||
        pthread_mutex_trylock(&pool.use) != 0) {
        b.rows_per = rows;
        b.bytes_per = total;
        do_piece(&b, 0);
        return;
    }
    start_helpers();
    if (tight) {
        b.bytes_per = GB_PIECE_BYTES;
        b.npieces = (unsigned)((total + GB_PIECE_BYTES - 1) / GB_PIECE_BYTES);
    } else {
        /* a triangle's pieces are narrower near its apex: the dynamic
         * share-out evens them out */
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

void gb_copy2d(void *dst, size_t ldd, const void *src, size_t lds, size_t rows,
               size_t cols, size_t es)
{
    copy_shape(dst, ldd, src, lds, rows, cols, es, 0);
}

void gb_copy_tri(void *dst, size_t ldd, const void *src, size_t lds, size_t n,
                 bool lower, size_t es)
{
    copy_shape(dst, ldd, src, lds, n, n, es, lower ? 'L' : 'U');
}

void gb_copy_span(void *dst, size_t ldd, const void *src, size_t lds,
                  size_t rows, size_t cols, bool by_cols, size_t lo, size_t hi,
                  size_t es)
{
    if (hi <= lo)
        return;
    if (by_cols)
        gb_copy2d((char *)dst + lo * es, ldd, (const char *)src + lo * es, lds,
                  rows, hi - lo, es);
    else
        gb_copy2d((char *)dst + lo * ldd * es, ldd,
                  (const char *)src + lo * lds * es, lds, hi - lo, cols, es);
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
