/*
 * fdchan.h: descriptor channels and tickets. nng cannot carry file
 * descriptors, so a client opens a second connection to the same socket
 * (its greeting names the channel, see common/wire.h), hands each memfd
 * over with SCM_RIGHTS and gets a one-use ticket bound to its uid
 * (SO_PEERCRED), which its RegisterBuffer names. A ticket not used within
 * 30 s expires, and one whose channel closed within FDC_CLOSED_TTL.
 * Every descriptor the daemon holds for a client before it is registered
 * (a ticket's, or one received and not yet matched with its message)
 * counts against its uid (--user-fds) and the daemon's descriptor budget
 * (the half of the connection cap kept for them); past either the
 * message is answered LIMIT and the descriptor closed at once. A message
 * must be whole within --message-timeout of its first byte, and queued
 * descriptors without a message are held no longer. LEND asks for a
 * spare (spares.h): the answer brings its memfd and a ticket that holds
 * the daemon's side of it (mapping and pin) until RegisterBuffer names
 * it, or the ticket expires and the spare is freed; a uid holds at most
 * FDC_LOANS such loans, and one that would pass its --user-bytes with the
 * size asked is refused (LIMIT). The channel installs
 * itself on the connection layer as a protocol. Loop thread only.
 */
#ifndef GEMMD_FDCHAN_H
#define GEMMD_FDCHAN_H

#include "conn.h"
#include "spares.h"

#include <stdint.h>

#define FDC_FDQ_MAX    8 /* descriptors received, not yet matched */
#define FDC_BUCKETS    64
#define FDC_TICKET_TTL 30 /* seconds a ticket stays good */
#define FDC_CLOSED_TTL 1  /* seconds, once its channel closed */
/* spares a uid may hold lent and not yet registered: each is pinned
 * memory its buffer bytes do not count until registered */
#define FDC_LOANS 2

/* The state of one channel (its conn->up). */
typedef struct fdc_chan {
    int fdq[FDC_FDQ_MAX]; /* -1: one refused at a cap (answered LIMIT) */
    unsigned nfdq;
    unsigned tickets; /* tickets of this channel not yet used */
} fdc_chan;

/* A descriptor handed over, until RegisterBuffer names it. */
typedef struct fdc_ticket {
    uint64_t ticket;
    int fd;
    uint64_t uid;
    gemmd_user *user; /* whose fds it counts in */
    conn *chan;       /* the channel it came on (NULL once closed) */
    uint64_t expires_ns;
    spare *loan; /* a spare lent: fd is the daemon's copy of its memfd */
    struct fdc_ticket *next;
} fdc_ticket;

typedef struct fdc_table {
    conn_set *set;
    conn_proto proto;
    fdc_ticket *buckets[FDC_BUCKETS];
    uint32_t count;   /* descriptors held: tickets and queued, all
                         channels */
    uint64_t refused; /* descriptors refused at a cap */
    bool lend;        /* spares are kept: LEND is answered */
} fdc_table;

/* Installs the descriptor channel on set and its ticket sweeper on the
 * set's listener. Main thread, before lsn_open. */
void fdc_init(fdc_table *t, conn_set *set);

/* Takes descriptor `ticket` for a RegisterBuffer of uid: the fd (the
 * caller owns it), or -1 when the ticket is unknown, used, expired or
 * another uid's. *loan is the spare lent with it (the caller's too), or
 * NULL for a memfd the client passed. */
int fdc_take(fdc_table *t, uint64_t ticket, uint64_t uid, spare **loan);

/* Drops every ticket (closing their descriptors). */
void fdc_close(fdc_table *t);

#endif
