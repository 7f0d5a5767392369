/*
 * spares.c: the spares' slots and the thread that fills them; see
 * spares.h. Every field below is under sp_mu.
 */
#include "spares.h"

#include "log.h"
#include "sysmem.h"

#include <gemm/types.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)

typedef struct slot {
    size_t size;  /* 0: unused */
    spare *ready; /* made, not lent */
    bool making;  /* the maker works on it (ready is NULL) */
    uint64_t age; /* when its size was last wanted */
} slot;

static pthread_mutex_t sp_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sp_cv = PTHREAD_COND_INITIALIZER;
static slot sp_slots[SPARE_SLOTS];
static spare *sp_dead[SPARE_SLOTS * 2]; /* to free on the maker thread */
static unsigned sp_ndead;
static uint64_t sp_bytes; /* --spare-bytes; 0: off */
static uint64_t sp_clock;
static reg_hooks sp_hooks;
static pthread_t sp_thread;
static bool sp_running, sp_stop;
static spare_stats sp_st;
static spares_idle_fn sp_idle;
static void *sp_idle_arg;

void spares_free(spare *s)
{
    if (s == NULL)
        return;
    if (s->pin != NULL && sp_hooks.unpin != NULL)
        sp_hooks.unpin(sp_hooks.arg, s->base, s->pin);
    munmap(s->base, s->size);
    close(s->fd);
    free(s);
}

void spares_disown(spare *s)
{
    close(s->fd);
    free(s);
}

/* Makes a spare of size bytes, or NULL (logged). Maker thread. */
static spare *make(size_t size)
{
    char msg[256] = "";
    spare *s = calloc(1, sizeof(*s));
    int fd = -1;
    void *base = MAP_FAILED;
    bool reserved = false;
    if (s == NULL) {
        snprintf(msg, sizeof(msg), "out of memory");
        goto fail;
    }
    if (size + SPARE_MIN > sysmem_available()) {
        snprintf(msg, sizeof(msg), "the host has less memory available");
        goto fail;
    }
    fd = memfd_create("gemmd-spare", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
        snprintf(msg, sizeof(msg), "memfd: %s", strerror(errno));
        goto fail;
    }
    int e = posix_fallocate(fd, 0, (off_t)size);
    if (e != 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
        snprintf(msg, sizeof(msg), "memfd: %s", strerror(e ? e : errno));
        goto fail;
    }
    base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        snprintf(msg, sizeof(msg), "mmap: %s", strerror(errno));
        goto fail;
    }
    if (sp_hooks.pin != NULL) {
        if (sp_hooks.reserve != NULL &&
            sp_hooks.reserve(sp_hooks.arg, size, msg, sizeof(msg)) != GEMM_OK)
            goto fail;
        reserved = true;
        if (sp_hooks.pin(sp_hooks.arg, base, size, &s->pin, msg, sizeof(msg)) !=
                GEMM_OK ||
            s->pin == NULL)
            goto fail;
    }
    s->fd = fd;
    s->base = base;
    s->size = size;
    return s;
fail:
    if (reserved && sp_hooks.unreserve != NULL)
        sp_hooks.unreserve(sp_hooks.arg, size);
    if (base != MAP_FAILED)
        munmap(base, size);
    if (fd >= 0)
        close(fd);
    free(s);
    gemmd_log(LOG_WARNING,
              "cannot make a spare of %zu MiB (%s): sizes "
              "that fail are no longer kept",
              size / MIB, msg);
    return NULL;
}

/* Waits (sp_mu held, released meanwhile) until the daemon has been idle
 * for SPARE_QUIET_MS, at most SPARE_WAIT_MS, or stop. */
static void wait_quiet(void)
{
    if (sp_idle == NULL)
        return;
    unsigned quiet = 0;
    for (unsigned waited = 0; waited < SPARE_WAIT_MS && !sp_stop; waited += 5) {
        pthread_mutex_unlock(&sp_mu);
        bool idle = sp_idle(sp_idle_arg);
        struct timespec ts = {0, 5 * 1000000};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&sp_mu);
        quiet = idle ? quiet + 5 : 0;
        if (quiet >= SPARE_QUIET_MS)
            return;
    }
}

/* The first slot to make, or NULL. Under sp_mu. */
static slot *next_to_make(void)
{
    for (unsigned i = 0; i < SPARE_SLOTS; i++)
        if (sp_slots[i].size != 0 && sp_slots[i].ready == NULL &&
            !sp_slots[i].making)
            return &sp_slots[i];
    return NULL;
}

static void *maker_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&sp_mu);
    for (;;) {
        while (sp_ndead > 0) {
            spare *s = sp_dead[--sp_ndead];
            pthread_mutex_unlock(&sp_mu);
            spares_free(s);
            pthread_mutex_lock(&sp_mu);
        }
        if (sp_stop)
            break;
        slot *k = next_to_make();
        if (k == NULL) {
            pthread_cond_wait(&sp_cv, &sp_mu);
            continue;
        }
        size_t size = k->size;
        k->making = true;
        wait_quiet();
        pthread_mutex_unlock(&sp_mu);
        spare *s = make(size);
        pthread_mutex_lock(&sp_mu);
        k->making = false;
        if (s == NULL) {
            sp_st.failed++;
            k->size = 0;
        } else if (sp_stop || k->size != size) { /* given up meanwhile */
            pthread_mutex_unlock(&sp_mu);
            spares_free(s);
            pthread_mutex_lock(&sp_mu);
        } else {
            k->ready = s;
            sp_st.made++;
            sp_st.ready++;
            sp_st.ready_bytes += size;
        }
        pthread_cond_broadcast(&sp_cv);
    }
    pthread_mutex_unlock(&sp_mu);
    return NULL;
}

