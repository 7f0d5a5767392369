/*
 * fuzz_request.c: libFuzzer target for the daemon's pure request path.
 * Arbitrary bytes go through what sp.c and dispatch.c do with a message
 * before any daemon state is touched: req_decode (size cap, protobuf
 * unpack), req_check_envelope, then per body req_gemm_desc + val_gemm_check
 * (blas3_desc + val_blas3_check for a Blas3; for a Batch req_batch_check,
 * req_batch_problem and val_gemm_check per problem, then the overlap
 * check across problems, val_spans_conflicts)
 * against a fake buffer table (kernel name and precision included), or
 * req_register_check. A reply is packed as the daemon would (a GEMM's with the
 * kernel that ran, ListKernels' with two entries) and decoded again.
 *
 * Beyond "no crash, no leak, no UB" the target checks what validation
 * promises: an accepted GEMM has every operand inside its buffer, aligned,
 * with ld >= its row length, D apart from A and B, C either D or apart from
 * it (also through a second buffer of the same memory object); an accepted
 * RegisterBuffer names a ticket and a size; every overlap a batch's check
 * reports is one (a D sharing bytes with another problem's operand). A
 * broken promise traps.
 *
 * Fake buffers: ids 1, 2, 3 are 4 KiB, 1 MiB and 2^40 bytes; an id with bit
 * 63 set names a buffer whose size is the id's low 48 bits (so the fuzzer
 * chooses sizes); every other id is unknown.
 */
#include "blas3.h"
#include "proto_util.h"
#include "registry.h"
#include "request.h"
#include "validate.h"
#include "validate_batch.h"

#include <gemm/types.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_MAX_MESSAGE (64 * 1024) /* gemmd's default --max-message */
#define FUZZ_MAX_DIM     (1u << 20)  /* gemmd's default --max-dim */

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond))                                                           \
            __builtin_trap();                                                  \
    } while (0)

/* The memory object of a fake buffer: ids of equal parity share one (as
 * two registrations of one memfd do). */
static uint64_t fake_object(uint64_t id)
{
    return id & 1;
}

static void *fake_lookup(void *arg, uint64_t id, size_t *size, uint64_t *object)
{
    (void)arg;
    static const size_t fixed[] = {4096, 1u << 20, (size_t)1 << 40};
    *object = fake_object(id);
    if (id >= 1 && id <= 3) {
        *size = fixed[id - 1];
        return (void *)(uintptr_t)(id << 4);
    }
    if (id >> 63) {
        *size = (size_t)(id & ((1ull << 48) - 1));
        return (void *)(uintptr_t)(id << 4 | 8);
    }
    return NULL;
}

static size_t fake_size(void *handle)
{
    size_t size = 0;
    uint64_t object;
    uint64_t h = (uint64_t)(uintptr_t)handle;
    uint64_t id = (h & 8) ? (h >> 4) | (1ull << 63) : h >> 4;
    CHECK(fake_lookup(NULL, id, &size, &object) == handle);
    return size;
}

/* Whether x and y share no byte: other memory objects, or disjoint ranges
 * of one (tensors are never passed here: the fake table has none). */
static bool apart(const val_matrix *x, const val_matrix *y)
{
    return (x->handle != y->handle && x->object != y->object) ||
           x->offset + x->extent <= y->offset ||
           y->offset + y->extent <= x->offset;
}

/* What an accepted matrix must satisfy, stored rows x cols of esize. */
static void check_matrix(const val_matrix *x, uint64_t rows, uint64_t cols,
                         size_t esize)
{
    CHECK(x->handle != NULL);
    CHECK(x->rows == rows && x->cols == cols && x->esize == esize);
    CHECK(x->ld >= cols);
    CHECK(x->offset % esize == 0);
    CHECK(x->extent == ((rows - 1) * x->ld + cols) * esize);
    CHECK(x->offset + x->extent >= x->offset); /* no wrap */
    CHECK(x->offset + x->extent <= fake_size(x->handle));
}

