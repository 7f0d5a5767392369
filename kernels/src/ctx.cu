/*
 * ctx.cu: the kernel context: made on a device (properties, the
 * driver's tensor-map encoder reached through
 * cudaGetDriverEntryPointByVersion so nothing links libcuda, the
 * tuning knobs, the cuBLAS handle of the wide types), its tensor-map
 * cache and growable workspaces, and the message of a failed call.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctx_internal.h"
#include "ladder/ladder.h"
#include "launch.h"

namespace gemmk
{
namespace
{

int encode_cb(void *user, const gemmk_tmap_key *key, gemmk_tmap *out)
{
    gemmk_ctx *ctx = static_cast<gemmk_ctx *>(user);
    cuuint64_t dims[2] = {key->dim0, key->dim1};
    cuuint64_t strides[1] = {key->stride1};
    cuuint32_t box[2] = {key->box0, key->box1};
    cuuint32_t estr[2] = {1, 1};
    CUtensorMapDataType dt =
        key->dtype == GEMM_BF16         ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
        : key->dtype == GEMM_FP32       ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
        : key->dtype == GEMMK_TMAP_TF32 ? CU_TENSOR_MAP_DATA_TYPE_TFLOAT32
        : key->dtype == GEMMK_TMAP_U8   ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                        : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    CUresult r = ctx->encode(
        reinterpret_cast<CUtensorMap *>(out), dt, 2,
        reinterpret_cast<void *>(key->addr), dims, strides, box, estr,
        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? 0 : 1;
}

} // namespace

int ctx_num_sms(const gemmk_ctx *ctx)
{
    return ctx->num_sms;
}

int ctx_knob(const gemmk_ctx *ctx, Knob k)
{
    return ctx->knobs.value[k];
}

gemm_error ctx_map(gemmk_ctx *ctx, const gemmk_tmap_key *key, CUtensorMap *out)
{
    const gemmk_tmap *m = gemmk_tmap_cache_get(&ctx->cache, key);
    if (!m) {
        ctx_say(ctx, "cuTensorMapEncodeTiled refused a %llu x %llu map",
                (unsigned long long)key->dim1, (unsigned long long)key->dim0);
        return GEMM_ERR_INVALID;
    }
    memcpy(out, m, sizeof(*out));
    return GEMM_OK;
}

gemm_error ctx_grow(gemmk_ctx *ctx, float **buf, size_t *bytes, size_t need,
                    cudaStream_t stream)
{
    if (need <= *bytes)
        return GEMM_OK;
    if (*buf) {
        cudaError_t ce = cudaFreeAsync(*buf, stream);
        *buf = nullptr;
        *bytes = 0;
        if (ce != cudaSuccess)
            return ctx_fail(ctx, ce, "cudaFreeAsync(workspace)", __FILE__,
                            __LINE__);
    }
    void *p = nullptr;
    cudaError_t ce = cudaMallocAsync(&p, need, stream);
    if (ce != cudaSuccess) {
        *buf = nullptr;
        cudaGetLastError(); /* an allocation failure is not sticky */
        ctx_fail(ctx, ce, "cudaMallocAsync(workspace)", __FILE__, __LINE__);
        return GEMM_ERR_DEVICE_MEMORY;
    }
    *buf = static_cast<float *>(p);
    *bytes = need;
    return GEMM_OK;
}

gemm_error ctx_workspace(gemmk_ctx *ctx, int slot, size_t bytes, void **out,
                         cudaStream_t stream)
{
    if (slot < 0 || slot >= SLOT_COUNT)
        return GEMM_ERR_INVALID;
    float *buf = static_cast<float *>(ctx->slot[slot]);
    gemm_error e = ctx_grow(ctx, &buf, &ctx->slot_bytes[slot],
                            bytes < 256 ? 256 : bytes, stream);
    ctx->slot[slot] = buf;
    if (e != GEMM_OK)
        return e;
    /* maps of the old buffer's addresses must not be reused */
    *out = buf;
    return GEMM_OK;
}

OzState **ctx_oz(gemmk_ctx *ctx)
{
    return &ctx->oz;
}

gemm_error cuda_err(cudaError_t e)
{
    if (e == cudaSuccess)
        return GEMM_OK;
    return e == cudaErrorMemoryAllocation ? GEMM_ERR_DEVICE_MEMORY
                                          : GEMM_ERR_DEVICE;
}

gemm_error ctx_fail(gemmk_ctx *ctx, cudaError_t e, const char *what,
                    const char *file, int line)
{
    const char *base = strrchr(file, '/');
    ctx_say(ctx, "%s failed: %s (%s:%d)", what, cudaGetErrorString(e),
            base ? base + 1 : file, line);
    return cuda_err(e);
}

