/*
 * util.c: the helpers gemmctl's subcommands and main.c share: error
 * messages, opening a client with the --timeout main.c was given, the
 * precision option, JSON strings and the random fill for generated
 * matrices. The lowest layer of gemmctl: it uses only libgemmclient.
 */
#include "gemmctl.h"

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

/* splitmix64: a seeded stream of 64 random bits. */
static uint64_t rnd_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform values in [-1, 1), never 0. fp64 gets 53 random bits per value,
 * fp32 24; the 16-bit types keep at most 11 significant bits, so each draw
 * gives four values of 16 bits, (u - 32767.5) / 32768 (exact in fp32,
 * rounded once to the type). Complex types: both parts so. */
void ctl_fill_random(void *dst, gemm_dtype t, size_t n, uint64_t *state)
{
    float tmp[4096];
    if (t == GEMM_INT8 || t == GEMM_INT32) { /* every int8 value */
        for (size_t i = 0; i < n; i++) {
            int8_t v = (int8_t)(rnd_next(state) >> 56);
            if (t == GEMM_INT8)
                ((int8_t *)dst)[i] = v;
            else
                ((int32_t *)dst)[i] = v;
        }
        return;
    }
    if (t == GEMM_FP64 || t == GEMM_COMPLEX128) {
        double *d = dst;
        size_t parts = t == GEMM_FP64 ? n : 2 * n;
        for (size_t i = 0; i < parts; i++)
            d[i] = (double)(rnd_next(state) >> 11) * 0x1p-52 - 1.0 + 0x1p-53;
        return;
    }
    if (t == GEMM_COMPLEX64) {
        t = GEMM_FP32; /* 2n fp32 parts */
        n *= 2;
    }
    size_t esize = gemm_dtype_size(t);
    for (size_t off = 0; off < n; off += 4096) {
        size_t len = n - off < 4096 ? n - off : 4096;
        if (t == GEMM_FP32) {
            for (size_t i = 0; i < len; i++)
                tmp[i] = (float)(rnd_next(state) >> 40) * 0x1p-23f - 1.0f;
        } else {
            for (size_t i = 0; i < len; i += 4) {
                uint64_t z = rnd_next(state);
                for (size_t q = 0; q < 4 && i + q < len; q++)
                    tmp[i + q] =
                        ((float)((z >> (16 * q)) & 0xffffu) - 32767.5f) *
                        0x1p-15f;
            }
        }
        gemm_convert((char *)dst + off * esize, t, tmp, GEMM_FP32, len);
    }
}
