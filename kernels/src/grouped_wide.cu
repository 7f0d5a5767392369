/*
 * grouped_wide.cu: the wide problems of a gemmk_gemm_grouped batch
 * (fp64, complex64, complex128: what "auto" runs as one cuBLAS call each)
 * in as few cuBLAS calls as their shapes allow (grouped_wide.h).
 *
 * The problems are sorted into classes by everything a cuBLAS batched
 * call shares: type, ops, m, n, k, lda, ldb, ldd, alpha and beta (batch
 * order within a class). A class whose A, B and D lie at constant
 * strides runs as one strided-batched call; the other classes of two or
 * more problems as one pointer-array batched call each, except that the
 * fp64 ones, when there are several, share one grouped-batched call
 * (cuBLAS's grouped calls take fp32 and fp64 only); a lone problem runs
 * as gemmk_gemm runs it. The pointer arrays reach the device in one
 * cudaMemcpyAsync before the calls. The operands swap as in wide.cu's
 * wide_blas: row-major D = op(A) op(B) is column-major D^T = op(B)^T
 * op(A)^T, B first, m and n swapped. D is updated in place: a C that is
 * read and is not D is copied into D first (one 2-D copy for a strided
 * class whose Cs and Ds are each contiguous).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>

#include "catalog.h"
#include "grouped_wide.h"

namespace gemmk
{
namespace
{

bool is_wide(int t)
{
    return t >= 1 && t < 32 && (GEMMK_WIDE_TYPES & (1u << t)) != 0;
}

size_t elem(int t)
{
    return t == GEMM_COMPLEX128 ? 16 : t == GEMM_COMPLEX64 ? 8 : sizeof(double);
}

bool uses_c(const gemmk_problem *p)
{
    return p->zbeta[0] != 0.0 || p->zbeta[1] != 0.0;
}

/* op(X) as wide_blas passes it; a real type's conjugate is its
 * transpose. */
cublasOperation_t op_of(const gemmk_problem *p, int trans, int conj)
{
    if (!trans)
        return CUBLAS_OP_N;
    return conj && p->ab_type != GEMM_FP64 ? CUBLAS_OP_C : CUBLAS_OP_T;
}

/* What one cuBLAS batched call shares, as comparable numbers: the
 * scalars by their bits (so NaNs compare), beta 0 without C. */
struct Key {
    int64_t v[14];
};

Key key_of(const gemmk_problem *p)
{
    Key k;
    const bool usec = uses_c(p);
    double sc[4] = {p->zalpha[0], p->zalpha[1], usec ? p->zbeta[0] : 0.0,
                    usec ? p->zbeta[1] : 0.0};
    k.v[0] = p->ab_type;
    k.v[1] = op_of(p, p->trans_a, p->conj_a);
    k.v[2] = op_of(p, p->trans_b, p->conj_b);
    k.v[3] = p->m, k.v[4] = p->n, k.v[5] = p->k;
    k.v[6] = p->lda, k.v[7] = p->ldb, k.v[8] = p->ldd;
    for (int i = 0; i < 4; i++)
        memcpy(&k.v[9 + i], &sc[i], sizeof(double));
    k.v[13] = usec;
    return k;
}

int key_cmp(const Key &a, const Key &b)
{
    for (int i = 0; i < 14; i++)
        if (a.v[i] != b.v[i])
            return a.v[i] < b.v[i] ? -1 : 1;
    return 0;
}

/* The host scalars of a class (alpha, beta in the type's form). */
struct Scalars {
    double d[2];
    cuComplex c[2];
    cuDoubleComplex z[2];
};

Scalars scalars_of(const gemmk_problem *p)
{
    Scalars s;
    const bool usec = uses_c(p);
    const double br = usec ? p->zbeta[0] : 0.0, bi = usec ? p->zbeta[1] : 0.0;
    s.d[0] = p->zalpha[0], s.d[1] = br;
    s.c[0] = {(float)p->zalpha[0], (float)p->zalpha[1]};
    s.c[1] = {(float)br, (float)bi};
    s.z[0] = {p->zalpha[0], p->zalpha[1]};
    s.z[1] = {br, bi};
    return s;
}

/* A class: [i0, i1) of the sorted order. */
struct Class {
    int i0, i1;
    bool strided;
    long long st[3]; /* strided: A, B, D strides, elements */
    int t0;          /* batched: first slot in the pointer arrays; -1 none */
};

