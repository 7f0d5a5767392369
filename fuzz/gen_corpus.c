/*
 * gen_corpus.c: writes the seed corpus of the fuzz targets, one valid
 * gemm.Request per file: hello, status, register, release, list_kernels,
 * GEMMs over every dtype pair with transposes, leading dimensions,
 * offsets and C = D, some naming a kernel and a precision, and Blas3
 * requests (syrk, her2k, trsm, symm, hemm, trmm) with their flags, and
 * Batch requests (a grouped one with an M = 0 problem and per-problem
 * scalars, a strided one with a shared operand).
 * Buffer ids follow fuzz_request.c's fake table (1: 4 KiB, 2: 1 MiB,
 * 3: 2^40 bytes, bit 63 set: size in the low 48 bits); fuzz_daemon maps them
 * onto its real buffers. Usage: gen_corpus DIR. The files are committed under
 * fuzz/corpus/; rerun this when the protocol grows.
 */
#include "gemm.pb-c.h"

#include <gemm/types.h>

#include <stdio.h>
#include <stdlib.h>

static const char *dir;

static int write_request(const char *name, Gemm__Request *rq)
{
    char path[512];
    size_t n = gemm__request__get_packed_size(rq);
    uint8_t *buf = malloc(n ? n : 1);
    if (buf == NULL)
        return -1;
    gemm__request__pack(rq, buf);
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    int rv = (f != NULL && fwrite(buf, 1, n, f) == n) ? 0 : -1;
    if (f != NULL && fclose(f) != 0)
        rv = -1;
    free(buf);
    if (rv != 0)
        perror(path);
    return rv;
}

static void envelope(Gemm__Request *rq, uint64_t id)
{
    gemm__request__init(rq);
    rq->has_version = 1;
    rq->version = GEMM_PROTOCOL_VERSION;
    rq->has_id = 1;
    rq->id = id;
}

static void operand(Gemm__Operand *o, uint64_t buf, uint64_t off, uint64_t ld)
{
    gemm__operand__init(o);
    o->has_buffer_id = 1;
    o->buffer_id = buf;
    o->has_offset = off != 0;
    o->offset = off;
    o->has_ld = ld != 0;
    o->ld = ld;
}

typedef struct seed_gemm {
    const char *name;
    uint64_t m, n, k;
    int ab, cd;
    int ta, tb;
    float alpha, beta;
    uint64_t lda, ldb, ldd, off; /* off: byte offset of D (C = D) */
    uint64_t buf_ab, buf_cd;
    int precision;            /* gemm_precision; 0: absent */
    const char *kernel;       /* NULL: absent */
    int conj;                 /* bit 0: conj_a, bit 1: conj_b (complex) */
    double alpha_im, beta_im; /* sent with alpha64/beta64 when non-zero */
} seed_gemm;

/* one seed a row */
/* clang-format off */
static const seed_gemm gemms[] = {
    {"gemm_f32_nn", 8, 8, 8, GEMM_FP32, GEMM_FP32, 0, 0, 1, 0, 0, 0, 0, 0, 1, 2,
     0, NULL, 0, 0, 0},
    {"gemm_bf16_f32_tn", 16, 4, 32, GEMM_BF16, GEMM_FP32, 1, 0, 1, 0, 0, 0, 0,
     0, 2, 3, 0, NULL, 0, 0, 0},
    {"gemm_f16_f16_nt_beta", 7, 9, 5, GEMM_FP16, GEMM_FP16, 0, 1, 2, 0.5f, 0, 0,
     16, 256, 2, 2, 0, NULL, 0, 0, 0},
    {"gemm_bf16_bf16_tt_ld", 3, 5, 11, GEMM_BF16, GEMM_BF16, 1, 1, -1, 1, 4, 12,
     8, 64, 3, 3, 0, NULL, 0, 0, 0},
    {"gemm_f16_f32_ld", 33, 17, 65, GEMM_FP16, GEMM_FP32, 0, 0, 1, 0, 80, 24,
     20, 4096, 2, 1ull << 63 | 65536, 0, NULL, 0, 0, 0},
    {"gemm_bf16_f16_big", 1024, 1024, 1024, GEMM_BF16, GEMM_FP16, 0, 1, 1, 0, 0,
     0, 0, 0, 3, 3, 0, NULL, 0, 0, 0},
    {"gemm_f32_tf32_kernel", 24, 40, 16, GEMM_FP32, GEMM_FP32, 0, 1, 1, 0, 0, 0,
     0, 0, 2, 2, GEMM_PRECISION_TF32, "openblas", 0, 0, 0},
    {"gemm_f32_fp32_auto", 9, 7, 33, GEMM_FP32, GEMM_FP32, 1, 0, 1, 0, 0, 0, 0,
     0, 2, 2, GEMM_PRECISION_FP32, "auto", 0, 0, 0},
    {"gemm_bf16_naive", 5, 6, 7, GEMM_BF16, GEMM_FP32, 0, 0, 1, 0, 0, 0, 0, 0,
     2, 2, 0, "cpu-naive", 0, 0, 0},
    {"gemm_f64_nt_beta", 12, 10, 9, GEMM_FP64, GEMM_FP64, 0, 1, 0.5f, 2, 0, 0,
     0, 0, 2, 2, 0, NULL, 0, 0, 0},
    {"gemm_c128_conj_complex", 6, 5, 4, GEMM_COMPLEX128, GEMM_COMPLEX128, 1, 1,
     1, 1, 0, 0, 0, 0, 2, 2, 0, NULL, 3, 0.5, -1},
    {"gemm_c64_ct_ld", 7, 3, 5, GEMM_COMPLEX64, GEMM_COMPLEX64, 1, 0, 1, 0, 9,
     0, 4, 0, 2, 2, 0, "openblas", 1, -2, 0},
    {"gemm_s8_s32_tn_beta", 9, 7, 33, GEMM_INT8, GEMM_INT32, 1, 0, -3, 2, 11,
     0, 8, 0, 2, 2, 0, NULL, 0, 0, 0},
    {"gemm_s8_s32_nt_kernel", 16, 16, 64, GEMM_INT8, GEMM_INT32, 0, 1, 1, 0, 0,
     0, 0, 0, 2, 2, 0, "cpu-s8", 0, 0, 0},
};
/* clang-format on */

