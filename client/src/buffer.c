/*
 * buffer.c: shared-memory buffers. The client makes an anonymous memfd
 * (MFD_ALLOW_SEALING), allocates all its pages with posix_fallocate so
 * that short memory fails here, and charged to this process, rather than
 * later in the daemon, maps it, hands its descriptor to the daemon over
 * the descriptor channel (fdchan.c) and registers it under the ticket it
 * got (RegisterBuffer). The daemon maps and seals it. There is no name:
 * nothing is left behind if anyone crashes, and no other process can find
 * it. Which buffers a request may use is the daemon's business: a buffer
 * is not checked here against the client a GEMM is sent on.
 *
 * A buffer of 32 MiB or more is borrowed first where gemmd keeps spares
 * (GEMM_FEATURE_LEND): a memfd gemmd made, mapped and pinned ahead, sent
 * back over the descriptor channel; it may be larger than asked (at most
 * twice), and it is registered whole.
 *
 * gemm_buffer_import registers a memfd the caller made and keeps mapped
 * (libgemmblas's zero-copy allocations): the same exchange, with the
 * caller's descriptor and mapping, which gemm_buffer_free then leaves
 * alone.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* MemAvailable in bytes (UINT64_MAX when unknown). A memfd has no size
 * limit of its own: fallocate of more than the host can give would not
 * fail, it would wake the OOM killer. */
static uint64_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "re");
    char line[128];
    unsigned long long kb;
    uint64_t v = UINT64_MAX;
    if (f == NULL)
        return v;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
            v = (uint64_t)kb * 1024;
            break;
        }
    fclose(f);
    return v;
}

static void buffer_link(gemm_client *c, gemm_buffer *b)
{
    pthread_mutex_lock(&c->mtx);
    b->prev = NULL;
    b->next = c->buffers;
    if (c->buffers != NULL)
        c->buffers->prev = b;
    c->buffers = b;
    pthread_mutex_unlock(&c->mtx);
}

static void buffer_unlink(gemm_client *c, gemm_buffer *b)
{
    pthread_mutex_lock(&c->mtx);
    if (b->prev != NULL)
        b->prev->next = b->next;
    else if (c->buffers == b)
        c->buffers = b->next;
    if (b->next != NULL)
        b->next->prev = b->prev;
    b->prev = b->next = NULL;
    pthread_mutex_unlock(&c->mtx);
}

/* Sends RegisterBuffer{ticket, size}; on success *id is the daemon's id. */
static int register_ticket(gemm_client *c, uint64_t ticket, size_t size,
                           uint64_t *id)
{
    Gemm__Request req = GEMM__REQUEST__INIT;
    Gemm__RegisterBufferRequest reg = GEMM__REGISTER_BUFFER_REQUEST__INIT;
    Gemm__Reply *rep;
    int rv;

    reg.has_fd_ticket = true;
    reg.fd_ticket = ticket;
    reg.has_size = true;
    reg.size = size;
    req.body_case = GEMM__REQUEST__BODY_REGISTER_BUFFER;
    req.register_buffer = &reg;
    if ((rv = cli_call(c, &req, "register buffer", &rep, NULL)) != GEMM_OK)
        return rv;
    if (rep->body_case != GEMM__REPLY__BODY_REGISTER_BUFFER ||
        !rep->register_buffer->has_buffer_id) {
        gemm__reply__free_unpacked(rep, NULL);
        return cli_error(GEMM_ERR_PROTOCOL,
                         "register buffer: reply has no buffer id");
    }
    *id = rep->register_buffer->buffer_id;
    gemm__reply__free_unpacked(rep, NULL);
    return GEMM_OK;
}

/* Passes fd and registers it: *id is the daemon's id. */
static int buffer_register(gemm_client *c, int fd, size_t size, uint64_t *id)
{
    uint64_t ticket;
    int rv = cli_pass_fd(c, fd, &ticket);
    return rv != GEMM_OK ? rv : register_ticket(c, ticket, size, id);
}

/* Borrows a spare of at least len bytes from gemmd (GEMM_FEATURE_LEND):
 * made, mapped and pinned there ahead, so this buffer's first GEMM waits
 * for no pin and its pages need no zeroing here. Fills b (data, size,
 * id) and returns true; false when gemmd lends none (the caller makes
 * its own memfd; the error state is left clear). */