static int fuzz_gemm(const Gemm__GemmRequest *g, char *msg, size_t len)
{
    val_gemm v;
    val_resolved res;
    val_limits lim = {.max_dim = FUZZ_MAX_DIM};
    req_gemm_desc(g, &v);
    memset(&res, 0, sizeof(res));
    int rv = val_gemm_check(&v, &lim, fake_lookup, NULL, &res, msg, len);
    if (rv != GEMM_OK)
        return rv;
    CHECK(val_dtypes_supported(v.ab_type, v.cd_type));
    CHECK(v.precision >= GEMM_PRECISION_DEFAULT &&
          v.precision <= GEMM_PRECISION_FP32);
    CHECK(v.ab_type == GEMM_FP32 || v.precision == GEMM_PRECISION_DEFAULT);
    if (v.kernel != NULL) {
        size_t n = strlen(v.kernel);
        CHECK(n >= 1 && n <= GEMM_KERNEL_NAME_MAX);
        CHECK(strspn(v.kernel,
                     "abcdefghijklmnopqrstuvwxyz"
                     "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-") == n);
    }
    CHECK(v.m >= 1 && v.n >= 1 && v.k >= 1);
    CHECK(v.m <= FUZZ_MAX_DIM && v.n <= FUZZ_MAX_DIM && v.k <= FUZZ_MAX_DIM);
    size_t ab = gemm_dtype_size(v.ab_type), cd = gemm_dtype_size(v.cd_type);
    check_matrix(&res.a, v.trans_a ? v.k : v.m, v.trans_a ? v.m : v.k, ab);
    check_matrix(&res.b, v.trans_b ? v.n : v.k, v.trans_b ? v.k : v.n, ab);
    check_matrix(&res.d, v.m, v.n, cd);
    CHECK(apart(&res.d, &res.a) && apart(&res.d, &res.b));
    CHECK(res.has_c == (v.beta != 0.0 || v.beta_im != 0.0));
    CHECK(!v.conj_a || (v.trans_a && gemm_dtype_is_complex(v.ab_type)));
    CHECK(!v.conj_b || (v.trans_b && gemm_dtype_is_complex(v.ab_type)));
    if (res.has_c) {
        check_matrix(&res.c, v.m, v.n, cd);
        CHECK(apart(&res.c, &res.d) ||
              (res.c.object == res.d.object && res.c.offset == res.d.offset &&
               res.c.ld == res.d.ld));
    }
    return GEMM_OK;
}

/* Problems of a batch the target checks (a grouped batch has at most
 * what fits in a message; a strided one is capped here). */
#define FUZZ_BATCH_MAX 4096

/* The spans of a batch as gathered (before the check sorts them). */
typedef struct fuzz_spans {
    const val_span *s;
    size_t n;
} fuzz_spans;

/* A reported overlap must be real: a D of `bad` sharing bytes with the
 * named operand of `other` (checked on small batches: it is quadratic). */
static void fuzz_conflict(void *arg, const val_conflict *c)
{
    const fuzz_spans *f = arg;
    CHECK(c->bad != c->other);
    if (f->n > 256)
        return;
    bool real = false;
    for (size_t i = 0; i < f->n && !real; i++)
        for (size_t j = 0; j < f->n && !real; j++) {
            const val_span *x = &f->s[i], *y = &f->s[j];
            real = x->problem == c->bad && x->what == 'D' &&
                   y->problem == c->other && y->what == c->what &&
                   x->object == y->object && x->lo < y->hi && y->lo < x->hi;
        }
    CHECK(real);
}

static int fuzz_batch(const Gemm__BatchRequest *r, char *msg, size_t len)
{
    uint64_t n = 0;
    val_gemm t, v;
    val_resolved res;
    val_limits lim = {.max_dim = FUZZ_MAX_DIM};
    int rv = req_batch_check(r, &n, msg, len);
    if (rv != GEMM_OK)
        return rv;
    CHECK(n >= 1 && (r->n_problems == 0 || n == r->n_problems));
    req_gemm_desc(r->op, &t);
    if (n > FUZZ_BATCH_MAX)
        n = FUZZ_BATCH_MAX;
    val_span *spans = calloc(4 * n, sizeof(*spans));
    size_t ns = 0;
    int first = GEMM_OK;
    CHECK(spans != NULL);
    for (uint64_t i = 0; i < n; i++) {
        rv = req_batch_problem(r, &t, i, &v, msg, len);
        if (rv == GEMM_OK && (v.m == 0 || v.n == 0))
            continue;
        if (rv == GEMM_OK)
            rv = val_gemm_check(&v, &lim, fake_lookup, NULL, &res, msg, len);
        if (rv != GEMM_OK) {
            if (first == GEMM_OK)
                first = rv;
            continue;
        }
        const val_matrix *ms[4] = {&res.a, &res.b, &res.d,
                                   res.has_c ? &res.c : NULL};
        for (int x = 0; x < 4; x++)
            if (ms[x] != NULL && !(x == 3 && ms[x]->offset == res.d.offset &&
                                   ms[x]->object == res.d.object))
                spans[ns++] = (val_span){.object = ms[x]->object,
                                         .lo = ms[x]->offset,
                                         .hi = ms[x]->offset + ms[x]->extent,
                                         .problem = i,
                                         .what = "ABDC"[x]};
    }
    val_span *orig = malloc((ns ? ns : 1) * sizeof(*orig));
    CHECK(orig != NULL);
    memcpy(orig, spans, ns * sizeof(*orig));
    fuzz_spans f = {orig, ns};
    val_spans_conflicts(spans, ns, fuzz_conflict, &f);
    free(orig);
    free(spans);
    if (first != GEMM_OK)
        return first;
    snprintf(msg, len, "ok");
    return GEMM_OK;
}

