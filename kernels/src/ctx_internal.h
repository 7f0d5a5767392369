/*
 * ctx_internal.h: what the int8 and fp64 paths (kern_s8.cu, ozaki.cu)
 * need from the context that api.cu owns: the device's SM count, tensor
 * maps through the context's cache, growable device workspaces, and the
 * fp64 path's lazily made state. All are for the context's owning thread.
 */
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "gemm_kernels.h"
#include "tmap_cache.h"

/* The element type of a tensor map key for int8 bytes (a gemm_dtype
 * number gemm.h does not use). */
#define GEMMK_TMAP_U8 GEMMK_TYPE_S8

namespace gemmk
{

struct OzState; /* ozaki.cu */

/* Workspaces of a context, each grown on demand (contents not kept). */
enum CtxSlot {
    SLOT_S8 = 0,  /* int8 GEMM: transposed operands */
    SLOT_OZ = 1,  /* fp64 emulation: residues, planes */
    SLOT_OZS = 2, /* fp64 emulation: statistics and scale exponents */
    SLOT_COUNT
};

int ctx_num_sms(const gemmk_ctx *ctx);
/* The tensor map for key (cached); GEMM_ERR_INVALID if it cannot be
 * encoded. */
gemm_error ctx_map(gemmk_ctx *ctx, const gemmk_tmap_key *key, CUtensorMap *out);
/* At least `bytes` of device memory in slot (256-byte aligned); the old
 * contents are lost. GEMM_ERR_DEVICE_MEMORY when cudaMalloc fails. */
gemm_error ctx_workspace(gemmk_ctx *ctx, int slot, size_t bytes, void **out);
/* The fp64 path's state pointer (NULL until ozaki.cu makes it). */
OzState **ctx_oz(gemmk_ctx *ctx);
void oz_free(OzState *st);

} // namespace gemmk
