/*
 * request.h: from bytes on the wire to a checked request, with no daemon
 * state: size limit, protobuf decoding, protocol version, body presence, and
 * the translation of a GemmRequest into validate.h's plain description.
 * Used by the server and by the fuzz targets. Thread-safe.
 */
#ifndef GEMMD_REQUEST_H
#define GEMMD_REQUEST_H

#include "validate.h"

#include "gemm.pb-c.h"

#include <stddef.h>
#include <stdint.h>

/*
 * Decodes len bytes into *out (free with gemm__request__free_unpacked).
 * Returns GEMM_OK, or TOO_LARGE (len > max), PROTOCOL (undecodable) with a
 * message; *out is NULL then.
 */
int req_decode(const uint8_t *data, size_t len, size_t max, Gemm__Request **out,
               char *msg, size_t msglen);

/* Checks the envelope of a decoded request: version and body. Returns
 * GEMM_OK, VERSION or PROTOCOL with a message. */
int req_check_envelope(const Gemm__Request *rq, char *msg, size_t msglen);

/* Checks the form of a RegisterBuffer: a descriptor ticket and a size
 * (names are refused). Returns GEMM_OK or INVALID with a message. */
int req_register_check(const Gemm__RegisterBufferRequest *r, char *msg,
                       size_t msglen);

/* Fills *o from an operand of a request (NULL: not present; absent
 * fields become 0). */
void req_operand_desc(val_operand *o, const Gemm__Operand *p);

/* Fills *o (the counter, as an operand) and *parts from a request's Fill
 * (NULL: not present). */
void req_fill_desc(val_operand *o, uint32_t *parts, const Gemm__Fill *f);

/* Fills *v from a GemmRequest (absent fields become 0 / not present). */
void req_gemm_desc(const Gemm__GemmRequest *g, val_gemm *v);

/* The form of a Batch: an op, either a count (strided) or problems
 * (grouped) but not both, and no resident tensor with a stride. Returns
 * GEMM_OK with *n the number of problems, or INVALID with a message. */
int req_batch_check(const Gemm__BatchRequest *r, uint64_t *n, char *msg,
                    size_t msglen);

/* Problem i of batch r (req_batch_check passed, i < its count) as a GEMM
 * description: t (req_gemm_desc of r's op) with, strided, the operands
 * moved by i strides, or, grouped, problem i's shape, transposes,
 * operands and (when it has them) scalars. Returns GEMM_OK, or BOUNDS
 * with a message when an offset overflows. */
int req_batch_problem(const Gemm__BatchRequest *r, const val_gemm *t,
                      uint64_t i, val_gemm *v, char *msg, size_t msglen);

#endif