static int fuzz_blas3(const Gemm__Blas3Request *r, char *msg, size_t len)
{
    val_blas3 v;
    val_blas3_resolved res;
    val_limits lim = {.max_dim = FUZZ_MAX_DIM};
    blas3_desc(r, &v);
    int rv = val_blas3_check(&v, &lim, fake_lookup, NULL, &res, msg, len);
    if (rv != GEMM_OK)
        return rv;
    bool tri = v.routine == VAL_TRMM || v.routine == VAL_TRSM;
    bool rank = !tri && v.routine != VAL_SYMM && v.routine != VAL_HEMM;
    size_t es = gemm_dtype_size(v.dtype);
    CHECK(v.routine >= VAL_SYMM && v.routine <= VAL_TRSM);
    CHECK(v.n >= 1 && v.n <= FUZZ_MAX_DIM);
    CHECK(rank ? v.k >= 1 && v.k <= FUZZ_MAX_DIM
               : v.m >= 1 && v.m <= FUZZ_MAX_DIM);
    CHECK(v.trans == VAL_OP_N || gemm_dtype_is_complex(v.dtype) ||
          v.trans == VAL_OP_T);
    uint64_t ka = rank ? 0 : (v.right ? v.n : v.m);
    if (rank)
        check_matrix(&res.a, v.trans == VAL_OP_N ? v.n : v.k,
                     v.trans == VAL_OP_N ? v.k : v.n, es);
    else
        check_matrix(&res.a, ka, ka, es);
    const val_matrix *out = tri ? &res.b : &res.c;
    check_matrix(out, rank ? v.n : v.m, v.n, es);
    CHECK(apart(out, &res.a));
    if (!tri && res.has_b)
        CHECK(apart(out, &res.b));
    return GEMM_OK;
}

static int fuzz_register(const Gemm__RegisterBufferRequest *r, char *msg,
                         size_t len)
{
    int rv = req_register_check(r, msg, len);
    if (rv == GEMM_OK)
        CHECK(r->has_fd_ticket && r->has_size && r->size >= 1);
    else
        CHECK(rv == GEMM_ERR_INVALID);
    return rv;
}

