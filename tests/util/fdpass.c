/*
 * fdpass.c: see fdpass.h.
 */
#include "util/fdpass.h"

#include "scm.h"
#include "wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

int tu_sock_connect(const char *url, int timeout_ms)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strncmp(url, "ipc://", 6) != 0 ||
        strlen(url + 6) >= sizeof(sa.sun_path))
        return -1;
    strcpy(sa.sun_path, url + 6);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int read_all(int fd, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t r = recv(fd, (char *)buf + got, len - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

static int send_all(int fd, const void *buf, size_t len, int pass)
{
    size_t sent = 0;
    while (sent < len) {
        ssize_t w = scm_send(fd, (const char *)buf + sent, len - sent,
                             sent == 0 ? pass : -1, 0);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        sent += (size_t)w;
    }
    return 0;
}

int tu_fd_ticket(const char *url, int fd, uint64_t *ticket)
{
    return tu_fd_ticket_keep(url, fd, ticket, NULL);
}

int tu_fd_ticket_keep(const char *url, int fd, uint64_t *ticket, int *chan)
{
    int s = tu_sock_connect(url, 10000);
    uint8_t greet[WIRE_HDR_LEN], msg[WIRE_FD_MSG_LEN], ans[WIRE_FD_ANSWER_LEN];
    int rv = -1;
    if (s < 0)
        return -1;
    wire_fd_msg_put(msg, WIRE_FD_OP_PASS, 0);
    if (read_all(s, greet, sizeof(greet)) != 0 ||
        memcmp(greet, wire_sp_rep_hdr, sizeof(greet)) != 0 ||
        send_all(s, wire_fd_hdr, sizeof(wire_fd_hdr), -1) != 0 ||
        send_all(s, msg, sizeof(msg), fd) != 0 ||
        read_all(s, ans, sizeof(ans)) != 0)
        goto done;
    rv = wire_fd_answer_get(ans, ticket);
    if (rv == 0 && chan != NULL) {
        *chan = s;
        return rv;
    }
done:
    close(s);
    return rv;
}

int tu_fd_lend(const char *url, uint32_t mib, int *fd, uint64_t *ticket,
               int *chan)
{
    int s = tu_sock_connect(url, 10000);
    uint8_t greet[WIRE_HDR_LEN], msg[WIRE_FD_MSG_LEN], ans[WIRE_FD_ANSWER_LEN];
    int rv = -1;
    *fd = -1;
    if (s < 0)
        return -1;
    wire_fd_msg_put(msg, WIRE_FD_OP_LEND, mib);
    if (read_all(s, greet, sizeof(greet)) != 0 ||
        memcmp(greet, wire_sp_rep_hdr, sizeof(greet)) != 0 ||
        send_all(s, wire_fd_hdr, sizeof(wire_fd_hdr), -1) != 0 ||
        send_all(s, msg, sizeof(msg), -1) != 0)
        goto done;
    int fds[SCM_FDS_MAX];
    size_t nfds = 0, got = 0;
    bool trunc;
    while (got < sizeof(ans)) {
        ssize_t r = scm_recv(s, ans + got, sizeof(ans) - got, fds, SCM_FDS_MAX,
                             &nfds, &trunc, 0);
        for (size_t i = 0; i < nfds; i++) {
            if (*fd < 0)
                *fd = fds[i];
            else
                close(fds[i]);
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            goto done;
        got += (size_t)r;
    }
    rv = wire_fd_answer_get(ans, ticket);
    if (chan != NULL) {
        *chan = s;
        return rv;
    }
done:
    close(s);
    return rv;
}

int tu_sp_handshake(int sock)
{
    uint8_t greet[WIRE_HDR_LEN];
    if (read_all(sock, greet, sizeof(greet)) != 0 ||
        memcmp(greet, wire_sp_rep_hdr, sizeof(greet)) != 0)
        return -1;
    return send_all(sock, wire_sp_req_hdr, sizeof(wire_sp_req_hdr), -1);
}

int tu_sp_send(int sock, uint32_t req_id, const void *body, size_t len)
{
    const size_t head = WIRE_SP_FRAME_HEAD + 4; /* frame + request id */
    uint8_t *f = malloc(head + len);
    if (f == NULL)
        return -1;
    wire_sp_frame_put(f, 4 + len);
    wire_put_be32(f + WIRE_SP_FRAME_HEAD, req_id | WIRE_SP_ID_FLAG);
    memcpy(f + head, body, len);
    int rv = send_all(sock, f, head + len, -1);
    free(f);
    return rv;
}

int tu_sp_recv(int sock, uint32_t *req_id, uint8_t **body, size_t *len)
{
    uint8_t h[WIRE_SP_FRAME_HEAD + 4];
    uint64_t n;
    if (read_all(sock, h, sizeof(h)) != 0 || !wire_sp_frame_get(h, &n))
        return -1;
    if (n < 4 || n > (64u << 20))
        return -1;
    *req_id = wire_get_be32(h + WIRE_SP_FRAME_HEAD);
    *len = (size_t)n - 4;
    *body = malloc(*len ? *len : 1);
    if (*body == NULL || read_all(sock, *body, *len) != 0) {
        free(*body);
        return -1;
    }
    return 0;
}
