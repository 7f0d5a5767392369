/*
 * scm.h: descriptors over a Unix stream socket (SCM_RIGHTS), the one copy
 * of the cmsg handling that the daemon, the client library and the tests
 * share. One sendmsg/recvmsg per call: callers keep their own loops,
 * waits and timeouts. Internal (not installed). Thread-safe per socket as
 * the socket calls are.
 */
#ifndef GEMM_COMMON_SCM_H
#define GEMM_COMMON_SCM_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

#define SCM_FDS_MAX 16 /* descriptors one scm_recv takes at most */

/*
 * Sends up to len bytes of buf with one sendmsg (MSG_NOSIGNAL | flags),
 * with descriptor fd as SCM_RIGHTS when fd >= 0 (the peer gets its own
 * copy; the caller keeps fd). Returns the bytes sent or -1 (errno).
 */
ssize_t scm_send(int sock, const void *buf, size_t len, int fd, int flags);

/* scm_send of n buffers (one sendmsg, writev's order). */
ssize_t scm_sendv(int sock, const struct iovec *iov, int n, int fd, int flags);

/*
 * Receives up to len bytes into buf with one recvmsg (MSG_CMSG_CLOEXEC |
 * flags) and the descriptors that came with them: up to maxfds (at most
 * SCM_FDS_MAX) go to fds, *nfds says how many; the caller owns them, also
 * when the call returns 0 or -1. *truncated is set when more descriptors
 * came than fit (the kernel closed the rest). Returns bytes read, 0 at
 * EOF, or -1 (errno).
 */
ssize_t scm_recv(int sock, void *buf, size_t len, int *fds, size_t maxfds,
                 size_t *nfds, bool *truncated, int flags);

#endif
