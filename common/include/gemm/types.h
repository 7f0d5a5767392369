/*
 * types.h: the names every part of gemmd shares, below the client API: the
 * error codes (one X-macro, stable numbers, the wire protocol's
 * Reply.status), the element types and fp32 precisions (the wire's DType
 * and Precision numbers), the version macros and the export macro. The
 * client library (gemm.h), the daemon and the kernel library include it;
 * it includes nothing of theirs. The functions declared here are compiled
 * from common/src and exported by libgemmclient.
 */
#ifndef GEMM_TYPES_H
#define GEMM_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(GEMM_BUILDING_LIBRARY)
#define GEMM_API __attribute__((visibility("default")))
#else
#define GEMM_API
#endif

#define GEMM_VERSION_MAJOR  0
#define GEMM_VERSION_MINOR  1
#define GEMM_VERSION_PATCH  0
#define GEMM_VERSION_STRING "0.1.0"

/* Version of the wire protocol (proto/gemm.proto) this library speaks. */
#define GEMM_PROTOCOL_VERSION 1

/* Features a daemon names in its hello (HelloReply.features) beyond
 * version 1's requests. */
/* Blas3Request.fill (gemm_blas3_submit_filled) */
#define GEMM_FEATURE_FILL 1u
/* GemmRequest.fill and GemmRequest.drain (gemm_submit_overlapped) */
#define GEMM_FEATURE_FILL_GEMM 2u
#define GEMM_FEATURE_DRAIN     4u
/* spares: gemm_buffer_alloc gets a memfd gemmd made and pinned ahead */
#define GEMM_FEATURE_LEND 8u

/*
 * Error codes: one table, stable numbers, shared with the wire protocol
 * (Reply.status). X(name, number, message).
 */
#define GEMM_ERROR_MAP(X)                                                      \
    X(GEMM_OK, 0, "success")                                                   \
    X(GEMM_ERR_INVALID, 1, "invalid argument")                                 \
    X(GEMM_ERR_NOMEM, 2, "out of memory")                                      \
    X(GEMM_ERR_CONNECT, 3, "cannot connect to gemmd (is it running?)")         \
    X(GEMM_ERR_TIMEOUT, 4, "timed out")                                        \
    X(GEMM_ERR_CLOSED, 5, "connection closed")                                 \
    X(GEMM_ERR_PROTOCOL, 6, "malformed or undecodable message")                \
    X(GEMM_ERR_VERSION, 7, "protocol version mismatch")                        \
    X(GEMM_ERR_TOO_LARGE, 8, "message too large")                              \
    X(GEMM_ERR_BUSY, 9, "server busy: queue full")                             \
    X(GEMM_ERR_SHUTDOWN, 10, "server shutting down")                           \
    X(GEMM_ERR_NO_BUFFER, 11, "unknown buffer id")                             \
    X(GEMM_ERR_PERMISSION, 12, "permission denied")                            \
    X(GEMM_ERR_BOUNDS, 13, "operand extends beyond its buffer")                \
    X(GEMM_ERR_DIMS, 14, "invalid dimensions")                                 \
    X(GEMM_ERR_LD, 15, "leading dimension too small")                          \
    X(GEMM_ERR_ALIGN, 16, "misaligned operand offset")                         \
    X(GEMM_ERR_DTYPE, 17, "unsupported data type combination")                 \
    X(GEMM_ERR_SHM, 18, "shared memory error")                                 \
    X(GEMM_ERR_BACKEND, 19, "backend failure")                                 \
    X(GEMM_ERR_LIMIT, 20, "resource limit reached")                            \
    X(GEMM_ERR_IO, 21, "i/o error")                                            \
    X(GEMM_ERR_UNSUPPORTED, 22, "operation not supported")                     \
    X(GEMM_ERR_INTERNAL, 23, "internal error")                                 \
    X(GEMM_ERR_DEVICE, 24, "GPU error")                                        \
    X(GEMM_ERR_DEVICE_MEMORY, 25, "out of GPU memory")                         \
    X(GEMM_ERR_BUFFER_FAULT, 26,                                               \
      "buffer truncated or unmapped under a request")                          \
    X(GEMM_ERR_ABANDONED, 27,                                                  \
      "gave up waiting: the request may still run and write its output")       \
    X(GEMM_ERR_NOT_ANSWERING, 28,                                              \
      "gemmd accepted the connection but does not answer (stopped or hung?)")

typedef enum gemm_error {
#define GEMM_X_ENUM(name, num, msg) name = num,
    GEMM_ERROR_MAP(GEMM_X_ENUM)
#undef GEMM_X_ENUM
} gemm_error;

/* A static message for any code (unknown codes get "unknown error").
 * Thread-safe. */
GEMM_API const char *gemm_strerror(int err);

/* "0.1.0": the library's version. Thread-safe. */
GEMM_API const char *gemm_version_string(void);

