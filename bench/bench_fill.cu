/*
 * bench_fill.cu: the benches' random inputs (bench_fill.h).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "bench_fill.h"
#include "cuda_check.h"

namespace
{

/* The index's 64 random bits (a splitmix-style hash of seed + i). */
__device__ __forceinline__ uint64_t mix(uint64_t seed, long long i)
{
    uint64_t x = (seed + i) * 0x9E3779B97F4A7C15ull;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    return x ^ (x >> 29);
}

__global__ void fill_kernel(uint16_t *p, long long n, uint64_t seed,
                            int is_bf16)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const uint64_t x = mix(seed, i);
        float v = ((uint32_t)(x >> 40) * (2.0f / 16777216.0f)) - 1.0f;
        if (is_bf16) {
            __nv_bfloat16 b = __float2bfloat16(v);
            p[i] = *reinterpret_cast<uint16_t *>(&b);
        } else {
            __half h = __float2half(v);
            p[i] = *reinterpret_cast<uint16_t *>(&h);
        }
    }
}

__global__ void fill_f32_kernel(float *p, long long n, uint64_t seed)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const uint64_t x = mix(seed, i);
        /* full 24-bit mantissas in [-1, 1) */
        p[i] = ((uint32_t)(x >> 40) * (2.0f / 16777216.0f)) - 1.0f;
    }
}

__global__ void fill_s8_kernel(int8_t *p, long long n, uint64_t seed)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const uint64_t x = mix(seed, i);
        p[i] = (int8_t)(x >> 56);
    }
}

__global__ void fill_f64_kernel(double *p, long long n, uint64_t seed,
                                double phi)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        uint64_t x = (seed + i) * 0x9E3779B97F4A7C15ull;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        x ^= x >> 31;
        uint64_t y = x * 0xd1342543de82ef95ull + 1;
        y = (y ^ (y >> 29)) * 0xbf58476d1ce4e5b9ull;
        y ^= y >> 32;
        double u = (double)(x >> 11) * 0x1p-53 * 2.0 - 1.0;
        double v = phi;
        if (phi > 0) {
            double u1 = ((y >> 11) + 1) * 0x1p-53;
            double u2 = (double)((x * 0x9E3779B97F4A7C15ull) >> 11) * 0x1p-53;
            v = exp2(phi * sqrt(-2 * log(u1)) * cospi(2 * u2));
        } else {
            v = 1.0;
        }
        p[i] = u * v;
    }
}

} // namespace

void fill_u16(uint16_t *p, long long n, uint64_t seed, bool bf16)
{
    fill_kernel<<<1024, 256>>>(p, n, seed, bf16);
    CK(cudaGetLastError());
}

void fill_f32(float *p, long long n, uint64_t seed)
{
    fill_f32_kernel<<<1024, 256>>>(p, n, seed);
    CK(cudaGetLastError());
}

void fill_s8(int8_t *p, long long n, uint64_t seed)
{
    fill_s8_kernel<<<1024, 256>>>(p, n, seed);
    CK(cudaGetLastError());
}

void fill_f64(double *p, long long n, uint64_t seed, double phi)
{
    fill_f64_kernel<<<2048, 256>>>(p, n, seed, phi);
    CK(cudaGetLastError());
}
