/*
 * criterion_main.c: the main() of every Criterion test program that
 * gemm_test() (cmake/GemmHelpers.cmake) builds. It runs the tests as
 * Criterion's own main does, then exits 77, ctest's SKIP_RETURN_CODE, when
 * no test passed or failed and at least one was skipped, after printing
 * each skip's reason on stderr: ctest then reports the program as skipped
 * (with why in its output) instead of counting a run that tested nothing
 * as passed.
 *
 * It also guards the exit of Criterion's workers against Debian's nng
 * 1.5.2 close deadlock (docs/reliability.md): a REQ socket whose daemon
 * went away with traffic in flight can leave nng's reaper thread blocked
 * for ever in the transport's teardown, and every later close that needs
 * the reaper blocks behind it. libgemmclient bounds its own closes; the
 * one left is Criterion's: a worker closes its socket to the runner with
 * nn_close() as it exits, after its test has reported, and then never
 * exits. The nn_close() below (it takes the place of nng's for Criterion,
 * which calls it through the PLT) runs nng's on a thread of its own and
 * waits at most CM_CLOSE_WAIT_S; past that it says so on stderr and
 * returns, and the worker exits with the result it already reported.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <criterion/criterion.h>
#include <criterion/hooks.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

/* ctest's SKIP_RETURN_CODE for every test the project registers. */
#define TU_SKIP_EXIT 77

static struct {
    size_t passed, failed, skipped;
} cm_totals;

/* Runs in Criterion's runner process once every test has reported: keeps
 * the totals for main() and prints why each skipped test skipped. */
ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
    cm_totals.passed = stats->tests_passed;
    cm_totals.failed = stats->tests_failed + stats->tests_crashed;
    cm_totals.skipped = stats->tests_skipped;
    if (cm_totals.passed != 0 || cm_totals.failed != 0)
        return;
    for (struct criterion_suite_stats *s = stats->suites; s != NULL;
         s = s->next)
        for (struct criterion_test_stats *t = s->tests; t != NULL; t = t->next)
            if (t->test_status == CR_STATUS_SKIPPED && t->message != NULL &&
                t->message[0] != '\0')
                fprintf(stderr, "%s::%s: %s\n", s->suite->name, t->test->name,
                        t->message);
}

/* How long a worker's last close may wait for nng's reaper. */
#define CM_CLOSE_WAIT_S 5

struct cm_close {
    pthread_mutex_t mtx;
    pthread_cond_t cv;
    int (*real)(int);
    int sock, rv;
    bool done;
};

/* The closing thread: nng's nn_close(), then the word to the waiter. The
 * job is static, so a close left behind never touches freed memory. */
static void *cm_close_main(void *arg)
{
    struct cm_close *j = arg;
    int rv = j->real(j->sock);
    pthread_mutex_lock(&j->mtx);
    j->rv = rv;
    j->done = true;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mtx);
    return NULL;
}

/* Criterion's nn_close(): nng's, bounded by CM_CLOSE_WAIT_S (see the top
 * of the file). Returns nng's result, or 0 when the close is left to the
 * stuck reaper (the process is about to exit). Not reentrant: Criterion
 * closes one socket at a time, and a second caller waits its turn. */
int nn_close(int s)
{
    static pthread_mutex_t turn = PTHREAD_MUTEX_INITIALIZER;
    static struct cm_close job = {.mtx = PTHREAD_MUTEX_INITIALIZER};
    static bool stuck;
    int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "nn_close");
    pthread_condattr_t ca;
    pthread_t th;
    struct timespec dl;

    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    pthread_mutex_lock(&turn);
    if (stuck) { /* the reaper is blocked: this close would block too */
        pthread_mutex_unlock(&turn);
        return 0;
    }
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&job.cv, &ca);
    pthread_condattr_destroy(&ca);
    job.real = real;
    job.sock = s;
    job.done = false;
    if (pthread_create(&th, NULL, cm_close_main, &job) != 0) {
        pthread_mutex_unlock(&turn);
        return real(s);
    }
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += CM_CLOSE_WAIT_S;
    pthread_mutex_lock(&job.mtx);
    while (!job.done &&
           pthread_cond_timedwait(&job.cv, &job.mtx, &dl) != ETIMEDOUT) {
    }
    bool done = job.done;
    int rv = job.rv;
    pthread_mutex_unlock(&job.mtx);
    if (done) {
        pthread_join(th, NULL);
        pthread_cond_destroy(&job.cv);
    } else {
        pthread_detach(th);
        stuck = true;
        fprintf(stderr,
                "criterion_main: nn_close(%d) still blocked after %d s: "
                "nng 1.5.2's reaper is stuck (its close deadlock, "
                "docs/reliability.md); the worker exits without it\n",
                s, CM_CLOSE_WAIT_S);
        rv = 0;
    }
    pthread_mutex_unlock(&turn);
    return rv;
}

int main(int argc, char *argv[])
{
    struct criterion_test_set *tests = criterion_initialize();
    int rc = 0;
    if (criterion_handle_args(argc, argv, true))
        rc = criterion_run_all_tests(tests) ? 0 : 1;
    criterion_finalize(tests);
    if (rc == 0 && cm_totals.passed == 0 && cm_totals.failed == 0 &&
        cm_totals.skipped > 0) {
        fprintf(stderr, "skipped: all %zu tests skipped (reasons above)\n",
                cm_totals.skipped);
        return TU_SKIP_EXIT;
    }
    return rc;
}
