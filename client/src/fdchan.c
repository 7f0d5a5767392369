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

/* Reads the daemon's answer, and the descriptor that may come with its
 * first bytes (*got, -1 when none), within ms per wait. 0 or -1 (errno;
 * *got closed then). */
static int read_answer(int fd, uint8_t ans[WIRE_FD_ANSWER_LEN], int *got,
                       int ms)
{
    size_t have = 0;
    *got = -1;
    while (have < WIRE_FD_ANSWER_LEN) {
        if (wait_fd(fd, POLLIN, ms) != 0)
            goto fail;
        int fds[SCM_FDS_MAX];
        size_t nfds = 0;
        bool trunc = false;
        ssize_t r = scm_recv(fd, ans + have, WIRE_FD_ANSWER_LEN - have, fds,
                             SCM_FDS_MAX, &nfds, &trunc, MSG_DONTWAIT);
        for (size_t i = 0; i < nfds; i++) {
            if (*got < 0 && have == 0)
                *got = fds[i];
            else
                close(fds[i]); /* only one comes, with the first byte */
        }
        if (r == 0) {
            errno = ECONNRESET;
            goto fail;
        }
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            goto fail;
        }
        have += (size_t)r;
    }
    return 0;
fail:
    if (*got >= 0) {
        int e = errno;
        close(*got);
        errno = e;
    }
    *got = -1;
    return -1;
}

/* One exchange on the channel: msg (with pass as SCM_RIGHTS when >= 0),
 * then the answer: its status (a gemm_error, with a message set when
 * not GEMM_OK), *ticket and *got (the descriptor that came with it, or
 * -1). `what` names the call in messages. */
static int exchange(gemm_client *c, const uint8_t msg[WIRE_FD_MSG_LEN],
                    int pass, const char *what, uint64_t *ticket, int *got)
{
    int ms = atomic_load(&c->timeout_ms);
    uint8_t ans[WIRE_FD_ANSWER_LEN];
    int rv = GEMM_OK;
    bool lost;

    *got = -1;
    pthread_mutex_lock(&c->mtx);
    lost = c->lost;
    pthread_mutex_unlock(&c->mtx);
    if (lost)
        return cli_error(GEMM_ERR_CLOSED,
                         "%s: connection to gemmd at %s lost (gemmd exited "
                         "or restarted?); reopen the client",
                         what, c->url);
    pthread_mutex_lock(&c->fd_mtx);
    if (c->fdchan < 0 && chan_open(c, ms) != 0) {
        int e = errno;
        rv = cli_error(e == EINVAL      ? GEMM_ERR_INVALID
                       : e == ETIMEDOUT ? GEMM_ERR_TIMEOUT
                                        : GEMM_ERR_CONNECT,
                       "%s: cannot open the descriptor channel to gemmd at "
                       "%s: %s%s",
                       what, c->url, strerror(e),
                       e == ETIMEDOUT ? " (gemmd is not answering)" : "");
        goto done;
    }
    if (send_all(c->fdchan, msg, WIRE_FD_MSG_LEN, pass, ms) != 0 ||
        read_answer(c->fdchan, ans, got, ms) != 0) {
        int e = errno;
        pthread_mutex_lock(&c->mtx);
        lost = c->lost;
        pthread_mutex_unlock(&c->mtx);
        rv = cli_error(lost || e == EPIPE || e == ECONNRESET ? GEMM_ERR_CLOSED
                       : e == ETIMEDOUT                      ? GEMM_ERR_TIMEOUT
                                                             : GEMM_ERR_IO,
                       "%s: the descriptor channel to gemmd at %s: %s%s", what,
                       c->url, strerror(e),
                       lost ? " (gemmd exited or restarted?); reopen the "
                              "client"
                            : "");
        close(c->fdchan);
        c->fdchan = -1;
        goto done;
    }
    int32_t status = wire_fd_answer_get(ans, ticket);
    if (status != GEMM_OK) {
        if (*got >= 0)
            close(*got);
        *got = -1;
        rv = cli_error(status, "%s: gemmd answered: %s%s", what,
                       gemm_strerror(status),
                       status == GEMM_ERR_LIMIT
                           ? " (too many descriptors not yet registered)"
                           : "");
    }
done:
    pthread_mutex_unlock(&c->fd_mtx);
    return rv;
}

int cli_pass_fd(gemm_client *c, int fd, uint64_t *ticket)
{
    uint8_t msg[WIRE_FD_MSG_LEN];
    int got;
    wire_fd_msg_put(msg, WIRE_FD_OP_PASS, 0);
    int rv = exchange(c, msg, fd, "register buffer", ticket, &got);
    if (got >= 0)
        close(got); /* none comes with a PASS answer */
    return rv;
}

int cli_lend_fd(gemm_client *c, size_t size, int *fd, uint64_t *ticket)
{
    uint8_t msg[WIRE_FD_MSG_LEN];
    size_t mib = (size + ((size_t)1 << 20) - 1) >> 20;
    *fd = -1;
    if (mib > UINT32_MAX)
        return cli_error(GEMM_ERR_INVALID, "spare: size %zu too large", size);
    wire_fd_msg_put(msg, WIRE_FD_OP_LEND, (uint32_t)mib);
    int rv = exchange(c, msg, -1, "spare", ticket, fd);
    if (rv == GEMM_OK && *fd < 0)
        rv = cli_error(GEMM_ERR_PROTOCOL,
                       "spare: gemmd's answer came without its memfd");
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
