/*
 * daemon.c: start, watch and stop a real gemmd for the integration tests
 * (see daemon.h).
 */
#include "util/daemon.h"
#include "util/cases.h"
#include "util/hold.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef GEMMD_PATH
#error "GEMMD_PATH must name the gemmd binary"
#endif

gemmd_proc g_gemmd;
gemm_client *g_client;
unsigned tu_daemon_nofile;

double tu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void tu_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

void tu_wait_until(double t)
{
    double left;
    while ((left = t - tu_now()) > 0)
        tu_sleep_ms(left > 0.001 ? (int)(left * 1000.0) + 1 : 1);
}

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[512];
    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

void gemmd_dump_log(const gemmd_proc *p)
{
    char buf[4096];
    int fd = open(p->log, O_RDONLY);
    if (fd < 0)
        return;
    off_t end = lseek(fd, 0, SEEK_END);
    off_t from =
        end > (off_t)sizeof(buf) - 1 ? end - (off_t)sizeof(buf) + 1 : 0;
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, from);
    close(fd);
    if (n > 0) {
        buf[n] = '\0';
        fprintf(stderr, "---- gemmd log (%s, last %zd bytes) ----\n%s----\n",
                p->log, n, buf);
    }
}

static bool has_option(const char *const *extra, const char *opt)
{
    for (; extra != NULL && *extra != NULL; extra++)
        if (strcmp(*extra, opt) == 0)
            return true;
    return false;
}

bool gemmd_wait_exit(gemmd_proc *p, double timeout_s)
{
    double until = tu_now() + timeout_s;
    if (p->pid == 0)
        return true;
    for (;;) {
        pid_t r = waitpid(p->pid, &p->status, WNOHANG);
        if (r == p->pid) {
            p->pid = 0;
            return true;
        }
        if (r < 0 && errno != EINTR)
            return false;
        if (tu_now() > until)
            return false;
        tu_sleep_ms(5);
    }
}

void gemmd_destroy(gemmd_proc *p)
{
    if (p->pid > 0) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, &p->status, 0);
        p->pid = 0;
    }
    if (p->dir[0] != '\0') {
        const char *keep = getenv("GEMM_TEST_KEEP");
        if (keep != NULL && *keep != '\0' && *keep != '0')
            fprintf(stderr, "kept %s (GEMM_TEST_KEEP)\n", p->dir);
        else
            remove_dir(p->dir);
    }
    p->dir[0] = '\0';
}

int gemmd_stop(gemmd_proc *p, double timeout_s)
{
    int st = -1;
    if (p->pid > 0) {
        kill(p->pid, SIGTERM);
        if (gemmd_wait_exit(p, timeout_s))
            st = p->status;
    }
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        gemmd_dump_log(p);
    gemmd_destroy(p);
    return st;
}

const struct passwd *tu_daemon_user(void)
{
    static struct passwd pw;
    static char name[64];
    static int done;
    if (done)
        return done > 0 ? &pw : NULL;
    done = -1;
    const char *want = getenv("GEMM_TEST_DAEMON_USER");
    if (want == NULL)
        want = geteuid() == 0 ? "nobody" : "";
    const struct passwd *p = *want != '\0' ? getpwnam(want) : NULL;
    if (p != NULL && p->pw_uid != geteuid()) {
        snprintf(name, sizeof(name), "%s", p->pw_name);
        pw = *p;
        pw.pw_name = name;
        pw.pw_passwd = pw.pw_gecos = pw.pw_dir = pw.pw_shell = (char *)"";
        done = 1;
    }
    return done > 0 ? &pw : NULL;
}

