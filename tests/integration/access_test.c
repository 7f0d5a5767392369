/*
 * access_test.c: a client of another uid. The ipc socket is 0660: a user
 * outside its group cannot even connect; one let in through --socket-group
 * can connect but cannot register an shm object another uid owns, nor use,
 * release or read a buffer another connection registered; and the error
 * messages it gets name nothing of the other client's. Needs root (to
 * become "nobody" in a child); elsewhere it says why it skipped.
 */
#include "util/daemon.h"
#include "util/raw.h"

#ifndef ACCESS_PROBE
#error "ACCESS_PROBE must name the access_probe program"
#endif

#include <criterion/criterion.h>

#include <grp.h>
#include <stdio.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(access, .timeout = 60);

static bool can_switch_user(struct passwd **pw, struct group **gr)
{
    *pw = getpwnam("nobody");
    *gr = getgrnam("nogroup");
    return geteuid() == 0 && *pw != NULL && *gr != NULL;
}

/* Runs ACCESS_PROBE with argv as nobody:nogroup in a child (exec: nng
 * does not survive a fork); returns its exit status. */
static int as_nobody(char *const argv[])
{
    struct passwd *pw;
    struct group *gr;
    can_switch_user(&pw, &gr);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (setgroups(0, NULL) != 0 || setgid(gr->gr_gid) != 0 ||
            setuid(pw->pw_uid) != 0)
            _exit(100);
        /* Sanitizer builds: LeakSanitizer cannot stop the world of a
         * process that changed uid (not dumpable), and the log paths of
         * the suite are not nobody's to write: plain options here */
        setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
        unsetenv("LSAN_OPTIONS");
        unsetenv("UBSAN_OPTIONS");
        unsetenv("BXFI_MAP"); /* the probe is not a Criterion worker */
        execv(ACCESS_PROBE, argv);
        _exit(101);
    }
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 200 + WTERMSIG(st);
}

Test(access, other_uid_outside_the_group_cannot_connect)
{
    struct passwd *pw;
    struct group *gr;
    if (!can_switch_user(&pw, &gr))
        cr_skip_test("skipped: needs root and the user nobody");
    gemmd_proc d;
    char why[512];
    cr_assert_eq(gemmd_start(&d, NULL, why, sizeof(why)), 0, "%s", why);
    chmod(d.dir, 0755); /* the directory is not what stops it */
    struct stat st;
    cr_assert_eq(stat(d.sock, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0660, "socket mode %o", st.st_mode & 0777);
    int rc = as_nobody((char *const[]){"access_probe", "connect", d.url, NULL});
    cr_expect_eq(rc, 0, "a user outside the socket's group: probe %d", rc);
    cr_expect_eq(gemmd_stop(&d, 20.0), 0);
    gemmd_destroy(&d);
}

Test(access, other_uid_in_the_group_cannot_reach_others_buffers)
{
    struct passwd *pw;
    struct group *gr;
    if (!can_switch_user(&pw, &gr))
        cr_skip_test("skipped: needs root and the user nobody");
    gemmd_proc d;
    char why[512];
    cr_assert_eq(
        gemmd_start(&d,
                    (const char *const[]){"--socket-group", "nogroup", NULL},
                    why, sizeof(why)),
        0, "%s", why);
    chmod(d.dir, 0755);
    struct stat st;
    cr_assert_eq(stat(d.sock, &st), 0);
    cr_expect_eq(st.st_gid, gr->gr_gid, "socket group");
    /* root's own buffer and an unregistered root-owned object */
    tu_raw r;
    cr_assert_eq(tu_raw_open(&r, d.url, 5000), 0);
    tu_shm mine, other;
    uint64_t id;
    cr_assert_eq(tu_raw_buffer(&r, &mine, 4096, &id), GEMM_OK);
    cr_assert_eq(tu_shm_create(&other, 4096), 0);
    memset(mine.data, 0x3c, 4096);
    char idstr[32];
    snprintf(idstr, sizeof(idstr), "%llu", (unsigned long long)id);
    int rc = as_nobody((char *const[]){"access_probe", "trespass", d.url,
                                       other.name, idstr, NULL});
    cr_expect_eq(rc, 0, "trespass check %d failed", rc);
    /* root's buffer is intact and still root's */
    for (int i = 0; i < 4096; i++)
        cr_assert_eq(((unsigned char *)mine.data)[i], 0x3c);
    Gemm__Reply *rep;
    cr_assert_eq(tu_raw_release(&r, id, &rep), 0);
    cr_expect_eq(tu_reply_status(rep), GEMM_OK);
    gemm__reply__free_unpacked(rep, NULL);
    tu_raw_close(&r);
    tu_shm_destroy(&mine);
    tu_shm_destroy(&other);
    cr_expect_eq(gemmd_stop(&d, 20.0), 0);
    gemmd_destroy(&d);
}
