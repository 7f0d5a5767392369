/*
 * npy.h: NumPy .npy files for gemmctl: 2-D float, complex and integer
 * matrices in and out. Reads format versions 1, 2 and 3, little-endian
 * float16, float32, float64, complex64, complex128, int8 ('|i1') and
 * int32 ('<i4'), and bfloat16 as ml_dtypes
 * and numpy save it (descr '<V2'), C or Fortran order (Fortran
 * order is transposed to C order on reading), and stacks of them (3-D,
 * numpy's matmul operands). Writes version 1, C order.
 * Uses only the public gemm API (for the dtype enum).
 */
#ifndef GEMMCTL_NPY_H
#define GEMMCTL_NPY_H

#include <gemm/gemm.h>

#include <stddef.h>

typedef struct npy_matrix {
    size_t rows, cols;
    gemm_dtype dtype; /* of data: BF16, FP16, FP32, FP64, COMPLEX64, ...,
                         INT8, INT32 */
    char descr[8];    /* as the file said, e.g. "<f8" */
    void *data;       /* batch * rows * cols elements, row-major (matrix
                         after matrix); malloc'd */
    size_t batch;     /* matrices in the file (1 for a 2-D one) */
    int ndim;         /* 2, or 3 for a stack (npy_read_stack) */
} npy_matrix;

/*
 * Reads path into *out. Returns 0, or -1 with a message naming the file and
 * the problem in err (errlen bytes). On success the caller owns out->data
 * and frees it with npy_free(); on failure *out is untouched. Thread-safe.
 */
int npy_read(const char *path, npy_matrix *out, char *err, size_t errlen);

/* npy_read that also takes a 3-D file, a stack of batch matrices
 * (shape (batch, rows, cols); ndim 3, even when batch is 1). */
int npy_read_stack(const char *path, npy_matrix *out, char *err, size_t errlen);

/*
 * Writes a rows x cols row-major matrix of dtype GEMM_BF16 ("<V2", as
 * numpy saves ml_dtypes.bfloat16), GEMM_FP16 ("<f2"),
 * GEMM_FP32 ("<f4"), GEMM_FP64 ("<f8"), GEMM_COMPLEX64 ("<c8"),
 * GEMM_COMPLEX128 ("<c16"), GEMM_INT8 ("|i1") or GEMM_INT32 ("<i4") to
 * path (created or truncated). Returns 0, or
 * -1 with a message in err. The caller keeps data. Thread-safe.
 */
int npy_write(const char *path, const void *data, gemm_dtype dtype, size_t rows,
              size_t cols, char *err, size_t errlen);

/* npy_write of a stack: shape (batch, rows, cols), batch matrices one
 * after the other at data. */
int npy_write_stack(const char *path, const void *data, gemm_dtype dtype,
                    size_t batch, size_t rows, size_t cols, char *err,
                    size_t errlen);

/* NumPy's name of a type npy_write writes ("bfloat16" .. "complex128",
 * "int8", "int32"), "?" for others. */
const char *npy_type_name(gemm_dtype t);

/* Frees m->data; m itself is the caller's. NULL is ignored. */
void npy_free(npy_matrix *m);

#endif /* GEMMCTL_NPY_H */
