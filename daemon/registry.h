/*
 * registry.h: the buffer registry. Clients' POSIX shm objects, mapped into
 * the daemon, each owned by the connection (nng pipe) that registered it and
 * named by an unguessable 64-bit id. Entries are reference counted: a queued
 * or running GEMM holds its buffers, so a release or a disconnect never
 * unmaps memory a backend is still using; the mapping goes when the last
 * reference does. All functions: loop thread only (no locking).
 */
#ifndef GEMMD_REGISTRY_H
#define GEMMD_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REG_NAME_MAX 255

typedef struct reg_buffer {
    uint64_t id;
    uint32_t owner;          /* nng pipe id of the registering connection */
    void *base;              /* mapping, size bytes */
    size_t size;
    void *pin;               /* backend handle (e.g. pinned), or NULL */
    int guard;               /* shmguard slot (SIGBUS protection) */
    unsigned refs;           /* 1 while registered + 1 per job using it */
    bool registered;         /* still in the table (not yet released) */
    struct reg_buffer *next; /* hash chain */
} reg_buffer;

/* Backend hooks run on register and on the final release (e.g.
 * cudaHostRegister). pin returns a gemm_error and may fill msg. */
typedef struct reg_hooks {
    void *arg;
    int (*pin)(void *arg, void *base, size_t size, void **handle, char *msg,
               size_t len);
    void (*unpin)(void *arg, void *base, void *handle);
} reg_hooks;

typedef struct registry {
    reg_buffer **buckets;
    size_t nbuckets;   /* power of two */
    uint32_t count;    /* registered buffers (in the table) */
    uint32_t mapped;   /* mappings alive, released ones still in use too */
    uint64_t bytes;    /* bytes of registered buffers */
    reg_hooks hooks;
} registry;

/* Returns GEMM_OK or GEMM_ERR_NOMEM. hooks may be NULL. */
int reg_init(registry *r, const reg_hooks *hooks);

/* Releases and unmaps everything, whatever the references. */
void reg_fini(registry *r);

/* GEMM_OK if name is an acceptable shm name: '/' then 1..254 bytes with no
 * other '/'. */
int reg_check_name(const char *name);

/*
 * Opens shm object `name`, checks that it is a regular file owned by
 * peer_uid and at least size bytes, maps size bytes and registers it for
 * owner. On success *id is the new buffer's id. On failure returns a
 * gemm_error and writes a message into msg (nothing is left mapped or open).
 */
int reg_register(registry *r, uint32_t owner, uint64_t peer_uid,
                 const char *name, uint64_t size, uint64_t *id, char *msg,
                 size_t len);

/* The buffer id registered by owner, or NULL if there is none (unknown id
 * and another connection's id look the same). */
reg_buffer *reg_lookup(registry *r, uint32_t owner, uint64_t id);

/* Whether the owner shrank the object under the mapping (see shmguard.h):
 * the buffer's contents are lost and every later use fails. */
bool reg_faulted(const reg_buffer *b);

/* Takes a reference; each needs one reg_put(). */
void reg_hold(reg_buffer *b);
void reg_put(registry *r, reg_buffer *b);

/* Removes owner's buffer id from the table (unmapped once unreferenced).
 * GEMM_OK or GEMM_ERR_NO_BUFFER. */
int reg_release(registry *r, uint32_t owner, uint64_t id);

/* Releases every buffer of owner (a connection went away); returns how
 * many. */
uint32_t reg_release_owner(registry *r, uint32_t owner);

#endif
