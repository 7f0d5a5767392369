/*
 * slice.c: tiles of D under a flop budget, and the checks between them;
 * see slice.h.
 */
#include "slice.h"
#include "log.h"

#include <gemm/types.h>

#include <stdio.h>
#include <sys/mman.h>

static bool complex_type(int t)
{
    return t == GEMM_COMPLEX64 || t == GEMM_COMPLEX128;
}

/* floor(sqrt(x)) */
static uint64_t isqrt(uint64_t x)
{
    uint64_t r = 0;
    for (uint64_t bit = 1ull << 62; bit != 0; bit >>= 2) {
        if (x >= r + bit) {
            x -= r + bit;
            r = (r >> 1) + bit;
        } else {
            r >>= 1;
        }
    }
    return r;
}

uint64_t slice_flops(const gemmd_job *j)
{
    uint64_t f = 2 * j->m * j->n * j->k; /* validated: no overflow */
    return complex_type(j->ab_type) ? 4 * f : f;
}

bool slice_small(const gemmd_job *j)
{
    return j->kind == JOB_GEMM && slice_flops(j) <= SLICE_SMALL_FLOPS;
}

void slice_plan(const gemmd_job *j, uint64_t budget, uint64_t align,
                uint64_t *rows, uint64_t *cols)
{
    *rows = j->m;
    *cols = j->n;
    uint64_t per = slice_flops(j) / (j->m * j->n); /* flops per element */
    if (budget == 0 || slice_flops(j) <= budget || per == 0)
        return;
    uint64_t area = budget / per; /* elements of D per tile */
    if (area == 0)
        area = 1;
    if (align == 0)
        align = 1;
    /* near square, columns first (a multiple of align), then rows */
    uint64_t c = isqrt(area);
    c = c / align * align;
    if (c < align)
        c = align;
    if (c >= j->n)
        c = j->n;
    uint64_t r = area / c / align * align;
    if (r < align)
        r = align;
    if (r >= j->m) { /* all rows fit: widen the columns instead */
        r = j->m;
        c = area / j->m / align * align;
        if (c < align)
            c = align;
        if (c > j->n)
            c = j->n;
    }
    *rows = r;
    *cols = c;
}

int slice_stopped(const gemmd_job *j)
{
    return atomic_load(&((gemmd_job *)j)->stop) == JOB_CLOSED
               ? GEMM_ERR_CLOSED
               : GEMM_ERR_TIMEOUT;
}

bool slice_yield(gemmd_job *j, uint64_t done, uint64_t total)
{
    if (j->between != NULL && atomic_load(&j->stop) == JOB_RUN)
        j->between(j->between_arg, j);
    int why = atomic_load(&j->stop);
    if (why == JOB_RUN)
        return false;
    snprintf(j->msg, sizeof(j->msg),
             "%s while running, after %llu of %llu slices: D may be "
             "partly written",
             why == JOB_CLOSED ? "its connection closed" : "canceled",
             (unsigned long long)done, (unsigned long long)total);
    return true;
}

void slice_plan_panels(const gemmd_job *j, uint64_t budget, uint64_t align,
                       uint64_t *rows, uint64_t *cols)
{
    slice_plan(j, budget, align, rows, cols);
    if (*rows == j->m && *cols == j->n)
        return;
    uint64_t per = slice_flops(j) / (j->m * j->n);
    uint64_t r = budget / per / j->n / align * align;
    if (r >= 4 * (align > 16 ? align : 16)) { /* a panel of whole rows */
        *rows = r < j->m ? r : j->m;
        *cols = j->n;
    }
}

/* Maps in the pages of one operand (at p, extent bytes), SLICE_FAULT_CHUNK
 * at a time, yielding between chunks (*chunks counts them). Returns
 * whether j must stop. */
static bool slice_prefault(gemmd_job *j, const void *p, uint64_t extent,
                           bool write, uint64_t total, uint64_t *chunks)
{
    if (p == NULL || extent == 0)
        return false;
    uintptr_t pg = 4096;
    uintptr_t lo = (uintptr_t)p & ~(pg - 1);
    uintptr_t hi = ((uintptr_t)p + extent + pg - 1) & ~(pg - 1);
    for (uintptr_t at = lo; at < hi; at += SLICE_FAULT_CHUNK) {
        if ((*chunks)++ > 0 && slice_yield(j, 0, total))
            return true;
        size_t n = hi - at < SLICE_FAULT_CHUNK ? hi - at : SLICE_FAULT_CHUNK;
        /* before Linux 5.14 (EINVAL) the tiles fault them in instead */
        if (madvise((void *)at, n,
                    write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) != 0)
            return false;
    }
    return false;
}

int slice_run(gemmd_job *j, uint64_t budget, uint64_t align, slice_fn fn,
              void *arg)
{
    uint64_t rows, cols;
    slice_plan_panels(j, budget, align, &rows, &cols);
    uint64_t nr = (j->m + rows - 1) / rows, nc = (j->n + cols - 1) / cols;
    uint64_t total = nr * nc, done = 0;
    if (total > 1)
        gemmd_log(LOG_DEBUG,
                  "a %llux%llux%llu GEMM runs in %llu slices of %llux%llu",
                  (unsigned long long)j->m, (unsigned long long)j->n,
                  (unsigned long long)j->k, (unsigned long long)total,
                  (unsigned long long)rows, (unsigned long long)cols);
    /* A client's buffer is mapped lazily: its pages, faulted in by the
     * first tiles, would make them several slices long (200 MB: ~120 ms
     * here). Fault them in first, a chunk between two yields. */
    uint64_t chunks = 0;
    if (total > 1 && j->kind == JOB_GEMM &&
        (slice_prefault(j, j->a_dev ? NULL : j->a, j->shape.a.extent, false,
                        total, &chunks) ||
         slice_prefault(j, j->b_dev ? NULL : j->b, j->shape.b.extent, false,
                        total, &chunks) ||
         slice_prefault(j, j->c_dev ? NULL : j->c, j->shape.c.extent, false,
                        total, &chunks) ||
         slice_prefault(j, j->d, j->shape.d.extent, true, total, &chunks)))
        return slice_stopped(j);
    for (uint64_t r0 = 0; r0 < j->m; r0 += rows) {
        for (uint64_t c0 = 0; c0 < j->n; c0 += cols) {
            if ((done > 0 || chunks > 0) && slice_yield(j, done, total))
                return slice_stopped(j);
            slice_tile t = {
                .r0 = r0,
                .rows = j->m - r0 < rows ? j->m - r0 : rows,
                .c0 = c0,
                .cols = j->n - c0 < cols ? j->n - c0 : cols,
            };
            int rv = fn(j, &t, arg);
            if (rv != GEMM_OK)
                return rv;
            done++;
        }
    }
    return GEMM_OK;
}

uint64_t slice_off_a(const gemmd_job *j, const slice_tile *t, uint64_t lda)
{
    return j->trans_a ? t->r0 : t->r0 * lda; /* A is k x m when transposed */
}

uint64_t slice_off_b(const gemmd_job *j, const slice_tile *t, uint64_t ldb)
{
    return j->trans_b ? t->c0 * ldb : t->c0; /* B is n x k when transposed */
}

uint64_t slice_off_d(const slice_tile *t, uint64_t ldd)
{
    return t->r0 * ldd + t->c0;
}
