/*
 * validate.h: checks of a GEMM request before any work is done. Pure
 * functions over a plain description (no protobuf, no registry), so the unit
 * tests drive every rule directly; the caller supplies a lookup from buffer
 * id to (handle, size). All sizes are computed overflow-safe. Thread-safe.
 */
#ifndef GEMMD_VALIDATE_H
#define GEMMD_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct val_operand {
    bool present;
    uint64_t tensor_id; /* non-zero: a resident tensor, not a buffer */
    uint64_t buffer_id;
    uint64_t offset; /* bytes */
    uint64_t ld;     /* elements; 0 = tight */
} val_operand;

typedef struct val_gemm {
    uint64_t m, n, k;
    int ab_type; /* gemm_dtype numbers */
    int cd_type;
    bool trans_a, trans_b;
    bool conj_a, conj_b;      /* conjugate transpose (complex, with trans_x) */
    double alpha, beta;       /* real parts (alpha64 over the float alpha) */
    double alpha_im, beta_im; /* imaginary parts (complex types) */
    val_operand a, b, c, d;
    int precision;       /* gemm_precision number (0 when absent) */
    const char *kernel;  /* the requested kernel; NULL when absent */
    uint32_t moduli;     /* fp64: Ozaki-II moduli asked for; 0 = auto */
    val_operand fill;    /* the fill counter (present: filled by parts) */
    uint32_t fill_parts; /* common/fill.h */
    val_operand drain;   /* the drain counter (present: D drained early) */
} val_gemm;

/* A resident tensor as the caller's lookup describes it. */
typedef struct val_tensor {
    uint64_t rows, cols, ld;
    int dtype;
} val_tensor;

/* Finds resident tensor id for the requester: its handle and shape, or NULL
 * when unknown or someone else's. */
typedef void *(*val_tensor_fn)(void *arg, uint64_t id, val_tensor *out);

typedef struct val_limits {
    uint64_t max_dim;
    val_tensor_fn tensor_lookup; /* NULL: no tensors (every id unknown) */
} val_limits;

/* A matrix as stored, resolved: rows x cols with leading dimension ld. */
typedef struct val_matrix {
    void *handle;    /* what lookup returned */
    uint64_t object; /* buffer: the memory object behind it (lookup's) */
    bool tensor;     /* a resident tensor (offset 0, extent 0) */
    uint64_t offset; /* bytes into the buffer */
    uint64_t ld;     /* elements, >= cols */
    uint64_t rows, cols;
    uint64_t extent; /* bytes from offset to one past the last element */
    size_t esize;    /* element size */
} val_matrix;

typedef struct val_resolved {
    val_matrix a, b, c, d;
    bool has_c;     /* beta != 0 (real or imaginary part): C is read */
    bool has_fill;  /* filled by parts: the counter, 8 bytes at fill */
    bool has_drain; /* D's final rows said at drain (8 bytes) */
    val_matrix fill, drain;
} val_resolved;

/* Finds buffer id for the requester: its handle, size and the memory object
 * it maps (two buffers of one object alias each other at equal offsets), or
 * NULL when the id is unknown or belongs to someone else. */
typedef void *(*val_lookup_fn)(void *arg, uint64_t id, size_t *size,
                               uint64_t *object);

/* Resolves one operand stored rows x cols of dtype (a buffer region or a
 * resident tensor); what names it in messages ("A", "B", "C", "D", "src").
 * Returns GEMM_OK or a gemm_error with a message. */
int val_operand_check(const char *what, const val_operand *op, uint64_t rows,
                      uint64_t cols, int dtype, const val_limits *lim,
                      val_lookup_fn lookup, void *arg, val_matrix *out,
                      char *msg, size_t len);

/* Whether (ab_type, cd_type) is a combination the service computes:
 * bf16/fp16 -> bf16, fp16, fp32; fp32 -> fp32; fp64 -> fp64; complex64 ->
 * complex64; complex128 -> complex128; int8 -> int32. */
