/*
 * criterion_main.c: the main() of every Criterion test program that
 * gemm_test() (cmake/GemmHelpers.cmake) builds. It runs the tests as
 * Criterion's own main does, then exits 77, ctest's SKIP_RETURN_CODE, when
 * no test passed or failed and at least one was skipped, after printing
 * each skip's reason on stderr: ctest then reports the program as skipped
 * (with why in its output) instead of counting a run that tested nothing
 * as passed.
 */
#include <criterion/criterion.h>
#include <criterion/hooks.h>

#include <stdio.h>

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
