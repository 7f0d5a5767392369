/*
 * npy.c: reading and writing NumPy .npy files (format described in
 * numpy/lib/format.py): a magic string, a version, a little-endian header
 * length, then a Python dict literal with 'descr', 'fortran_order' and
 * 'shape', padded with spaces and a newline, then the raw data. Only what
 * gemmctl needs: 2-D float, complex, int8 and int32 matrices (and stacks
 * of them); bfloat16 as numpy saves ml_dtypes'
 * bfloat16 (descr '<V2': numpy knows no bfloat16, so a 2-byte void). Every
 * failure names the file and says what is wrong with it.
 */
#include "npy.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NPY_MAGIC      "\x93NUMPY"
#define NPY_MAGIC_LEN  6
#define NPY_HEADER_MAX (1u << 20) /* a sane bound on the dict's length */

static int npy_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int npy_fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* Finds the value after key ('key' or "key", then ':') in the dict text. */
static const char *dict_value(const char *hdr, const char *key)
{
    size_t klen = strlen(key);
    for (const char *p = hdr; (p = strstr(p, key)) != NULL; p += klen) {
        if (p == hdr || (p[-1] != '\'' && p[-1] != '"') || p[klen] != p[-1])
            continue;
        const char *q = p + klen + 1;
        while (isspace((unsigned char)*q))
            q++;
        if (*q != ':')
            continue;
        q++;
        while (isspace((unsigned char)*q))
            q++;
        return q;
    }
    return NULL;
}

/* Parses the dict: descr into descr[8], fortran order, and a shape of 1..3
 * dims. Returns 0 or -1 with err set. */
static int parse_header(const char *path, const char *hdr, char descr[8],
                        int *fortran, size_t dims[3], int *ndim, char *err,
                        size_t errlen)
{
    const char *v;
    size_t n = 0;

    if ((v = dict_value(hdr, "descr")) == NULL || (*v != '\'' && *v != '"'))
        return npy_fail(err, errlen, "%s: header has no 'descr'", path);
    {
        char quote = *v++;
        const char *end = strchr(v, quote);
        if (end == NULL || end - v >= 8 || end == v)
            return npy_fail(err, errlen,
                            "%s: unsupported dtype in header: %.40s", path,
                            v - 1);
        memcpy(descr, v, (size_t)(end - v));
        descr[end - v] = '\0';
    }
    if ((v = dict_value(hdr, "fortran_order")) == NULL)
        return npy_fail(err, errlen, "%s: header has no 'fortran_order'", path);
    if (strncmp(v, "True", 4) == 0)
        *fortran = 1;
    else if (strncmp(v, "False", 5) == 0)
        *fortran = 0;
    else
        return npy_fail(err, errlen, "%s: bad 'fortran_order' in header", path);
    if ((v = dict_value(hdr, "shape")) == NULL || *v != '(')
        return npy_fail(err, errlen, "%s: header has no 'shape' tuple", path);
    v++;
    for (;;) {
        while (isspace((unsigned char)*v))
            v++;
        if (*v == ')')
            break;
        if (!isdigit((unsigned char)*v))
            return npy_fail(err, errlen, "%s: bad 'shape' in header", path);
        errno = 0;
        char *end;
        unsigned long long d = strtoull(v, &end, 10);
        if (errno != 0 || d > SIZE_MAX)
            return npy_fail(err, errlen, "%s: dimension too large", path);
        if (n == 3)
            return npy_fail(err, errlen,
                            "%s: has more than 3 dimensions; gemmctl needs "
                            "a 2-D matrix (or, for mm, a 3-D stack)",
                            path);
        dims[n++] = (size_t)d;
        v = end;
        if (*v == 'L') /* Python 2 wrote longs as 3L */
            v++;
        while (isspace((unsigned char)*v))
            v++;
        if (*v == ',')
            v++;
        else if (*v != ')')
            return npy_fail(err, errlen, "%s: bad 'shape' in header", path);
    }
    *ndim = (int)n;
    return 0;
}

