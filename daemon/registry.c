/*
 * registry.c: the buffer table (open hashing on random ids) and the shm
 * checks done before the daemon maps anything a client names.
 */
#include "registry.h"
#include "shmguard.h"

#include <gemm/gemm.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

int reg_init(registry *r, const reg_hooks *hooks)
{
    memset(r, 0, sizeof(*r));
    r->nbuckets = 64;
    r->buckets = calloc(r->nbuckets, sizeof(*r->buckets));
    if (r->buckets == NULL)
        return GEMM_ERR_NOMEM;
    if (hooks != NULL)
        r->hooks = *hooks;
    return GEMM_OK;
}

static void unmap(registry *r, reg_buffer *b)
{
    if (b->kind == REG_TENSOR) {
        if (r->hooks.free_tensor != NULL)
            r->hooks.free_tensor(r->hooks.arg, b->pin);
        free(b);
        return;
    }
    if (b->pin != NULL && r->hooks.unpin != NULL)
        r->hooks.unpin(r->hooks.arg, b->base, b->pin);
    shmguard_remove(b->guard);
    munmap(b->base, b->size);
    if (b->fd >= 0)
        close(b->fd);
    r->mapped--;
    free(b);
}

void reg_fini(registry *r)
{
    for (size_t i = 0; i < r->nbuckets; i++) {
        reg_buffer *b = r->buckets[i];
        while (b != NULL) {
            reg_buffer *next = b->next;
            unmap(r, b);
            b = next;
        }
    }
    free(r->buckets);
    r->buckets = NULL;
    r->count = 0;
    r->bytes = 0;
    r->tensors = 0;
    r->tensor_bytes = 0;
}

int reg_check_name(const char *name)
{
    if (name == NULL || name[0] != '/')
        return GEMM_ERR_INVALID;
    size_t n = strnlen(name, REG_NAME_MAX + 1);
    if (n < 2 || n > REG_NAME_MAX)
        return GEMM_ERR_INVALID;
    if (strchr(name + 1, '/') != NULL)
        return GEMM_ERR_INVALID;
    return GEMM_OK;
}

static size_t bucket_of(const registry *r, uint64_t id)
{
    /* ids are random: their low bits are already well spread */
    return (size_t)(id & (r->nbuckets - 1));
}

reg_buffer *reg_find(registry *r, uint32_t owner, uint64_t id, int kind)
{
    if (id == 0)
        return NULL;
    for (reg_buffer *b = r->buckets[bucket_of(r, id)]; b != NULL; b = b->next)
        if (b->id == id)
            return b->owner == owner && b->kind == kind ? b : NULL;
    return NULL;
}

reg_buffer *reg_lookup(registry *r, uint32_t owner, uint64_t id)
{
    return reg_find(r, owner, id, REG_BUFFER);
}

static void grow(registry *r)
{
    size_t n = r->nbuckets * 2;
    reg_buffer **nb = calloc(n, sizeof(*nb));
    if (nb == NULL)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < r->nbuckets; i++) {
        reg_buffer *b = r->buckets[i];
        while (b != NULL) {
            reg_buffer *next = b->next;
            size_t j = (size_t)(b->id & (n - 1));
            b->next = nb[j];
            nb[j] = b;
            b = next;
        }
    }
    free(r->buckets);
    r->buckets = nb;
    r->nbuckets = n;
}

/* A fresh id: random, non-zero, not in use by anyone. */
static int new_id(registry *r, uint64_t *out)
{
    for (int tries = 0; tries < 16; tries++) {
        uint64_t id;
        if (getrandom(&id, sizeof(id), 0) != sizeof(id))
            return GEMM_ERR_INTERNAL;
        if (id == 0)
            continue;
        bool used = false;
        for (reg_buffer *b = r->buckets[bucket_of(r, id)]; b; b = b->next)
            used |= (b->id == id);
        if (!used) {
            *out = id;
            return GEMM_OK;
        }
    }
    return GEMM_ERR_INTERNAL;
}

/* Links b (id drawn) into the table with the table's reference. */
static void insert(registry *r, reg_buffer *b)
{
    b->refs = 1;
    b->registered = true;
    size_t i = bucket_of(r, b->id);
    b->next = r->buckets[i];
    r->buckets[i] = b;
    if (r->count + r->tensors > 2 * r->nbuckets)
        grow(r);
}

int reg_add_tensor(registry *r, uint32_t owner, reg_buffer *t, uint64_t *id)
{
    if (new_id(r, &t->id) != GEMM_OK)
        return GEMM_ERR_INTERNAL;
    t->kind = REG_TENSOR;
    t->owner = owner;
    t->guard = -1;
    t->fd = -1;
    insert(r, t);
    r->tensors++;
    r->tensor_bytes += t->size;
    *id = t->id;
    return GEMM_OK;
}

