/*
 * ctx_internal.h: the kernel context (struct gemmk_ctx) and what the
 * paths need from it: the device's SM count, tensor maps through the
 * context's cache, growable device workspaces, the tuning knobs read at
 * creation, lazily made library state, and the failure message of the
 * current call. ctx.cu makes and frees it. All are for the context's
 * owning thread.
 */
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>

#include "gemm_kernels.h"
#include "knobs.h"
#include "tmap_cache.h"

/* The element type of a tensor map key for int8 bytes (a gemm_dtype
 * number gemm.h does not use). */
#define GEMMK_TMAP_U8 GEMMK_TYPE_S8
/* The element type of a tensor map key for fp32 values that the TMA unit
 * rounds to tf32 as it loads them (CU_TENSOR_MAP_DATA_TYPE_TFLOAT32: to
 * nearest, ties to even, measured on the H200, kernel-notes v20), so the
 * tensor cores read rounded operands, not truncated ones. */
#define GEMMK_TMAP_TF32 64

namespace gemmk
{

struct OzState;   /* ozaki.cu */
struct PlanMemo;  /* plan_memo.cu */
struct WideState; /* wide.cu */
namespace ladder
{
struct CublasState; /* ladder/cublas.cu */
}

/* Workspaces of a context, each grown on demand (contents not kept). */
enum CtxSlot {
    SLOT_S8 = 0,    /* int8 GEMM: transposed operands */
    SLOT_OZ = 1,    /* fp64 emulation: residues, planes */
    SLOT_OZS = 2,   /* fp64 emulation: statistics and scale exponents */
    SLOT_GROUP = 3, /* grouped launches: tensor maps and problem table */
    SLOT_WIDE = 4,  /* wide batches: cuBLAS's device pointer arrays */
    SLOT_SK = 5,    /* stream-K: partial accumulators and flags */
    SLOT_ZOZ = 6,   /* complex emulation: split operands, real product */
    SLOT_COUNT
};

typedef CUresult (*encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType,
                                    cuuint32_t, void *, const cuuint64_t *,
                                    const cuuint64_t *, const cuuint32_t *,
                                    const cuuint32_t *, CUtensorMapInterleave,
                                    CUtensorMapSwizzle, CUtensorMapL2promotion,
                                    CUtensorMapFloatOOBfill);

} // namespace gemmk

struct gemmk_ctx {
    gemmk_tmap_cache cache; /* first: its CUtensorMaps are 64-byte aligned */
    int device;
    int num_sms;
    int max_clusters2; /* co-resident 2-CTA clusters of the 128x256 kernel */
    gemmk::encode_tiled_fn encode;
    gemmk::Knobs knobs;
    float *ws; /* split-K workspace */
    size_t ws_bytes;
    float *prep; /* fp32 pre-pass workspace (tf32 operands, K-major) */
    size_t prep_bytes;
    gemmk::ladder::CublasState *cublas; /* the "cublas" entry, made lazily */
    void *slot[gemmk::SLOT_COUNT];      /* workspaces by CtxSlot */
    size_t slot_bytes[gemmk::SLOT_COUNT];
    gemmk::OzState *oz;        /* the fp64 path (ozaki.cu), made lazily */
    gemmk::WideState *wide;    /* cuBLAS for the wide types (wide.cu), made
                                  with the context */
    int sk_epoch;              /* the last stream-K launch's flag value */
    gemmk::PlanMemo *plans;    /* auto's recent 16-bit choices, made lazily */
    pthread_mutex_t f64_mu;    /* guards the two below (set from any thread) */
    gemmk_f64_rates f64_rates; /* the fp64 cost model (ozaki.cu) */
    int f64_rates_set;         /* 0: "auto" runs DGEMM */
    char msg[256];             /* why the current call failed ("" if unsaid) */
};

namespace gemmk
{

int ctx_num_sms(const gemmk_ctx *ctx);
/* The value of tuning knob k as read when ctx was made. */
int ctx_knob(const gemmk_ctx *ctx, Knob k);
/* The tensor map for key (cached); GEMM_ERR_INVALID if it cannot be
 * encoded. */
gemm_error ctx_map(gemmk_ctx *ctx, const gemmk_tmap_key *key, CUtensorMap *out);
/* At least `bytes` of device memory in slot (256-byte aligned) for work
 * on stream; the old contents are lost. GEMM_ERR_DEVICE_MEMORY when the
 * allocation fails. */
gemm_error ctx_workspace(gemmk_ctx *ctx, int slot, size_t bytes, void **out,
                         cudaStream_t stream);
/* Frees the memo of auto's choices (plan_memo.cu; NULL: nothing). */
void plan_memo_free(PlanMemo *m);
/* A copy of ctx's fp64 cost model; false until one was set (ozaki.cu). */
bool f64_rates(gemmk_ctx *ctx, gemmk_f64_rates *out);
/* The fp64 path's state pointer (NULL until ozaki.cu makes it). */
OzState **ctx_oz(gemmk_ctx *ctx);
void oz_free(OzState *st);
/* The wide types' cuBLAS handle (wide.cu), made with the context. */
gemm_error wide_create(gemmk_ctx *ctx, WideState **out);
void wide_free(WideState *st);

/* Grows *buf to at least `need` bytes (contents are not kept), stream
 * ordered on stream (the one stream the context's work runs on): the old
 * buffer is freed after the work queued there before, the new one is
 * usable by what comes after, and nothing waits on the host (cudaFree
 * would synchronize the whole device, stalling every other worker). */
gemm_error ctx_grow(gemmk_ctx *ctx, float **buf, size_t *bytes, size_t need,
                    cudaStream_t stream);

/* The gemm_error of a CUDA error (GEMM_OK for cudaSuccess). */
gemm_error cuda_err(cudaError_t e);
/* Records why the current call failed in ctx->msg ("what: CUDA's message
 * (file:line)") unless a message is there already; returns cuda_err(e). */
gemm_error ctx_fail(gemmk_ctx *ctx, cudaError_t e, const char *what,
                    const char *file, int line);
/* Records a message of the caller's in ctx->msg unless one is there. */
void ctx_say(gemmk_ctx *ctx, const char *fmt, ...);

} // namespace gemmk

/* Returns from the enclosing function with the gemm_error of a failed CUDA
 * call, its message and place recorded in ctx. */
#define GEMMK_CK(ctx, call)                                                    \
    do {                                                                       \
        cudaError_t e_ = (call);                                               \
        if (e_ != cudaSuccess)                                                 \
            return gemmk::ctx_fail((ctx), e_, #call, __FILE__, __LINE__);      \
    } while (0)