void tu_exec_as(uid_t uid, gid_t gid, const gid_t *groups, int ngroups,
                const char *path, char *const argv[])
{
    extern char **environ;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "open %s: %s\n", path, strerror(errno));
        _exit(126);
    }
    int death = 0; /* the caller's parent-death signal, if it set one */
    const pid_t parent = getppid();
    prctl(PR_GET_PDEATHSIG, &death);
    if (uid != geteuid() && (setgroups((size_t)ngroups, groups) != 0 ||
                             setgid(gid) != 0 || setuid(uid) != 0)) {
        fprintf(stderr, "becoming uid %u: %s\n", (unsigned)uid,
                strerror(errno));
        _exit(125);
    }
    /* a change of user clears the parent-death signal: set it again, so
     * that a daemon started as nobody by a root test process still dies
     * with it (a test that skips or crashes after starting one) */
    if (death != 0 &&
        (prctl(PR_SET_PDEATHSIG, death) != 0 || getppid() != parent))
        _exit(127);
    fexecve(fd, argv, environ);
    fprintf(stderr, "exec %s: %s\n", path, strerror(errno));
    _exit(127);
}

void tu_exec_gemmd(char *const argv[])
{
    const struct passwd *pw = tu_daemon_user();
    if (pw == NULL)
        tu_exec_as(geteuid(), getegid(), NULL, 0, tu_gemmd_path(), argv);
    tu_exec_as(pw->pw_uid, pw->pw_gid, NULL, 0, tu_gemmd_path(), argv);
}