bool val_dtypes_supported(int ab_type, int cd_type);

/* Checks (ab_type, cd_type) as val_dtypes_supported; when refused,
 * GEMM_ERR_DTYPE with a message that names the combination and the fix
 * (e.g. int8 inputs with fp32 C/D: "int8 inputs write int32 C and D").
 * Returns GEMM_OK or GEMM_ERR_DTYPE. */
int val_dtypes_check(int ab_type, int cd_type, char *msg, size_t len);

/* The operator and scalar rules of g's types: conj_x only on complex
 * types and with trans_x (op C is the conjugate transpose), imaginary
 * parts of alpha and beta only on complex types, and for int8 inputs
 * integer alpha and beta within int32's range (they scale in int32
 * arithmetic). Returns GEMM_OK or GEMM_ERR_INVALID with a message. */
int val_ops_scalars(const val_gemm *g, char *msg, size_t len);

/* Kernel names on the wire: 1..GEMM_KERNEL_NAME_MAX bytes of
 * [A-Za-z0-9._+-]. NULL (absent) is fine: the backend picks. Returns
 * GEMM_OK or GEMM_ERR_INVALID with a message (which never echoes bytes
 * outside that set). */
int val_kernel_name(const char *name, char *msg, size_t len);

/* A precision for A/B of ab_type: a known gemm_precision, and DEFAULT for
 * 16-bit inputs. Returns GEMM_OK or GEMM_ERR_INVALID with a message. */
int val_precision(int ab_type, int precision, char *msg, size_t len);

/* An Ozaki-II modulus count: 0 (the backend picks), or
 * GEMM_OZ_MODULI_MIN..GEMM_OZ_MODULI_MAX on fp64 inputs, or on fp32 inputs
 * with fp32 C/D at fp32 precision. Whether the kernel asked for runs the
 * emulation is the backend's check. Returns GEMM_OK or GEMM_ERR_INVALID
 * with a message that names the fix. */
int val_moduli(int ab_type, int cd_type, int precision, uint32_t moduli,
               char *msg, size_t len);

/* Whether x and y share bytes: the same buffer, or two buffers of the
 * same memory object (both map it from offset 0), and intersecting
 * extents; a tensor overlaps only itself. */
bool val_overlap(const val_matrix *x, const val_matrix *y);

/* A counter word of a request (what: "fill counter", "drain counter"): 8
 * aligned bytes of one of the caller's buffers (resolved into *out as one
 * fp64), outside each of the nops operands ops (NULL ones skipped;
 * names[i] names ops[i]). ref prefixes messages ("gemm", "DSYRK").
 * val_fill_check: a fill counter (proto/gemm.proto's Fill), with its
 * parts in 1..64. Returns GEMM_OK or a gemm_error with a message. */
int val_word_check(const char *what, const val_operand *word, const char *ref,
                   const val_matrix *const ops[], const char *const names[],
                   int nops, const val_limits *lim, val_lookup_fn lookup,
                   void *arg, val_matrix *out, char *msg, size_t len);
int val_fill_check(const val_operand *fill, uint32_t parts, const char *ref,
                   const val_matrix *const ops[], const char *const names[],
                   int nops, const val_limits *lim, val_lookup_fn lookup,
                   void *arg, val_matrix *out, char *msg, size_t len);

/*
 * Checks g against the limits and the caller's buffers. Returns GEMM_OK and
 * fills *out, or a gemm_error (DTYPE, DIMS, INVALID, NO_BUFFER, LD, ALIGN,
 * BOUNDS) with a message in msg. Offsets must be multiples of the element
 * size (16 bytes for complex128). The kernel name, precision and moduli
 * are checked for form here; whether the backend has that kernel, and
 * whether it serves the request, is the backend's check.
 */
int val_gemm_check(const val_gemm *g, const val_limits *lim,
                   val_lookup_fn lookup, void *arg, val_resolved *out,
                   char *msg, size_t len);

#endif
