/*
 * desc_test.c: the wgmma shared-memory descriptor encoding (kernels/src/
 * smem_desc.h) against the values CUTLASS's make_gmma_desc prints for a
 * 128 x 64 half tile (seed 004), for each swizzle mode and major-ness, and
 * the constants our kernel uses. Runs on any CPU.
 */
#include <criterion/criterion.h>
#include <stdint.h>

#include "smem_desc.h"

/* CUTLASS starts its smem at byte 0x400 (encoded 0x40). */
#define BASE 0x400u

struct vec {
    int k_major, layout;
    uint64_t first;  /* descriptor of block (0,0) */
    uint32_t step_m; /* byte offset of block (1,0): next 64 MN rows */
    uint32_t step_k; /* byte offset of block (0,1): next 16 K */
    uint64_t second; /* printed descriptor of block (1,0) */
    uint64_t third;  /* printed descriptor of block (0,1) */
};

/* Values from seed 004; offsets read off its printed start addresses. */
static const struct vec vecs[] = {
    /* K-major, 128 x 64 half */
    {1, GEMMK_SWIZZLE_NONE, 0x0000000800800040ull, 0x400, 0x1000,
     0x0000000800800080ull, 0x0000000800800140ull},
    {1, GEMMK_SWIZZLE_32B, 0xc000001000010040ull, 0x800, 0x1000,
     0xc0000010000100c0ull, 0xc000001000010140ull},
    {1, GEMMK_SWIZZLE_64B, 0x8000002000010040ull, 0x1000, 0x20,
     0x8000002000010140ull, 0x8000002000010042ull},
    {1, GEMMK_SWIZZLE_128B, 0x4000004000010040ull, 0x2000, 0x20,
     0x4000004000010240ull, 0x4000004000010042ull},
    /* MN-major, 128 x 64 half */
    {0, GEMMK_SWIZZLE_NONE, 0x0000000800800040ull, 0x400, 0x1000,
     0x0000000800800080ull, 0x0000000800800140ull},
    {0, GEMMK_SWIZZLE_32B, 0xc000008000100040ull, 0x400, 0x1000,
     0xc000008000100080ull, 0xc000008000100140ull},
    {0, GEMMK_SWIZZLE_64B, 0x8000008000200040ull, 0x400, 0x1000,
     0x8000008000200080ull, 0x8000008000200140ull},
    {0, GEMMK_SWIZZLE_128B, 0x4000008000000040ull, 0x400, 0x1000,
     0x4000008000000080ull, 0x4000008000000140ull},
};

Test(smem_desc, seed004_vectors)
{
    for (size_t i = 0; i < sizeof(vecs) / sizeof(vecs[0]); i++) {
        const struct vec *v = &vecs[i];
        uint32_t lbo, sbo;
        gemmk_desc_offsets(v->k_major, v->layout, 128, 64, &lbo, &sbo);
        uint64_t d = gemmk_desc_encode(BASE, lbo, sbo, v->layout);
        cr_expect_eq(d, v->first, "case %zu: got %#llx want %#llx", i,
                     (unsigned long long)d, (unsigned long long)v->first);
        uint64_t d2 = gemmk_desc_encode(BASE + v->step_m, lbo, sbo, v->layout);
        cr_expect_eq(d2, v->second, "case %zu (next MN block): got %#llx", i,
                     (unsigned long long)d2);
        uint64_t d3 = gemmk_desc_encode(BASE + v->step_k, lbo, sbo, v->layout);
        cr_expect_eq(d3, v->third, "case %zu (next K block): got %#llx", i,
                     (unsigned long long)d3);
    }
}

Test(smem_desc, fields)
{
    uint64_t d =
        gemmk_desc_encode(0x3FFF0, 0x3FFF0, 0x3FFF0, GEMMK_SWIZZLE_128B);
    cr_expect_eq(d & 0x3FFF, 0x3FFF);
    cr_expect_eq((d >> 16) & 0x3FFF, 0x3FFF);
    cr_expect_eq((d >> 32) & 0x3FFF, 0x3FFF);
    cr_expect_eq(d >> 62, 1);
    cr_expect_eq((d >> 14) & 3, 0, "reserved bits stay clear");
    cr_expect_eq((d >> 49) & 7, 0, "base offset 0 for 1024-aligned tiles");
}

/* The constants gemm_sm90.cuh uses: K-major SW128 (LBO 16, SBO 1024) is
 * CUTLASS's; MN-major SW128 with 64-wide slabs of BK=64 rows (LBO = 8 KiB
 * between slabs, SBO = 1024 between 8-row K groups) matches
 * gemmk_desc_offsets for a slab-major tile of 64 x 64. */
Test(smem_desc, kernel_layouts)
{
    uint32_t lbo, sbo;
    gemmk_desc_offsets(1, GEMMK_SWIZZLE_128B, 128, 64, &lbo, &sbo);
    cr_expect_eq(lbo, 16);
    cr_expect_eq(sbo, 1024);
    gemmk_desc_offsets(0, GEMMK_SWIZZLE_128B, 64, 64, &lbo, &sbo);
    cr_expect_eq(sbo, 1024, "one 64-wide slab: 8 K rows of 128 B");
    cr_expect_eq(lbo, 0, "m64 fits one slab: LBO unused");
    gemmk_desc_offsets(0, GEMMK_SWIZZLE_128B, 64, 256, &lbo, &sbo);
    cr_expect_eq(lbo, 1024, "N=256 spans slabs: atom stride of a packed tile");
}
