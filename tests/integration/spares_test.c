/*
 * spares_test.c: spares, memfds gemmd makes and pins ahead and lends whole
 * to a client's new buffer (daemon/spares.h). gemmd_test's CPU backend
 * pins with the test pin (GEMMD_TEST_PIN_MS_PER_MIB), so on any host: a
 * buffer borrowed through gemm_buffer_alloc is registered with its pin
 * already done (no pin pending: its first GEMM waits for none), reads as
 * zeros and computes correctly; a lent spare is made again; a size no
 * spare fits is made by the client and wanted from then on; the loan
 * that is never registered, the one with holes punched before its
 * registration and the one registered at the wrong size give back their
 * pinned bytes; a uid holds two unregistered loans at most; a
 * registered loan is sealed as any client memfd; a
 * daemon without spares answers LEND "unsupported" and
 * keeps the channel; stopping with spares ready and lent leaks nothing
 * (the ASan runs). States are polled with deadlines.
 */
#include "util/cases.h"
#include "util/daemon.h"
#include "util/fdpass.h"
#include "util/raw.h"

#include "scm.h"

#include <criterion/criterion.h>

#include <fcntl.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIB            ((size_t)1 << 20)
#define PIN_MS_PER_MIB 5 /* the three spares (128 + 64 + 32 MiB) in 1.1 s */
#define SPARES         "256m"

static void start(const char *const *extra)
{
    if (strcmp(tu_backend(), "cpu") != 0)
        cr_skip_test("skipped: the test pin exists on the CPU backend only "
                     "(GEMM_TEST_BACKEND=%s)",
                     tu_backend());
    char ms[16];
    snprintf(ms, sizeof(ms), "%d", PIN_MS_PER_MIB);
    setenv("GEMMD_TEST_PIN_MS_PER_MIB", ms, 1);
    fixture_start(extra);
}

static void setup(void)
{
    static const char *const args[] = {"--spare-bytes", "268435456", NULL};
    start(args);
}

static void setup_none(void)
{
    static const char *const args[] = {"--spare-bytes", "none", NULL};
    start(args);
}

TestSuite(spares, .init = setup, .fini = fixture_teardown, .timeout = 90);

/* Polls until `ready` spares are ready and nothing pins; asserts it
 * happens within 30 s; the last status. */
static gemm_status wait_ready(gemm_client *c, uint32_t ready)
{
    double until = tu_now() + 30;
    gemm_status st = tu_status(c);
    while ((st.spares_ready != ready || st.pins_pending != 0) &&
           tu_now() < until) {
        tu_sleep_ms(10);
        st = tu_status(c);
    }
    cr_assert_eq(st.spares_ready, ready,
                 "%u spares ready after 30 s, want %u (made %llu, failed "
                 "%llu)",
                 st.spares_ready, ready, (unsigned long long)st.spares_made,
                 (unsigned long long)st.spares_failed);
    cr_assert_eq(st.spares_failed, 0);
    return st;
}

/* Polls until pinned_bytes is want (30 s at most); asserts it. */
static void wait_pinned(gemm_client *c, uint64_t want)
{
    double until = tu_now() + 30;
    gemm_status st = tu_status(c);
    while (st.pinned_bytes != want && tu_now() < until) {
        tu_sleep_ms(10);
        st = tu_status(c);
    }
    cr_assert_eq(st.pinned_bytes, want,
                 "pinned_bytes %llu, want %llu (a leaked pin?)",
                 (unsigned long long)st.pinned_bytes, (unsigned long long)want);
}

static void gemm_ok(gemm_client *c, gemm_buffer *buf, uint64_t seed)
{
    char why[768];
    tu_case cs = tu_case_plain(96, 80, 64, GEMM_FP32, GEMM_FP32, seed);
    int rv = tu_case_run(c, buf, &cs, why, sizeof(why));
    cr_assert_eq(rv, GEMM_OK, "gemm: %s", why);
}

