/*
 * registry.c: the buffer table (open hashing on random ids) and the checks
 * and seals a client's memfd gets before the daemon uses it.
 */
#include "registry.h"

#include "pinner.h"
#include "reaper.h"

#include <gemm/types.h>

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
    r->mapped--;
    if (pinner_release(b))
        return; /* the pinner unpins, unmaps and frees it when done */
    void *pin = atomic_load(&b->pin);
    if (pin != NULL && r->hooks.unpin != NULL)
        r->hooks.unpin(r->hooks.arg, b->base, pin);
    reaper_unmap(b->base, b->size);
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
    pinner_drain();
    free(r->buckets);
    r->buckets = NULL;
    r->count = 0;
    r->bytes = 0;
    r->tensors = 0;
    r->tensor_bytes = 0;
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

void *reg_scope_buffer(void *arg, uint64_t id, size_t *size, uint64_t *object)
{
    const reg_scope *sc = arg;
    reg_buffer *b = reg_lookup(sc->reg, sc->owner, id);
    if (b == NULL)
        return NULL;
    *size = b->size;
    *object = b->object;
    return b;
}

void *reg_scope_tensor(void *arg, uint64_t id, val_tensor *out)
{
    const reg_scope *sc = arg;
    reg_buffer *t = reg_find(sc->reg, sc->owner, id, REG_TENSOR);
    if (t == NULL)
        return NULL;
    out->rows = t->rows;
    out->cols = t->cols;
    out->ld = t->ld;
    out->dtype = t->dtype;
    return t;
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
    insert(r, t);
    r->tensors++;
    r->tensor_bytes += t->size;
    *id = t->id;
    return GEMM_OK;
}

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010 /* Linux 5.1; older libc headers lack it */
#endif

/* Whether fd is a regular file of at least size bytes with every page
 * allocated (fallocate counts; SEEK_HOLE would call such pages holes until
 * written). Fills *st. Returns GEMM_OK or GEMM_ERR_SHM with a message. */
static int check_object(int fd, uint64_t size, struct stat *st, char *msg,
                        size_t len)
{
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
        snprintf(msg, len, "the descriptor is not a regular file");
        return GEMM_ERR_SHM;
    }
    if ((uint64_t)st->st_size < size) {
        snprintf(msg, len,
                 "the memfd holds %lld bytes, less than the %llu declared",
                 (long long)st->st_size, (unsigned long long)size);
        return GEMM_ERR_SHM;
    }
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t need = ((uint64_t)st->st_size + page - 1) / page * page;
    if ((uint64_t)st->st_blocks * 512 < need) {
        snprintf(msg, len,
                 "the memfd is sparse (%llu of its %llu bytes allocated): "
                 "allocate it all first (fallocate): registered memory "
                 "must be the client's",
                 (unsigned long long)st->st_blocks * 512,
                 (unsigned long long)need);
        return GEMM_ERR_SHM;
    }
    return GEMM_OK;
}

/* Reserves and pins b's mapping [base, base + size) with the hooks: at
 * once when small, else queued to the pinner (after b is filled in and
 * still loop-owned: the pinner only reads base and size). A gemm_error;
 * on failure nothing stays reserved. Loop thread. */
static int pin_or_queue(registry *r, reg_buffer *b, void *base, size_t size,
                        char *msg, size_t len)
{
    const reg_hooks *h = &r->hooks;
    int rv;
    if (h->pin == NULL)
        return GEMM_OK;
    if (h->reserve != NULL &&
        (rv = h->reserve(h->arg, size, msg, len)) != GEMM_OK)
        return rv;
    b->base = base;
    b->size = size;
    if (size >= PIN_ASYNC_MIN && pinner_queue(b, h))
        return GEMM_OK;
    void *handle = NULL;
    if ((rv = h->pin(h->arg, base, size, &handle, msg, len)) != GEMM_OK) {
        if (h->unreserve != NULL)
            h->unreserve(h->arg, size);
        return rv;
    }
    atomic_store(&b->pin, handle);
    atomic_store(&b->pin_state, PIN_DONE);
    return GEMM_OK;
}

/* Checks fd as reg_register_fd says, before it is mapped and sealed.
 * Fills *st. A gemm_error with a message. */
static int seal_object(int fd, uint64_t size, struct stat *st, char *msg,
                       size_t len)
{
    int rv;
    if (size == 0 || size > (uint64_t)SIZE_MAX / 2) {
        snprintf(msg, len, "bad buffer size %llu", (unsigned long long)size);
        return GEMM_ERR_INVALID;
    }
    if ((rv = check_object(fd, size, st, msg, len)) != GEMM_OK)
        return rv;
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0) {
        snprintf(msg, len,
                 "the descriptor cannot be sealed: pass a memfd made with "
                 "MFD_ALLOW_SEALING");
        return GEMM_ERR_SHM;
    }
    if (seals == F_SEAL_SEAL) { /* what a memfd without the flag has */
        snprintf(msg, len,
                 "the memfd was made without MFD_ALLOW_SEALING, so it "
                 "cannot be sealed: make it with memfd_create(name, "
                 "MFD_ALLOW_SEALING)");
        return GEMM_ERR_SHM;
    }
    if (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)) {
        snprintf(msg, len, "the memfd is sealed against writing");
        return GEMM_ERR_SHM;
    }
    if (seals & F_SEAL_SEAL) {
        snprintf(msg, len,
                 "the memfd is sealed against further seals: leave the "
                 "sealing to gemmd");
        return GEMM_ERR_SHM;
    }
    return GEMM_OK;
}

