/*
 * need.c: skip a test whose host program is missing, or fail it where
 * $GEMM_REQUIRE says the program must be there (see need.h).
 */
#include "util/need.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool tu_required(const char *tool)
{
    const char *req = getenv("GEMM_REQUIRE");
    size_t n = strlen(tool);
    if (req == NULL)
        return false;
    while (*req != '\0') {
        req += strspn(req, " ,");
        size_t w = strcspn(req, " ,");
        if ((w == 3 && strncmp(req, "all", 3) == 0) ||
            (w == n && strncmp(req, tool, n) == 0))
            return true;
        req += w;
    }
    return false;
}

bool tu_have_tool(const char *tool)
{
    const char *path = getenv("PATH");
    char file[4096];
    if (path == NULL)
        path = "/usr/bin:/bin";
    while (*path != '\0') {
        size_t w = strcspn(path, ":");
        snprintf(file, sizeof(file), "%.*s/%s", (int)w, path, tool);
        if (w > 0 && access(file, X_OK) == 0)
            return true;
        path += w + (path[w] == ':');
    }
    return false;
}

void tu_need_tool(const char *tool, const char *package)
{
    if (tu_have_tool(tool))
        return;
    if (tu_required(tool))
        cr_assert_fail("%s not found, and GEMM_REQUIRE says this host has "
                       "it (install the %s package)",
                       tool, package);
    cr_skip_test("skipped: %s not found (install the %s package)", tool,
                 package);
}