/* Packs the reply the daemon would send and decodes it again. */
static void reply_roundtrip(uint64_t id, int status, const char *msg,
                            Gemm__Request__BodyCase body)
{
    Gemm__Reply r = GEMM__REPLY__INIT;
    Gemm__GemmReply gr = GEMM__GEMM_REPLY__INIT;
    Gemm__RegisterBufferReply rr = GEMM__REGISTER_BUFFER_REPLY__INIT;
    Gemm__ListKernelsReply lk = GEMM__LIST_KERNELS_REPLY__INIT;
    Gemm__KernelInfo ki[2] = {GEMM__KERNEL_INFO__INIT, GEMM__KERNEL_INFO__INIT};
    Gemm__KernelInfo *kis[2] = {&ki[0], &ki[1]};
    r.has_version = true;
    r.version = GEMM_PROTOCOL_VERSION;
    r.has_id = true;
    r.id = id;
    r.has_status = true;
    r.status = status;
    if (status != GEMM_OK) {
        r.message = (char *)msg;
    } else if (body == GEMM__REQUEST__BODY_GEMM) {
        gr.has_total_us = true;
        gr.total_us = id;
        gr.kernel = "openblas";
        gr.has_kernel_ns = true;
        gr.kernel_ns = id;
        r.body_case = GEMM__REPLY__BODY_GEMM;
        r.gemm = &gr;
    } else if (body == GEMM__REQUEST__BODY_LIST_KERNELS) {
        ki[0].name = "openblas";
        ki[0].summary = "the reference";
        ki[0].has_reference = ki[0].reference = true;
        ki[1].name = "cpu-naive";
        ki[1].summary = "";
        ki[1].has_ladder = true;
        ki[1].ladder = 1;
        ki[1].has_ab_types = true;
        ki[1].ab_types = 0xe;
        lk.n_kernels = 2;
        lk.kernels = kis;
        r.body_case = GEMM__REPLY__BODY_LIST_KERNELS;
        r.list_kernels = &lk;
    } else if (body == GEMM__REQUEST__BODY_REGISTER_BUFFER) {
        rr.has_buffer_id = true;
        rr.buffer_id = ~id;
        r.body_case = GEMM__REPLY__BODY_REGISTER_BUFFER;
        r.register_buffer = &rr;
    }
    size_t n = gemm__reply__get_packed_size(&r);
    uint8_t *buf = malloc(n ? n : 1);
    CHECK(buf != NULL);
    CHECK(gemm__reply__pack(&r, buf) == n);
    Gemm__Reply *back = gemm__reply__unpack(NULL, n, buf);
    CHECK(back != NULL);
    CHECK(back->id == id && back->status == status);
    if (status != GEMM_OK)
        CHECK(back->message != NULL && strcmp(back->message, msg) == 0);
    if (r.body_case == GEMM__REPLY__BODY_GEMM)
        CHECK(back->body_case == r.body_case && back->gemm->kernel != NULL &&
              strcmp(back->gemm->kernel, "openblas") == 0 &&
              back->gemm->kernel_ns == id);
    if (r.body_case == GEMM__REPLY__BODY_LIST_KERNELS)
        CHECK(back->body_case == r.body_case &&
              back->list_kernels->n_kernels == 2 &&
              strcmp(back->list_kernels->kernels[1]->name, "cpu-naive") == 0 &&
              back->list_kernels->kernels[1]->ladder == 1 &&
              back->list_kernels->kernels[0]->reference);
    gemm__reply__free_unpacked(back, NULL);
    free(buf);
}

/* A decoded request without unknown fields packs again into the same
 * request. */
static void request_roundtrip(const Gemm__Request *rq)
{
    if (has_unknown(rq))
        return;
    size_t n = gemm__request__get_packed_size(rq);
    uint8_t *buf = malloc(n ? n : 1);
    CHECK(buf != NULL);
    CHECK(gemm__request__pack(rq, buf) == n);
    Gemm__Request *back = gemm__request__unpack(NULL, n, buf);
    CHECK(back != NULL);
    CHECK(back->body_case == rq->body_case);
    CHECK(back->has_id == rq->has_id && back->id == rq->id);
    gemm__request__free_unpacked(back, NULL);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Gemm__Request *rq = NULL;
    char msg[256] = "";
    int rv = req_decode(data, size, FUZZ_MAX_MESSAGE, &rq, msg, sizeof(msg));
    if (rv != GEMM_OK) {
        CHECK(rq == NULL && msg[0] != '\0');
        CHECK(size > FUZZ_MAX_MESSAGE ? rv == GEMM_ERR_TOO_LARGE
                                      : rv == GEMM_ERR_PROTOCOL);
        reply_roundtrip(0, rv, msg, GEMM__REQUEST__BODY__NOT_SET);
        return 0;
    }
    request_roundtrip(rq);
    uint64_t id = rq->has_id ? rq->id : 0;
    rv = req_check_envelope(rq, msg, sizeof(msg));
    if (rv == GEMM_OK) {
        switch (rq->body_case) {
        case GEMM__REQUEST__BODY_GEMM:
            rv = fuzz_gemm(rq->gemm, msg, sizeof(msg));
            break;
        case GEMM__REQUEST__BODY_REGISTER_BUFFER:
            rv = fuzz_register(rq->register_buffer, msg, sizeof(msg));
            break;
        case GEMM__REQUEST__BODY_BLAS3:
            rv = fuzz_blas3(rq->blas3, msg, sizeof(msg));
            break;
        case GEMM__REQUEST__BODY_BATCH:
            rv = fuzz_batch(rq->batch, msg, sizeof(msg));
            break;
        default:
            break;
        }
    }
    reply_roundtrip(id, rv, msg, rq->body_case);
    gemm__request__free_unpacked(rq, NULL);
    return 0;
}
