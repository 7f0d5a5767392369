/*
 * blas3.h: the Blas3 request kind (symm, hemm, syrk, herk, syr2k, her2k,
 * trmm, trsm): from the protobuf body to a checked, admitted job. Its
 * handler is one row of dispatch.c's table; the backends compute it in
 * backend_cpu_blas3.c (OpenBLAS) and cuda/staging_blas3.c (cuBLAS through
 * the kernel library). Loop thread only.
 */
#ifndef GEMMD_BLAS3_H
#define GEMMD_BLAS3_H

#include "gemmd.h"
#include "validate_blas3.h"

#include "gemm.pb-c.h"

/* Fills *v from a Blas3Request (absent fields become 0 / not present;
 * alpha defaults to 1). Thread-safe. */
void blas3_desc(const Gemm__Blas3Request *r, val_blas3 *v);

/* Fills Blas3 job j (zeroed by the caller) from the validated v and its
 * operands res. Takes no references. Loop thread. */
void blas3_job_fill(gemmd_job *j, const val_blas3 *v,
                    const val_blas3_resolved *res);

/* The handler: validate, admit, enqueue; or reply with the error. */
void blas3_handle(gemmd *d, sp_req *q, const Gemm__Request *req);

#endif