static bool buffer_borrow(gemm_client *c, size_t len, gemm_buffer *b)
{
    int fd = -1;
    uint64_t ticket;
    struct stat st;
    void *data = MAP_FAILED;
    if (len < ((size_t)32 << 20))
        return false;
    if (!atomic_load(&c->pinged) && gemm_ping(c, NULL) != GEMM_OK)
        goto none; /* what gemmd offers is unknown: lend nothing */
    if (!(atomic_load(&c->features) & GEMM_FEATURE_LEND) ||
        cli_lend_fd(c, len, &fd, &ticket) != GEMM_OK)
        goto none;
    if (fstat(fd, &st) != 0 || st.st_size < (off_t)len)
        goto none;
    data = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED,
                fd, 0);
    if (data == MAP_FAILED)
        goto none;
    if (register_ticket(c, ticket, (size_t)st.st_size, &b->id) != GEMM_OK)
        goto none;
    close(fd);
    b->data = data;
    b->size = (size_t)st.st_size;
    b->lent = true;
    return true;
none:
    if (data != MAP_FAILED)
        munmap(data, (size_t)st.st_size);
    if (fd >= 0)
        close(fd);
    cli_clear_error();
    return false;
}

GEMM_API int gemm_buffer_alloc(gemm_client *c, size_t size, gemm_buffer **out)
{
    gemm_buffer *b = NULL;
    void *data = MAP_FAILED;
    long page = sysconf(_SC_PAGESIZE);
    size_t len;
    int fd = -1;
    int rv;

    cli_clear_error();
    if (c == NULL || out == NULL)
        return cli_error(GEMM_ERR_INVALID, "gemm_buffer_alloc: NULL argument");
    if (size == 0)
        return cli_error(GEMM_ERR_INVALID, "gemm_buffer_alloc: size is 0");
    if (size > SIZE_MAX - (size_t)page || size > (size_t)INT64_MAX)
        return cli_error(GEMM_ERR_INVALID,
                         "gemm_buffer_alloc: size %zu too large", size);
    len = (size + (size_t)page - 1) / (size_t)page * (size_t)page;
    uint64_t avail = mem_available();
    if (len > avail)
        return cli_error(GEMM_ERR_NOMEM,
                         "cannot allocate %zu bytes (%.1f MiB) of shared "
                         "memory: the host has %.1f MiB available",
                         len, (double)len / (1024.0 * 1024.0),
                         (double)avail / (1024.0 * 1024.0));

    if ((b = calloc(1, sizeof(*b))) == NULL)
        return cli_error(GEMM_ERR_NOMEM, "gemm_buffer_alloc: out of memory");
    if (buffer_borrow(c, len, b)) {
        b->client = c;
        buffer_link(c, b);
        *out = b;
        return GEMM_OK;
    }
    fd = memfd_create("gemm-buffer", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        rv = cli_error(GEMM_ERR_SHM, "memfd_create: %s", strerror(errno));
        free(b);
        return rv;
    }
    if (ftruncate(fd, (off_t)len) != 0) {
        rv = cli_error(GEMM_ERR_SHM, "cannot size a %zu-byte memfd: %s", len,
                       strerror(errno));
        goto fail;
    }
    if ((rv = posix_fallocate(fd, 0, (off_t)len)) != 0) {
        rv = cli_error(rv == ENOSPC || rv == ENOMEM ? GEMM_ERR_NOMEM
                                                    : GEMM_ERR_SHM,
                       "cannot allocate %zu bytes (%.1f MiB) of shared "
                       "memory: %s",
                       len, (double)len / (1024.0 * 1024.0), strerror(rv));
        goto fail;
    }
    data = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (data == MAP_FAILED) {
        rv = cli_error(errno == ENOMEM ? GEMM_ERR_NOMEM : GEMM_ERR_SHM,
                       "mmap of %zu bytes of shared memory: %s", len,
                       strerror(errno));
        goto fail;
    }
    if ((rv = buffer_register(c, fd, len, &b->id)) != GEMM_OK)
        goto fail;
    close(fd);

    b->client = c;
    b->data = data;
    b->size = len;
    buffer_link(c, b);
    *out = b;
    return GEMM_OK;

fail:
    if (data != MAP_FAILED)
        munmap(data, len);
    close(fd);
    free(b);
    return rv;
}

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010 /* Linux 5.1; older libc headers lack it */
#endif

/* Whether fd can be sealed by the daemon: GEMM_OK, or GEMM_ERR_SHM naming
 * why not. */
static int import_check_seals(int fd)
{
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0)
        return cli_error(GEMM_ERR_SHM,
                         "gemm_buffer_import: the descriptor is not a memfd "
                         "(%s): make it with memfd_create(name, "
                         "MFD_ALLOW_SEALING)",
                         strerror(errno));
    if (seals == F_SEAL_SEAL)
        return cli_error(GEMM_ERR_SHM,
                         "gemm_buffer_import: the memfd was made without "
                         "MFD_ALLOW_SEALING, so gemmd cannot seal it: make "
                         "it with memfd_create(name, MFD_ALLOW_SEALING)");
    if (seals & (F_SEAL_SEAL | F_SEAL_WRITE | F_SEAL_FUTURE_WRITE))
        return cli_error(GEMM_ERR_SHM,
                         "gemm_buffer_import: the memfd is sealed already "
                         "(seals 0x%x; a memfd is registered at most once): "
                         "leave the sealing to gemmd",
                         (unsigned)seals);
    return GEMM_OK;
}

