/*
 * backend_cpu_blas3.h: the CPU backend's Blas3 jobs (OpenBLAS's CBLAS,
 * row-major, in place). Called by backend_cpu.c's gemm hook for
 * JOB_BLAS3. Worker thread.
 */
#ifndef GEMMD_BACKEND_CPU_BLAS3_H
#define GEMMD_BACKEND_CPU_BLAS3_H

#include "job.h"

/* Runs Blas3 job j; on failure sets j->msg. Returns a gemm_error. */
int cpu_blas3(gemmd_job *j);

#endif
