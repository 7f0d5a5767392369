/*
 * startup_test.c: gemmd refuses to start with a message that names the way
 * out: a socket in a directory that does not exist (started by hand, with
 * no RuntimeDirectory= to make /run/gemmd), or in one the daemon's user
 * cannot write.
 */
#include "util/daemon.h"

#include <criterion/criterion.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs gemmd with --listen url, collects its stderr into out (until it
 * exits or 10 s pass) and returns its exit status (-1: killed). */
static int run_capture(const char *url, char *out, size_t cap)
{
    int pfd[2];
    cr_assert_eq(pipe2(pfd, O_CLOEXEC), 0, "pipe");
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork");
    if (pid == 0) {
        dup2(pfd[1], 2);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        char *argv[] = {"gemmd",     "--listen", (char *)url,
                        "--backend", "cpu",      NULL};
        tu_exec_gemmd(argv);
        _exit(127);
    }
    close(pfd[1]);
    size_t got = 0;
    double deadline = tu_now() + 10.0;
    for (;;) {
        int left_ms = (int)((deadline - tu_now()) * 1000);
        if (left_ms <= 0)
            break;
        struct pollfd p = {.fd = pfd[0], .events = POLLIN};
        if (poll(&p, 1, left_ms) <= 0)
            break;
        ssize_t n = read(pfd[0], out + got, cap - 1 - got);
        if (n <= 0)
            break;
        got += (size_t)n;
        if (got == cap - 1)
            break;
    }
    out[got] = '\0';
    close(pfd[0]);
    gemmd_proc p = {.pid = pid};
    if (!gemmd_wait_exit(&p, 5.0)) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    return WIFEXITED(p.status) ? WEXITSTATUS(p.status) : -1;
}

Test(startup, missing_socket_directory_names_the_way_out)
{
    char dir[] = "/tmp/gemmd-startup.XXXXXX";
    cr_assert_not_null(mkdtemp(dir), "mkdtemp");
    chmod(dir, 0755);
    char url[256], err[4096];
    snprintf(url, sizeof(url), "ipc://%s/missing/gemmd.sock", dir);
    int rv = run_capture(url, err, sizeof(err));
    rmdir(dir);
    cr_assert(rv > 0, "gemmd on a missing directory: exit %d, want nonzero",
              rv);
    cr_assert(strstr(err, "does not exist") != NULL &&
                  strstr(err, "RuntimeDirectory=") != NULL &&
                  strstr(err, "--listen ipc://") != NULL,
              "the message names RuntimeDirectory= and --listen: %s", err);
}

Test(startup, unwritable_socket_directory_names_the_way_out)
{
    const struct passwd *pw = tu_daemon_user();
    if ((pw == NULL ? geteuid() : pw->pw_uid) == 0)
        cr_skip_test("gemmd runs as root here, who may write anywhere");
    char dir[] = "/tmp/gemmd-startup.XXXXXX";
    cr_assert_not_null(mkdtemp(dir), "mkdtemp");
    chmod(dir, 0555); /* readable, not writable, by everyone */
    char url[256], err[4096];
    snprintf(url, sizeof(url), "ipc://%s/gemmd.sock", dir);
    int rv = run_capture(url, err, sizeof(err));
    rmdir(dir);
    cr_assert(rv > 0, "gemmd on a read-only directory: exit %d", rv);
    cr_assert(strstr(err, "cannot create files in") != NULL &&
                  strstr(err, "--listen ipc://") != NULL,
              "the message says why and names --listen: %s", err);
}
