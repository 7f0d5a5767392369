/*
 * wire.h: the bytes gemmd and its clients exchange on the Unix socket,
 * written once. Two protocols share the socket:
 *
 *  - SP (nng's scalability protocols, IPC mapping): each side opens with
 *    an 8-byte header naming its protocol (REQ 0x30, REP 0x31), then
 *    frames of 01 + u64 big-endian length + body; a REQ body opens with
 *    its backtrace, 4-byte big-endian words up to the request id (high
 *    bit set);
 *  - the descriptor channel (see proto/gemm.proto): the client opens with
 *    its own 8-byte header, then sends 8-byte messages (u32 little-endian
 *    op + u32 0) carrying a memfd as SCM_RIGHTS; the daemon answers each
 *    with 16 bytes (i32 little-endian status, u32 0, u64 little-endian
 *    ticket).
 *
 * Internal to this project (not installed): constants and static inline
 * packing only, no state. Thread-safe.
 */
#ifndef GEMM_COMMON_WIRE_H
#define GEMM_COMMON_WIRE_H

#include <stdbool.h>
#include <stdint.h>

#define WIRE_HDR_LEN 8 /* the greeting each side sends first */

/* The daemon's greeting (SP REP), a REQ client's, a descriptor channel's. */
static const uint8_t wire_sp_rep_hdr[WIRE_HDR_LEN] = {0, 'S',  'P', 0,
                                                      0, 0x31, 0,   0};
static const uint8_t wire_sp_req_hdr[WIRE_HDR_LEN] = {0, 'S',  'P', 0,
                                                      0, 0x30, 0,   0};
static const uint8_t wire_fd_hdr[WIRE_HDR_LEN] = {0, 'G', 'F', 'D', 0, 1, 0, 0};

#define WIRE_SP_FRAME_HEAD 9           /* 01 + u64 length */
#define WIRE_SP_FRAME_TYPE 1           /* the first byte of a frame */
#define WIRE_SP_ID_FLAG    0x80000000u /* marks the backtrace's last word */

#define WIRE_FD_MSG_LEN    8  /* u32 op + u32 argument */
#define WIRE_FD_ANSWER_LEN 16 /* i32 status + u32 0 + u64 ticket */
#define WIRE_FD_OP_PASS    1  /* a memfd comes with this message */
/* asks for a spare (gemmd's memfd, pinned ahead) of at least the
 * argument's MiB; on GEMM_OK the answer brings it as SCM_RIGHTS */
#define WIRE_FD_OP_LEND 2

static inline uint64_t wire_get_be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

static inline void wire_put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static inline uint32_t wire_get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           p[3];
}

static inline void wire_put_be32(uint8_t *p, uint32_t v)
{
    for (int i = 3; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static inline uint32_t wire_get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static inline void wire_put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++, v >>= 8)
        p[i] = (uint8_t)v;
}

static inline uint64_t wire_get_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static inline void wire_put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++, v >>= 8)
        p[i] = (uint8_t)v;
}

/* Writes an SP frame head for a body of len bytes (backtrace included). */
static inline void wire_sp_frame_put(uint8_t p[WIRE_SP_FRAME_HEAD],
                                     uint64_t len)
{
    p[0] = WIRE_SP_FRAME_TYPE;
    wire_put_be64(p + 1, len);
}

/* Reads an SP frame head: whether it is one, and its body length. */
static inline bool wire_sp_frame_get(const uint8_t p[WIRE_SP_FRAME_HEAD],
                                     uint64_t *len)
{
    *len = wire_get_be64(p + 1);
    return p[0] == WIRE_SP_FRAME_TYPE;
}

/* Writes a descriptor-channel message of op with its argument. */
static inline void wire_fd_msg_put(uint8_t p[WIRE_FD_MSG_LEN], uint32_t op,
                                   uint32_t arg)
{
    wire_put_le32(p, op);
    wire_put_le32(p + 4, arg);
}

/* The op of a descriptor-channel message. */
static inline uint32_t wire_fd_msg_op(const uint8_t p[WIRE_FD_MSG_LEN])
{
    return wire_get_le32(p);
}

/* The argument of a descriptor-channel message. */
static inline uint32_t wire_fd_msg_arg(const uint8_t p[WIRE_FD_MSG_LEN])
{
    return wire_get_le32(p + 4);
}

/* Writes the daemon's answer: a gemm_error and, on GEMM_OK, the ticket. */
static inline void wire_fd_answer_put(uint8_t p[WIRE_FD_ANSWER_LEN],
                                      int32_t status, uint64_t ticket)
{
    wire_put_le32(p, (uint32_t)status);
    wire_put_le32(p + 4, 0);
    wire_put_le64(p + 8, ticket);
}

/* Reads the daemon's answer: returns its status, *ticket its ticket. */
static inline int32_t wire_fd_answer_get(const uint8_t p[WIRE_FD_ANSWER_LEN],
                                         uint64_t *ticket)
{
    *ticket = wire_get_le64(p + 8);
    return (int32_t)wire_get_le32(p);
}

#endif