void ctx_say(gemmk_ctx *ctx, const char *fmt, ...)
{
    if (ctx->msg[0] != '\0')
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->msg, sizeof(ctx->msg), fmt, ap);
    va_end(ap);
}

} // namespace gemmk

using namespace gemmk;

extern "C" {

gemm_error gemmk_ctx_create(gemmk_ctx **out, int device)
{
    if (!out)
        return GEMM_ERR_INVALID;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || device < 0 ||
        device >= count)
        return GEMM_ERR_DEVICE;
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess)
        return GEMM_ERR_DEVICE;
    if (prop.major != 9 || prop.minor != 0)
        return GEMM_ERR_UNSUPPORTED;
    if (cudaSetDevice(device) != cudaSuccess)
        return GEMM_ERR_DEVICE;
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                         cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess || !fn)
        return GEMM_ERR_DEVICE;
    /* gemmk_ctx is 64-byte aligned (the cache's CUtensorMaps, which the
     * driver requires aligned); calloc promises only 16. */
    const size_t ctx_bytes = (sizeof(gemmk_ctx) + 63) / 64 * 64;
    gemmk_ctx *ctx = static_cast<gemmk_ctx *>(aligned_alloc(64, ctx_bytes));
    if (!ctx)
        return GEMM_ERR_NOMEM;
    memset(ctx, 0, ctx_bytes);
    ctx->device = device;
    ctx->num_sms = prop.multiProcessorCount;
    ctx->encode = reinterpret_cast<encode_tiled_fn>(fn);
    knobs_read(&ctx->knobs);
    ctx->max_clusters2 = max_clusters2();
    cudaGetLastError(); /* an occupancy failure only disables clusters */
    if (ctx->knobs.value[KNOB_MAX_CLUSTERS] >= 0)
        ctx->max_clusters2 = ctx->knobs.value[KNOB_MAX_CLUSTERS];
    gemmk_tmap_cache_init(&ctx->cache, encode_cb, ctx);
    pthread_mutex_init(&ctx->f64_mu, nullptr);
    gemm_error e = wide_create(ctx, &ctx->wide);
    if (e != GEMM_OK) {
        pthread_mutex_destroy(&ctx->f64_mu);
        free(ctx);
        return e;
    }
    *out = ctx;
    return GEMM_OK;
}

void gemmk_ctx_destroy(gemmk_ctx *ctx)
{
    if (!ctx)
        return;
    cudaDeviceSynchronize();
    /* the workspaces came from the stream-ordered pool (ctx_grow) */
    if (ctx->ws)
        cudaFreeAsync(ctx->ws, 0);
    if (ctx->prep)
        cudaFreeAsync(ctx->prep, 0);
    if (ctx->cublas)
        ladder::cublas_free(ctx->cublas);
    for (int i = 0; i < SLOT_COUNT; i++)
        if (ctx->slot[i])
            cudaFreeAsync(ctx->slot[i], 0);
    cudaDeviceSynchronize();
    oz_free(ctx->oz);
    wide_free(ctx->wide);
    plan_memo_free(ctx->plans);
    pthread_mutex_destroy(&ctx->f64_mu);
    free(ctx);
}

void gemmk_ctx_info(const gemmk_ctx *ctx, int *num_sms, int *max_clusters2)
{
    if (!ctx)
        return;
    if (num_sms)
        *num_sms = ctx->num_sms;
    if (max_clusters2)
        *max_clusters2 = ctx->max_clusters2;
}

int gemmk_ctx_knob(const gemmk_ctx *ctx, int i, gemmk_knob *out)
{
    if (!ctx || !out || i < 0)
        return 0;
    for (int k = 0; k < KNOB_COUNT; k++) {
        if (!ctx->knobs.set[k] || i-- > 0)
            continue;
        out->name = knob_name(k);
        out->text = ctx->knobs.text[k];
        out->value = ctx->knobs.value[k];
        out->description = knob_description(k);
        return 1;
    }
    return 0;
}

void gemmk_cache_stats_get(const gemmk_ctx *ctx, gemmk_cache_stats *out)
{
    if (!ctx || !out)
        return;
    out->hits = ctx->cache.hits;
    out->misses = ctx->cache.misses;
    out->evictions = ctx->cache.evictions;
    out->entries = ctx->cache.entries;
    out->capacity = GEMMK_TMAP_CACHE_CAP;
}

void gemmk_cache_forget(gemmk_ctx *ctx, const void *base, size_t bytes)
{
    if (ctx)
        gemmk_tmap_cache_forget(&ctx->cache, (uint64_t)(uintptr_t)base, bytes);
}

} /* extern "C" */
