/*
 * notify.c: one sendto() on an AF_UNIX datagram socket, path or abstract
 * ('@' prefix) address, as sd_notify(3) describes the protocol.
 */
#include "notify.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int gemmd_notify(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (path == NULL || path[0] == '\0')
        return 0;
    struct sockaddr_un sa;
    size_t n = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || n >= sizeof(sa.sun_path))
        return -1;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path, n);
    if (path[0] == '@')
        sa.sun_path[0] = '\0'; /* abstract namespace */
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    ssize_t rv = sendto(fd, state, strlen(state), MSG_NOSIGNAL,
                        (struct sockaddr *)&sa, len);
    close(fd);
    return rv < 0 ? -1 : 1;
}