long long addr(const void *x)
{
    return (long long)(uintptr_t)x;
}

/*
 * Whether the n problems at idx (one class, batch order) are a strided
 * batch: A, B and D at constant strides, whole elements apart, D's
 * positive (A or B may be shared: 0). On success st holds the strides
 * in elements: A, B, D.
 */
bool strided(const gemmk_problem *probs, const int *idx, int n, long long st[3])
{
    if (n < 2)
        return false;
    const gemmk_problem *p0 = &probs[idx[0]], *p1 = &probs[idx[1]];
    const long long es = (long long)elem(p0->ab_type);
    long long b[3] = {addr(p1->a) - addr(p0->a), addr(p1->b) - addr(p0->b),
                      addr(p1->d) - addr(p0->d)};
    for (int t = 0; t < 3; t++) {
        if (b[t] % es != 0 || b[t] < 0 || (t == 2 && b[t] == 0))
            return false;
        st[t] = b[t] / es;
    }
    for (int i = 2; i < n; i++) {
        const gemmk_problem *p = &probs[idx[i]];
        if (addr(p->a) != addr(p0->a) + i * b[0] ||
            addr(p->b) != addr(p0->b) + i * b[1] ||
            addr(p->d) != addr(p0->d) + i * b[2])
            return false;
    }
    return true;
}

/* Whether the Cs of strided class c are all read, none D, and lie
 * contiguous as the Ds do (each m rows after the last, one ldc): then
 * one 2-D copy moves them all. */
bool cs_contiguous(const gemmk_problem *probs, const int *ord, const Class &c)
{
    const gemmk_problem *p0 = &probs[ord[c.i0]];
    if (!c.strided || c.st[2] != p0->m * p0->ldd)
        return false;
    const long long sc = p0->m * p0->ldc * (long long)elem(p0->ab_type);
    for (int i = c.i0; i < c.i1; i++) {
        const gemmk_problem *p = &probs[ord[i]];
        if (!p->c || p->c == p->d || p->ldc != p0->ldc ||
            addr(p->c) != addr(p0->c) + (i - c.i0) * sc)
            return false;
    }
    return true;
}

/* C into D for the problems of class c that read a C other than D: one
 * 2-D copy when cs_contiguous, else one per problem. */
gemm_error copy_cs(gemmk_ctx *ctx, const gemmk_problem *probs, const int *ord,
                   const Class &c, cudaStream_t s)
{
    const gemmk_problem *p0 = &probs[ord[c.i0]];
    const size_t es = elem(p0->ab_type);
    if (!uses_c(p0))
        return GEMM_OK;
    if (cs_contiguous(probs, ord, c)) {
        GEMMK_CK(ctx, cudaMemcpy2DAsync(
                          p0->d, p0->ldd * es, p0->c, p0->ldc * es, p0->n * es,
                          p0->m * (c.i1 - c.i0), cudaMemcpyDeviceToDevice, s));
        return GEMM_OK;
    }
    for (int i = c.i0; i < c.i1; i++) {
        gemm_error e = c_into_d(ctx, &probs[ord[i]], es, s);
        if (e != GEMM_OK)
            return e;
    }
    return GEMM_OK;
}

/* Strided class c as one cublas{D,C,Z}gemmStridedBatched_64. */
gemm_error run_strided(gemmk_ctx *ctx, cublasHandle_t h, const gemmk_problem *p,
                       const Class &c)
{
    const cublasOperation_t opa = op_of(p, p->trans_a, p->conj_a);
    const cublasOperation_t opb = op_of(p, p->trans_b, p->conj_b);
    const Scalars sc = scalars_of(p);
    const int64_t n = c.i1 - c.i0;
    switch (p->ab_type) {
    case GEMM_FP64:
        GEMMK_CB(ctx, cublasDgemmStridedBatched_64(
                          h, opb, opa, p->n, p->m, p->k, &sc.d[0],
                          static_cast<const double *>(p->b), p->ldb, c.st[1],
                          static_cast<const double *>(p->a), p->lda, c.st[0],
                          &sc.d[1], static_cast<double *>(p->d), p->ldd,
                          c.st[2], n));
        break;
    case GEMM_COMPLEX64:
        GEMMK_CB(ctx, cublasCgemmStridedBatched_64(
                          h, opb, opa, p->n, p->m, p->k, &sc.c[0],
                          static_cast<const cuComplex *>(p->b), p->ldb, c.st[1],
                          static_cast<const cuComplex *>(p->a), p->lda, c.st[0],
                          &sc.c[1], static_cast<cuComplex *>(p->d), p->ldd,
                          c.st[2], n));
        break;
    default:
        GEMMK_CB(ctx,
                 cublasZgemmStridedBatched_64(
                     h, opb, opa, p->n, p->m, p->k, &sc.z[0],
                     static_cast<const cuDoubleComplex *>(p->b), p->ldb,
                     c.st[1], static_cast<const cuDoubleComplex *>(p->a),
                     p->lda, c.st[0], &sc.z[1],
                     static_cast<cuDoubleComplex *>(p->d), p->ldd, c.st[2], n));
        break;
    }
    return GEMM_OK;
}

