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

#include "scm.h"
#include "wire.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

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
    size_t sent = 0;
    while (sent < len) {
        if (wait_fd(fd, POLLOUT, ms) != 0)
            return -1;
        ssize_t w = scm_send(fd, (const char *)buf + sent, len - sent,
                             sent == 0 ? pass : -1, MSG_DONTWAIT);
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
    uint8_t greet[WIRE_HDR_LEN];
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        read_all(fd, greet, sizeof(greet), ms) != 0 ||
        send_all(fd, wire_fd_hdr, sizeof(wire_fd_hdr), -1, ms) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (memcmp(greet, wire_sp_rep_hdr, sizeof(greet)) != 0) {
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
    uint8_t msg[WIRE_FD_MSG_LEN], ans[WIRE_FD_ANSWER_LEN];
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
    wire_fd_msg_put(msg, WIRE_FD_OP_PASS);
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
    uint64_t got;
    int32_t status = wire_fd_answer_get(ans, &got);
    if (status != GEMM_OK) {
        rv = cli_error(status,
                       "register buffer: gemmd refused the descriptor: %s%s",
                       gemm_strerror(status),
                       status == GEMM_ERR_LIMIT
                           ? " (too many descriptors not yet registered)"
                           : "");
        goto done;
    }
    *ticket = got;
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
