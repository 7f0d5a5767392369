/*
 * cpu_s8.c: int8 x int8 -> int32 GEMM on the CPU (see cpu_s8.h), blocked
 * the GotoBLAS way: for each NC-wide panel of op(B) and KC-deep slab of
 * K, op(B)'s slab is packed into NR-column strips and, for each MC-high
 * block of op(A), op(A)'s block into MR-row strips; an MR x NR micro-kernel
 * then runs over a strip pair, its B strip in L1, the A block in L2.
 * Packed elements are int16 pairs (k, k+1) in one 32-bit word, so one
 * vpmaddwd multiplies eight such pairs and adds each pair's two products:
 * 16 multiply-adds, exact (|a b| <= 2^14, so a pair's sum fits easily).
 * Accumulators are int32 and wrap (vpaddd), which is the arithmetic the
 * request asks for. The first K slab writes beta * C + alpha * acc into D,
 * later slabs add alpha * acc: the same value modulo 2^32 as alpha times
 * the whole sum, and C may be D itself (each element is read before it is
 * written, by the same thread).
 *
 * Threads split D into column (or row) ranges that are whole strips, each
 * running the blocked loops on its own packing buffers: together they
 * pack op(B) once and op(A) once per thread (split by rows, the other way
 * round). AVX2 is chosen at run time, so the build needs no -march.
 */
#include "cpu_s8.h"

#include <gemm/types.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_S8_X86 1
#endif

#define MR 6    /* rows of the micro-tile */
#define NR 16   /* columns of the micro-tile: two vectors of 8 int32 */
#define KC 512  /* K per slab (even): a B strip is KC/2 * NR * 4 = 16 KiB */
#define MC 144  /* rows of a packed A block (a multiple of MR): 144 KiB */
#define NC 1024 /* columns of a packed B panel (a multiple of NR): 1 MiB */

/* Multiply-adds below which one thread does it all (thread start-up
 * costs about what 2^21 of them take). */
#define CPU_S8_SERIAL_MACS (1ull << 21)

typedef void (*ukr_fn)(size_t kc2, const int32_t *a, const int32_t *b,
                       int32_t *acc);

/* acc (MR x NR, row-major) = the sum over kc2 packed pairs of the A strip
 * a (MR words per pair) times the B strip b (NR words per pair); exact
 * modulo 2^32. Portable C: the products are formed in int32 (no overflow:
 * |a b| <= 2^14) and summed as uint32 (wrapping, defined). */
static void ukr_portable(size_t kc2, const int32_t *a, const int32_t *b,
                         int32_t *acc)
{
    uint32_t s[MR][NR];
    memset(s, 0, sizeof(s));
    for (size_t p = 0; p < kc2; p++) {
        const int16_t *ap = (const int16_t *)(a + p * MR);
        const int16_t *bp = (const int16_t *)(b + p * NR);
        for (int i = 0; i < MR; i++) {
            int32_t a0 = ap[2 * i], a1 = ap[2 * i + 1];
            for (int j = 0; j < NR; j++)
                s[i][j] += (uint32_t)(a0 * bp[2 * j] + a1 * bp[2 * j + 1]);
        }
    }
    memcpy(acc, s, sizeof(s));
}

#ifdef CPU_S8_X86
/* ukr_portable with AVX2: per pair, two loads of B, MR broadcasts of A,
 * 2 MR vpmaddwd and vpaddd into 12 accumulators. */
