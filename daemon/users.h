/*
 * users.h: what each local user (peer uid) holds in the daemon, so limits
 * apply per user as well as per connection: one user opening many
 * connections cannot take the daemon's shared tables, memory budget or
 * descriptors from the others. Entries are made on a user's first
 * connection and kept (a host has few uids). Loop thread only.
 */
#ifndef GEMMD_USERS_H
#define GEMMD_USERS_H

#include <stdint.h>

typedef struct gemmd_user {
    uint64_t uid;
    uint32_t conns;    /* open connections */
    uint32_t buffers;  /* registered buffers */
    uint64_t bytes;    /* registered buffer bytes + resident tensors */
    uint64_t memory;   /* of the daemon's memory budget, in use */
    uint32_t inflight; /* jobs queued or running */
    uint32_t fds;      /* descriptors held for it, not yet registered
                          (tickets, and those queued on its channels) */
    uint32_t loans;    /* of them, spares lent (fdchan.h: FDC_LOANS) */
    uint64_t requests; /* answered, all kinds */
    uint64_t failed;   /* of which with an error */
    uint64_t refused;  /* connections refused (caps) */
    struct gemmd_user *next;
} gemmd_user;

#define USERS_BUCKETS 64

typedef struct gemmd_users {
    gemmd_user *buckets[USERS_BUCKETS];
    uint32_t count;
} gemmd_users;

/* The entry of uid, made if needed; NULL only when out of memory. */
gemmd_user *users_get(gemmd_users *u, uint64_t uid);

/* Calls fn for every user (bucket order). */
void users_each(const gemmd_users *u,
                void (*fn)(void *arg, const gemmd_user *e), void *arg);

void users_fini(gemmd_users *u);

#endif