/* Gives slot k up: its ready spare goes to the maker to free. */
static void slot_drop(slot *k)
{
    if (k->ready != NULL) {
        sp_st.ready--;
        sp_st.ready_bytes -= k->ready->size;
        if (sp_ndead < sizeof(sp_dead) / sizeof(sp_dead[0]))
            sp_dead[sp_ndead++] = k->ready;
        else /* the maker is behind: free it here */
            spares_free(k->ready);
    }
    k->ready = NULL;
    k->size = 0;
}

static uint64_t total_wanted(void)
{
    uint64_t t = 0;
    for (unsigned i = 0; i < SPARE_SLOTS; i++)
        t += sp_slots[i].size;
    return t;
}

/* Wants spares of size bytes from now on: a slot of its own, the oldest
 * slots giving way while the total would pass sp_bytes. Under sp_mu. */
static void want(size_t size)
{
    slot *free_slot = NULL;
    while (total_wanted() + size > sp_bytes || free_slot == NULL) {
        slot *oldest = NULL;
        free_slot = NULL;
        for (unsigned i = 0; i < SPARE_SLOTS; i++) {
            slot *k = &sp_slots[i];
            if (k->size == 0 && free_slot == NULL)
                free_slot = k;
            else if (k->size != 0 && (oldest == NULL || k->age < oldest->age))
                oldest = k;
        }
        if (total_wanted() + size <= sp_bytes && free_slot != NULL)
            break;
        if (oldest == NULL)
            return; /* cannot happen: size <= sp_bytes */
        slot_drop(oldest);
    }
    free_slot->size = size;
    free_slot->age = ++sp_clock;
    pthread_cond_broadcast(&sp_cv);
}

void spares_start(uint64_t bytes, const reg_hooks *hooks, spares_idle_fn idle,
                  void *arg)
{
    if (bytes < SPARE_MIN)
        return;
    pthread_mutex_lock(&sp_mu);
    sp_bytes = bytes;
    sp_idle = idle;
    sp_idle_arg = arg;
    if (hooks != NULL)
        sp_hooks = *hooks;
    size_t s = (size_t)512 << 20;
    while (s > bytes / 2 && s > SPARE_MIN)
        s /= 2;
    for (; s >= SPARE_MIN; s /= 2)
        if (total_wanted() + s <= bytes)
            want(s);
    sp_running = pthread_create(&sp_thread, NULL, maker_main, NULL) == 0;
    if (!sp_running) {
        sp_bytes = 0;
        memset(sp_slots, 0, sizeof(sp_slots));
    }
    pthread_mutex_unlock(&sp_mu);
    if (sp_running)
        gemmd_log(LOG_INFO,
                  "spares: up to %llu MiB of memfds made and %s ahead, "
                  "lent to new buffers of %zu MiB or more",
                  (unsigned long long)(bytes / MIB),
                  hooks != NULL && hooks->pin != NULL ? "pinned" : "mapped",
                  SPARE_MIN / MIB);
    else
        gemmd_log(LOG_WARNING, "spares: cannot start their thread; off");
}

bool spares_on(void)
{
    pthread_mutex_lock(&sp_mu);
    bool on = sp_bytes != 0 && !sp_stop;
    pthread_mutex_unlock(&sp_mu);
    return on;
}

spare *spares_take(size_t size)
{
    spare *s = NULL;
    pthread_mutex_lock(&sp_mu);
    if (sp_bytes == 0 || sp_stop || size < SPARE_MIN || size > sp_bytes) {
        pthread_mutex_unlock(&sp_mu);
        return NULL;
    }
    slot *best = NULL, *same = NULL;
    for (unsigned i = 0; i < SPARE_SLOTS; i++) {
        slot *k = &sp_slots[i];
        if (k->size >= size && k->size / 2 <= size) {
            if (k->ready != NULL && (best == NULL || k->size < best->size))
                best = k;
            same = k;
        }
    }
    if (best != NULL) {
        s = best->ready;
        best->ready = NULL; /* made again at the same size */
        best->age = ++sp_clock;
        sp_st.ready--;
        sp_st.ready_bytes -= s->size;
        sp_st.lent++;
        pthread_cond_broadcast(&sp_cv);
    } else {
        sp_st.none++;
        if (same != NULL) /* wanted already, still being made */
            same->age = ++sp_clock;
        else
            want((size + 2 * MIB - 1) / (2 * MIB) * (2 * MIB));
    }
    pthread_mutex_unlock(&sp_mu);
    return s;
}

void spares_stop(void)
{
    pthread_mutex_lock(&sp_mu);
    if (!sp_running) {
        pthread_mutex_unlock(&sp_mu);
        return;
    }
    sp_stop = true;
    for (unsigned i = 0; i < SPARE_SLOTS; i++)
        slot_drop(&sp_slots[i]);
    pthread_cond_broadcast(&sp_cv);
    pthread_mutex_unlock(&sp_mu);
    pthread_join(sp_thread, NULL); /* frees the dropped ones first */
    pthread_mutex_lock(&sp_mu);
    sp_running = false;
    pthread_mutex_unlock(&sp_mu);
}

void spares_stats_get(spare_stats *out)
{
    pthread_mutex_lock(&sp_mu);
    *out = sp_st;
    pthread_mutex_unlock(&sp_mu);
}
