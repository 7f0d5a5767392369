/*
 * fdpass.c: see fdpass.h.
 */
#include "util/fdpass.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

static const uint8_t sp_req_hdr[8] = {0, 'S', 'P', 0, 0, 0x30, 0, 0};
static const uint8_t sp_rep_hdr[8] = {0, 'S', 'P', 0, 0, 0x31, 0, 0};
static const uint8_t fd_hdr[8] = {0, 'G', 'F', 'D', 0, 1, 0, 0};

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
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } cm;
    size_t sent = 0;
    while (sent < len) {
        struct iovec iov = {(char *)buf + sent, len - sent};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        if (pass >= 0 && sent == 0) {
            memset(&cm, 0, sizeof(cm));
            mh.msg_control = cm.buf;
            mh.msg_controllen = sizeof(cm.buf);
            struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
            h->cmsg_level = SOL_SOCKET;
            h->cmsg_type = SCM_RIGHTS;
            h->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(h), &pass, sizeof(int));
        }
        ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);
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
    int s = tu_sock_connect(url, 10000);
    uint8_t greet[8], ans[16];
    const uint8_t msg[8] = {1, 0, 0, 0, 0, 0, 0, 0};
    int rv = -1;
    if (s < 0)
        return -1;
    if (read_all(s, greet, 8) != 0 || memcmp(greet, sp_rep_hdr, 8) != 0 ||
        send_all(s, fd_hdr, 8, -1) != 0 || send_all(s, msg, 8, fd) != 0 ||
        read_all(s, ans, 16) != 0)
        goto done;
    rv = (int)((uint32_t)ans[0] | (uint32_t)ans[1] << 8 |
               (uint32_t)ans[2] << 16 | (uint32_t)ans[3] << 24);
    *ticket = 0;
    for (int i = 7; i >= 0; i--)
        *ticket = *ticket << 8 | ans[8 + i];
done:
    close(s);
    return rv;
}

int tu_sp_handshake(int sock)
{
    uint8_t greet[8];
    if (read_all(sock, greet, 8) != 0 || memcmp(greet, sp_rep_hdr, 8) != 0)
        return -1;
    return send_all(sock, sp_req_hdr, 8, -1);
}

int tu_sp_send(int sock, uint32_t req_id, const void *body, size_t len)
{
    uint8_t *f = malloc(13 + len);
    if (f == NULL)
        return -1;
    uint64_t n = 4 + len;
    f[0] = 1;
    for (int i = 0; i < 8; i++)
        f[1 + i] = (uint8_t)(n >> (56 - 8 * i));
    req_id |= 0x80000000u;
    for (int i = 0; i < 4; i++)
        f[9 + i] = (uint8_t)(req_id >> (24 - 8 * i));
    memcpy(f + 13, body, len);
    int rv = send_all(sock, f, 13 + len, -1);
    free(f);
    return rv;
}

int tu_sp_recv(int sock, uint32_t *req_id, uint8_t **body, size_t *len)
{
    uint8_t h[13];
    if (read_all(sock, h, 13) != 0 || h[0] != 1)
        return -1;
    uint64_t n = 0;
    for (int i = 0; i < 8; i++)
        n = n << 8 | h[1 + i];
    if (n < 4 || n > (64u << 20))
        return -1;
    *req_id = (uint32_t)h[9] << 24 | (uint32_t)h[10] << 16 |
              (uint32_t)h[11] << 8 | h[12];
    *len = (size_t)n - 4;
    *body = malloc(*len ? *len : 1);
    if (*body == NULL || read_all(sock, *body, *len) != 0) {
        free(*body);
        return -1;
    }
    return 0;
}