__attribute__((target("avx2"))) static void
ukr_avx2(size_t kc2, const int32_t *a, const int32_t *b, int32_t *acc)
{
    __m256i c00 = _mm256_setzero_si256(), c01 = _mm256_setzero_si256();
    __m256i c10 = _mm256_setzero_si256(), c11 = _mm256_setzero_si256();
    __m256i c20 = _mm256_setzero_si256(), c21 = _mm256_setzero_si256();
    __m256i c30 = _mm256_setzero_si256(), c31 = _mm256_setzero_si256();
    __m256i c40 = _mm256_setzero_si256(), c41 = _mm256_setzero_si256();
    __m256i c50 = _mm256_setzero_si256(), c51 = _mm256_setzero_si256();
    for (size_t p = 0; p < kc2; p++) {
        __m256i b0 = _mm256_load_si256((const __m256i *)(b + p * NR));
        __m256i b1 = _mm256_load_si256((const __m256i *)(b + p * NR + 8));
        const int32_t *ap = a + p * MR;
        __m256i x;
        x = _mm256_set1_epi32(ap[0]);
        c00 = _mm256_add_epi32(c00, _mm256_madd_epi16(x, b0));
        c01 = _mm256_add_epi32(c01, _mm256_madd_epi16(x, b1));
        x = _mm256_set1_epi32(ap[1]);
        c10 = _mm256_add_epi32(c10, _mm256_madd_epi16(x, b0));
        c11 = _mm256_add_epi32(c11, _mm256_madd_epi16(x, b1));
        x = _mm256_set1_epi32(ap[2]);
        c20 = _mm256_add_epi32(c20, _mm256_madd_epi16(x, b0));
        c21 = _mm256_add_epi32(c21, _mm256_madd_epi16(x, b1));
        x = _mm256_set1_epi32(ap[3]);
        c30 = _mm256_add_epi32(c30, _mm256_madd_epi16(x, b0));
        c31 = _mm256_add_epi32(c31, _mm256_madd_epi16(x, b1));
        x = _mm256_set1_epi32(ap[4]);
        c40 = _mm256_add_epi32(c40, _mm256_madd_epi16(x, b0));
        c41 = _mm256_add_epi32(c41, _mm256_madd_epi16(x, b1));
        x = _mm256_set1_epi32(ap[5]);
        c50 = _mm256_add_epi32(c50, _mm256_madd_epi16(x, b0));
        c51 = _mm256_add_epi32(c51, _mm256_madd_epi16(x, b1));
    }
    __m256i *o = (__m256i *)acc;
    _mm256_storeu_si256(o + 0, c00);
    _mm256_storeu_si256(o + 1, c01);
    _mm256_storeu_si256(o + 2, c10);
    _mm256_storeu_si256(o + 3, c11);
    _mm256_storeu_si256(o + 4, c20);
    _mm256_storeu_si256(o + 5, c21);
    _mm256_storeu_si256(o + 6, c30);
    _mm256_storeu_si256(o + 7, c31);
    _mm256_storeu_si256(o + 8, c40);
    _mm256_storeu_si256(o + 9, c41);
    _mm256_storeu_si256(o + 10, c50);
    _mm256_storeu_si256(o + 11, c51);
}
#endif

static ukr_fn ukr_pick(void)
{
#ifdef CPU_S8_X86
    if (__builtin_cpu_supports("avx2"))
        return ukr_avx2;
#endif
    return ukr_portable;
}

static pthread_once_t ukr_once = PTHREAD_ONCE_INIT;
static ukr_fn ukr;                /* set once by ukr_init */
static pthread_key_t scratch_key; /* each thread's packing buffers */
static void scratch_free(void *p);

/* The kernel for this CPU and the buffers' key, once per process. */
static void ukr_init(void)
{
    ukr = ukr_pick();
    pthread_key_create(&scratch_key, scratch_free);
}

const char *cpu_s8_isa(void)
{
    pthread_once(&ukr_once, ukr_init);
    return ukr == ukr_portable ? "portable" : "avx2";
}

/* A word of two int16: lo = x, hi = y (the order vpmaddwd pairs them). */
static inline int32_t pair(int8_t x, int8_t y)
{
    return (int32_t)(((uint32_t)(uint16_t)(int16_t)y << 16) |
                     (uint16_t)(int16_t)x);
}

/* Packs op(A)[i0 .. i0+mc)[p0 .. p0+kc) into MR-row strips of kc2 =
 * ceil(kc/2) pairs each, rows past mc and the odd K tail zero. */
static void pack_a(const cpu_s8_problem *pr, uint64_t i0, uint64_t mc,
                   uint64_t p0, uint64_t kc, int32_t *out)
{
    size_t kc2 = (kc + 1) / 2;
    for (uint64_t s = 0; s < mc; s += MR) {
        int32_t *o = out + (s / MR) * kc2 * MR;
        for (int i = 0; i < MR; i++) {
            uint64_t r = i0 + s + (uint64_t)i;
            if (s + (uint64_t)i >= mc) {
                for (size_t q = 0; q < kc2; q++)
                    o[q * MR + (size_t)i] = 0;
                continue;
            }
            if (!pr->trans_a) { /* row r of A, contiguous in K */
                const int8_t *src = pr->a + r * pr->lda + p0;
                for (size_t q = 0; q < kc / 2; q++)
                    o[q * MR + (size_t)i] = pair(src[2 * q], src[2 * q + 1]);
                if (kc & 1)
                    o[(kc2 - 1) * MR + (size_t)i] = pair(src[kc - 1], 0);
            } else { /* column r of the stored K x M */
                const int8_t *src = pr->a + p0 * pr->lda + r;
                uint64_t ld = pr->lda;
                for (size_t q = 0; q < kc / 2; q++)
                    o[q * MR + (size_t)i] =
                        pair(src[2 * q * ld], src[(2 * q + 1) * ld]);
                if (kc & 1)
                    o[(kc2 - 1) * MR + (size_t)i] = pair(src[(kc - 1) * ld], 0);
            }
        }
    }
}