Test(spares, a_borrowed_buffer_is_pinned_zeroed_and_made_again)
{
    gemm_server_info info;
    cr_assert_eq(gemm_ping(g_client, &info), GEMM_OK);
    cr_assert(gemm_server_features(g_client) & GEMM_FEATURE_LEND,
              "gemmd with --spare-bytes does not say GEMM_FEATURE_LEND");
    /* 256 MiB: the ladder 128, 64 and 32 MiB */
    gemm_status st = wait_ready(g_client, 3);
    cr_assert_eq(st.spare_bytes, 224 * MIB);
    cr_assert_eq(st.pinned_bytes, 224 * MIB, "the spares are pinned");
    uint64_t made = st.spares_made;

    gemm_buffer *b;
    int rv = gemm_buffer_alloc(g_client, 100 * MIB, &b);
    cr_assert_eq(rv, GEMM_OK, "%s", gemm_last_error_message());
    cr_assert_eq(gemm_buffer_size(b), 128 * MIB,
                 "100 MiB should borrow the 128 MiB spare, got %zu bytes",
                 gemm_buffer_size(b));
    st = tu_status(g_client);
    cr_assert_eq(st.spares_lent, 1);
    cr_assert_eq(st.pins_pending, 0,
                 "a borrowed buffer was queued to be pinned again");
    cr_assert_eq(st.pins_done, 0, "a borrowed buffer was pinned again");
    cr_assert_eq(st.buffers, 1);
    const unsigned char *p = gemm_buffer_data(b);
    for (size_t i = 0; i < gemm_buffer_size(b); i += 4093)
        cr_assert_eq(p[i], 0, "byte %zu of a fresh spare is %u", i, p[i]);
    gemm_ok(g_client, b, 1);

    /* the lent one is made again: three ready, the fourth made */
    st = wait_ready(g_client, 3);
    cr_assert_eq(st.spares_made, made + 1);
    cr_assert_eq(st.pinned_bytes, (224 + 128) * MIB);
    gemm_buffer_free(b);
    wait_pinned(g_client, 224 * MIB);

    /* small buffers are the client's own */
    rv = gemm_buffer_alloc(g_client, 8 * MIB, &b);
    cr_assert_eq(rv, GEMM_OK, "%s", gemm_last_error_message());
    cr_assert_eq(gemm_buffer_size(b), 8 * MIB);
    cr_assert_eq(tu_status(g_client).spares_lent, 1);
    gemm_buffer_free(b);
}

Test(spares, a_size_none_fits_is_made_by_the_client_then_kept)
{
    wait_ready(g_client, 3);
    gemm_buffer *b;
    int rv = gemm_buffer_alloc(g_client, 200 * MIB, &b);
    cr_assert_eq(rv, GEMM_OK, "%s", gemm_last_error_message());
    cr_assert_eq(gemm_buffer_size(b), 200 * MIB, "the client's own memfd");
    gemm_status st = tu_status(g_client);
    cr_assert_eq(st.spares_none, 1);
    cr_assert_eq(st.spares_lent, 0);
    gemm_ok(g_client, b, 2);
    gemm_buffer_free(b);
    /* wanted now: 200 MiB in, the oldest (128, 64) out, 32 kept */
    st = wait_ready(g_client, 2);
    cr_assert_eq(st.spare_bytes, 232 * MIB);
    wait_pinned(g_client, 232 * MIB);
    rv = gemm_buffer_alloc(g_client, 200 * MIB, &b);
    cr_assert_eq(rv, GEMM_OK, "%s", gemm_last_error_message());
    cr_assert_eq(gemm_buffer_size(b), 200 * MIB);
    cr_assert_eq(tu_status(g_client).spares_lent, 1);
    gemm_ok(g_client, b, 3);
    gemm_buffer_free(b);
}

Test(spares, loans_not_registered_give_their_pins_back)
{
    wait_ready(g_client, 3);
    const char *url = g_gemmd.url;
    int fd, chan;
    uint64_t ticket;

    /* a loan whose channel closes unregistered: its ticket expires */
    cr_assert_eq(tu_fd_lend(url, 100, &fd, &ticket, NULL), 0);
    cr_assert_geq(fd, 0);
    close(fd);
    wait_ready(g_client, 3); /* made again */
    wait_pinned(g_client, 224 * MIB);

    /* holes punched before registering: refused as sparse */
    cr_assert_eq(tu_fd_lend(url, 50, &fd, &ticket, &chan), 0);
    struct stat sb;
    cr_assert_eq(fstat(fd, &sb), 0);
    cr_assert_eq(sb.st_size, (off_t)(64 * MIB));
    cr_assert_eq(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                           (off_t)MIB),
                 0, "a loan is not sealed before it is registered");
    tu_raw r;
    cr_assert_eq(tu_raw_open(&r, url, 10000), 0);
    Gemm__Reply *rep;
    cr_assert_eq(tu_raw_register(&r, NULL, 1, ticket, 1, 64 * MIB, &rep), 0);
    cr_assert_eq(tu_reply_status(rep), GEMM_ERR_SHM, "%s",
                 rep->message != NULL ? rep->message : "");
    cr_assert(strstr(rep->message, "sparse") != NULL, "%s", rep->message);
    gemm__reply__free_unpacked(rep, NULL);
    close(fd);
    close(chan);

    /* registered at another size: refused, naming the size */
    cr_assert_eq(tu_fd_lend(url, 32, &fd, &ticket, &chan), 0);
    cr_assert_eq(tu_raw_register(&r, NULL, 1, ticket, 1, 16 * MIB, &rep), 0);
    cr_assert_eq(tu_reply_status(rep), GEMM_ERR_INVALID);
    cr_assert(strstr(rep->message, "whole") != NULL, "%s", rep->message);
    gemm__reply__free_unpacked(rep, NULL);
    close(fd);
    close(chan);
    tu_raw_close(&r);

    wait_ready(g_client, 3);
    wait_pinned(g_client, 224 * MIB);
    cr_assert_eq(tu_status(g_client).buffers, 0);
}

