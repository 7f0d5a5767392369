/*
 * xerbla.c: the default error handlers and the data a libblas.so.3 with
 * CBLAS exports. A program (the netlib testers, LAPACK-based code) that
 * defines its own xerbla_ or cblas_xerbla wins by symbol interposition:
 * gemm.c calls them by name. Ours print what the reference ones print and
 * return: reference XERBLA stops the program, which a library inside
 * someone else's program must not do (OpenBLAS returns too).
 *
 * RowMajorStrg and CBLAS_CallFromC are reference CBLAS's globals. The
 * CBLAS testers declare RowMajorStrg and read it in their cblas_xerbla;
 * libgemmblas writes it only around a cblas_xerbla call it makes (as
 * reference CBLAS does), never on the normal path, which many threads run
 * at once. CBLAS_CallFromC is exported for programs that read it; it stays
 * 0.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int RowMajorStrg = 0;
int CBLAS_CallFromC = 0;

void xerbla_(const char *srname, const int *info, size_t len);
void cblas_xerbla(int info, const char *rout, const char *form, ...);

/* The name's length: the hidden Fortran length when it is plausible (C
 * callers may leave it out), else up to a NUL or 32 bytes; trailing
 * blanks dropped. */
static int name_len(const char *s, size_t len)
{
    size_t n = 0;
    if (len >= 1 && len <= 64)
        n = len;
    else
        while (n < 32 && s[n] != '\0')
            n++;
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\0'))
        n--;
    return (int)n;
}

void xerbla_(const char *srname, const int *info, size_t len)
{
    fprintf(stderr,
            " ** On entry to %.*s parameter number %2d had an illegal "
            "value\n",
            name_len(srname, len), srname, *info);
}

void cblas_xerbla(int info, const char *rout, const char *form, ...)
{
    va_list ap;
    fprintf(stderr, "Parameter %d to routine %s was incorrect\n", info, rout);
    va_start(ap, form);
    vfprintf(stderr, form, ap);
    va_end(ap);
}