/* Packs op(B)[p0 .. p0+kc)[j0 .. j0+nc) into NR-column strips of kc2
 * pairs each, columns past nc and the odd K tail zero. */
static void pack_b(const cpu_s8_problem *pr, uint64_t p0, uint64_t kc,
                   uint64_t j0, uint64_t nc, int32_t *out)
{
    size_t kc2 = (kc + 1) / 2;
    for (uint64_t s = 0; s < nc; s += NR) {
        int32_t *o = out + (s / NR) * kc2 * NR;
        uint64_t w = nc - s < NR ? nc - s : NR;
        if (w < NR)
            memset(o, 0, kc2 * NR * sizeof(int32_t));
        if (!pr->trans_b) { /* rows of B, contiguous in N */
            for (size_t q = 0; q < kc2; q++) {
                uint64_t p = p0 + 2 * q;
                const int8_t *r0 = pr->b + p * pr->ldb + j0 + s;
                const int8_t *r1 = 2 * q + 1 < kc ? r0 + pr->ldb : NULL;
                for (uint64_t j = 0; j < w; j++)
                    o[q * NR + j] = pair(r0[j], r1 != NULL ? r1[j] : 0);
            }
        } else { /* column j of op(B) is row j of the stored N x K */
            for (uint64_t j = 0; j < w; j++) {
                const int8_t *src = pr->b + (j0 + s + j) * pr->ldb + p0;
                for (size_t q = 0; q < kc / 2; q++)
                    o[q * NR + j] = pair(src[2 * q], src[2 * q + 1]);
                if (kc & 1)
                    o[(kc2 - 1) * NR + j] = pair(src[kc - 1], 0);
            }
        }
    }
}

/* D[i0.., j0..] (rows x cols of the micro-tile acc) = beta * C + alpha *
 * acc on the first slab, D + alpha * acc after; in uint32 (wrapping). */
static void update(const cpu_s8_problem *pr, uint64_t i0, uint64_t j0, int rows,
                   int cols, const int32_t *acc, bool first)
{
    uint32_t al = (uint32_t)pr->alpha, be = (uint32_t)pr->beta;
    for (int i = 0; i < rows; i++) {
        int32_t *d = pr->d + (i0 + (uint64_t)i) * pr->ldd + j0;
        const int32_t *x = acc + i * NR;
        if (!first) {
            for (int j = 0; j < cols; j++)
                d[j] = (int32_t)((uint32_t)d[j] + al * (uint32_t)x[j]);
        } else if (pr->c != NULL && be != 0) {
            const int32_t *c = pr->c + (i0 + (uint64_t)i) * pr->ldc + j0;
            for (int j = 0; j < cols; j++)
                d[j] = (int32_t)(be * (uint32_t)c[j] + al * (uint32_t)x[j]);
        } else {
            for (int j = 0; j < cols; j++)
                d[j] = (int32_t)(al * (uint32_t)x[j]);
        }
    }
}

/* One thread's part: rows [m0, m1) and columns [n0, n1) of D, with its
 * packing buffers. */
typedef struct s8_part {
    const cpu_s8_problem *p;
    uint64_t m0, m1, n0, n1;
    int32_t *pa, *pb; /* MC x KC and KC x NC pairs' worth */
} s8_part;