/* The sealing's second half, once fd is mapped: from here the object
 * keeps its size and pages, so they are checked again. */
static int seal_mapped(int fd, uint64_t size, struct stat *st, char *msg,
                       size_t len)
{
    const int want = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE;
    if (fcntl(fd, F_ADD_SEALS, want | F_SEAL_SEAL) != 0) {
        snprintf(msg, len, "cannot seal the memfd: %s", strerror(errno));
        return GEMM_ERR_SHM;
    }
    return check_object(fd, size, st, msg, len);
}

/* A new entry with a fresh id in *out (free it on failure: *out is NULL
 * or the caller's). A gemm_error with a message. */
static int new_buffer(registry *r, reg_buffer **out, char *msg, size_t len)
{
    if ((*out = calloc(1, sizeof(**out))) == NULL) {
        snprintf(msg, len, "out of memory");
        return GEMM_ERR_NOMEM;
    }
    if (new_id(r, &(*out)->id) != GEMM_OK) {
        snprintf(msg, len, "cannot draw a buffer id");
        return GEMM_ERR_INTERNAL;
    }
    return GEMM_OK;
}

/* Enters buffer b (mapping base of size bytes of object st, pin state
 * set) into the table for owner; *id its id. */
static void enter(registry *r, reg_buffer *b, uint32_t owner, void *base,
                  uint64_t size, const struct stat *st, uint64_t *id)
{
    b->kind = REG_BUFFER;
    b->owner = owner;
    b->base = base;
    b->size = (size_t)size;
    b->object =
        (uint64_t)st->st_ino ^ (uint64_t)st->st_dev * 0x9e3779b97f4a7c15u;
    insert(r, b);
    r->count++;
    r->mapped++;
    r->bytes += size;
    *id = b->id;
}

int reg_register_fd(registry *r, uint32_t owner, int fd, uint64_t size,
                    uint64_t *id, char *msg, size_t len)
{
    int rv;
    void *base = MAP_FAILED;
    reg_buffer *b = NULL;
    struct stat st;

    if ((rv = seal_object(fd, size, &st, msg, len)) != GEMM_OK)
        goto fail;
    base = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        rv = (errno == ENOMEM) ? GEMM_ERR_NOMEM : GEMM_ERR_SHM;
        snprintf(msg, len, "cannot map the memfd: %s", strerror(errno));
        goto fail;
    }
    if ((rv = seal_mapped(fd, size, &st, msg, len)) != GEMM_OK)
        goto fail; /* changed under us: sealed now, but not usable */
    if ((rv = new_buffer(r, &b, msg, len)) != GEMM_OK)
        goto fail;
    if ((rv = pin_or_queue(r, b, base, (size_t)size, msg, len)) != GEMM_OK)
        goto fail;
    close(fd); /* the mapping keeps the object; seals keep it whole */
    enter(r, b, owner, base, size, &st, id);
    return GEMM_OK;

fail:
    free(b);
    if (base != MAP_FAILED)
        munmap(base, (size_t)size);
    close(fd);
    return rv;
}

int reg_register_lent(registry *r, uint32_t owner, int fd, uint64_t size,
                      void *base, size_t mapped, void *pin, uint64_t *id,
                      char *msg, size_t len)
{
    int rv;
    reg_buffer *b = NULL;
    struct stat st;

    if (size != mapped) {
        rv = GEMM_ERR_INVALID;
        snprintf(msg, len,
                 "a lent buffer is registered whole: size %llu, not %llu",
                 (unsigned long long)mapped, (unsigned long long)size);
        goto fail;
    }
    if ((rv = seal_object(fd, size, &st, msg, len)) != GEMM_OK ||
        (rv = seal_mapped(fd, size, &st, msg, len)) != GEMM_OK)
        goto fail; /* e.g. holes punched before registering */
    if ((rv = new_buffer(r, &b, msg, len)) != GEMM_OK)
        goto fail;
    close(fd);
    atomic_store(&b->pin, pin);
    atomic_store(&b->pin_state, pin != NULL ? PIN_DONE : PIN_NONE);
    enter(r, b, owner, base, size, &st, id);
    return GEMM_OK;

fail:
    free(b);
    if (pin != NULL && r->hooks.unpin != NULL)
        r->hooks.unpin(r->hooks.arg, base, pin);
    munmap(base, mapped);
    close(fd);
    return rv;
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

uint32_t reg_release_owner(registry *r, uint32_t owner, uint64_t *charges)
{
    uint32_t n = 0;
    *charges = 0;
    for (size_t i = 0; i < r->nbuckets; i++) {
        reg_buffer **l = &r->buckets[i];
        while (*l != NULL) {
            if ((*l)->owner == owner) {
                *charges += (*l)->charge;
                unregister(r, l);
                n++;
            } else {
                l = &(*l)->next;
            }
        }
    }
    return n;
}