/*
 * Element types. The numbers are the wire protocol's DType. Complex types
 * are interleaved (real, imaginary) pairs, as BLAS, C99 _Complex and NumPy
 * store them. Combinations (A/B -> C/D): bf16 or fp16 -> bf16, fp16 or
 * fp32; fp32 -> fp32; fp64 -> fp64; complex64 -> complex64; complex128
 * -> complex128; int8 -> int32. fp64 and the complex types accumulate in
 * their own type. int8 accumulates in int32, and D = alpha * op(A) *
 * op(B) + beta * C is computed in int32 arithmetic that wraps on overflow
 * (exact modulo 2^32, as cuBLAS/cuBLASLt int8 GEMMs with int32 scalars):
 * alpha and beta must be integers in int32's range. int32 is a C/D type
 * only.
 */
typedef enum gemm_dtype {
    GEMM_BF16 = 1,
    GEMM_FP16 = 2,
    GEMM_FP32 = 3,
    GEMM_FP64 = 4,
    GEMM_COMPLEX64 = 5,  /* two fp32 */
    GEMM_COMPLEX128 = 6, /* two fp64 */
    GEMM_INT8 = 7,       /* signed 8-bit integer (A/B) */
    GEMM_INT32 = 8,      /* signed 32-bit integer (C/D of int8 A/B) */
} gemm_dtype;

/*
 * How fp32 A/B are multiplied (ignored for 16-bit inputs, where it must be
 * GEMM_PRECISION_DEFAULT). The numbers are the wire protocol's Precision.
 *  - DEFAULT: GEMM_PRECISION_FP32.
 *  - TF32: on the tensor cores as tf32 (10-bit mantissa; fast, ~1e-3
 *    relative error).
 *  - FP32: fp32 accuracy: on the GPU, error-compensated 3xTF32 (each input
 *    split into a tf32 high and low part, three tf32 products); on the CPU,
 *    SGEMM.
 */
typedef enum gemm_precision {
    GEMM_PRECISION_DEFAULT = 0,
    GEMM_PRECISION_TF32 = 1,
    GEMM_PRECISION_FP32 = 2,
} gemm_precision;

/* "default", "tf32", "fp32"; "?" otherwise. Thread-safe. */
GEMM_API const char *gemm_precision_name(gemm_precision p);
/* Parses "default", "tf32", "fp32". GEMM_ERR_INVALID if unknown. */
GEMM_API int gemm_precision_parse(const char *s, gemm_precision *out);

/* Bytes per element: 2, 2, 4, 8, 8, 16, 1, 4 (a complex element counts
 * once); 0 for an unknown type. Thread-safe. */
GEMM_API size_t gemm_dtype_size(gemm_dtype t);
/* "bf16", "fp16", "fp32", "fp64", "c64", "c128", "int8", "int32"; "?"
 * for an unknown type. Thread-safe. */
GEMM_API const char *gemm_dtype_name(gemm_dtype t);
/* Parses "bf16", "fp16"/"f16"/"half", "fp32"/"f32"/"float",
 * "fp64"/"f64"/"double"/"float64", "c64"/"complex64",
 * "c128"/"complex128", "int8"/"i8"/"s8", "int32"/"i32"/"s32" (any case).
 * Returns GEMM_ERR_DTYPE if unknown.
 * Thread-safe. */
GEMM_API int gemm_dtype_parse(const char *s, gemm_dtype *out);
/* Whether t is a complex type. Thread-safe. */
GEMM_API bool gemm_dtype_is_complex(gemm_dtype t);
/* Whether t is an integer type (int8, int32). Thread-safe. */
GEMM_API bool gemm_dtype_is_integer(gemm_dtype t);

/*
 * Converts n elements from src (type st) to dst (type dt): any pair of
 * real types, or complex64 <-> complex128 (each part converted); real <->
 * complex is GEMM_ERR_DTYPE. Round-to-nearest-even when narrowing (fp64
 * to 16-bit rounds once: through fp32 rounded to odd), NaN kept NaN.
 * Integers: int8 -> int32 and int8/int32 -> any real float type (rounded
 * to nearest even where the type is narrower); a float or int32 into
 * int8, or a float into int32, has no one right rounding and is
 * GEMM_ERR_DTYPE (convert such data yourself). src
 * and dst must not overlap unless they are the same pointer and the types
 * have equal size. Returns GEMM_ERR_DTYPE for an unknown type or pair.
 * Thread-safe.
 */
GEMM_API int gemm_convert(void *dst, gemm_dtype dt, const void *src,
                          gemm_dtype st, size_t n);

/* Longest kernel name a request may carry (gemm_op.kernel), in bytes. */
#define GEMM_KERNEL_NAME_MAX 31

/* fp64 A/B: the explicit Ozaki-II modulus counts a request may ask for
 * (gemm_op.moduli; 0 = the backend picks). Fewer moduli are faster and
 * less accurate. */
#define GEMM_OZ_MODULI_MIN 2
#define GEMM_OZ_MODULI_MAX 20

#ifdef __cplusplus
}
#endif

#endif /* GEMM_TYPES_H */