static void *run_part(void *arg)
{
    const s8_part *t = arg;
    const cpu_s8_problem *p = t->p;
    int32_t acc[MR * NR] __attribute__((aligned(32)));
    for (uint64_t jc = t->n0; jc < t->n1; jc += NC) {
        uint64_t nc = t->n1 - jc < NC ? t->n1 - jc : NC;
        for (uint64_t pc = 0; pc < p->k; pc += KC) {
            uint64_t kc = p->k - pc < KC ? p->k - pc : KC;
            size_t kc2 = (kc + 1) / 2;
            pack_b(p, pc, kc, jc, nc, t->pb);
            for (uint64_t ic = t->m0; ic < t->m1; ic += MC) {
                uint64_t mc = t->m1 - ic < MC ? t->m1 - ic : MC;
                pack_a(p, ic, mc, pc, kc, t->pa);
                for (uint64_t jr = 0; jr < nc; jr += NR) {
                    const int32_t *bs = t->pb + (jr / NR) * kc2 * NR;
                    int cols = (int)(nc - jr < NR ? nc - jr : NR);
                    for (uint64_t ir = 0; ir < mc; ir += MR) {
                        const int32_t *as = t->pa + (ir / MR) * kc2 * MR;
                        int rows = (int)(mc - ir < MR ? mc - ir : MR);
                        ukr(kc2, as, bs, acc);
                        update(p, ic + ir, jc + jr, rows, cols, acc, pc == 0);
                    }
                }
            }
        }
    }
    return NULL;
}

size_t cpu_s8_scratch(void)
{
    return ((size_t)MC * (KC / 2) + (size_t)(KC / 2) * NC) * sizeof(int32_t);
}

/* The calling thread's packing buffers, kept between calls (a sliced
 * GEMM calls once per slice: no allocation and page faults each time)
 * and freed when the thread exits. */
typedef struct s8_scratch {
    int32_t *buf;
    size_t words;
} s8_scratch;

static void scratch_free(void *p)
{
    s8_scratch *s = p;
    free(s->buf);
    free(s);
}

/* The calling thread's buffers grown to words, or NULL when out of
 * memory. */
static int32_t *scratch(size_t words)
{
    s8_scratch *s = pthread_getspecific(scratch_key);
    if (s == NULL) {
        if ((s = calloc(1, sizeof(*s))) == NULL)
            return NULL;
        if (pthread_setspecific(scratch_key, s) != 0) {
            free(s);
            return NULL;
        }
    }
    if (words <= s->words)
        return s->buf;
    int32_t *b = aligned_alloc(64, words * sizeof(int32_t));
    if (b == NULL)
        return NULL;
    free(s->buf);
    s->buf = b;
    s->words = words;
    return b;
}

int cpu_s8_gemm(const cpu_s8_problem *p, unsigned threads)
{
    pthread_once(&ukr_once, ukr_init);
    if (p->m == 0 || p->n == 0)
        return GEMM_OK;
    /* split along the longer side of D, in whole strips */
    bool by_cols = p->n >= p->m;
    uint64_t len = by_cols ? p->n : p->m, unit = by_cols ? NR : MR;
    uint64_t units = (len + unit - 1) / unit;
    if (threads < 1 || (double)p->m * p->n * p->k < CPU_S8_SERIAL_MACS)
        threads = 1;
    if (threads > units)
        threads = (unsigned)units;
    if (threads > 64)
        threads = 64;
    size_t per_a = (size_t)MC * (KC / 2), per_b = (size_t)(KC / 2) * NC;
    int32_t *buf = scratch((per_a + per_b) * (size_t)threads);
    if (buf == NULL)
        return GEMM_ERR_NOMEM;
    s8_part parts[64];
    pthread_t tid[64];
    bool started[64] = {false};
    for (unsigned i = 0; i < threads; i++) {
        uint64_t u0 = units * i / threads, u1 = units * (i + 1) / threads;
        uint64_t lo = u0 * unit, hi = u1 * unit < len ? u1 * unit : len;
        parts[i] = (s8_part){
            .p = p,
            .m0 = by_cols ? 0 : lo,
            .m1 = by_cols ? p->m : hi,
            .n0 = by_cols ? lo : 0,
            .n1 = by_cols ? hi : p->n,
            .pa = buf + (per_a + per_b) * i,
            .pb = buf + (per_a + per_b) * i + per_a,
        };
    }
    for (unsigned i = 1; i < threads; i++)
        started[i] = pthread_create(&tid[i], NULL, run_part, &parts[i]) == 0;
    run_part(&parts[0]);
    for (unsigned i = 1; i < threads; i++) {
        if (started[i])
            pthread_join(tid[i], NULL);
        else
            run_part(&parts[i]); /* no thread to be had: here, in turn */
    }
    return GEMM_OK;
}