int gemmd_start(gemmd_proc *p, const char *const *extra, char *why,
                size_t whylen)
{
    const char *argv[64];
    int argc = 0;
    const char *tmp = getenv("TMPDIR");

    memset(p, 0, sizeof(*p));
    snprintf(p->dir, sizeof(p->dir), "%s/gemmd-test-XXXXXX",
             tmp && *tmp && strlen(tmp) < 80 ? tmp : "/tmp");
    if (mkdtemp(p->dir) == NULL) {
        snprintf(why, whylen, "mkdtemp %s: %s", p->dir, strerror(errno));
        p->dir[0] = '\0';
        return -1;
    }
    const struct passwd *pw = tu_daemon_user();
    if (pw != NULL && chown(p->dir, pw->pw_uid, pw->pw_gid) != 0) {
        snprintf(why, whylen, "chown %s to %s: %s", p->dir, pw->pw_name,
                 strerror(errno));
        gemmd_destroy(p);
        return -1;
    }
    snprintf(p->sock, sizeof(p->sock), "%s/gemmd.sock", p->dir);
    snprintf(p->url, sizeof(p->url), "ipc://%s", p->sock);
    snprintf(p->log, sizeof(p->log), "%s/gemmd.log", p->dir);

    argv[argc++] = tu_gemmd_path();
    argv[argc++] = "--listen";
    argv[argc++] = p->url;
    if (!has_option(extra, "--backend")) {
        argv[argc++] = "--backend";
        argv[argc++] = tu_backend();
    }
    if (!has_option(extra, "--threads")) {
        argv[argc++] = "--threads";
        argv[argc++] = "2";
    }
    if (!has_option(extra, "--spare-bytes")) {
        /* spares (made and pinned in the background from the start) would
         * move the pinned-memory counters that suites compare; the spares
         * suite and the cuda test that lend set them */
        argv[argc++] = "--spare-bytes";
        argv[argc++] = "none";
    }
    if (!has_option(extra, "--log-level")) {
        const char *lvl = getenv("GEMM_TEST_LOG_LEVEL");
        argv[argc++] = "--log-level";
        argv[argc++] = lvl != NULL && *lvl != '\0' ? lvl : "info";
    }
    /* $GEMM_TEST_GEMMD_ARGS: options for every daemon of the suite (e.g.
     * --devices 0,0), each unless the test sets it itself */
    static char env_args[512];
    const char *ea = getenv("GEMM_TEST_GEMMD_ARGS");
    snprintf(env_args, sizeof(env_args), "%s", ea != NULL ? ea : "");
    char *save = NULL, *tok = strtok_r(env_args, " \t", &save);
    while (tok != NULL && argc < 60) {
        char *val = strtok_r(NULL, " \t", &save);
        char *next = val;
        if (val != NULL && strncmp(val, "--", 2) == 0)
            val = NULL; /* a flag of its own */
        else if (val != NULL)
            next = strtok_r(NULL, " \t", &save);
        if (!has_option(extra, tok)) {
            argv[argc++] = tok;
            if (val != NULL)
                argv[argc++] = val;
        }
        tok = next;
    }
    for (; extra != NULL && *extra != NULL && argc < 62; extra++)
        argv[argc++] = *extra;
    argv[argc] = NULL;

    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, whylen, "fork: %s", strerror(errno));
        gemmd_destroy(p);
        return -1;
    }
    if (pid == 0) {
        /* never outlive the test process, even if it crashes */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int fd = open(p->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, STDERR_FILENO);
            dup2(fd, STDOUT_FILENO);
            close(fd);
        }
        int null = open("/dev/null", O_RDONLY);
        if (null >= 0) {
            dup2(null, STDIN_FILENO);
            close(null);
        }
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        if (tu_hold_daemon_fd >= 0) {
            /* the test hold (hold.h): this end, and only it, crosses exec */
            char fd[16];
            snprintf(fd, sizeof(fd), "%d", tu_hold_daemon_fd);
            if (fcntl(tu_hold_daemon_fd, F_SETFD, 0) != 0 ||
                setenv("GEMMD_TEST_HOLD_FD", fd, 1) != 0)
                _exit(124);
        }
        if (tu_daemon_nofile != 0) {
            struct rlimit rl = {tu_daemon_nofile, tu_daemon_nofile};
            if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
                _exit(124);
        }
        tu_exec_gemmd((char *const *)argv);
    }
    p->pid = pid;

    double until = tu_now() + 10.0;
    int last = GEMM_ERR_CONNECT;
    while (tu_now() < until) {
        gemm_client *c = NULL;
        if (waitpid(pid, &p->status, WNOHANG) == pid) {
            p->pid = 0;
            snprintf(why, whylen,
                     "gemmd exited during start-up (status 0x%x); see log",
                     p->status);
            gemmd_dump_log(p);
            gemmd_destroy(p);
            return -1;
        }
        last = gemm_client_open(&c, p->url);
        if (last == GEMM_OK) {
            gemm_client_set_timeout(c, 1000);
            last = gemm_ping(c, NULL);
            gemm_client_close(c);
            if (last == GEMM_OK)
                return 0;
        }
        tu_sleep_ms(10);
    }
    snprintf(why, whylen, "gemmd did not answer a ping within 10 s: %s",
             gemm_strerror(last));
    gemmd_dump_log(p);
    gemmd_destroy(p);
    return -1;
}

int tu_log_count(const gemmd_proc *p, const char *needle)
{
    char line[4096];
    int n = 0;
    FILE *f = fopen(p->log, "r");
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL)
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

bool tu_log_wait(const gemmd_proc *p, const char *needle, int after,
                 double timeout_s)
{
    double until = tu_now() + timeout_s;
    for (;;) {
        if (tu_log_count(p, needle) > after)
            return true;
        if (tu_now() > until)
            return false;
        tu_sleep_ms(2);
    }
}

gemm_status tu_status(gemm_client *c)
{
    gemm_status st;
    int rv = gemm_get_status(c, &st);
    cr_assert_eq(rv, GEMM_OK, "gemm_get_status: %s (%s)", gemm_strerror(rv),
                 gemm_last_error_message());
    return st;
}

gemm_client *tu_client(const gemmd_proc *p, int timeout_ms)
{
    gemm_client *c = NULL;
    int rv = gemm_client_open(&c, p->url);
    cr_assert_eq(rv, GEMM_OK, "gemm_client_open(%s): %s", p->url,
                 gemm_strerror(rv));
    rv = gemm_client_set_timeout(c, timeout_ms);
    cr_assert_eq(rv, GEMM_OK, "gemm_client_set_timeout: %s", gemm_strerror(rv));
    return c;
}