/* Reads path (2-D, or 3-D when stacks) into *out; see npy.h. */
static int npy_load(const char *path, npy_matrix *out, bool stacks, char *err,
                    size_t errlen)
{
    unsigned char pre[12];
    char *hdr = NULL;
    void *raw = NULL, *data = NULL;
    char descr[8];
    size_t dims[3] = {0, 0, 0}, hlen, pre_len, esize, count, nbytes;
    int fortran = 0, ndim = 0;
    gemm_dtype dtype;
    struct stat st;
    FILE *f;

    if ((f = fopen(path, "rb")) == NULL)
        return npy_fail(err, errlen, "%s: %s", path, strerror(errno));
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        npy_fail(err, errlen, "%s: not a regular file", path);
        goto fail;
    }
    if (fread(pre, 1, 10, f) != 10 ||
        memcmp(pre, NPY_MAGIC, NPY_MAGIC_LEN) != 0) {
        npy_fail(err, errlen, "%s: not a NumPy .npy file (bad magic)", path);
        goto fail;
    }
    switch (pre[6]) {
    case 1:
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
        pre_len = 10;
        break;
    case 2:
    case 3:
        if (fread(pre + 10, 1, 2, f) != 2) {
            npy_fail(err, errlen, "%s: truncated header", path);
            goto fail;
        }
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 |
               (size_t)pre[11] << 24;
        pre_len = 12;
        break;
    default:
        npy_fail(err, errlen, "%s: unsupported .npy format version %u.%u", path,
                 pre[6], pre[7]);
        goto fail;
    }
    if (hlen == 0 || hlen > NPY_HEADER_MAX) {
        npy_fail(err, errlen, "%s: bad header length %zu", path, hlen);
        goto fail;
    }
    if ((hdr = malloc(hlen + 1)) == NULL) {
        npy_fail(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    if (fread(hdr, 1, hlen, f) != hlen) {
        npy_fail(err, errlen, "%s: truncated header", path);
        goto fail;
    }
    hdr[hlen] = '\0';
    if (parse_header(path, hdr, descr, &fortran, dims, &ndim, err, errlen))
        goto fail;

    if (descr[0] == '>' && descr[1] != '\0') {
        npy_fail(err, errlen,
                 "%s: big-endian data (%s) is not supported; convert it "
                 "with a.astype('<%s')",
                 path, descr, descr + 1);
        goto fail;
    }
    if (strcmp(descr, "<V2") == 0 || strcmp(descr, "|V2") == 0) {
        /* ml_dtypes' bfloat16: numpy saves it as a 2-byte void */
        dtype = GEMM_BF16;
        esize = 2;
    } else if (strcmp(descr, "<f2") == 0) {
        dtype = GEMM_FP16;
        esize = 2;
    } else if (strcmp(descr, "<f4") == 0) {
        dtype = GEMM_FP32;
        esize = 4;
    } else if (strcmp(descr, "<f8") == 0) {
        dtype = GEMM_FP64;
        esize = 8;
    } else if (strcmp(descr, "<c8") == 0) {
        dtype = GEMM_COMPLEX64;
        esize = 8;
    } else if (strcmp(descr, "<c16") == 0) {
        dtype = GEMM_COMPLEX128;
        esize = 16;
    } else if (strcmp(descr, "|i1") == 0 || strcmp(descr, "<i1") == 0 ||
               strcmp(descr, "i1") == 0) {
        dtype = GEMM_INT8;
        esize = 1;
    } else if (strcmp(descr, "<i4") == 0) {
        dtype = GEMM_INT32;
        esize = 4;
    } else {
        npy_fail(err, errlen,
                 "%s: dtype '%s' is not supported; use bfloat16 "
                 "(ml_dtypes), float16, float32, float64, complex64, "
                 "complex128, int8 or int32",
                 path, descr);
        goto fail;
    }
    if (ndim == 2) { /* a matrix is a stack of one */
        dims[2] = dims[1];
        dims[1] = dims[0];
        dims[0] = 1;
    } else if (ndim != 3 || !stacks) {
        if (ndim == 1)
            npy_fail(err, errlen,
                     "%s: is 1-D (shape (%zu,)); gemmctl needs a 2-D "
                     "matrix: reshape it to (1, %zu) or (%zu, 1)",
                     path, dims[0], dims[0], dims[0]);
        else
            npy_fail(err, errlen,
                     "%s: has %d dimensions; gemmctl needs a 2-D matrix%s",
                     path, ndim,
                     ndim == 3 ? " here (gemmctl mm takes 3-D stacks)" : "");
        goto fail;
    }
    if (dims[0] == 0 || dims[1] == 0 || dims[2] == 0) {
        npy_fail(err, errlen, "%s: is empty (shape (%zu, %zu, %zu))", path,
                 dims[0], dims[1], dims[2]);
        goto fail;
    }
    if (dims[1] > SIZE_MAX / dims[2] ||
        dims[1] * dims[2] > SIZE_MAX / dims[0] ||
        dims[0] * dims[1] * dims[2] > SIZE_MAX / esize) {
        npy_fail(err, errlen, "%s: shape (%zu, %zu, %zu) too large", path,
                 dims[0], dims[1], dims[2]);
        goto fail;
    }
    count = dims[0] * dims[1] * dims[2];
    nbytes = count * esize;
    if ((uint64_t)st.st_size < pre_len + hlen + (uint64_t)nbytes) {
        npy_fail(err, errlen,
                 "%s: truncated: %zu elements of %s need %zu bytes of "
                 "data, the file has %lld",
                 path, count, descr, nbytes,
                 (long long)st.st_size - (long long)(pre_len + hlen));
        goto fail;
    }
    if ((raw = malloc(nbytes)) == NULL) {
        npy_fail(err, errlen, "%s: out of memory for %zu bytes", path, nbytes);
        goto fail;
    }
    if (fread(raw, 1, nbytes, f) != nbytes) {
        npy_fail(err, errlen, "%s: read error: %s", path,
                 ferror(f) ? strerror(errno) : "truncated");
        goto fail;
    }
    if (fortran) { /* column-major: element (b, i, j) at (j * rows + i) *
                      batch + b */
        size_t nb = dims[0], nr = dims[1], nc = dims[2];
        if ((data = malloc(count * esize)) == NULL) {
            npy_fail(err, errlen, "%s: out of memory", path);
            goto fail;
        }
        for (size_t b = 0; b < nb; b++)
            for (size_t i = 0; i < nr; i++)
                for (size_t j = 0; j < nc; j++)
                    memcpy((char *)data + ((b * nr + i) * nc + j) * esize,
                           (char *)raw + ((j * nr + i) * nb + b) * esize,
                           esize);
        free(raw);
        raw = data;
    }
    fclose(f);
    free(hdr);
    out->batch = dims[0];
    out->ndim = ndim;
    out->rows = dims[1];
    out->cols = dims[2];
    out->dtype = dtype;
    memcpy(out->descr, descr, sizeof(out->descr));
    out->data = raw;
    return 0;

fail:
    free(raw);
    free(hdr);
    fclose(f);
    return -1;
}

int npy_read(const char *path, npy_matrix *out, char *err, size_t errlen)
{
    return npy_load(path, out, false, err, errlen);
}

int npy_read_stack(const char *path, npy_matrix *out, char *err, size_t errlen)
{
    return npy_load(path, out, true, err, errlen);
}

int npy_write(const char *path, const void *data, gemm_dtype dtype, size_t rows,
              size_t cols, char *err, size_t errlen)
{
    return npy_write_stack(path, data, dtype, 0, rows, cols, err, errlen);
}

/* batch 0: a 2-D matrix */
int npy_write_stack(const char *path, const void *data, gemm_dtype dtype,
                    size_t batch, size_t rows, size_t cols, char *err,
                    size_t errlen)
{
    char hdr[256];
    size_t esize = gemm_dtype_size(dtype), nbytes;
    int n;
    FILE *f;

    if (esize == 0)
        return npy_fail(err, errlen,
                        "%s: can only write bfloat16, float16, float32, "
                        "float64, complex64, complex128, int8 or int32",
                        path);
    /* 10 bytes of preamble + dict + padding + '\n', a multiple of 64;
     * bfloat16 as numpy saves ml_dtypes.bfloat16: a 2-byte void */
    char shape[80];
    if (batch != 0)
        snprintf(shape, sizeof(shape), "%zu, %zu, %zu", batch, rows, cols);
    else
        snprintf(shape, sizeof(shape), "%zu, %zu", rows, cols);
    n = snprintf(hdr + 10, sizeof(hdr) - 10,
                 "{'descr': '%c%c%zu', 'fortran_order': False, "
                 "'shape': (%s), }",
                 esize == 1 ? '|' : '<', /* numpy's byte order of 1 byte */
                 dtype == GEMM_BF16             ? 'V'
                 : gemm_dtype_is_complex(dtype) ? 'c'
                 : gemm_dtype_is_integer(dtype) ? 'i'
                                                : 'f',
                 esize, shape);
    size_t total = (10 + (size_t)n + 1 + 63) / 64 * 64;
    memcpy(hdr, NPY_MAGIC, NPY_MAGIC_LEN);
    hdr[6] = 1;
    hdr[7] = 0;
    hdr[8] = (char)((total - 10) & 0xff);
    hdr[9] = (char)((total - 10) >> 8);
    memset(hdr + 10 + n, ' ', total - 10 - (size_t)n - 1);
    hdr[total - 1] = '\n';

    nbytes = (batch ? batch : 1) * rows * cols * esize;
    if ((f = fopen(path, "wb")) == NULL)
        return npy_fail(err, errlen, "%s: %s", path, strerror(errno));
    if (fwrite(hdr, 1, total, f) != total ||
        fwrite(data, 1, nbytes, f) != nbytes) {
        npy_fail(err, errlen, "%s: write error: %s", path, strerror(errno));
        fclose(f);
        return -1;
    }
    if (fclose(f) != 0)
        return npy_fail(err, errlen, "%s: write error: %s", path,
                        strerror(errno));
    return 0;
}

const char *npy_type_name(gemm_dtype t)
{
    switch (t) {
    case GEMM_BF16:
        return "bfloat16";
    case GEMM_FP16:
        return "float16";
    case GEMM_FP32:
        return "float32";
    case GEMM_FP64:
        return "float64";
    case GEMM_COMPLEX64:
        return "complex64";
    case GEMM_COMPLEX128:
        return "complex128";
    case GEMM_INT8:
        return "int8";
    case GEMM_INT32:
        return "int32";
    default:
        return "?";
    }
}

void npy_free(npy_matrix *m)
{
    if (m != NULL) {
        free(m->data);
        m->data = NULL;
    }
}
