/*
 * access_test.c: users. gemmd runs as its own unprivileged user (the
 * fixture's default when the tests run as root: "nobody", as the shipped
 * unit runs it as "gemmd"), the test is a client of another uid (root),
 * and a probe runs as a third (the system user "daemon"). The socket is
 * 0660 in the daemon's group: a user outside it cannot connect; one in it
 * is served (its memfd crosses to the daemon's uid through the descriptor
 * channel) but reaches nothing of another client's: not its buffer ids,
 * not its descriptor tickets. Needs root to become the other users;
 * elsewhere each test says why it skipped.
 */
#include "util/daemon.h"
#include "util/fdpass.h"
#include "util/raw.h"

#ifndef ACCESS_PROBE
#error "ACCESS_PROBE must name the access_probe program"
#endif

#include <criterion/criterion.h>

#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(access, .timeout = 60);

/* The probe's user ("daemon"), when the test can become it and gemmd runs
 * as a user of its own; else skips with the reason. */
static const struct passwd *probe_user(void)
{
    static struct passwd pw;
    const struct passwd *du = tu_daemon_user(); /* before: getpwnam's
                                                   buffer is shared */
    const struct passwd *p = getpwnam("daemon");
    if (geteuid() != 0 || p == NULL)
        cr_skip_test("skipped: needs root and the user 'daemon'");
    if (du == NULL)
        cr_skip_test("skipped: gemmd runs as the tests' own user "
                     "(GEMM_TEST_DAEMON_USER)");
    if (p->pw_uid == tu_daemon_user()->pw_uid)
        cr_skip_test("skipped: the probe's user is the daemon's");
    pw = *p;
    return &pw;
}

/* Runs the probe with argv as the probe user; in_group adds the daemon's
 * group (the socket's) to its groups. Returns its exit status. */
static int as_probe(bool in_group, char *const argv[])
{
    const struct passwd *pw = probe_user();
    gid_t g = tu_daemon_user()->pw_gid;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        /* Sanitizer builds: the suite's log and suppression paths are not
         * this user's to open */
        setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
        unsetenv("LSAN_OPTIONS");
        unsetenv("UBSAN_OPTIONS");
        unsetenv("BXFI_MAP"); /* the probe is not a Criterion worker */
        /* GEMM_TEST_ACCESS_PROBE: the probe's path where the suite runs
         * from a bundle (a GPU host) rather than the build tree */
        const char *probe = getenv("GEMM_TEST_ACCESS_PROBE");
        tu_exec_as(
            pw->pw_uid, pw->pw_gid, in_group ? &g : NULL, in_group ? 1 : 0,
            probe != NULL && *probe != '\0' ? probe : ACCESS_PROBE, argv);
    }
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 200 + WTERMSIG(st);
}

Test(access, other_uid_outside_the_group_cannot_connect)
{
    probe_user();
    gemmd_proc d;
    char why[512];
    cr_assert_eq(gemmd_start(&d, NULL, why, sizeof(why)), 0, "%s", why);
    chmod(d.dir, 0755); /* the directory is not what stops it */
    struct stat st;
    cr_assert_eq(stat(d.sock, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0660, "socket mode %o", st.st_mode & 0777);
    cr_expect_eq(st.st_uid, tu_daemon_user()->pw_uid, "socket owner");
    int rc = as_probe(false,
                      (char *const[]){"access_probe", "connect", d.url, NULL});
    cr_expect_eq(rc, 0, "a user outside the socket's group: probe %d", rc);
    cr_expect_eq(gemmd_stop(&d, 20.0), 0);
    gemmd_destroy(&d);
}

Test(access, three_uids_each_served_none_reaches_another)
{
    probe_user();
    gemmd_proc d;
    char why[512];
    cr_assert_eq(gemmd_start(&d, NULL, why, sizeof(why)), 0, "%s", why);
    chmod(d.dir, 0755);
    /* the test's own buffer (root's memfd, mapped by nobody) and a
     * descriptor ticket it has not used */
    tu_raw r;
    cr_assert_eq(tu_raw_open(&r, d.url, 5000), 0);
    tu_shm mine, spare;
    uint64_t id, ticket;
    cr_assert_eq(tu_raw_buffer(&r, &mine, 4096, &id), GEMM_OK);
    cr_assert_eq(tu_shm_create(&spare, 4096), 0);
    int chan;
    cr_assert_eq(tu_fd_ticket_keep(d.url, spare.fd, &ticket, &chan), 0);
    memset(mine.data, 0x3c, 4096);
    char idstr[32], tstr[32];
    snprintf(idstr, sizeof(idstr), "%llu", (unsigned long long)id);
    snprintf(tstr, sizeof(tstr), "%llu", (unsigned long long)ticket);
    int rc = as_probe(true, (char *const[]){"access_probe", "serve", d.url,
                                            idstr, tstr, NULL});
    cr_expect_eq(rc, 0, "probe check %d failed", rc);
    /* the test's buffer is intact and still the test's; its ticket is
     * still good for the test */
    for (int i = 0; i < 4096; i++)
        cr_assert_eq(((unsigned char *)mine.data)[i], 0x3c);
    Gemm__Reply *rep;
    cr_assert_eq(tu_raw_release(&r, id, &rep), 0);
    cr_expect_eq(tu_reply_status(rep), GEMM_OK);
    gemm__reply__free_unpacked(rep, NULL);
    cr_assert_eq(tu_raw_register(&r, NULL, 1, ticket, 1, 4096, &rep), 0);
    cr_expect_eq(tu_reply_status(rep), GEMM_OK, "the test's own ticket: %s",
                 rep->message ? rep->message : "");
    gemm__reply__free_unpacked(rep, NULL);
    tu_raw_close(&r);
    close(chan);
    tu_shm_destroy(&mine);
    tu_shm_destroy(&spare);
    cr_expect_eq(gemmd_stop(&d, 20.0), 0);
    gemmd_destroy(&d);
}

/* The fixture's daemon runs as a user of its own and the test (another
 * uid) is served through it: gemmctl, the client library's buffers. */
Test(access, daemon_of_its_own_user_serves_another)
{
    if (tu_daemon_user() == NULL)
        cr_skip_test("skipped: gemmd runs as the tests' own user (run as "
                     "root, or set GEMM_TEST_DAEMON_USER)");
    gemmd_proc d;
    char why[512];
    cr_assert_eq(gemmd_start(&d, NULL, why, sizeof(why)), 0, "%s", why);
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)d.pid);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    char line[256];
    unsigned uid = 0;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "Uid: %u", &uid) == 1)
            break;
    fclose(f);
    cr_expect_eq(uid, tu_daemon_user()->pw_uid, "gemmd runs as uid %u", uid);
    cr_expect_neq(uid, geteuid());
    gemm_client *c = tu_client(&d, 10000);
    tu_assert_healthy(c);
    gemm_client_close(c);
    cr_expect_eq(gemmd_stop(&d, 20.0), 0);
    gemmd_destroy(&d);
}