static int write_gemm(const seed_gemm *s, uint64_t id)
{
    Gemm__Request rq;
    Gemm__GemmRequest g;
    Gemm__Operand a, b, d;
    envelope(&rq, id);
    gemm__gemm_request__init(&g);
    g.has_m = g.has_n = g.has_k = 1;
    g.m = s->m;
    g.n = s->n;
    g.k = s->k;
    g.has_ab_type = g.has_cd_type = 1;
    g.ab_type = (Gemm__DType)s->ab;
    g.cd_type = (Gemm__DType)s->cd;
    g.has_trans_a = s->ta;
    g.trans_a = s->ta;
    g.has_trans_b = s->tb;
    g.trans_b = s->tb;
    g.has_alpha = s->alpha != 1.0f;
    g.alpha = s->alpha;
    g.has_beta = s->beta != 0.0f;
    g.beta = s->beta;
    /* A at 0, B after it, both in buf_ab; C = D at off in buf_cd (apart
     * from A and B even when buf_cd == buf_ab: off is past them then) */
    uint64_t esize = gemm_dtype_size((gemm_dtype)s->ab);
    uint64_t arows = s->ta ? s->k : s->m, acols = s->ta ? s->m : s->k;
    uint64_t lda = s->lda ? s->lda : acols;
    uint64_t aext = ((arows - 1) * lda + acols) * esize;
    uint64_t boff = (aext + 63) / 64 * 64;
    uint64_t bcols = s->tb ? s->k : s->n, brows = s->tb ? s->n : s->k;
    uint64_t ldb = s->ldb ? s->ldb : bcols;
    uint64_t doff = s->off;
    if (s->buf_cd == s->buf_ab) {
        uint64_t bend = boff + ((brows - 1) * ldb + bcols) * esize;
        doff += (bend + 63) / 64 * 64;
    }
    operand(&a, s->buf_ab, 0, s->lda);
    operand(&b, s->buf_ab, boff, s->ldb);
    operand(&d, s->buf_cd, doff, s->ldd);
    g.a = &a;
    g.b = &b;
    g.d = &d;
    if (s->beta != 0.0f)
        g.c = &d;
    if (s->precision != 0) {
        g.has_precision = 1;
        g.precision = (Gemm__Precision)s->precision;
    }
    g.kernel = (char *)s->kernel;
    g.has_conj_a = g.conj_a = (s->conj & 1) != 0;
    g.has_conj_b = g.conj_b = (s->conj & 2) != 0;
    if (s->alpha_im != 0 || s->beta_im != 0) {
        g.has_alpha64 = g.has_beta64 = 1;
        g.alpha64 = s->alpha;
        g.beta64 = s->beta;
        g.has_alpha_imag = s->alpha_im != 0;
        g.alpha_imag = s->alpha_im;
        g.has_beta_imag = s->beta_im != 0;
        g.beta_imag = s->beta_im;
    }
    if (s->beta_im != 0)
        g.c = &d;
    rq.body_case = GEMM__REQUEST__BODY_GEMM;
    rq.gemm = &g;
    return write_request(s->name, &rq);
}

