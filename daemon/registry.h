/*
 * registry.h: the buffer registry. Clients' memfds, handed over as
 * descriptors, mapped into the daemon and sealed so they can neither shrink
 * nor lose pages, and resident tensors (matrices kept in the backend's
 * memory), each owned by the connection that made it and named by an
 * unguessable 64-bit id. Entries are reference counted: a queued
 * or running GEMM holds its buffers, so a release or a disconnect never
 * unmaps memory a backend is still using; the mapping goes when the last
 * reference does. All functions: loop thread only (no locking).
 */
#ifndef GEMMD_REGISTRY_H
#define GEMMD_REGISTRY_H

#include "validate.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum reg_kind {
    REG_BUFFER, /* a client's memfd, mapped */
    REG_TENSOR, /* a resident tensor in the backend's memory */
};

typedef struct reg_buffer {
    int kind; /* enum reg_kind */
    uint64_t id;
    uint32_t owner; /* connection id of the registering connection */
    void *base;     /* buffer: mapping, size bytes */
    size_t size;    /* buffer: mapped bytes; tensor: its memory */
    /* backend handle (pinned buffer, tensor); a large buffer's is
     * published by the pinner thread (pinner.h): NULL until then, so
     * workers read it once per job */
    void *_Atomic pin;
    uint64_t object; /* buffer: the file (device and inode mixed): two
                        registrations of one memfd alias each other */
    uint64_t charge; /* tensor: bytes of the memory budget it holds */
    unsigned refs;   /* 1 while registered + 1 per job using it */
    bool registered; /* still in the table (not yet released) */
    /* tensors: a rows x cols matrix of dtype, leading dimension ld, at data
     * (device memory when on_device) */
    void *data;
    uint64_t rows, cols, ld;
    int dtype;
    bool on_device;
    struct reg_buffer *next; /* hash chain */
    _Atomic int pin_state;   /* buffer: enum pin_state (pinner.h) */
    bool pin_orphan; /* released while pinning (under the pinner's lock) */
    struct reg_buffer *pin_next; /* the pinner's queue */
} reg_buffer;

/* Backend hooks run on register and on the final release (e.g.
 * cudaHostRegister). reserve takes size bytes of the pinned-memory limit
 * (GEMM_ERR_LIMIT and a message when over it), loop thread; pin registers
 * reserved memory, any thread; unpin unregisters it and releases its
 * reservation, any thread; unreserve releases a reservation whose pin
 * failed or never ran, any thread. pin returns a gemm_error and may fill
 * msg. */
typedef struct reg_hooks {
    void *arg;
    int (*reserve)(void *arg, size_t size, char *msg, size_t len);
    void (*unreserve)(void *arg, size_t size);
    int (*pin)(void *arg, void *base, size_t size, void **handle, char *msg,
               size_t len);
    void (*unpin)(void *arg, void *base, void *handle);
    void (*free_tensor)(void *arg, void *handle);
} reg_hooks;

typedef struct registry {
    reg_buffer **buckets;
    size_t nbuckets;  /* power of two */
    uint32_t count;   /* registered buffers (in the table) */
    uint32_t mapped;  /* mappings alive, released ones still in use too */
    uint64_t bytes;   /* bytes of registered buffers */
    uint32_t tensors; /* resident tensors (in the table) */
    uint64_t tensor_bytes;
    reg_hooks hooks;
} registry;

/* Returns GEMM_OK or GEMM_ERR_NOMEM. hooks may be NULL. */
int reg_init(registry *r, const reg_hooks *hooks);

/* Releases and unmaps everything, whatever the references; waits for
 * pins in flight (before the backend goes). */
void reg_fini(registry *r);

/*
 * Registers descriptor fd (a memfd the client passed) for owner: checks
 * that it is a regular file of at least size bytes that can be sealed and
 * mapped writable, maps size bytes, seals it (F_SEAL_SHRINK, F_SEAL_GROW,
 * F_SEAL_FUTURE_WRITE, F_SEAL_SEAL: no truncation, no hole punching, no
 * new writable mappings) and checks that every page of the first size
 * bytes is allocated (a sparse object would make the daemon allocate, and
 * pay for, the client's memory). With a pin hook, reserves size pinned
 * bytes (GEMM_ERR_LIMIT when over) and pins the buffer: at once when it
 * is under PIN_ASYNC_MIN, else on the pinner thread (pinner.h), after
 * this returns. Takes fd (closed in every case). On
 * success *id is the new buffer's id; on failure returns a gemm_error with
 * a message in msg, and nothing is left mapped.
 */
int reg_register_fd(registry *r, uint32_t owner, int fd, uint64_t size,
                    uint64_t *id, char *msg, size_t len);

/*
 * Registers a lent spare (spares.h) for owner: fd is its memfd, mapped
 * at base (`mapped` bytes, pinned with handle pin, NULL when nothing
 * pins; its pinned bytes reserved). The client registers it whole (size
 * == mapped). Checks and seals fd as reg_register_fd does and keeps the
 * mapping and the pin. Takes fd, the mapping and the pin in every case:
 * on failure they are unpinned, unmapped and closed.
 */
int reg_register_lent(registry *r, uint32_t owner, int fd, uint64_t size,
                      void *base, size_t mapped, void *pin, uint64_t *id,
                      char *msg, size_t len);

/*
 * Adds a resident tensor for owner: t holds kind-independent fields set by
 * the caller (pin = the backend's handle, data, size, rows, cols, ld,
 * dtype, on_device); the registry takes it over (frees it with the
 * free_tensor hook once released and unreferenced). Returns GEMM_OK and
 * the id, or GEMM_ERR_INTERNAL (t is then still the caller's).
 */
int reg_add_tensor(registry *r, uint32_t owner, reg_buffer *t, uint64_t *id);

/* The entry `id` of `kind` made by owner, or NULL if there is none (unknown
 * id and another connection's id look the same). */
reg_buffer *reg_find(registry *r, uint32_t owner, uint64_t id, int kind);

/* reg_find for buffers. */
reg_buffer *reg_lookup(registry *r, uint32_t owner, uint64_t id);

/* One owner's entries as the validation's lookups (validate.h's
 * val_lookup_fn and val_tensor_fn): pass a reg_scope as their arg. */
typedef struct reg_scope {
    registry *reg;
    uint32_t owner;
} reg_scope;
void *reg_scope_buffer(void *arg, uint64_t id, size_t *size, uint64_t *object);
void *reg_scope_tensor(void *arg, uint64_t id, val_tensor *out);

/* Takes a reference; each needs one reg_put(). */
void reg_hold(reg_buffer *b);
void reg_put(registry *r, reg_buffer *b);

/* Removes owner's entry id of kind from the table (unmapped or freed once
 * unreferenced). GEMM_OK or GEMM_ERR_NO_BUFFER. */
int reg_release_kind(registry *r, uint32_t owner, uint64_t id, int kind);

/* Releases every buffer and tensor of owner (a connection went away);
 * returns how many, and in *charges the sum of the tensors' charges. */
uint32_t reg_release_owner(registry *r, uint32_t owner, uint64_t *charges);

#endif
