/*
 * fork_probe.c: a plain program (no Criterion, which starts nng threads
 * of its own, no libgemmclient of its own) for the fork rules of
 * libgemmblas. "before": fork first, then the child and afterwards the
 * parent each run a checked 40^3 dgemm_ (both offload: nobody had used
 * nng before the fork). "after": the parent runs one, forks, the child
 * runs one (on the CPU: nng cannot be used in a child of a process that
 * used it), then the parent runs one more. Exit status 0 when every
 * result is right and the child exited normally; the test checks gemmd's
 * counters.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void dgemm_(const char *, const char *, const int *, const int *, const int *,
            const double *, const double *, const int *, const double *,
            const int *, const double *, double *, const int *);

/* C = A A^T for a small integer A: exact in any order; 0 when right. */
static int checked_dgemm(void)
{
    enum { N = 40 };
    static double a[N * N], c[N * N];
    int n = N;
    double one = 1, zero = 0;
    for (int i = 0; i < N * N; i++)
        a[i] = (i % 7) - 3;
    memset(c, 0xff, sizeof(c)); /* NaN: beta 0 must not read it */
    dgemm_("N", "T", &n, &n, &n, &one, a, &n, a, &n, &zero, c, &n);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int l = 0; l < N; l++)
                s += a[l * N + i] * a[l * N + j];
            if (c[j * N + i] != s)
                return 1;
        }
    return 0;
}

static int child(void)
{
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0)
        _exit(checked_dgemm());
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) {
        fprintf(stderr, "fork_probe: the child did not exit normally\n");
        return 1;
    }
    return WEXITSTATUS(st);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    int bad = 0;
    if (strcmp(argv[1], "before") == 0) {
        bad |= child();
        bad |= checked_dgemm();
    } else if (strcmp(argv[1], "after") == 0) {
        bad |= checked_dgemm();
        bad |= child();
        bad |= checked_dgemm();
    } else {
        return 2;
    }
    printf("fork_probe %s: %s\n", argv[1], bad ? "wrong" : "ok");
    return bad;
}
