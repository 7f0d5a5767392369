/*
 * cases.c: layout, poisoning, reference and verification of one GEMM test
 * case in a client buffer (see cases.h).
 */
#include "util/cases.h"
#include "util/data.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t align_up(uint64_t x, uint64_t a)
{
    return (x + a - 1) / a * a;
}

static uint64_t ld_of(uint64_t cols, uint32_t pad)
{
    return pad == TU_TIGHT ? 0 : cols + pad;
}

/* Fills op and the operands' offsets; returns the end of the region. */
static size_t layout(const tu_case *cs, gemm_op *op)
{
    size_t r, c, ld, esab = gemm_dtype_size(cs->ab),
                     escd = gemm_dtype_size(cs->cd);
    uint64_t at = cs->base;

    gemm_op_init(op, cs->m, cs->n, cs->k, cs->ab, cs->cd);
    op->trans_a = cs->ta;
    op->trans_b = cs->tb;
    op->alpha = cs->alpha;
    op->beta = cs->beta;
    op->a.ld = ld_of(cs->ta ? cs->m : cs->k, cs->pad_a);
    op->b.ld = ld_of(cs->tb ? cs->k : cs->n, cs->pad_b);
    op->d.ld = ld_of(cs->n, cs->pad_d);
    op->c.ld = cs->c_mode == TU_C_INPLACE ? op->d.ld : ld_of(cs->n, cs->pad_c);
    /* 6-byte gaps: legal for every type, rarely 16-byte aligned */
    at = align_up(at, esab);
    op->a.offset = at;
    tu_shape(op, 'a', &r, &c, &ld);
    at = align_up(at + tu_extent(r, c, ld) * esab + 6, esab);
    op->b.offset = at;
    tu_shape(op, 'b', &r, &c, &ld);
    at = align_up(at + tu_extent(r, c, ld) * esab + 6, escd);
    op->d.offset = at;
    tu_shape(op, 'd', &r, &c, &ld);
    at = align_up(at + tu_extent(r, c, ld) * escd + 6, escd);
    if (cs->c_mode == TU_C_SEPARATE || cs->c_mode == TU_C_UNREAD) {
        op->c.offset = at;
        tu_shape(op, 'c', &r, &c, &ld);
        at += tu_extent(r, c, ld) * escd + 6;
    } else if (cs->c_mode == TU_C_INPLACE) {
        op->c.offset = op->d.offset;
    }
    return at;
}

size_t tu_case_bytes(const tu_case *cs)
{
    gemm_op op;
    return layout(cs, &op);
}

bool tu_case_prepare(const tu_case *cs, gemm_buffer *buf, tu_prepared *p,
                     char *why, size_t whylen)
{
    size_t r, c, ld, end;
    uint64_t seed = cs->seed ? cs->seed : 0x9E3779B97F4A7C15ULL;
    gemm_op *op = &p->op;

    memset(p, 0, sizeof(*p));
    end = layout(cs, op);
    p->data = gemm_buffer_data(buf);
    p->lo = cs->base;
    p->hi = end + 64;
    if (p->hi > gemm_buffer_size(buf)) {
        snprintf(why, whylen, "case needs %zu bytes, buffer has %zu", p->hi,
                 gemm_buffer_size(buf));
        return false;
    }
    op->a.buf = op->b.buf = op->d.buf = buf;
    op->c.buf = cs->c_mode == TU_C_NONE ? NULL : buf;

    memset(p->data + p->lo, 0xff, p->hi - p->lo);
    tu_shape(op, 'a', &r, &c, &ld);
    tu_fill(p->data + op->a.offset, cs->ab, r, c, ld, &seed);
    tu_shape(op, 'b', &r, &c, &ld);
    tu_fill(p->data + op->b.offset, cs->ab, r, c, ld, &seed);
    if (cs->c_mode == TU_C_SEPARATE || cs->c_mode == TU_C_INPLACE) {
        tu_shape(op, 'c', &r, &c, &ld);
        tu_fill(p->data + op->c.offset, cs->cd, r, c, ld, &seed);
    }

    p->ref = malloc(cs->m * cs->n * sizeof(double));
    p->scale = malloc(cs->m * cs->n * sizeof(double));
    p->snapshot = malloc(p->hi - p->lo);
    if (p->ref == NULL || p->scale == NULL || p->snapshot == NULL)
        abort();
    tu_ref_gemm(op, p->data + op->a.offset, p->data + op->b.offset,
                op->c.buf ? p->data + op->c.offset : NULL, p->ref, p->scale);
    memcpy(p->snapshot, p->data + p->lo, p->hi - p->lo);
    return true;
}