/* Class c of problem p's shape as one cublas{D,C,Z}gemmBatched_64 over
 * the device pointer arrays pa, pb, pd (c's slots). */
gemm_error run_listed(gemmk_ctx *ctx, cublasHandle_t h, const gemmk_problem *p,
                      int64_t n, void *const *pa, void *const *pb,
                      void *const *pd)
{
    const cublasOperation_t opa = op_of(p, p->trans_a, p->conj_a);
    const cublasOperation_t opb = op_of(p, p->trans_b, p->conj_b);
    const Scalars sc = scalars_of(p);
    switch (p->ab_type) {
    case GEMM_FP64:
        GEMMK_CB(ctx, cublasDgemmBatched_64(
                          h, opb, opa, p->n, p->m, p->k, &sc.d[0],
                          reinterpret_cast<const double *const *>(pb), p->ldb,
                          reinterpret_cast<const double *const *>(pa), p->lda,
                          &sc.d[1], reinterpret_cast<double *const *>(pd),
                          p->ldd, n));
        break;
    case GEMM_COMPLEX64:
        GEMMK_CB(ctx,
                 cublasCgemmBatched_64(
                     h, opb, opa, p->n, p->m, p->k, &sc.c[0],
                     reinterpret_cast<const cuComplex *const *>(pb), p->ldb,
                     reinterpret_cast<const cuComplex *const *>(pa), p->lda,
                     &sc.c[1], reinterpret_cast<cuComplex *const *>(pd), p->ldd,
                     n));
        break;
    default:
        GEMMK_CB(ctx, cublasZgemmBatched_64(
                          h, opb, opa, p->n, p->m, p->k, &sc.z[0],
                          reinterpret_cast<const cuDoubleComplex *const *>(pb),
                          p->ldb,
                          reinterpret_cast<const cuDoubleComplex *const *>(pa),
                          p->lda, &sc.z[1],
                          reinterpret_cast<cuDoubleComplex *const *>(pd),
                          p->ldd, n));
        break;
    }
    return GEMM_OK;
}

/* The fp64 classes cl[0..ng) (each listed, slots consecutive from
 * cl[0].t0) as one cublasDgemmGroupedBatched_64. */
