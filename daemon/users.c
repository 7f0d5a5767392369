/*
 * users.c: the per-uid table (chained hash on the uid).
 */
#include "users.h"

#include <stdlib.h>

gemmd_user *users_get(gemmd_users *u, uint64_t uid)
{
    gemmd_user **l = &u->buckets[uid % USERS_BUCKETS];
    for (; *l != NULL; l = &(*l)->next)
        if ((*l)->uid == uid)
            return *l;
    gemmd_user *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return NULL;
    e->uid = uid;
    *l = e;
    u->count++;
    return e;
}

void users_each(const gemmd_users *u, void (*fn)(void *, const gemmd_user *),
                void *arg)
{
    for (int i = 0; i < USERS_BUCKETS; i++)
        for (const gemmd_user *e = u->buckets[i]; e != NULL; e = e->next)
            fn(arg, e);
}

void users_fini(gemmd_users *u)
{
    for (int i = 0; i < USERS_BUCKETS; i++) {
        while (u->buckets[i] != NULL) {
            gemmd_user *e = u->buckets[i];
            u->buckets[i] = e->next;
            free(e);
        }
    }
    u->count = 0;
}
