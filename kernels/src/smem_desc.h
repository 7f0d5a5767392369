/*
 * smem_desc.h: the 64-bit shared-memory matrix descriptor that wgmma reads
 * (PTX ISA "Matrix Descriptor Format"), as plain C so the host-side unit
 * tests can check it without a GPU, and the kernels use the same code.
 *
 * Bits: [0,14) start address >> 4, [16,30) leading byte offset >> 4,
 * [32,46) stride byte offset >> 4, [49,52) base offset, [62,64) layout
 * (0 none/interleave, 1 128B swizzle, 2 64B, 3 32B).
 *
 * Our layouts (16-bit types, 128B swizzle, 1024-byte aligned tiles):
 *   K-major: rows of 64 K-elements (128 B); LBO unused (1 x 16 B), SBO =
 *            8 rows * 128 B = 1024 B; the k16 step adds 32 B to the start.
 *   MN-major: each 64-element MN slab is a separate TMA box of BK rows of
 *            128 B; LBO = distance between MN slabs (BK * 128 B), SBO =
 *            8 K-rows * 128 B = 1024 B; the k16 step adds 16 * 128 B.
 */
#ifndef GEMMK_SMEM_DESC_H
#define GEMMK_SMEM_DESC_H

#include <stdint.h>

#ifdef __CUDACC__
#define GEMMK_HD __host__ __device__ __forceinline__
#else
#define GEMMK_HD static inline
#endif

enum gemmk_swizzle {
    GEMMK_SWIZZLE_NONE = 0,
    GEMMK_SWIZZLE_128B = 1,
    GEMMK_SWIZZLE_64B = 2,
    GEMMK_SWIZZLE_32B = 3,
};

/* Encodes a descriptor from byte values (each a multiple of 16). */
GEMMK_HD uint64_t gemmk_desc_encode(uint32_t smem_addr, uint32_t lbo_bytes,
                                    uint32_t sbo_bytes, int layout)
{
    uint64_t d = 0;
    d |= (uint64_t)((smem_addr & 0x3FFFF) >> 4);
    d |= (uint64_t)((lbo_bytes & 0x3FFFF) >> 4) << 16;
    d |= (uint64_t)((sbo_bytes & 0x3FFFF) >> 4) << 32;
    d |= (uint64_t)(layout & 3) << 62;
    return d;
}

/* Swizzle width in bytes of a layout (16 for none). */
GEMMK_HD uint32_t gemmk_swizzle_bytes(int layout)
{
    return layout == GEMMK_SWIZZLE_128B  ? 128u
           : layout == GEMMK_SWIZZLE_64B ? 64u
           : layout == GEMMK_SWIZZLE_32B ? 32u
                                         : 16u;
}

/*
 * LBO and SBO (bytes) that CUTLASS's make_gmma_desc computes for a 16-bit
 * tile of mn x k elements tiled with its swizzle atom MN-first (column
 * order), as wgmma of width wg_mn (64 for A) reads it. k_major selects the
 * major-ness. These are what seed 004 prints for 128 x 64 half tiles.
 */
GEMMK_HD void gemmk_desc_offsets(int k_major, int layout, uint32_t mn,
                                 uint32_t wg_mn, uint32_t *lbo, uint32_t *sbo)
{
    uint32_t w = gemmk_swizzle_bytes(layout); /* bytes per atom row */
    if (k_major) {
        /* atom: 8 rows (MN) x w bytes of K. */
        if (layout == GEMMK_SWIZZLE_NONE) {
            *lbo = mn * 16u; /* next 8 columns of K: after all MN rows */
            *sbo = 8u * 16u; /* next 8 MN rows */
        } else {
            *lbo = 16u; /* unused, CUTLASS writes 1 */
            *sbo = 8u * w;
        }
    } else {
        /* atom: w bytes of MN x 8 rows of K; atoms tiled along MN first */
        uint32_t atoms_mn = (mn * 2u) / w;
        if (layout == GEMMK_SWIZZLE_NONE) {
            *lbo = atoms_mn * 128u; /* next 8 K rows */
            *sbo = 128u;            /* next 8 MN elements */
        } else {
            /* LBO: next MN atom; 0 when one atom spans wgmma's width */
            *lbo = (wg_mn * 2u > w) ? 8u * w : 0u;
            *sbo = atoms_mn * 8u * w; /* next 8 K rows */
        }
    }
}

#endif /* GEMMK_SMEM_DESC_H */