int reg_register(registry *r, uint32_t owner, uint64_t peer_uid,
                 const char *name, uint64_t size, uint64_t *id, char *msg,
                 size_t len)
{
    int rv;
    int fd = -1;
    void *base = MAP_FAILED;
    reg_buffer *b = NULL;
    struct stat st;

    if (reg_check_name(name) != GEMM_OK) {
        snprintf(msg, len,
                 "bad shm name: it must start with '/', contain no other "
                 "'/', and be 2..%d bytes",
                 REG_NAME_MAX);
        return GEMM_ERR_INVALID;
    }
    if (size == 0 || size > (uint64_t)SIZE_MAX / 2) {
        snprintf(msg, len, "bad buffer size %llu", (unsigned long long)size);
        return GEMM_ERR_INVALID;
    }
    fd = shm_open(name, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0) {
        rv = (errno == EACCES) ? GEMM_ERR_PERMISSION : GEMM_ERR_SHM;
        snprintf(msg, len, "cannot open shm object %s: %s", name,
                 strerror(errno));
        goto fail;
    }
    if (fstat(fd, &st) != 0) {
        rv = GEMM_ERR_SHM;
        snprintf(msg, len, "cannot stat shm object %s: %s", name,
                 strerror(errno));
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        rv = GEMM_ERR_SHM;
        snprintf(msg, len, "shm object %s is not a regular file", name);
        goto fail;
    }
    if ((uint64_t)st.st_uid != peer_uid) {
        rv = GEMM_ERR_PERMISSION;
        snprintf(msg, len,
                 "shm object %s is not owned by the connecting user "
                 "(uid %llu)",
                 name, (unsigned long long)peer_uid);
        goto fail;
    }
    if ((uint64_t)st.st_size < size) {
        rv = GEMM_ERR_SHM;
        snprintf(msg, len,
                 "shm object %s holds %lld bytes, less than the %llu "
                 "declared",
                 name, (long long)st.st_size, (unsigned long long)size);
        goto fail;
    }
    base = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        rv = (errno == ENOMEM) ? GEMM_ERR_NOMEM : GEMM_ERR_SHM;
        snprintf(msg, len, "cannot map shm object %s: %s", name,
                 strerror(errno));
        goto fail;
    }
    if ((b = calloc(1, sizeof(*b))) == NULL) {
        rv = GEMM_ERR_NOMEM;
        snprintf(msg, len, "out of memory");
        goto fail;
    }
    b->guard = -1;
    if ((rv = new_id(r, &b->id)) != GEMM_OK) {
        snprintf(msg, len, "cannot draw a buffer id");
        goto fail;
    }
    if ((b->guard = shmguard_add(base, (size_t)size)) < 0) {
        rv = GEMM_ERR_LIMIT;
        snprintf(msg, len, "the daemon holds its maximum of %d buffers",
                 SHMGUARD_SLOTS);
        goto fail;
    }
    if (r->hooks.pin != NULL) {
        rv = r->hooks.pin(r->hooks.arg, base, (size_t)size, &b->pin, msg, len);
        if (rv != GEMM_OK) {
            b->pin = NULL;
            goto fail;
        }
    }
    b->kind = REG_BUFFER;
    b->fd = fd; /* kept: fstat tells whether the owner shrinks it */
    b->owner = owner;
    b->base = base;
    b->size = (size_t)size;
    insert(r, b);
    r->count++;
    r->mapped++;
    r->bytes += size;
    *id = b->id;
    return GEMM_OK;

fail:
    if (b != NULL)
        shmguard_remove(b->guard);
    free(b);
    if (base != MAP_FAILED)
        munmap(base, (size_t)size);
    if (fd >= 0)
        close(fd);
    return rv;
}

bool reg_faulted(const reg_buffer *b)
{
    if (b->kind != REG_BUFFER)
        return false;
    if (shmguard_faulted(b->guard))
        return true;
    struct stat st;
    if (b->fd >= 0 && fstat(b->fd, &st) == 0 &&
        (uint64_t)st.st_size < (uint64_t)b->size) {
        shmguard_mark_faulted(b->guard);
        return true;
    }
    return false;
}

void reg_hold(reg_buffer *b)
{
    b->refs++;
}

void reg_put(registry *r, reg_buffer *b)
{
    if (--b->refs == 0)
        unmap(r, b);
}

/* Unlinks b from the table and drops the table's reference. */
static void unregister(registry *r, reg_buffer **link)
{
    reg_buffer *b = *link;
    *link = b->next;
    b->next = NULL;
    b->registered = false;
    if (b->kind == REG_TENSOR) {
        r->tensors--;
        r->tensor_bytes -= b->size;
    } else {
        r->count--;
        r->bytes -= b->size;
    }
    reg_put(r, b);
}

int reg_release_kind(registry *r, uint32_t owner, uint64_t id, int kind)
{
    if (id == 0)
        return GEMM_ERR_NO_BUFFER;
    for (reg_buffer **l = &r->buckets[bucket_of(r, id)]; *l; l = &(*l)->next) {
        if ((*l)->id == id) {
            if ((*l)->owner != owner || (*l)->kind != kind)
                return GEMM_ERR_NO_BUFFER;
            unregister(r, l);
            return GEMM_OK;
        }
    }
    return GEMM_ERR_NO_BUFFER;
}

int reg_release(registry *r, uint32_t owner, uint64_t id)
{
    return reg_release_kind(r, owner, id, REG_BUFFER);
}

uint32_t reg_release_owner(registry *r, uint32_t owner)
{
    uint32_t n = 0;
    for (size_t i = 0; i < r->nbuckets; i++) {
        reg_buffer **l = &r->buckets[i];
        while (*l != NULL) {
            if ((*l)->owner == owner) {
                unregister(r, l);
                n++;
            } else {
                l = &(*l)->next;
            }
        }
    }
    return n;
}