void fixture_start(const char *const *extra)
{
    char why[512];
    int rv = gemmd_start(&g_gemmd, extra, why, sizeof(why));
    cr_assert_eq(rv, 0, "starting gemmd: %s", why);
    g_client = tu_client(&g_gemmd, 30000);
}

void fixture_stop(void)
{
    tu_hold_close(); /* a held GEMM left by a failed test goes on */
    gemm_client_close(g_client);
    g_client = NULL;
    if (g_gemmd.pid == 0 && g_gemmd.dir[0] == '\0')
        return; /* the test stopped it itself */
    int st = gemmd_stop(&g_gemmd, 20.0);
    cr_assert_neq(st, -1, "gemmd did not exit within 20 s of SIGTERM");
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "gemmd did not exit with status 0 after SIGTERM (waitpid "
              "status 0x%x: %s %d)",
              st, WIFEXITED(st) ? "exit" : "signal",
              WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

void fixture_setup(void)
{
    fixture_start(NULL);
}
void fixture_teardown(void)
{
    fixture_stop();
}

void tu_assert_healthy(gemm_client *c)
{
    gemm_buffer *buf = NULL;
    char why[512];
    tu_case cs = {.m = 17,
                  .n = 13,
                  .k = 9,
                  .ab = GEMM_FP32,
                  .cd = GEMM_FP32,
                  .alpha = 1.5f,
                  .beta = 0.5f,
                  .c_mode = TU_C_SEPARATE,
                  .pad_a = 1,
                  .pad_b = TU_TIGHT,
                  .pad_c = 2,
                  .pad_d = 3,
                  .base = 8,
                  .seed = 12345};
    int rv = gemm_ping(c, NULL);
    cr_assert_eq(rv, GEMM_OK, "daemon no longer answers a ping: %s (%s)",
                 gemm_strerror(rv), gemm_last_error_message());
    rv = gemm_buffer_alloc(c, 16384, &buf);
    cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc after the bad input: %s",
                 gemm_strerror(rv));
    rv = tu_case_run(c, buf, &cs, why, sizeof(why));
    cr_assert_eq(rv, GEMM_OK, "good GEMM after the bad input: %s", why);
    gemm_buffer_free(buf);
}

/* GEMM_TEST_BACKEND runs the suite on another backend (cuda, on a GPU
 * host); the CPU backend by default. */
const char *tu_backend(void)
{
    const char *b = getenv("GEMM_TEST_BACKEND");
    return b != NULL && *b != '\0' ? b : "cpu";
}

/* GEMM_TEST_GEMMD runs the suite against another build of gemmd (a
 * sanitizer build, an installed one, a bundle on a GPU host). */
const char *tu_gemmd_path(void)
{
    const char *bin = getenv("GEMM_TEST_GEMMD");
    return bin != NULL && *bin != '\0' ? bin : GEMMD_PATH;
}

double tu_wait_timeout(gemm_request *rq, const char *needle)
{
    double t0 = tu_now();
    int rv = gemm_wait(rq, NULL);
    cr_assert_eq(rv, GEMM_ERR_TIMEOUT, "got %s: %s", gemm_strerror(rv),
                 gemm_last_error_message());
    cr_assert(strstr(gemm_last_error_message(), needle) != NULL, "%s",
              gemm_last_error_message());
    return tu_now() - t0;
}

void tu_assert_queue_drains(gemm_client *c, double seconds)
{
    gemm_status st;
    double end = tu_now() + seconds;
    do
        cr_assert_eq(gemm_get_status(c, &st), GEMM_OK);
    while (st.queue_depth > 0 && tu_now() < end);
    cr_assert_eq(st.queue_depth, 0,
                 "jobs were still queued or running %.1f s "
                 "later",
                 seconds);
}
