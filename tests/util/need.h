/*
 * need.h: tests that need a program of the host (promtool, cc, ...). Where
 * the program is missing the test skips and says what to install, unless
 * $GEMM_REQUIRE names the program (or is "all"): then it fails, because
 * that host (CI: .ci/run sets GEMM_REQUIRE=all) installs it and its
 * absence means the test would silently not run. Criterion tests only.
 */
#ifndef GEMM_TESTS_UTIL_NEED_H
#define GEMM_TESTS_UTIL_NEED_H

#include <stdbool.h>

/* Whether $GEMM_REQUIRE (words separated by spaces or commas) names tool
 * or is "all". */
bool tu_required(const char *tool);

/* Whether an executable named tool is in one of $PATH's directories. */
bool tu_have_tool(const char *tool);

/* Returns when tool is found on $PATH; else skips the calling test with
 * "skipped: TOOL not found (install PACKAGE)", or fails it when
 * tu_required(tool). */
void tu_need_tool(const char *tool, const char *package);

#endif