typedef struct seed_blas3 {
    const char *name;
    Gemm__Routine routine;
    Gemm__DType dtype;
    int right, lower, unit;
    Gemm__Op trans;
    uint64_t m, n, k, lda;
    double alpha_im, beta;
} seed_blas3;

static const seed_blas3 blas3s[] = {
    {"blas3_dsyrk_n_lower", GEMM__ROUTINE__SYRK, GEMM__DTYPE__FP64, 0, 1, 0,
     GEMM__OP__OP_N, 0, 16, 8, 0, 0, 0.5},
    {"blas3_zher2k_c", GEMM__ROUTINE__HER2K, GEMM__DTYPE__COMPLEX128, 0, 0, 0,
     GEMM__OP__OP_C, 0, 9, 5, 11, -0.25, 1},
    {"blas3_strsm_right_t_unit", GEMM__ROUTINE__TRSM, GEMM__DTYPE__FP32, 1, 1,
     1, GEMM__OP__OP_T, 7, 12, 0, 0, 0, 0},
    {"blas3_csymm_right", GEMM__ROUTINE__SYMM, GEMM__DTYPE__COMPLEX64, 1, 0, 0,
     GEMM__OP__OP_N, 6, 10, 0, 12, 0.5, 2},
    {"blas3_zhemm_left", GEMM__ROUTINE__HEMM, GEMM__DTYPE__COMPLEX128, 0, 1, 0,
     GEMM__OP__OP_N, 8, 4, 0, 0, 1, 0},
    {"blas3_dtrmm_left_n", GEMM__ROUTINE__TRMM, GEMM__DTYPE__FP64, 0, 0, 0,
     GEMM__OP__OP_N, 5, 3, 0, 6, 0, 0},
};

static int write_blas3(const seed_blas3 *s, uint64_t id)
{
    Gemm__Request rq;
    Gemm__Blas3Request r = GEMM__BLAS3_REQUEST__INIT;
    Gemm__Operand a, b, c;
    envelope(&rq, id);
    r.has_routine = r.has_dtype = 1;
    r.routine = s->routine;
    r.dtype = s->dtype;
    r.has_right = s->right;
    r.right = s->right;
    r.has_lower = s->lower;
    r.lower = s->lower;
    r.has_unit_diag = s->unit;
    r.unit_diag = s->unit;
    r.has_trans = s->trans != GEMM__OP__OP_N;
    r.trans = s->trans;
    r.has_m = s->m != 0;
    r.m = s->m;
    r.has_n = r.has_k = 1;
    r.n = s->n;
    r.k = s->k;
    r.has_alpha_imag = s->alpha_im != 0;
    r.alpha_imag = s->alpha_im;
    r.has_beta = s->beta != 0;
    r.beta = s->beta;
    operand(&a, 2, 0, s->lda);
    operand(&b, 2, 16 << 10, 0);
    operand(&c, 2, 32 << 10, 0);
    r.a = &a;
    if (s->routine != GEMM__ROUTINE__SYRK && s->routine != GEMM__ROUTINE__HERK)
        r.b = &b;
    if (s->routine != GEMM__ROUTINE__TRMM && s->routine != GEMM__ROUTINE__TRSM)
        r.c = &c;
    rq.body_case = GEMM__REQUEST__BODY_BLAS3;
    rq.blas3 = &r;
    return write_request(s->name, &rq);
}

/* A grouped batch: three fp32 problems (the second with M = 0, the
 * third with its own scalars and C in place) over buffer 2. */