gemm_error run_grouped_f64(gemmk_ctx *ctx, cublasHandle_t h,
                           const gemmk_problem *probs, const int *ord,
                           const Class *const *cl, int ng, void *const *pa,
                           void *const *pb, void *const *pd)
{
    /* one array per argument, as cuBLAS takes them */
    size_t per = sizeof(cublasOperation_t) * 2 + sizeof(int64_t) * 7 +
                 sizeof(double) * 2;
    char *buf = static_cast<char *>(malloc(per * ng));
    if (!buf) {
        ctx_say(ctx, "out of host memory for %d fp64 groups", ng);
        return GEMM_ERR_NOMEM;
    }
    cublasOperation_t *ta = reinterpret_cast<cublasOperation_t *>(buf);
    cublasOperation_t *tb = ta + ng;
    int64_t *i64 = reinterpret_cast<int64_t *>(buf + sizeof(*ta) * 2 * ng);
    int64_t *m = i64, *n = i64 + ng, *k = i64 + 2 * ng, *lda = i64 + 3 * ng,
            *ldb = i64 + 4 * ng, *ldc = i64 + 5 * ng, *size = i64 + 6 * ng;
    double *al = reinterpret_cast<double *>(i64 + 7 * ng), *be = al + ng;
    for (int i = 0; i < ng; i++) {
        const gemmk_problem *p = &probs[ord[cl[i]->i0]];
        const Scalars sc = scalars_of(p);
        /* swapped: B first, m and n exchanged */
        ta[i] = op_of(p, p->trans_b, p->conj_b);
        tb[i] = op_of(p, p->trans_a, p->conj_a);
        m[i] = p->n, n[i] = p->m, k[i] = p->k;
        lda[i] = p->ldb, ldb[i] = p->lda, ldc[i] = p->ldd;
        size[i] = cl[i]->i1 - cl[i]->i0;
        al[i] = sc.d[0], be[i] = sc.d[1];
    }
    cublasStatus_t s = cublasDgemmGroupedBatched_64(
        h, ta, tb, m, n, k, al, reinterpret_cast<const double *const *>(pb),
        lda, reinterpret_cast<const double *const *>(pa), ldb, be,
        reinterpret_cast<double *const *>(pd), ldc, ng, size);
    free(buf);
    if (s != CUBLAS_STATUS_SUCCESS)
        return blas_fail(ctx, s, "cublasDgemmGroupedBatched_64", __FILE__,
                         __LINE__);
    return GEMM_OK;
}

/* The run of wide_batch, its arrays owned here. */
struct Batch {
    int n;     /* wide problems */
    int *ord;  /* their indices, sorted by class */
    Key *keys; /* by problem index (the wide ones') */
    Class *cl; /* classes */
    int ncl;
    int nslots;  /* pointer-array slots */
    void **host; /* A, B, D pointer arrays (3 * nslots) */
    ~Batch()
    {
        free(ord);
        free(keys);
        free(cl);
        free(host);
    }
};

} // namespace

bool wide_batched(const gemmk_problem *p)
{
    return is_wide(p->ab_type) && !p->host_mapped;
}

