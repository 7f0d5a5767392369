/*
 * peeruid.c: the uid owning a loopback TCP peer's socket, from the
 * kernel's socket table (one NETLINK_SOCK_DIAG request naming the exact
 * 4-tuple; the reply's idiag_uid). A socket per lookup, so no stale reply
 * can be read by the next one. Thread-safe.
 */
#include "peeruid.h"

#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

/* A v4-mapped IPv6 address's IPv4 part into *out; whether it was one. */
static bool peeruid_unmap(const struct sockaddr_in6 *a, struct in_addr *out)
{
    if (!IN6_IS_ADDR_V4MAPPED(&a->sin6_addr))
        return false;
    memcpy(out, a->sin6_addr.s6_addr + 12, 4);
    return true;
}

bool peeruid_is_loopback(const struct sockaddr_storage *addr)
{
    if (addr->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)addr;
        return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
    }
    if (addr->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)addr;
        struct in_addr v4;
        if (peeruid_unmap(a, &v4))
            return (ntohl(v4.s_addr) >> 24) == 127;
        return IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
    }
    return false;
}

/* Fills the request's family, ports and addresses from one side's
 * address (src: the peer's socket's own side). Returns the family. */
static int peeruid_side(const struct sockaddr_storage *s, __be16 *port,
                        __be32 addr[4], bool v4)
{
    memset(addr, 0, 16);
    if (s->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)s;
        *port = a->sin_port;
        memcpy(addr, &a->sin_addr, 4);
        return AF_INET;
    }
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)s;
    *port = a->sin6_port;
    struct in_addr four;
    if (v4 && peeruid_unmap(a, &four)) {
        memcpy(addr, &four, 4);
        return AF_INET;
    }
    memcpy(addr, &a->sin6_addr, 16);
    return AF_INET6;
}

int peeruid_lookup(const struct sockaddr_storage *peer,
                   const struct sockaddr_storage *local, uid_t *uid)
{
    struct {
        struct nlmsghdr nh;
        struct inet_diag_req_v2 r;
    } req;
    memset(&req, 0, sizeof(req));
    req.nh.nlmsg_len = sizeof(req);
    req.nh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    req.nh.nlmsg_flags = NLM_F_REQUEST;
    req.nh.nlmsg_seq = 1;
    /* A v4 peer reaching a dual-stack listener shows as ::ffff:a.b.c.d;
     * its own socket is AF_INET. */
    bool v4 = peer->ss_family == AF_INET;
    if (peer->ss_family == AF_INET6) {
        struct in_addr x;
        v4 = peeruid_unmap((const struct sockaddr_in6 *)peer, &x);
    }
    req.r.sdiag_family =
        (__u8)peeruid_side(peer, &req.r.id.idiag_sport, req.r.id.idiag_src, v4);
    peeruid_side(local, &req.r.id.idiag_dport, req.r.id.idiag_dst, v4);
    req.r.sdiag_protocol = IPPROTO_TCP;
    req.r.idiag_states = ~0u;
    req.r.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;

    int s = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (s < 0)
        return -errno;
    struct timeval tv = {0, 100000}; /* the kernel answers at once */
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    struct sockaddr_nl nl = {.nl_family = AF_NETLINK};
    int rv = -ENOENT;
    if (sendto(s, &req, sizeof(req), 0, (struct sockaddr *)&nl, sizeof(nl)) !=
        (ssize_t)sizeof(req)) {
        rv = -errno;
        close(s);
        return rv;
    }
    union {
        struct nlmsghdr nh;
        char b[1024];
    } ans;
    ssize_t n = recv(s, &ans, sizeof(ans), 0);
    if (n < 0)
        rv = -errno;
    for (struct nlmsghdr *h = &ans.nh; n > 0 && NLMSG_OK(h, (size_t)n);
         h = NLMSG_NEXT(h, n)) {
        if (h->nlmsg_type == NLMSG_ERROR) {
            const struct nlmsgerr *e = NLMSG_DATA(h);
            rv = e->error != 0 ? e->error : -ENOENT;
            break;
        }
        if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
            h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
            const struct inet_diag_msg *m = NLMSG_DATA(h);
            *uid = (uid_t)m->idiag_uid;
            rv = 0;
            break;
        }
    }
    close(s);
    return rv;
}
