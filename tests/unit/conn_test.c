/*
 * conn_test.c: a reply that a worker writes itself (conn_write_direct) on
 * a socketpair with a small send buffer: the part that fits leaves at
 * once and the rest is held; nothing else is written, by a worker or by
 * the loop, until the loop puts that rest first in the queue
 * (conn_send_rest); the peer then reads the reply whole, followed by
 * what was queued behind it, and the connection's counters add up.
 * Nothing is written directly while output waits or once the connection
 * is closed.
 */
#include "conn.h"

#include <gemm/types.h>

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <syslog.h>
#include <unistd.h>

static gemmd_config cfg;
static lsn_listener lsn;
static conn_set set;
static int peer = -1;

/* A connection of set on one end of a socketpair (the peer holds the
 * other), its send buffer at the kernel's minimum. */
static conn *make_conn(void)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int small = 1;
    cr_assert_eq(
        setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
    peer = sv[1];
    cfg.client_pending = 64;
    cfg.send_timeout_s = 0;
    lsn.stopped = true; /* no sweep timer */
    set.loop = uv_default_loop();
    set.cfg = &cfg;
    set.lsn = &lsn;
    pthread_mutex_init(&set.wmu, NULL);
    conn *c = calloc(1, sizeof(*c));
    cr_assert_not_null(c);
    c->set = &set;
    c->fd = sv[0];
    c->refs = 1;
    c->read_paused = true; /* this test reads nothing from the peer */
    cr_assert_eq(uv_poll_init(set.loop, &c->poll, c->fd), 0);
    c->poll.data = c;
    return c;
}

/* A reply of len bytes, byte i = (seed + i) % 251. */
static conn_out *reply(size_t len, unsigned seed)
{
    conn_out *o = conn_out_new(len, true);
    cr_assert_not_null(o);
    for (size_t i = 0; i < len; i++)
        o->data[i] = (uint8_t)((seed + i) % 251);
    return o;
}

/* Reads the n replies of (len, seed) from the peer, in order, while the
 * loop runs, the first from its byte skip on (those before were read);
 * checks every byte. */
static void read_all(const size_t *lens, const unsigned *seeds, int n,
                     size_t skip)
{
    size_t want = 0;
    for (int i = 0; i < n; i++)
        want += lens[i];
    want -= skip;
    uint8_t *got = malloc(want);
    cr_assert_not_null(got);
    size_t have = 0;
    for (int spins = 0; have < want && spins < 1000000; spins++) {
        uv_run(set.loop, UV_RUN_NOWAIT);
        ssize_t r = recv(peer, got + have, want - have, MSG_DONTWAIT);
        if (r > 0)
            have += (size_t)r;
        else
            cr_assert(r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK),
                      "recv: %s", r == 0 ? "end of file" : strerror(errno));
    }
    cr_assert_eq(have, want, "read %zu of %zu bytes", have, want);
    size_t off = 0;
    for (int i = 0; i < n; i++)
        for (size_t j = i == 0 ? skip : 0; j < lens[i]; j++, off++)
            cr_assert_eq(got[off], (uint8_t)((seeds[i] + j) % 251),
                         "reply %d byte %zu differs", i, j);
    free(got);
}

Test(conn, direct_reply_written_in_part_goes_first)
{
    conn *c = make_conn();
    c->pending = 3; /* three requests read, none answered */
    /* far larger than the send buffer: only a part fits */
    size_t lens[3] = {1u << 20, 4096, 100};
    unsigned seeds[3] = {1, 2, 3};
    conn_out *o = reply(lens[0], seeds[0]);
    size_t wrote;
    conn_wlock(&set);
    int st = conn_write_direct(c, o, &wrote);
    conn_wunlock(&set);
    cr_assert_eq(st, CONN_DIRECT_PARTIAL, "direct write of 1 MiB: %d", st);
    cr_assert(wrote > 0 && wrote < lens[0], "wrote %zu", wrote);
    cr_assert_eq(o->len, lens[0] - wrote, "the rest holds %zu bytes", o->len);
    cr_assert(c->out_stuck);
    /* the peer reads what was written: the socket has room again */
    uint8_t *head = malloc(wrote);
    cr_assert_not_null(head);
    for (size_t have = 0; have < wrote;) {
        ssize_t r = recv(peer, head + have, wrote - have, 0);
        cr_assert(r > 0, "recv: %s", r == 0 ? "end of file" : strerror(errno));
        have += (size_t)r;
    }
    for (size_t j = 0; j < wrote; j++)
        cr_assert_eq(head[j], (uint8_t)((seeds[0] + j) % 251));
    free(head);

    /* a second worker's reply is not written in between */
    conn_out *o2 = reply(lens[2], seeds[2]);
    size_t wrote2;
    conn_wlock(&set);
    cr_assert_eq(conn_write_direct(c, o2, &wrote2), CONN_DIRECT_NONE);
    conn_wunlock(&set);
    cr_assert_eq(wrote2, 0);

    /* the loop's own reply waits behind the rest */
    conn_send(c, reply(lens[1], seeds[1]));
    cr_assert(c->out_head != NULL && c->out_head->len == lens[1] &&
                  c->out_off == 0,
              "the loop's reply was written (in part) before the rest");
    conn_reply_written(c, wrote, false);
    conn_send_rest(c, o);
    cr_assert(!c->out_stuck);
    conn_send(c, o2); /* as the loop sends a reply a worker could not */
    read_all(lens, seeds, 3, wrote);
    cr_assert_null(c->out_head, "output left after the peer read it all");
    cr_assert_eq(set.bytes_out, lens[0] + lens[1] + lens[2], "bytes_out %llu",
                 (unsigned long long)set.bytes_out);
    cr_assert_eq(c->pending, 0, "pending %u after three replies", c->pending);

    /* all written, a small reply leaves whole */
    conn_out *o3 = reply(64, 7);
    conn_wlock(&set);
    cr_assert_eq(conn_write_direct(c, o3, &wrote), CONN_DIRECT_SENT);
    conn_wunlock(&set);
    cr_assert_eq(wrote, 64);
    conn_reply_written(c, wrote, true);
    free(o3);
    size_t l64 = 64;
    unsigned s7 = 7;
    read_all(&l64, &s7, 1, 0);

    /* closed: nothing is written */
    conn_close(c, LOG_DEBUG, "test done");
    conn_out *o4 = reply(64, 9);
    conn_wlock(&set);
    cr_assert_eq(conn_write_direct(c, o4, &wrote), CONN_DIRECT_NONE);
    conn_wunlock(&set);
    free(o4);
    uv_run(set.loop, UV_RUN_NOWAIT); /* the close callback frees c */
    close(peer);
}
