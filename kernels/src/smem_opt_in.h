/*
 * smem_opt_in.h: a kernel's opt-in to more than 48 KB of dynamic shared
 * memory, asked of the runtime once a device rather than before every
 * launch (cudaFuncSetAttribute costs ~0.5 us of host time a call on the
 * H200, kernel-notes v23; a decode shape's kernel takes 35 us).
 *
 * Each launcher keeps one as a static of its own (a function-local static
 * of a template is one per instantiation, so one per kernel): ensure()
 * raises the limit where this device has not been given as much yet.
 */
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>

namespace gemmk
{

struct SmemOptIn {
    static constexpr int kDevices = 64;
    std::atomic<int> most[kDevices]; /* zero: a static's */

    template <typename K> cudaError_t ensure(K kern, int smem)
    {
        int dev = -1;
        if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kDevices)
            return cudaFuncSetAttribute(
                kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (most[dev].load(std::memory_order_acquire) >= smem)
            return cudaSuccess;
        cudaError_t e = cudaFuncSetAttribute(
            kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e != cudaSuccess)
            return e;
        int seen = most[dev].load(std::memory_order_relaxed);
        while (seen < smem && !most[dev].compare_exchange_weak(
                                  seen, smem, std::memory_order_release))
            ;
        return cudaSuccess;
    }
};

} // namespace gemmk
