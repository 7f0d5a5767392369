/*
 * pinner_test.c: background pins through the registry, with pin hooks
 * that block on a gate the test opens (no timing): a large buffer is
 * registered with its bytes reserved and its pin pending, the pinner
 * publishes the handle, a queued pin is cancelled by the release, a
 * running one is finished and cleaned up by the pinner after the release,
 * a failed pin releases its reservation and leaves the buffer unpinned,
 * small buffers are pinned at once, and the limit answers at
 * registration.
 */
#include "pinner.h"
#include "registry.h"

#include <gemm/types.h>

#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define BIG PIN_ASYNC_MIN

static registry reg;
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static bool gate_open;
static atomic_int pins, unpins, unreserves;
static atomic_llong reserved;
static size_t fail_size; /* pins of this size fail */
static long long cap;    /* reservation limit, 0: none */

static int reserve(void *arg, size_t size, char *msg, size_t len)
{
    (void)arg;
    if (cap != 0 && atomic_load(&reserved) + (long long)size > cap) {
        snprintf(msg, len, "over the pinned limit");
        return GEMM_ERR_LIMIT;
    }
    atomic_fetch_add(&reserved, (long long)size);
    return GEMM_OK;
}

static void unreserve(void *arg, size_t size)
{
    (void)arg;
    atomic_fetch_sub(&reserved, (long long)size);
    atomic_fetch_add(&unreserves, 1);
}

/* Waits for the gate when the buffer is large (the pinner's pins). */
static int pin(void *arg, void *base, size_t size, void **h, char *msg,
               size_t len)
{
    (void)arg;
    (void)base;
    if (size >= BIG) {
        pthread_mutex_lock(&gate_mu);
        while (!gate_open)
            pthread_cond_wait(&gate_cv, &gate_mu);
        pthread_mutex_unlock(&gate_mu);
    }
    if (size == fail_size) {
        snprintf(msg, len, "refused by the test");
        return GEMM_ERR_DEVICE;
    }
    atomic_fetch_add(&pins, 1);
    *h = (void *)size;
    return GEMM_OK;
}

static void unpin(void *arg, void *base, void *h)
{
    (void)arg;
    (void)base;
    atomic_fetch_sub(&reserved, (long long)(size_t)h);
    atomic_fetch_add(&unpins, 1);
}

static void open_gate(void)
{
    pthread_mutex_lock(&gate_mu);
    gate_open = true;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
}

static void setup(void)
{
    reg_hooks hooks = {
        .reserve = reserve, .unreserve = unreserve, .pin = pin, .unpin = unpin};
    cr_assert_eq(reg_init(&reg, &hooks), GEMM_OK);
}

static void teardown(void)
{
    open_gate(); /* a failed test leaves no pin blocked */
    reg_fini(&reg);
    cr_expect_eq(atomic_load(&reserved), 0, "%lld bytes still reserved",
                 (long long)atomic_load(&reserved));
}

TestSuite(pinner, .init = setup, .fini = teardown, .timeout = 30);

static reg_buffer *add(uint32_t owner, size_t size, uint64_t *id)
{
    int fd = memfd_create("pintest", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    cr_assert(fd >= 0, "memfd_create");
    cr_assert_eq(posix_fallocate(fd, 0, (off_t)size), 0);
    char msg[256] = "";
    int rv = reg_register_fd(&reg, owner, fd, size, id, msg, sizeof(msg));
    cr_assert_eq(rv, GEMM_OK, "register: %s (%s)", gemm_strerror(rv), msg);
    return reg_lookup(&reg, owner, *id);
}

/* Polls b's pin state for up to 10 s; asserts it reaches want. */
static void wait_state(reg_buffer *b, int want)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        if (atomic_load(&b->pin_state) == want)
            return;
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL); /* between looks, under the deadline */
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while (t.tv_sec - t0.tv_sec < 10);
    cr_assert_fail("pin state %d, want %d", atomic_load(&b->pin_state), want);
}

static pinner_stats stats(void)
{
    pinner_stats s;
    pinner_stats_get(&s);
    return s;
}

