/*
 * raw.c: an nng req0 socket that speaks gemm.proto directly, and POSIX shm
 * objects made by hand (see raw.h).
 */
#include "util/raw.h"
#include "util/fdpass.h"

#include <gemm/gemm.h>
#include <nng/protocol/reqrep0/req.h>

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int tu_raw_open(tu_raw *r, const char *url, int timeout_ms)
{
    int rv;
    memset(r, 0, sizeof(*r));
    r->next_id = 1000;
    snprintf(r->url, sizeof(r->url), "%s", url);
    if ((rv = nng_req0_open(&r->sock)) != 0)
        return rv;
    nng_socket_set_ms(r->sock, NNG_OPT_SENDTIMEO, timeout_ms);
    nng_socket_set_ms(r->sock, NNG_OPT_RECVTIMEO, timeout_ms);
    /* no resend of a request whose connection was dropped */
    nng_socket_set_ms(r->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    nng_socket_set_size(r->sock, NNG_OPT_RECVMAXSZ, 0);
    if ((rv = nng_dial(r->sock, url, NULL, 0)) != 0) {
        nng_close(r->sock);
        return rv;
    }
    return 0;
}

void tu_raw_close(tu_raw *r)
{
    nng_close(r->sock);
}

int tu_raw_send_bytes(tu_raw *r, const void *bytes, size_t len,
                      Gemm__Reply **out)
{
    nng_msg *msg;
    int rv;
    *out = NULL;
    if ((rv = nng_msg_alloc(&msg, 0)) != 0)
        return rv;
    if (len > 0 && (rv = nng_msg_append(msg, bytes, len)) != 0) {
        nng_msg_free(msg);
        return rv;
    }
    if ((rv = nng_sendmsg(r->sock, msg, 0)) != 0) {
        nng_msg_free(msg);
        return rv;
    }
    if ((rv = nng_recvmsg(r->sock, &msg, 0)) != 0)
        return rv;
    *out = gemm__reply__unpack(NULL, nng_msg_len(msg), nng_msg_body(msg));
    nng_msg_free(msg);
    return *out ? 0 : -1;
}

int tu_raw_call(tu_raw *r, Gemm__Request *req, Gemm__Reply **out)
{
    if (!req->has_id) {
        req->has_id = 1;
        req->id = r->next_id++;
    }
    size_t len = gemm__request__get_packed_size(req);
    uint8_t *buf = malloc(len ? len : 1);
    if (buf == NULL)
        return NNG_ENOMEM;
    gemm__request__pack(req, buf);
    int rv = tu_raw_send_bytes(r, buf, len, out);
    free(buf);
    return rv;
}

int tu_reply_status(const Gemm__Reply *rep)
{
    return rep->has_status ? rep->status : GEMM_ERR_INTERNAL + 1000;
}

int tu_raw_ping(tu_raw *r, Gemm__Reply **out)
{
    Gemm__Request req = GEMM__REQUEST__INIT;
    Gemm__HelloRequest h = GEMM__HELLO_REQUEST__INIT;
    req.has_version = 1;
    req.version = GEMM_PROTOCOL_VERSION;
    req.body_case = GEMM__REQUEST__BODY_HELLO;
    req.hello = &h;
    return tu_raw_call(r, &req, out);
}

int tu_raw_register(tu_raw *r, const char *name, int has_ticket,
                    uint64_t ticket, int has_size, uint64_t size,
                    Gemm__Reply **out)
{
    Gemm__Request req = GEMM__REQUEST__INIT;
    Gemm__RegisterBufferRequest rb = GEMM__REGISTER_BUFFER_REQUEST__INIT;
    rb.name = (char *)name;
    rb.has_fd_ticket = has_ticket;
    rb.fd_ticket = ticket;
    rb.has_size = has_size;
    rb.size = size;
    req.has_version = 1;
    req.version = GEMM_PROTOCOL_VERSION;
    req.body_case = GEMM__REQUEST__BODY_REGISTER_BUFFER;
    req.register_buffer = &rb;
    return tu_raw_call(r, &req, out);
}

int tu_raw_register_fd(tu_raw *r, int fd, uint64_t size, Gemm__Reply **out)
{
    uint64_t ticket = 0;
    int rv = tu_fd_ticket(r->url, fd, &ticket);
    if (rv != 0) {
        *out = NULL;
        return rv < 0 ? -1 : -rv;
    }
    return tu_raw_register(r, NULL, 1, ticket, 1, size, out);
}

int tu_raw_unread_flood(const char *url, int n, int *sent)
{
    int s = tu_sock_connect(url, 5000);
    if (s < 0)
        return -1;
    int small = 4096;
    setsockopt(s, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    if (tu_sp_handshake(s) != 0) {
        close(s);
        return -1;
    }
    Gemm__Request rq = GEMM__REQUEST__INIT;
    Gemm__StatusRequest st = GEMM__STATUS_REQUEST__INIT;
    rq.has_version = rq.has_id = 1;
    rq.version = GEMM_PROTOCOL_VERSION;
    rq.body_case = GEMM__REQUEST__BODY_STATUS;
    rq.status = &st;
    uint8_t buf[64];
    *sent = 0;
    for (int i = 0; i < n; i++) {
        struct pollfd p = {.fd = s, .events = POLLOUT};
        if (poll(&p, 1, 200) <= 0)
            break; /* the daemon stopped reading this connection */
        rq.id = (uint64_t)i + 1;
        size_t len = gemm__request__pack(&rq, buf);
        if (tu_sp_send(s, 0x1000u + (uint32_t)i, buf, len) != 0)
            break;
        (*sent)++;
    }
    return s;
}

int tu_raw_release(tu_raw *r, uint64_t id, Gemm__Reply **out)
{
    Gemm__Request req = GEMM__REQUEST__INIT;
    Gemm__ReleaseBufferRequest rb = GEMM__RELEASE_BUFFER_REQUEST__INIT;
    rb.has_buffer_id = 1;
    rb.buffer_id = id;
    req.has_version = 1;
    req.version = GEMM_PROTOCOL_VERSION;
    req.body_case = GEMM__REQUEST__BODY_RELEASE_BUFFER;
    req.release_buffer = &rb;
    return tu_raw_call(r, &req, out);
}

int tu_raw_gemm(tu_raw *r, Gemm__GemmRequest *g, Gemm__Reply **out)
{
    Gemm__Request req = GEMM__REQUEST__INIT;
    req.has_version = 1;
    req.version = GEMM_PROTOCOL_VERSION;
    req.body_case = GEMM__REQUEST__BODY_GEMM;
    req.gemm = g;
    return tu_raw_call(r, &req, out);
}

static int shm_make(tu_shm *s, size_t size, bool populate)
{
    memset(s, 0, sizeof(*s));
    s->fd = memfd_create("gemmd-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (s->fd < 0)
        return errno;
    int e = 0;
    if (size > 0 && ftruncate(s->fd, (off_t)size) != 0)
        e = errno;
    if (e == 0 && size > 0 && populate)
        e = posix_fallocate(s->fd, 0, (off_t)size);
    if (e == 0 && size > 0) {
        s->data =
            mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
        if (s->data == MAP_FAILED) {
            e = errno;
            s->data = NULL;
        }
    }
    if (e != 0) {
        close(s->fd);
        s->fd = -1;
        return e;
    }
    s->size = size;
    return 0;
}

int tu_shm_create(tu_shm *s, size_t size)
{
    return shm_make(s, size, true);
}

int tu_shm_create_sparse(tu_shm *s, size_t size)
{
    return shm_make(s, size, false);
}

void tu_shm_destroy(tu_shm *s)
{
    if (s->data != NULL)
        munmap(s->data, s->size);
    if (s->fd >= 0)
        close(s->fd);
    memset(s, 0, sizeof(*s));
    s->fd = -1;
}

int tu_raw_buffer(tu_raw *r, tu_shm *s, size_t size, uint64_t *id)
{
    Gemm__Reply *rep;
    int rv = tu_shm_create(s, size);
    if (rv != 0)
        return GEMM_ERR_SHM;
    rv = tu_raw_register_fd(r, s->fd, size, &rep);
    if (rv < -1)
        return -rv; /* the daemon refused the descriptor */
    if (rv != 0)
        return GEMM_ERR_CLOSED;
    rv = tu_reply_status(rep);
    if (rv == GEMM_OK) {
        if (rep->body_case == GEMM__REPLY__BODY_REGISTER_BUFFER &&
            rep->register_buffer->has_buffer_id)
            *id = rep->register_buffer->buffer_id;
        else
            rv = GEMM_ERR_PROTOCOL;
    }
    gemm__reply__free_unpacked(rep, NULL);
    return rv;
}

void tu_raw_gemm_init(Gemm__GemmRequest *g, Gemm__Operand ops[4], uint64_t id,
                      uint64_t m, uint64_t n, uint64_t k, uint64_t a_off,
                      uint64_t b_off, uint64_t d_off)
{
    static const Gemm__GemmRequest gi = GEMM__GEMM_REQUEST__INIT;
    static const Gemm__Operand oi = GEMM__OPERAND__INIT;
    *g = gi;
    g->has_m = g->has_n = g->has_k = 1;
    g->m = m;
    g->n = n;
    g->k = k;
    g->has_ab_type = g->has_cd_type = 1;
    g->ab_type = GEMM__DTYPE__FP32;
    g->cd_type = GEMM__DTYPE__FP32;
    g->has_trans_a = g->has_trans_b = 1;
    g->has_alpha = g->has_beta = 1;
    g->alpha = 1.0f;
    g->beta = 0.0f;
    uint64_t offs[4] = {a_off, b_off, 0, d_off};
    for (int i = 0; i < 4; i++) {
        ops[i] = oi;
        ops[i].has_buffer_id = ops[i].has_offset = ops[i].has_ld = 1;
        ops[i].buffer_id = id;
        ops[i].offset = offs[i];
    }
    g->a = &ops[0];
    g->b = &ops[1];
    g->c = NULL;
    g->d = &ops[3];
}
