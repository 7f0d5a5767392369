/*
 * fdchan.h: descriptor channels and tickets. nng cannot carry file
 * descriptors, so a client opens a second connection to the same socket
 * (its greeting names the channel, see common/wire.h), hands each memfd
 * over with SCM_RIGHTS and gets a one-use ticket bound to its uid
 * (SO_PEERCRED), which its RegisterBuffer names. A ticket not used within
 * 30 s expires. The channel installs itself on the connection layer as a
 * protocol. Loop thread only.
 */
#ifndef GEMMD_FDCHAN_H
#define GEMMD_FDCHAN_H

#include "conn.h"

#include <stdint.h>

#define FDC_FDQ_MAX    8 /* descriptors received, not yet matched */
#define FDC_BUCKETS    64
#define FDC_TICKET_TTL 30 /* seconds a ticket stays good */

/* The state of one channel (its conn->up). */
typedef struct fdc_chan {
    int fdq[FDC_FDQ_MAX];
    unsigned nfdq;
    unsigned tickets; /* tickets of this channel not yet used */
} fdc_chan;

/* A descriptor handed over, until RegisterBuffer names it. */
typedef struct fdc_ticket {
    uint64_t ticket;
    int fd;
    uint64_t uid;
    conn *chan; /* the channel it came on (NULL once closed) */
    uint64_t expires_ns;
    struct fdc_ticket *next;
} fdc_ticket;

typedef struct fdc_table {
    conn_set *set;
    conn_proto proto;
    fdc_ticket *buckets[FDC_BUCKETS];
    uint32_t count; /* tickets held, all channels */
} fdc_table;

/* Installs the descriptor channel on set and its ticket sweeper on the
 * set's listener. Main thread, before lsn_open. */
void fdc_init(fdc_table *t, conn_set *set);

/* Takes descriptor `ticket` for a RegisterBuffer of uid: the fd (the
 * caller owns it), or -1 when the ticket is unknown, used, expired or
 * another uid's. */
int fdc_take(fdc_table *t, uint64_t ticket, uint64_t uid);

/* Drops every ticket (closing their descriptors). */
void fdc_close(fdc_table *t);

#endif