gemm_error wide_batch(gemmk_ctx *ctx, const gemmk_problem *probs, int count,
                      cudaStream_t s, int *fail, const char **kernel)
{
    *kernel = nullptr;
    Batch b = {};
    for (int i = 0; i < count; i++)
        b.n += probs[i].m && probs[i].n && wide_batched(&probs[i]);
    if (b.n == 0)
        return GEMM_OK;
    b.ord = static_cast<int *>(malloc(sizeof(int) * b.n));
    b.keys = static_cast<Key *>(malloc(sizeof(Key) * count));
    b.cl = static_cast<Class *>(malloc(sizeof(Class) * b.n));
    if (!b.ord || !b.keys || !b.cl) {
        ctx_say(ctx, "out of host memory for %d wide problems", b.n);
        return GEMM_ERR_NOMEM;
    }
    for (int i = 0, j = 0; i < count; i++)
        if (probs[i].m && probs[i].n && wide_batched(&probs[i])) {
            b.ord[j++] = i;
            b.keys[i] = key_of(&probs[i]);
        }
    const Key *keys = b.keys;
    bool in_order = true; /* e.g. a strided batch: one class already */
    for (int j = 1; j < b.n && in_order; j++)
        in_order = key_cmp(keys[b.ord[j - 1]], keys[b.ord[j]]) <= 0;
    if (!in_order)
        std::sort(b.ord, b.ord + b.n, [keys](int x, int y) {
            int c = key_cmp(keys[x], keys[y]);
            return c != 0 ? c < 0 : x < y;
        });

    /* classes; the listed fp64 ones counted for the grouped call */
    int f64_classes = 0;
    for (int i0 = 0; i0 < b.n;) {
        int i1 = i0 + 1;
        while (i1 < b.n && key_cmp(keys[b.ord[i1]], keys[b.ord[i0]]) == 0)
            i1++;
        Class &c = b.cl[b.ncl++];
        c.i0 = i0, c.i1 = i1, c.t0 = -1;
        c.strided = strided(probs, b.ord + i0, i1 - i0, c.st);
        if (!c.strided && probs[b.ord[i0]].ab_type == GEMM_FP64)
            f64_classes++;
        i0 = i1;
    }
    /* slots: listed classes of two or more, and every listed fp64 class
     * when the fp64 ones run as one grouped call */
    const bool f64_grouped = f64_classes > 1;
    for (int ci = 0; ci < b.ncl; ci++) {
        Class &c = b.cl[ci];
        const bool f64 = probs[b.ord[c.i0]].ab_type == GEMM_FP64;
        if (!c.strided && (c.i1 - c.i0 > 1 || (f64 && f64_grouped))) {
            c.t0 = b.nslots;
            b.nslots += c.i1 - c.i0;
        }
    }

    cublasHandle_t h;
    gemm_error e = wide_handle(ctx, s, &h);
    if (e != GEMM_OK) {
        *fail = b.ord[0];
        return e;
    }
    void **dev = nullptr;
    if (b.nslots > 0) {
        const size_t bytes = sizeof(void *) * 3 * (size_t)b.nslots;
        b.host = static_cast<void **>(malloc(bytes));
        if (!b.host) {
            ctx_say(ctx, "out of host memory for %d wide problems", b.n);
            return GEMM_ERR_NOMEM;
        }
        for (int ci = 0; ci < b.ncl; ci++) {
            const Class &c = b.cl[ci];
            for (int i = c.i0; c.t0 >= 0 && i < c.i1; i++) {
                const gemmk_problem *p = &probs[b.ord[i]];
                const int t = c.t0 + (i - c.i0);
                b.host[t] = const_cast<void *>(p->a);
                b.host[b.nslots + t] = const_cast<void *>(p->b);
                b.host[2 * b.nslots + t] = p->d;
            }
        }
        void *ws;
        if ((e = ctx_workspace(ctx, SLOT_WIDE, bytes, &ws, s)) != GEMM_OK) {
            *fail = b.ord[0];
            return e;
        }
        dev = static_cast<void **>(ws);
        cudaError_t ce =
            cudaMemcpyAsync(dev, b.host, bytes, cudaMemcpyHostToDevice, s);
        if (ce != cudaSuccess) {
            *fail = b.ord[0];
            return ctx_fail(ctx, ce, "cudaMemcpyAsync(wide pointer arrays)",
                            __FILE__, __LINE__);
        }
    }
    void **da = dev, **db = dev + b.nslots, **dd = dev + 2 * b.nslots;

    /* every C into its D, then the calls */
    for (int ci = 0; ci < b.ncl; ci++) {
        const Class &c = b.cl[ci];
        if (c.strided || c.t0 >= 0) {
            if ((e = copy_cs(ctx, probs, b.ord, b.cl[ci], s)) != GEMM_OK) {
                *fail = b.ord[c.i0];
                return e;
            }
        }
    }
    const Class **f64 = nullptr;
    if (f64_grouped) {
        f64 = static_cast<const Class **>(
            malloc(sizeof(Class *) * (size_t)f64_classes));
        if (!f64) {
            ctx_say(ctx, "out of host memory for %d wide problems", b.n);
            return GEMM_ERR_NOMEM;
        }
    }
    int nf = 0;
    for (int ci = 0; ci < b.ncl && e == GEMM_OK; ci++) {
        const Class &c = b.cl[ci];
        const gemmk_problem *p = &probs[b.ord[c.i0]];
        *fail = b.ord[c.i0];
        if (c.strided)
            e = run_strided(ctx, h, p, c);
        else if (f64_grouped && p->ab_type == GEMM_FP64)
            f64[nf++] = &c; /* after the loop, in one call */
        else if (c.t0 >= 0)
            e = run_listed(ctx, h, p, c.i1 - c.i0, da + c.t0, db + c.t0,
                           dd + c.t0);
        else
            e = wide_blas(ctx, p, s);
    }
    if (e == GEMM_OK && nf > 0) {
        *fail = b.ord[f64[0]->i0];
        const int t0 = f64[0]->t0;
        e = run_grouped_f64(ctx, h, probs, b.ord, f64, nf, da + t0, db + t0,
                            dd + t0);
    }
    free(f64);
    if (e == GEMM_OK) {
        cudaError_t ce = cudaGetLastError();
        if (ce != cudaSuccess)
            return ctx_fail(ctx, ce, "a wide batch's cuBLAS calls", __FILE__,
                            __LINE__);
        *fail = -1;
        *kernel = row_reference().d.name;
    }
    return e;
}

} // namespace gemmk
