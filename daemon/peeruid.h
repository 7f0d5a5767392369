/*
 * peeruid.h: which local user owns the other end of a TCP connection from
 * a loopback address. The kernel's socket table is asked for the peer's
 * socket by its exact 4-tuple (NETLINK_SOCK_DIAG, inet_diag), which gives
 * its owner's uid; the metrics endpoint shares its places per local uid
 * with it, since every local user connects from 127.0.0.1. Needs
 * AF_NETLINK (the systemd unit allows it). Thread-safe.
 */
#ifndef GEMMD_PEERUID_H
#define GEMMD_PEERUID_H

#include <stdbool.h>
#include <sys/socket.h>
#include <sys/types.h>

/* Whether addr (AF_INET or AF_INET6) is a loopback address: 127.0.0.0/8,
 * ::1 or ::ffff:127.0.0.0/104. */
bool peeruid_is_loopback(const struct sockaddr_storage *addr);

/* The uid owning the TCP socket at peer whose connection reaches us at
 * local (both as getpeername/getsockname give them). Returns 0 and sets
 * *uid, or a negative errno: -ENOENT when no such socket is found,
 * another when the kernel cannot be asked (e.g. -EAFNOSUPPORT where
 * AF_NETLINK is not allowed). Blocks only for one netlink round trip. */
int peeruid_lookup(const struct sockaddr_storage *peer,
                   const struct sockaddr_storage *local, uid_t *uid);

#endif