Test(pinner, large_buffer_registers_at_once_and_is_pinned_behind)
{
    uint64_t id;
    reg_buffer *b = add(1, BIG, &id);
    cr_assert_not_null(b);
    cr_expect_null(atomic_load(&b->pin), "pinned during registration");
    cr_expect_eq(atomic_load(&reserved), (long long)BIG, "not reserved");
    wait_state(b, PIN_RUNNING);
    cr_expect_eq(stats().pending, 1);
    memset(b->base, 1, 4096); /* usable meanwhile */
    open_gate();
    wait_state(b, PIN_DONE);
    cr_expect_eq(atomic_load(&b->pin), (void *)BIG);
    pinner_stats s = stats();
    cr_expect_eq(s.pending, 0);
    cr_expect_eq(s.done, 1);
    cr_expect_eq(s.bytes, BIG);
    cr_expect_geq(s.seconds, 0.0);
    cr_expect_eq(reg_release_kind(&reg, 1, id, REG_BUFFER), GEMM_OK);
    cr_expect_eq(atomic_load(&unpins), 1);
    cr_expect_eq(atomic_load(&reserved), 0);
    cr_expect_eq(reg.mapped, 0);
}

Test(pinner, release_cancels_a_queued_pin_and_hands_a_running_one_over)
{
    uint64_t ia, ib;
    reg_buffer *a = add(1, BIG, &ia);
    wait_state(a, PIN_RUNNING);
    reg_buffer *b = add(1, BIG + 4096, &ib);
    cr_expect_eq(atomic_load(&b->pin_state), PIN_QUEUED);
    cr_expect_eq(stats().pending, 2);
    /* queued: cancelled, its reservation back, unmapped at once */
    cr_expect_eq(reg_release_kind(&reg, 1, ib, REG_BUFFER), GEMM_OK);
    cr_expect_eq(atomic_load(&unreserves), 1);
    cr_expect_eq(atomic_load(&reserved), (long long)BIG);
    cr_expect_eq(stats().pending, 1);
    /* running: the pinner owns it now; a job's reference goes first */
    reg_hold(a);
    cr_expect_eq(reg_release_kind(&reg, 1, ia, REG_BUFFER), GEMM_OK);
    cr_expect_eq(reg.mapped, 1, "unmapped while a job holds it");
    reg_put(&reg, a);
    cr_expect_eq(reg.mapped, 0);
    cr_expect_eq(atomic_load(&unpins), 0, "unpinned before the pin ended");
    open_gate();
    pinner_drain();
    cr_expect_eq(atomic_load(&pins), 1);
    cr_expect_eq(atomic_load(&unpins), 1, "the pinner did not unpin");
    cr_expect_eq(atomic_load(&reserved), 0);
    cr_expect_eq(stats().pending, 0);
}

Test(pinner, failed_pin_releases_its_reservation)
{
    uint64_t id;
    fail_size = BIG;
    reg_buffer *b = add(1, BIG, &id);
    open_gate();
    wait_state(b, PIN_FAILED);
    cr_expect_null(atomic_load(&b->pin));
    cr_expect_eq(atomic_load(&reserved), 0);
    cr_expect_eq(stats().failed, 1);
    cr_expect_eq(stats().done, 0);
    memset(b->base, 2, BIG); /* still usable */
    cr_expect_eq(reg_release_kind(&reg, 1, id, REG_BUFFER), GEMM_OK);
    cr_expect_eq(atomic_load(&unpins), 0);
}

Test(pinner, small_buffers_pin_at_once)
{
    uint64_t id;
    reg_buffer *b = add(1, 1 << 20, &id);
    cr_expect_eq(atomic_load(&b->pin_state), PIN_DONE);
    cr_expect_eq(atomic_load(&b->pin), (void *)(size_t)(1 << 20));
    cr_expect_eq(stats().pending, 0);
    cr_expect_eq(stats().done, 0, "counted as a background pin");
    cr_expect_eq(reg_release_kind(&reg, 1, id, REG_BUFFER), GEMM_OK);
    cr_expect_eq(atomic_load(&unpins), 1);
}

Test(pinner, limit_answers_at_registration)
{
    uint64_t id, id2;
    cap = (long long)BIG + (1 << 20);
    reg_buffer *b = add(1, BIG, &id);
    cr_assert_not_null(b);
    int fd = memfd_create("pintest", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    cr_assert_eq(posix_fallocate(fd, 0, BIG), 0);
    char msg[256] = "";
    int rv = reg_register_fd(&reg, 1, fd, BIG, &id2, msg, sizeof(msg));
    cr_expect_eq(rv, GEMM_ERR_LIMIT, "%s", gemm_strerror(rv));
    cr_expect_eq(reg.count, 1);
    cr_expect_eq(reg.mapped, 1);
    cr_expect_eq(atomic_load(&reserved), (long long)BIG);
}