Test(spares, a_uid_holds_two_loans_unregistered_at_most)
{
    wait_ready(g_client, 3);
    int fd[3], chan[3];
    uint64_t ticket;
    cr_assert_eq(tu_fd_lend(g_gemmd.url, 32, &fd[0], &ticket, &chan[0]), 0);
    cr_assert_eq(tu_fd_lend(g_gemmd.url, 64, &fd[1], &ticket, &chan[1]), 0);
    cr_assert_eq(tu_fd_lend(g_gemmd.url, 100, &fd[2], &ticket, &chan[2]),
                 GEMM_ERR_LIMIT, "a third loan while two are unregistered");
    cr_assert_eq(fd[2], -1);
    close(chan[2]);
    /* a loan whose channel closes expires, and the next is lent */
    close(fd[0]);
    close(chan[0]);
    double until = tu_now() + 10;
    int rv;
    while ((rv = tu_fd_lend(g_gemmd.url, 100, &fd[2], &ticket, &chan[2])) ==
               GEMM_ERR_LIMIT &&
           tu_now() < until)
        tu_sleep_ms(20);
    cr_assert_eq(rv, 0, "LEND after a loan expired: %d", rv);
    for (int i = 1; i < 3; i++) {
        close(fd[i]);
        close(chan[i]);
    }
    wait_ready(g_client, 3);
    wait_pinned(g_client, 224 * MIB);
}

Test(spares, a_registered_loan_is_sealed)
{
    wait_ready(g_client, 3);
    int fd, chan;
    uint64_t ticket;
    cr_assert_eq(tu_fd_lend(g_gemmd.url, 64, &fd, &ticket, &chan), 0);
    void *p = mmap(NULL, 64 * MIB, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    cr_assert_neq(p, MAP_FAILED);
    tu_raw r;
    cr_assert_eq(tu_raw_open(&r, g_gemmd.url, 10000), 0);
    Gemm__Reply *rep;
    cr_assert_eq(tu_raw_register(&r, NULL, 1, ticket, 1, 64 * MIB, &rep), 0);
    cr_assert_eq(tu_reply_status(rep), GEMM_OK, "%s",
                 rep->message != NULL ? rep->message : "");
    gemm__reply__free_unpacked(rep, NULL);
    /* the mapping made before stays writable; nothing else can be done */
    memset(p, 7, MIB);
    cr_assert_eq(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                           (off_t)MIB),
                 -1, "holes punched in a registered loan");
    cr_assert_eq(ftruncate(fd, (off_t)MIB), -1, "a registered loan shrank");
    cr_assert_eq(mmap(NULL, MIB, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0),
                 MAP_FAILED, "a registered loan mapped writable again");
    munmap(p, 64 * MIB);
    close(fd);
    close(chan);
    tu_raw_close(&r); /* its connection's buffer goes with it */
    double until = tu_now() + 30;
    while (tu_status(g_client).buffers != 0 && tu_now() < until)
        tu_sleep_ms(10);
    wait_ready(g_client, 3);
    wait_pinned(g_client, 224 * MIB);
}

Test(spares, stopping_with_spares_ready_and_lent)
{
    wait_ready(g_client, 3);
    gemm_buffer *b;
    cr_assert_eq(gemm_buffer_alloc(g_client, 60 * MIB, &b), GEMM_OK);
    cr_assert_eq(tu_status(g_client).spares_lent, 1);
    int fd;
    uint64_t ticket;
    cr_assert_eq(tu_fd_lend(g_gemmd.url, 32, &fd, &ticket, NULL), 0);
    close(fd);
    /* fixture_teardown stops gemmd (SIGTERM) and asserts a clean exit */
    gemm_buffer_free(b);
}

Test(spares, off_lend_is_unsupported_and_the_channel_stays, .init = setup_none)
{
    cr_assert_eq(gemm_ping(g_client, NULL), GEMM_OK);
    cr_assert_eq(gemm_server_features(g_client) & GEMM_FEATURE_LEND, 0,
                 "GEMM_FEATURE_LEND without spares");
    int fd, chan;
    uint64_t ticket;
    cr_assert_eq(tu_fd_lend(g_gemmd.url, 64, &fd, &ticket, &chan),
                 GEMM_ERR_UNSUPPORTED);
    cr_assert_eq(fd, -1);
    /* the same channel still passes a memfd */
    int m = memfd_create("t", MFD_ALLOW_SEALING);
    cr_assert_geq(m, 0);
    cr_assert_eq(ftruncate(m, 4096), 0);
    uint8_t msg[8] = {1, 0, 0, 0, 0, 0, 0, 0}, ans[16];
    cr_assert_eq(scm_send(chan, msg, sizeof(msg), m, 0), (ssize_t)sizeof(msg));
    cr_assert_eq(read(chan, ans, sizeof(ans)), (ssize_t)sizeof(ans));
    cr_assert_eq(ans[0], 0, "a PASS after a refused LEND: status %u", ans[0]);
    close(m);
    close(chan);
    gemm_buffer *b;
    cr_assert_eq(gemm_buffer_alloc(g_client, 64 * MIB, &b), GEMM_OK);
    cr_assert_eq(tu_status(g_client).spares_none, 0);
    gemm_buffer_free(b);
}