bool tu_case_verify(const tu_prepared *p, char *why, size_t whylen)
{
    const gemm_op *op = &p->op;
    size_t r, c, ldd, es = gemm_dtype_size(op->cd_type);
    tu_shape(op, 'd', &r, &c, &ldd);

    if (!tu_compare(op, p->data + op->d.offset, p->ref, p->scale, why, whylen))
        return false;
    for (size_t o = p->lo; o < p->hi; o++) {
        if (p->data[o] == p->snapshot[o - p->lo])
            continue;
        if (o >= op->d.offset) {
            size_t e = (o - op->d.offset) / es;
            if (e / ldd < r && e % ldd < c)
                continue; /* an element of D */
        }
        snprintf(why, whylen,
                 "byte %zu of the buffer changed (0x%02x -> 0x%02x) but is "
                 "not part of D (D at offset %llu, %zu x %zu, ld %zu; m=%llu "
                 "n=%llu k=%llu %s->%s)",
                 o, p->snapshot[o - p->lo], p->data[o],
                 (unsigned long long)op->d.offset, r, c, ldd,
                 (unsigned long long)op->m, (unsigned long long)op->n,
                 (unsigned long long)op->k, gemm_dtype_name(op->ab_type),
                 gemm_dtype_name(op->cd_type));
        return false;
    }
    return true;
}

void tu_case_free(tu_prepared *p)
{
    free(p->ref);
    free(p->scale);
    free(p->snapshot);
    p->ref = p->scale = NULL;
    p->snapshot = NULL;
}

int tu_case_run(gemm_client *c, gemm_buffer *buf, const tu_case *cs, char *why,
                size_t whylen)
{
    tu_prepared p;
    int rv;
    if (!tu_case_prepare(cs, buf, &p, why, whylen))
        return -1;
    rv = gemm_run(c, &p.op, NULL);
    if (rv != GEMM_OK)
        snprintf(why, whylen, "gemm_run: %s (%s)", gemm_strerror(rv),
                 gemm_last_error_message());
    else if (!tu_case_verify(&p, why, whylen))
        rv = -1;
    tu_case_free(&p);
    return rv;
}

void tu_case_random(tu_case *cs, uint64_t *s, uint64_t maxdim)
{
    static const gemm_dtype combos[7][2] = {
        {GEMM_BF16, GEMM_BF16}, {GEMM_BF16, GEMM_FP16}, {GEMM_BF16, GEMM_FP32},
        {GEMM_FP16, GEMM_BF16}, {GEMM_FP16, GEMM_FP16}, {GEMM_FP16, GEMM_FP32},
        {GEMM_FP32, GEMM_FP32},
    };
    uint64_t x = tu_rand(s);
    memset(cs, 0, sizeof(*cs));
    cs->m = 1 + tu_rand(s) % maxdim;
    cs->n = 1 + tu_rand(s) % maxdim;
    cs->k = 1 + tu_rand(s) % maxdim;
    cs->ab = combos[x % 7][0];
    cs->cd = combos[x % 7][1];
    x /= 7;
    cs->ta = x & 1;
    cs->tb = (x >> 1) & 1;
    x >>= 2;
    tu_case_c_mode(cs, (unsigned)(x % 4));
    x >>= 2;
    cs->pad_a = x % 3 == 0 ? TU_TIGHT : (uint32_t)(x % 5);
    cs->pad_b = (x >> 3) % 3 == 0 ? TU_TIGHT : (uint32_t)((x >> 3) % 4);
    cs->pad_c = (x >> 6) % 2 ? 3 : TU_TIGHT;
    cs->pad_d = (x >> 7) % 3 == 0 ? TU_TIGHT : (uint32_t)((x >> 7) % 7);
    cs->base = 2 * ((x >> 10) % 9);
    cs->seed = tu_rand(s) | 1;
}

tu_case tu_case_plain(uint64_t m, uint64_t n, uint64_t k, gemm_dtype ab,
                      gemm_dtype cd, uint64_t seed)
{
    tu_case cs = {.m = m,
                  .n = n,
                  .k = k,
                  .ab = ab,
                  .cd = cd,
                  .alpha = 1.0f,
                  .c_mode = TU_C_NONE,
                  .pad_a = TU_TIGHT,
                  .pad_b = TU_TIGHT,
                  .pad_c = TU_TIGHT,
                  .pad_d = TU_TIGHT,
                  .seed = seed};
    return cs;
}

void tu_case_c_mode(tu_case *cs, unsigned sel)
{
    switch (sel % 4) {
    case 0:
        cs->c_mode = TU_C_NONE, cs->alpha = 1.0f, cs->beta = 0.0f;
        break;
    case 1:
        cs->c_mode = TU_C_SEPARATE, cs->alpha = 0.75f, cs->beta = -0.5f;
        break;
    case 2:
        cs->c_mode = TU_C_INPLACE, cs->alpha = -1.25f, cs->beta = 1.0f;
        break;
    default:
        cs->c_mode = TU_C_UNREAD, cs->alpha = 2.0f, cs->beta = 0.0f;
        break;
    }
}
