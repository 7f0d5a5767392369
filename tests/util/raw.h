/*
 * raw.h: talking to gemmd below libgemmclient, for the cases the public API
 * cannot express: undecodable bytes, a Request without a body, a wrong
 * protocol version, oversized messages, RegisterBuffer with bad names or
 * sizes, and buffer ids used on another connection. A tu_raw is one nng
 * req0 socket (one pipe, so one "client" to the daemon); tu_shm is a memfd
 * made the way the client library makes them (its descriptor kept, so a
 * test can try to shrink it). Not thread-safe: one thread per tu_raw.
 */
#ifndef GEMM_TESTS_UTIL_RAW_H
#define GEMM_TESTS_UTIL_RAW_H

#include "gemm.pb-c.h"

#include <nng/nng.h>

#include <stddef.h>
#include <stdint.h>

typedef struct tu_raw {
    nng_socket sock;
    uint64_t next_id;
    char url[256]; /* for the descriptor channel */
} tu_raw;

/* Dials url (blocking) with send/receive timeouts of timeout_ms. Returns 0
 * or an nng error. */
int tu_raw_open(tu_raw *r, const char *url, int timeout_ms);
void tu_raw_close(tu_raw *r);

/* Sends len bytes as one message and decodes the reply into *out (free with
 * gemm__reply__free_unpacked(*out, NULL)). Returns 0, an nng error, or -1
 * if the reply does not decode. */
int tu_raw_send_bytes(tu_raw *r, const void *bytes, size_t len,
                      Gemm__Reply **out);

/* Packs and sends req (its id is set to a fresh one unless has_id). */
int tu_raw_call(tu_raw *r, Gemm__Request *req, Gemm__Reply **out);

/* Wrappers: each sets version 1 and a fresh id. */
int tu_raw_ping(tu_raw *r, Gemm__Reply **out);
/* RegisterBuffer with the fields as given (has_ticket 0 leaves the ticket
 * out; name NULL leaves the name out). */
int tu_raw_register(tu_raw *r, const char *name, int has_ticket,
                    uint64_t ticket, int has_size, uint64_t size,
                    Gemm__Reply **out);
/* Passes fd over a descriptor channel, then RegisterBuffer{ticket, size}.
 * A refused descriptor gives a reply-less failure: the daemon's status is
 * returned as a negative number. */
int tu_raw_register_fd(tu_raw *r, int fd, uint64_t size, Gemm__Reply **out);
int tu_raw_release(tu_raw *r, uint64_t id, Gemm__Reply **out);
int tu_raw_gemm(tu_raw *r, Gemm__GemmRequest *g, Gemm__Reply **out);

/* Status of a reply (GEMM_ERR_INTERNAL + 1000 if it carries none). */
int tu_reply_status(const Gemm__Reply *rep);

/* A client that reads nothing: connects a plain socket to url with a 4 KiB
 * receive buffer, does the SP handshake and sends up to n Status requests
 * while the daemon reads them (each send waits up to 200 ms for room).
 * Returns the socket (the caller closes it) and the count in *sent, or -1.
 */
int tu_raw_unread_flood(const char *url, int n, int *sent);

typedef struct tu_shm {
    int fd; /* the memfd, kept open */
    void *data;
    size_t size;
} tu_shm;

/* Creates a memfd of size bytes (sealable), allocates its pages and maps
 * it. Returns 0 or errno. */
int tu_shm_create(tu_shm *s, size_t size);
/* The same without allocating the pages: a sparse object. */
int tu_shm_create_sparse(tu_shm *s, size_t size);
void tu_shm_destroy(tu_shm *s);

/* tu_shm_create + RegisterBuffer on r. Returns the reply status (or a
 * transport error) and the buffer id in *id. */
int tu_raw_buffer(tu_raw *r, tu_shm *s, size_t size, uint64_t *id);

/* A Gemm__GemmRequest for an fp32 m x n x k product with every field set,
 * A, B and D in buffer id at offsets a_off, b_off, d_off, tight. The
 * operands live in *ops (caller storage, 4 entries). */
void tu_raw_gemm_init(Gemm__GemmRequest *g, Gemm__Operand ops[4], uint64_t id,
                      uint64_t m, uint64_t n, uint64_t k, uint64_t a_off,
                      uint64_t b_off, uint64_t d_off);

#endif
