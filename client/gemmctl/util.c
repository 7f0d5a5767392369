/*
 * util.c: the helpers gemmctl's subcommands and main.c share: error
 * messages, opening a client with the --timeout main.c was given, the
 * precision option, JSON strings and the random fill for generated
 * matrices. The lowest layer of gemmctl: it uses only libgemmclient.
 */
#include "gemmctl.h"

#include <rnd.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

int ctl_error(int code, const char *fmt, ...)
{
    va_list ap;
    fputs("gemmctl: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return code;
}

int ctl_parse_precision(const char *cmd, const char *opt, const char *s,
                        gemm_precision *out)
{
    if (gemm_precision_parse(s, out) != GEMM_OK)
        return ctl_error(EXIT_USAGE,
                         "%s: %s wants default, tf32 or fp32, not '%s'", cmd,
                         opt, s);
    return EXIT_OK;
}

int ctl_fail(int rv, const char *what)
{
    const char *msg = gemm_last_error_message();
    if (msg == NULL || msg[0] == '\0')
        msg = gemm_strerror(rv);
    if (what != NULL)
        return ctl_error(EXIT_RUNTIME, "%s: %s", what, msg);
    return ctl_error(EXIT_RUNTIME, "%s", msg);
}

/* --timeout: per-request timeout in ms, 0 = the library's default. Set
 * once by main.c before any subcommand runs. */
static int ctl_timeout_ms;

void ctl_set_timeout(int ms)
{
    ctl_timeout_ms = ms;
}

int ctl_open(const char *url, gemm_client **out)
{
    int rv = ctl_timeout_ms != 0
                 ? gemm_client_open_timeout(out, url, ctl_timeout_ms)
                 : gemm_client_open(out, url);
    if (rv != GEMM_OK)
        return ctl_fail(rv, NULL);
    if (ctl_timeout_ms != 0)
        gemm_client_set_timeout(*out, ctl_timeout_ms);
    return EXIT_OK;
}

void ctl_json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch < 0x20)
            printf("\\u%04x", ch);
        else
            putchar(ch);
    }
    putchar('"');
}

typedef struct fill_arg {
    void *dst;
    gemm_dtype t;
    uint64_t s; /* the stream's state before the first value */
} fill_arg;

/* Values [lo, hi) of one fill (rnd_parallel's part; a 16-bit part starts
 * at a multiple of 4). */
static void fill_part(void *p, size_t lo, size_t hi)
{
    const fill_arg *f = p;
    const uint64_t s = f->s;
    if (f->t == GEMM_INT8 || f->t == GEMM_INT32) { /* every int8 value */
        for (size_t i = lo; i < hi; i++) {
            int8_t v = (int8_t)(rnd_at(s, i) >> 56);
            if (f->t == GEMM_INT8)
                ((int8_t *)f->dst)[i] = v;
            else
                ((int32_t *)f->dst)[i] = v;
        }
        return;
    }
    if (f->t == GEMM_FP64) {
        double *d = f->dst;
        for (size_t i = lo; i < hi; i++)
            d[i] = (double)(rnd_at(s, i) >> 11) * 0x1p-52 - 1.0 + 0x1p-53;
        return;
    }
    float tmp[4096];
    size_t esize = gemm_dtype_size(f->t);
    for (size_t off = lo; off < hi; off += 4096) {
        size_t len = hi - off < 4096 ? hi - off : 4096;
        if (f->t == GEMM_FP32) {
            for (size_t i = 0; i < len; i++)
                tmp[i] = rnd_f24(rnd_at(s, off + i));
        } else {
            for (size_t i = 0; i < len; i += 4) {
                uint64_t z = rnd_at(s, (off + i) / 4);
                for (size_t q = 0; q < 4 && i + q < len; q++)
                    tmp[i + q] = rnd_lane16(z, (unsigned)q);
            }
        }
        gemm_convert((char *)f->dst + off * esize, f->t, tmp, GEMM_FP32, len);
    }
}

/* Uniform values in [-1, 1), never 0. fp64 gets 53 random bits per value,
 * fp32 24; the 16-bit types keep at most 11 significant bits, so each draw
 * gives four values of 16 bits, (u - 32767.5) / 32768 (exact in fp32,
 * rounded once to the type). Complex types: both parts so. Filled by the
 * caller and one thread per idle CPU; the values are those of one
 * splitmix64 stream drawn in order (common/rnd.h). */
void ctl_fill_random(void *dst, gemm_dtype t, size_t n, uint64_t *state)
{
    if (t == GEMM_COMPLEX128 || t == GEMM_COMPLEX64) {
        t = t == GEMM_COMPLEX128 ? GEMM_FP64 : GEMM_FP32; /* 2n parts */
        n *= 2;
    }
    fill_arg f = {.dst = dst, .t = t, .s = *state};
    const bool sixteen = gemm_dtype_size(t) == 2;
    rnd_parallel(n, sixteen ? 4 : 1, fill_part, &f);
    *state += (sixteen ? (n + 3) / 4 : n) * RND_GAMMA;
}
