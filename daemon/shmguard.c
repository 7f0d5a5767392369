/*
 * shmguard.c: the SIGBUS handler and its slot table. Only async-signal-safe
 * work happens in the handler: atomic loads, mmap, an atomic store.
 */
#include "shmguard.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct guard_slot {
    _Atomic uintptr_t base; /* 0: free */
    _Atomic size_t size;
    atomic_bool faulted;
} guard_slot;

static guard_slot slots[SHMGUARD_SLOTS];
static atomic_int high; /* slots in use are below this */
static uintptr_t page_mask;

static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    uintptr_t a = (uintptr_t)si->si_addr;
    int n = atomic_load(&high);
    for (int i = 0; i < n; i++) {
        uintptr_t base = atomic_load(&slots[i].base);
        size_t size = atomic_load(&slots[i].size);
        if (base == 0 || a < base || a >= base + size)
            continue;
        uintptr_t page = a & ~page_mask;
        void *p = mmap((void *)page, base + size - page, PROT_READ | PROT_WRITE,
                       MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            break;
        atomic_store(&slots[i].faulted, true);
        return; /* the faulting access now succeeds on zero pages */
    }
    /* not a client buffer: a genuine bug, crash as the default would */
    signal(sig, SIG_DFL);
    raise(sig);
}

int shmguard_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    page_mask = (uintptr_t)sysconf(_SC_PAGESIZE) - 1;
    return sigaction(SIGBUS, &sa, NULL);
}

int shmguard_add(void *base, size_t size)
{
    for (int i = 0; i < SHMGUARD_SLOTS; i++) {
        if (atomic_load(&slots[i].base) != 0)
            continue;
        atomic_store(&slots[i].faulted, false);
        atomic_store(&slots[i].size, size);
        atomic_store(&slots[i].base, (uintptr_t)base);
        if (i >= atomic_load(&high))
            atomic_store(&high, i + 1);
        return i;
    }
    return -1;
}

void shmguard_remove(int slot)
{
    if (slot < 0 || slot >= SHMGUARD_SLOTS)
        return;
    atomic_store(&slots[slot].base, 0);
    atomic_store(&slots[slot].size, 0);
}

bool shmguard_faulted(int slot)
{
    if (slot < 0 || slot >= SHMGUARD_SLOTS)
        return false;
    return atomic_load(&slots[slot].faulted);
}

void shmguard_mark_faulted(int slot)
{
    if (slot >= 0 && slot < SHMGUARD_SLOTS)
        atomic_store(&slots[slot].faulted, true);
}
