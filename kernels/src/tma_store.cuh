/*
 * tma_store.cuh: the TMA-store epilogues' primitives: bulk tensor stores
 * from shared memory and their groups, tensor-map prefetch, the
 * warpgroup's named barrier and stmatrix (gemm_sm90_tstore.cuh,
 * tstore32.cuh, gemm_grouped.cuh).
 */
#pragma once

#include "gemm_sm90.cuh"

namespace gemmk
{

__device__ __forceinline__ void tma_store_2d(const CUtensorMap *map,
                                             const void *src, int c0, int c1)
{
    asm volatile(
        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, "
        "%2}], [%3];" ::"l"(reinterpret_cast<uint64_t>(map)),
        "r"(c0), "r"(c1), "r"(smem_u32(src))
        : "memory");
}

/* tma_store_2d into matrix z of a 3-D map (a strided batch's D). */
__device__ __forceinline__ void
tma_store_3d(const CUtensorMap *map, const void *src, int c0, int c1, int z)
{
    asm volatile(
        "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, "
        "%2, %3}], [%4];" ::"l"(reinterpret_cast<uint64_t>(map)),
        "r"(c0), "r"(c1), "r"(z), "r"(smem_u32(src))
        : "memory");
}

/* Starts fetching a tensor map (a kernel parameter's or one in global
 * memory) into the TMA unit's descriptor cache. */
__device__ __forceinline__ void tmap_prefetch(const CUtensorMap *map)
{
    asm volatile(
        "prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map))
        : "memory");
}

__device__ __forceinline__ void bulk_commit()
{
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

/* The copy engine has read the sources of all committed bulk groups. */
__device__ __forceinline__ void bulk_wait_read_all()
{
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}

/* All committed bulk groups are complete (writes to global done). */
__device__ __forceinline__ void bulk_wait_all()
{
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

/* Named barrier over one warpgroup (ids 1, 2; 0 is __syncthreads). */
__device__ __forceinline__ void wg_bar(int id)
{
    asm volatile("bar.sync %0, 128;" ::"r"(id) : "memory");
}

__device__ __forceinline__ void
stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3)
{
    asm volatile(
        "stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::
            "r"(addr),
        "r"(r0), "r"(r1), "r"(r2), "r"(r3)
        : "memory");
}

} // namespace gemmk
