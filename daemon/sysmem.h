/*
 * sysmem.h: how much memory this host gives gemmd: the machine's RAM
 * (/proc/meminfo MemTotal) and the tightest memory limit of the cgroups
 * gemmd runs in (cgroup v2 memory.max, or v1 memory.limit_in_bytes, of its
 * own cgroup and every ancestor). The daemon sizes its memory budget and
 * default limits from these. Thread-safe (reads files only).
 */
#ifndef GEMMD_SYSMEM_H
#define GEMMD_SYSMEM_H

#include <stdint.h>

/* MemTotal in bytes; 0 when unknown. */
uint64_t sysmem_total(void);

/* MemAvailable in bytes (what can be allocated without swapping);
 * UINT64_MAX when unknown. */
uint64_t sysmem_available(void);

/* The smallest cgroup memory limit over gemmd's cgroup and its ancestors,
 * in bytes; UINT64_MAX when there is none. */
uint64_t sysmem_cgroup_limit(void);

#endif
