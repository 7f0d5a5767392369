/*
 * fdchan.c: the descriptor channel. nng cannot carry file descriptors, so
 * a client that registers a buffer opens a second connection to the
 * daemon's socket, says so in its first 8 bytes instead of an SP header,
 * and sends each memfd as SCM_RIGHTS ancillary data; the daemon answers
 * with a ticket that the RegisterBuffer request names (see gemm.proto).
 * One channel per client, opened on first use, one exchange at a time
 * (c->fd_mtx); any failure closes it, and the next use opens a new one.
 */
#include "internal.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static const uint8_t sp_rep_hdr[8] = {0, 'S', 'P', 0, 0, 0x31, 0, 0};
static const uint8_t fd_hdr[8] = {0, 'G', 'F', 'D', 0, 1, 0, 0};

/* Waits up to ms (-1: forever) for fd to be ready for events. */
static int wait_fd(int fd, short events, int ms)
{
    struct pollfd p = {.fd = fd, .events = events};
    int rv;
    while ((rv = poll(&p, 1, ms)) < 0 && errno == EINTR)
        ;
    if (rv == 0)
        errno = ETIMEDOUT;
    return rv > 0 ? 0 : -1;
}

/* Reads exactly len bytes within ms (per wait). 0 or -1 (errno). */
static int read_all(int fd, void *buf, size_t len, int ms)
{
    size_t got = 0;
    while (got < len) {
        if (wait_fd(fd, POLLIN, ms) != 0)
            return -1;
        ssize_t r = recv(fd, (char *)buf + got, len - got, MSG_DONTWAIT);
        if (r == 0) {
            errno = ECONNRESET;
            return -1;
        }
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

/* Sends len bytes, with pass (>= 0) as SCM_RIGHTS on the first. */
static int send_all(int fd, const void *buf, size_t len, int pass, int ms)
{
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } cm;
    size_t sent = 0;
    while (sent < len) {
        if (wait_fd(fd, POLLOUT, ms) != 0)
            return -1;
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
        ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -1;
        }
        sent += (size_t)w;
    }
    return 0;
}

/* Opens the channel: connect, read the daemon's greeting, send ours. */
static int chan_open(gemm_client *c, int ms)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strncmp(c->url, "ipc://", 6) != 0 ||
        strlen(c->url + 6) >= sizeof(sa.sun_path)) {
        errno = EINVAL;
        return -1;
    }
    strcpy(sa.sun_path, c->url + 6);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    uint8_t greet[8];
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        read_all(fd, greet, sizeof(greet), ms) != 0 ||
        send_all(fd, fd_hdr, sizeof(fd_hdr), -1, ms) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (memcmp(greet, sp_rep_hdr, sizeof(greet)) != 0) {
        close(fd);
        errno = EPROTO;
        return -1;
    }
    c->fdchan = fd;
    return 0;
}

int cli_pass_fd(gemm_client *c, int fd, uint64_t *ticket)
{
    int ms = atomic_load(&c->timeout_ms);
    uint8_t msg[8] = {1, 0, 0, 0, 0, 0, 0, 0}, ans[16];
    int rv = GEMM_OK;
    bool lost;

    pthread_mutex_lock(&c->mtx);
    lost = c->lost;
    pthread_mutex_unlock(&c->mtx);
    if (lost)
        return cli_error(GEMM_ERR_CLOSED,
                         "register buffer: connection to gemmd at %s lost "
                         "(gemmd exited or restarted?); reopen the client",
                         c->url);
    pthread_mutex_lock(&c->fd_mtx);
    if (c->fdchan < 0 && chan_open(c, ms) != 0) {
        int e = errno;
        rv = cli_error(e == EINVAL      ? GEMM_ERR_INVALID
                       : e == ETIMEDOUT ? GEMM_ERR_TIMEOUT
                                        : GEMM_ERR_CONNECT,
                       "register buffer: cannot open the descriptor channel "
                       "to gemmd at %s: %s%s",
                       c->url, strerror(e),
                       e == ETIMEDOUT ? " (gemmd is not answering)" : "");
        goto done;
    }
    if (send_all(c->fdchan, msg, sizeof(msg), fd, ms) != 0 ||
        read_all(c->fdchan, ans, sizeof(ans), ms) != 0) {
        int e = errno;
        pthread_mutex_lock(&c->mtx);
        lost = c->lost;
        pthread_mutex_unlock(&c->mtx);
        rv = cli_error(lost || e == EPIPE || e == ECONNRESET ? GEMM_ERR_CLOSED
                       : e == ETIMEDOUT                      ? GEMM_ERR_TIMEOUT
                                                             : GEMM_ERR_IO,
                       "register buffer: passing the memfd to gemmd at %s: "
                       "%s%s",
                       c->url, strerror(e),
                       lost ? " (gemmd exited or restarted?); reopen the "
                              "client"
                            : "");
        close(c->fdchan);
        c->fdchan = -1;
        goto done;
    }
    int32_t status = (int32_t)((uint32_t)ans[0] | (uint32_t)ans[1] << 8 |
                               (uint32_t)ans[2] << 16 | (uint32_t)ans[3] << 24);
    if (status != GEMM_OK) {
        rv = cli_error(status,
                       "register buffer: gemmd refused the descriptor: %s%s",
                       gemm_strerror(status),
                       status == GEMM_ERR_LIMIT
                           ? " (too many descriptors not yet registered)"
                           : "");
        goto done;
    }
    *ticket = 0;
    for (int i = 7; i >= 0; i--)
        *ticket = *ticket << 8 | ans[8 + i];
done:
    pthread_mutex_unlock(&c->fd_mtx);
    return rv;
}

void cli_fdchan_close(gemm_client *c)
{
    pthread_mutex_lock(&c->fd_mtx);
    if (c->fdchan >= 0)
        close(c->fdchan);
    c->fdchan = -1;
    pthread_mutex_unlock(&c->fd_mtx);
}