static int write_batch_grouped(uint64_t id)
{
    Gemm__Request rq;
    Gemm__BatchRequest b = GEMM__BATCH_REQUEST__INIT;
    Gemm__GemmRequest op = GEMM__GEMM_REQUEST__INIT;
    Gemm__BatchProblem p[3], *pp[3];
    Gemm__Operand o[3][4];
    envelope(&rq, id);
    op.has_ab_type = op.has_cd_type = 1;
    op.ab_type = op.cd_type = GEMM__DTYPE__FP32;
    static const uint64_t dims[3][3] = {{16, 8, 4}, {0, 8, 4}, {5, 7, 9}};
    for (int i = 0; i < 3; i++) {
        gemm__batch_problem__init(&p[i]);
        p[i].has_m = p[i].has_n = p[i].has_k = 1;
        p[i].m = dims[i][0];
        p[i].n = dims[i][1];
        p[i].k = dims[i][2];
        uint64_t base = (uint64_t)i << 14;
        operand(&o[i][0], 2, base, 0);
        operand(&o[i][1], 2, base + 4096, 0);
        operand(&o[i][3], 2, base + 8192, 0);
        p[i].a = &o[i][0];
        p[i].b = &o[i][1];
        p[i].d = &o[i][3];
        pp[i] = &p[i];
    }
    p[2].has_trans_a = p[2].trans_a = 1;
    p[2].has_alpha = p[2].has_beta = 1;
    p[2].alpha = 0.5;
    p[2].beta = -1.0;
    p[2].c = &o[2][3];
    b.op = &op;
    b.n_problems = 3;
    b.problems = pp;
    rq.body_case = GEMM__REQUEST__BODY_BATCH;
    rq.batch = &b;
    return write_request("batch_grouped", &rq);
}

/* A strided batch: 8 bf16 -> fp32 32x16x8 problems, B shared (stride 0),
 * A and D strided, a kernel named. */
static int write_batch_strided(uint64_t id)
{
    Gemm__Request rq;
    Gemm__BatchRequest b = GEMM__BATCH_REQUEST__INIT;
    Gemm__GemmRequest op = GEMM__GEMM_REQUEST__INIT;
    Gemm__Operand a, bb, d;
    envelope(&rq, id);
    op.has_m = op.has_n = op.has_k = 1;
    op.m = 32;
    op.n = 16;
    op.k = 8;
    op.has_ab_type = op.has_cd_type = 1;
    op.ab_type = GEMM__DTYPE__BF16;
    op.cd_type = GEMM__DTYPE__FP32;
    op.kernel = "auto";
    operand(&a, 2, 0, 0);
    operand(&bb, 2, 8192, 0);
    operand(&d, 2, 16384, 16);
    op.a = &a;
    op.b = &bb;
    op.d = &d;
    b.op = &op;
    b.has_count = 1;
    b.count = 8;
    b.has_stride_a = b.has_stride_d = 1;
    b.stride_a = 32 * 8 * 2;
    b.stride_d = 32 * 16 * 4;
    rq.body_case = GEMM__REQUEST__BODY_BATCH;
    rq.batch = &b;
    return write_request("batch_strided", &rq);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_corpus DIR\n");
        return 2;
    }
    dir = argv[1];
    int rv = 0;
    Gemm__Request rq;

    Gemm__HelloRequest hello = GEMM__HELLO_REQUEST__INIT;
    hello.client_name = "fuzz-seed";
    envelope(&rq, 1);
    rq.body_case = GEMM__REQUEST__BODY_HELLO;
    rq.hello = &hello;
    rv |= write_request("hello", &rq);

    Gemm__StatusRequest status = GEMM__STATUS_REQUEST__INIT;
    envelope(&rq, 2);
    rq.body_case = GEMM__REQUEST__BODY_STATUS;
    rq.status = &status;
    rv |= write_request("status", &rq);

    Gemm__RegisterBufferRequest reg = GEMM__REGISTER_BUFFER_REQUEST__INIT;
    reg.name = "/gemm-fuzz-0123456789abcdef";
    reg.has_size = 1;
    reg.size = 1 << 20;
    envelope(&rq, 3);
    rq.body_case = GEMM__REQUEST__BODY_REGISTER_BUFFER;
    rq.register_buffer = &reg;
    rv |= write_request("register", &rq);

    Gemm__ReleaseBufferRequest rel = GEMM__RELEASE_BUFFER_REQUEST__INIT;
    rel.has_buffer_id = 1;
    rel.buffer_id = 2;
    envelope(&rq, 4);
    rq.body_case = GEMM__REQUEST__BODY_RELEASE_BUFFER;
    rq.release_buffer = &rel;
    rv |= write_request("release", &rq);

    Gemm__ListKernelsRequest lk = GEMM__LIST_KERNELS_REQUEST__INIT;
    envelope(&rq, 5);
    rq.body_case = GEMM__REQUEST__BODY_LIST_KERNELS;
    rq.list_kernels = &lk;
    rv |= write_request("list_kernels", &rq);

    for (size_t i = 0; i < sizeof(gemms) / sizeof(gemms[0]); i++)
        rv |= write_gemm(&gemms[i], 100 + i);
    for (size_t i = 0; i < sizeof(blas3s) / sizeof(blas3s[0]); i++)
        rv |= write_blas3(&blas3s[i], 200 + i);
    rv |= write_batch_grouped(300);
    rv |= write_batch_strided(301);
    return rv ? 1 : 0;
}
