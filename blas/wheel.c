/*
 * wheel.c: noticing a BLAS of its own that libgemmblas cannot reach.
 * numpy from pip or conda carries a renamed OpenBLAS
 * (numpy.libs/libscipy_openblas64_-*.so, or libopenblas*.so beside the
 * package) and calls it by its own names, so a preloaded libgemmblas is
 * never called and nothing would say so. At exit, if such a library was
 * loaded into the process (found with dl_iterate_phdr: a
 * libscipy_openblas*, or a libopenblas* under site-packages,
 * dist-packages or a wheel's *.libs directory), one line on stderr says
 * that its products did not go to gemmd and what to use instead. The
 * import happens after libgemmblas is loaded and calls nothing of it, so
 * exit is the first moment it can be seen.
 */
#include "gemmblas.h"

#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether path names a BLAS that a wheel or conda package brought. */
static bool wheel_blas(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base != NULL ? base + 1 : path;
    if (strncmp(base, "libscipy_openblas", 17) == 0)
        return true;
    if (strncmp(base, "libopenblas", 11) != 0)
        return false;
    return strstr(path, "/site-packages/") != NULL ||
           strstr(path, "/dist-packages/") != NULL ||
           strstr(path, ".libs/") != NULL;
}

/* dl_iterate_phdr callback: copies the first such path into data (a
 * PATH_MAX buffer) and stops. */
static int find_wheel_blas(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    if (info->dlpi_name == NULL || !wheel_blas(info->dlpi_name))
        return 0;
    snprintf(data, PATH_MAX, "%s", info->dlpi_name);
    return 1;
}

/* At exit (the library is never unloaded): the notice, once. Runs on the
 * exiting thread. */
__attribute__((destructor)) static void gb_wheel_notice(void)
{
    char found[PATH_MAX] = "";
    dl_iterate_phdr(find_wheel_blas, found);
    if (found[0] == '\0')
        return;
    char file[PATH_MAX]; /* numpy loads it as numpy/_core/../../numpy.libs/ */
    if (realpath(found, file) == NULL)
        snprintf(file, sizeof(file), "%s", found);
    fprintf(stderr,
            "gemmblas: this process loaded a BLAS of its own, %s (numpy "
            "from pip or conda brings one): its matrix products went there, "
            "not through libgemmblas to gemmd. Use the gemmd Python package "
            "(gemmd.matmul; python/README.md) or Debian's numpy (apt install "
            "python3-numpy, run by /usr/bin/python3), which uses the "
            "system's libblas.so.3\n",
            file);
}
