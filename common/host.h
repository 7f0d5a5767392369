/*
 * host.h: how busy the host is, as the kernel counts it: the CPUs no
 * runnable thread uses besides the caller. gemmd's spin guard starts no
 * spin when there are none (daemon/spinguard.c); libgemmblas's staging
 * copies take only that many helpers (blas/copy.c). Header only: each
 * user compiles its own copy.
 */
#ifndef GEMM_HOST_H
#define GEMM_HOST_H

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>

/* The CPUs the calling process may run on (at least 1). */
static inline int host_usable_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return 1;
    int n = CPU_COUNT(&set);
    return n > 0 ? n : 1;
}

/* host_usable_cpus() less the host's runnable threads (the fourth field
 * of /proc/loadavg, the caller included) other than the caller, at least
 * 0; all of them when /proc cannot tell. One small file read. */
static inline int host_idle_cpus(void)
{
    int cpus = host_usable_cpus();
    int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return cpus;
    char buf[128];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    int running = 0, total = 0;
    if (n <= 0)
        return cpus;
    buf[n] = '\0';
    if (sscanf(buf, "%*f %*f %*f %d/%d", &running, &total) != 2)
        return cpus;
    int idle = cpus - (running - 1);
    return idle > 0 ? idle : 0;
}

#endif
