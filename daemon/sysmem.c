/*
 * sysmem.c: MemTotal and the cgroup memory limit (see sysmem.h). The
 * cgroup paths come from /proc/self/cgroup: "0::/path" (v2, under
 * /sys/fs/cgroup or /sys/fs/cgroup/unified) and "N:...memory...:/path" (v1,
 * under /sys/fs/cgroup/memory).
 */
#include "sysmem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The /proc/meminfo line `name` (with its colon) in bytes, or `none`. */
static uint64_t meminfo(const char *name, uint64_t none)
{
    FILE *f = fopen("/proc/meminfo", "re");
    char line[256];
    size_t n = strlen(name);
    unsigned long long kb;
    uint64_t v = none;
    if (f == NULL)
        return v;
    while (fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, name, n) == 0 &&
            sscanf(line + n, " %llu kB", &kb) == 1) {
            v = (uint64_t)kb * 1024;
            break;
        }
    fclose(f);
    return v;
}

uint64_t sysmem_total(void)
{
    return meminfo("MemTotal:", 0);
}

uint64_t sysmem_available(void)
{
    return meminfo("MemAvailable:", UINT64_MAX);
}

/* The number in file (a limit), or UINT64_MAX for "max", absent or
 * unreadable. v1 spells "no limit" as a huge page-rounded number. */
static uint64_t read_limit(const char *file)
{
    FILE *f = fopen(file, "re");
    char buf[64];
    uint64_t v = UINT64_MAX;
    if (f == NULL)
        return v;
    if (fgets(buf, sizeof(buf), f) != NULL && strncmp(buf, "max", 3) != 0) {
        char *end;
        unsigned long long x = strtoull(buf, &end, 10);
        if (end != buf && x < (1ull << 62))
            v = x;
    }
    fclose(f);
    return v;
}

/* The smallest limit named `leaf` in root/path and each of its parents. */
static uint64_t walk(const char *root, const char *path, const char *leaf)
{
    char p[1024];
    uint64_t best = UINT64_MAX;
    snprintf(p, sizeof(p), "%s", path);
    for (;;) {
        char file[1200];
        snprintf(file, sizeof(file), "%s%s/%s", root,
                 strcmp(p, "/") == 0 ? "" : p, leaf);
        uint64_t v = read_limit(file);
        if (v < best)
            best = v;
        char *slash = strrchr(p, '/');
        if (slash == NULL || slash == p)
            break;
        *slash = '\0';
    }
    return best;
}

uint64_t sysmem_cgroup_limit(void)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    char line[1024];
    uint64_t best = UINT64_MAX;
    if (f == NULL)
        return best;
    while (fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':');
        char *c2 = c1 != NULL ? strchr(c1 + 1, ':') : NULL;
        if (c2 == NULL)
            continue;
        *c1 = *c2 = '\0';
        const char *ctrls = c1 + 1, *path = c2 + 1;
        uint64_t v = UINT64_MAX;
        if (strcmp(line, "0") == 0 && *ctrls == '\0') {
            v = walk("/sys/fs/cgroup", path, "memory.max");
            uint64_t u = walk("/sys/fs/cgroup/unified", path, "memory.max");
            if (u < v)
                v = u;
        } else if (strstr(ctrls, "memory") != NULL) {
            v = walk("/sys/fs/cgroup/memory", path, "memory.limit_in_bytes");
        }
        if (v < best)
            best = v;
    }
    fclose(f);
    return best;
}
