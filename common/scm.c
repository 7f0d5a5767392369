/*
 * scm.c: SCM_RIGHTS send and receive; see scm.h.
 */
#include "scm.h"

#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

ssize_t scm_sendv(int sock, const struct iovec *iov, int n, int fd, int flags)
{
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } cm;
    struct msghdr mh = {.msg_iov = (struct iovec *)iov,
                        .msg_iovlen = (size_t)n};
    if (fd >= 0) {
        memset(&cm, 0, sizeof(cm));
        mh.msg_control = cm.buf;
        mh.msg_controllen = sizeof(cm.buf);
        struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
        h->cmsg_level = SOL_SOCKET;
        h->cmsg_type = SCM_RIGHTS;
        h->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(h), &fd, sizeof(int));
    }
    return sendmsg(sock, &mh, MSG_NOSIGNAL | flags);
}

ssize_t scm_send(int sock, const void *buf, size_t len, int fd, int flags)
{
    struct iovec iov = {(void *)buf, len};
    return scm_sendv(sock, &iov, 1, fd, flags);
}

ssize_t scm_recv(int sock, void *buf, size_t len, int *fds, size_t maxfds,
                 size_t *nfds, bool *truncated, int flags)
{
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int) * SCM_FDS_MAX)];
    } cm;
    if (maxfds > SCM_FDS_MAX)
        maxfds = SCM_FDS_MAX;
    struct iovec iov = {buf, len};
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = cm.buf,
                        .msg_controllen = CMSG_SPACE(sizeof(int) * maxfds)};
    *nfds = 0;
    *truncated = false;
    ssize_t r = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | flags);
    if (r < 0)
        return r;
    *truncated = (mh.msg_flags & MSG_CTRUNC) != 0;
    for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h != NULL;
         h = CMSG_NXTHDR(&mh, h)) {
        if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
            continue;
        size_t n = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof(fd));
            if (*nfds < maxfds)
                fds[(*nfds)++] = fd;
            else {
                close(fd); /* the control buffer's padding held more */
                *truncated = true;
            }
        }
    }
    return r;
}