GEMM_API int gemm_buffer_import(gemm_client *c, int fd, size_t size, void *addr,
                                gemm_buffer **out)
{
    long page = sysconf(_SC_PAGESIZE);
    struct stat st;
    int rv;

    cli_clear_error();
    if (c == NULL || out == NULL || addr == NULL)
        return cli_error(GEMM_ERR_INVALID, "gemm_buffer_import: NULL argument");
    if (size == 0 || size > (size_t)INT64_MAX - (size_t)page)
        return cli_error(GEMM_ERR_INVALID, "gemm_buffer_import: bad size %zu",
                         size);
    if ((uintptr_t)addr % (uintptr_t)page != 0)
        return cli_error(GEMM_ERR_INVALID,
                         "gemm_buffer_import: address %p is not page-aligned",
                         addr);
    size_t len = (size + (size_t)page - 1) / (size_t)page * (size_t)page;
    if ((rv = import_check_seals(fd)) != GEMM_OK)
        return rv;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < len)
        return cli_error(GEMM_ERR_SHM,
                         "gemm_buffer_import: the memfd holds %lld bytes, "
                         "less than the %zu to register",
                         (long long)st.st_size, len);
    /* the daemon takes only memory whose every page is allocated */
    uint64_t have = (uint64_t)st.st_blocks * 512;
    if (have < len) {
        uint64_t avail = mem_available();
        if (len - have > avail)
            return cli_error(GEMM_ERR_NOMEM,
                             "cannot allocate %.1f MiB more of shared memory "
                             "to register %zu bytes: the host has %.1f MiB "
                             "available",
                             (double)(len - have) / (1024.0 * 1024.0), len,
                             (double)avail / (1024.0 * 1024.0));
        if ((rv = posix_fallocate(fd, 0, (off_t)len)) != 0)
            return cli_error(rv == ENOSPC || rv == ENOMEM ? GEMM_ERR_NOMEM
                                                          : GEMM_ERR_SHM,
                             "cannot allocate %zu bytes of shared memory to "
                             "register: %s",
                             len, strerror(rv));
    }
    gemm_buffer *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return cli_error(GEMM_ERR_NOMEM, "gemm_buffer_import: out of memory");
    if ((rv = buffer_register(c, fd, len, &b->id)) != GEMM_OK) {
        free(b);
        return rv;
    }
    b->client = c;
    b->data = addr;
    b->size = len;
    b->imported = true;
    buffer_link(c, b);
    *out = b;
    return GEMM_OK;
}

GEMM_API void gemm_buffer_free(gemm_buffer *b)
{
    gemm_client *c;

    if (b == NULL)
        return;
    if ((c = b->client) != NULL) {
        Gemm__Request req = GEMM__REQUEST__INIT;
        Gemm__ReleaseBufferRequest rel = GEMM__RELEASE_BUFFER_REQUEST__INIT;
        Gemm__Reply *rep;
        char saved[512];

        /* Keep the caller's last error message: a free is no request. */
        snprintf(saved, sizeof(saved), "%s", gemm_last_error_message());

        buffer_unlink(c, b);
        rel.has_buffer_id = true;
        rel.buffer_id = b->id;
        req.body_case = GEMM__REQUEST__BODY_RELEASE_BUFFER;
        req.release_buffer = &rel;
        /* Errors are ignored: the daemon drops the buffer with the
         * connection anyway. */
        if (cli_call(c, &req, "release buffer", &rep, NULL) == GEMM_OK)
            gemm__reply__free_unpacked(rep, NULL);
        cli_error(GEMM_OK, "%s", saved);
    }
    if (!b->imported)
        munmap(b->data, b->size);
    free(b);
}

GEMM_API void *gemm_buffer_data(const gemm_buffer *b)
{
    return b != NULL ? b->data : NULL;
}

GEMM_API size_t gemm_buffer_size(const gemm_buffer *b)
{
    return b != NULL ? b->size : 0;
}

GEMM_API uint64_t gemm_buffer_id(const gemm_buffer *b)
{
    return b != NULL ? b->id : 0;
}

GEMM_API bool gemm_buffer_lent(const gemm_buffer *b)
{
    return b != NULL && b->lent;
}
