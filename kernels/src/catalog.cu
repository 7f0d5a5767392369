/*
 * catalog.cu: the kernel catalog, one table with one row per kernel in
 * listing order ("auto", the ladder by rung, the production kernels, the
 * wide kernels, the reference), the listing clients see (rows of types
 * the client API lacks left out), lookup by name and gemmk_check. To add
 * a kernel, add its row here: its descriptor, the path that runs it, and
 * the tiling and launch (or rung, or variant) the path uses.
 */
#include <string.h>

#include "catalog.h"
#include "ladder/ladder.h"
#include "launch.h"

namespace gemmk
{
namespace
{

constexpr unsigned kAB16 = (1u << GEMM_BF16) | (1u << GEMM_FP16);
constexpr unsigned kAB32 = 1u << GEMM_FP32;
constexpr unsigned kCDAll =
    (1u << GEMM_BF16) | (1u << GEMM_FP16) | (1u << GEMM_FP32);
constexpr unsigned kWide = GEMMK_WIDE_TYPES;
constexpr unsigned kF64 = 1u << GEMM_FP64;
constexpr unsigned kZ128 = 1u << GEMM_COMPLEX128;
constexpr unsigned kZC = kZ128 | 1u << GEMM_COMPLEX64;
constexpr unsigned kS8 = 1u << GEMMK_TYPE_S8;
constexpr unsigned kS32 = 1u << GEMMK_TYPE_S32;
constexpr unsigned kPrecTF32 = 1u << GEMM_PRECISION_TF32;
constexpr unsigned kPrecFP32 = 1u << GEMM_PRECISION_FP32;
/* true fp32 FMA on the CUDA cores: what DEFAULT and FP32 ask for */
constexpr unsigned kPrecFma = (1u << GEMM_PRECISION_DEFAULT) | kPrecFP32;
constexpr unsigned kT = GEMMK_TRANS_ALL;

cudaError_t launch_n256e2(const Launch &l)
{
    return launch_n256e(l, 2);
}
cudaError_t launch_n256e4(const Launch &l)
{
    return launch_n256e(l, 4);
}

/* Rows: {name, rung, reference, summary, ab, cd, precisions, transposes},
 * flags, path, tiling {bn, cluster, split, pp, epi, sk}, launch, rung launch,
 * variant. */
const Row kRows[] = {
    {{"auto", 0, 0,
      "picks a kernel by shape, type and precision (fp64 and complex128: "
      "cuBLAS or Ozaki-II by the calibrated cost model; complex64: cuBLAS; "
      "int8: pp-s8)",
      kAB16 | kAB32 | kWide | kS8, kCDAll | kWide | kS32, kPrecTF32 | kPrecFP32,
      kT},
     ROW_AUTO | ROW_CONJ,
     run_auto,
     {0, 0, 0, 0, 0, 0},
     nullptr,
     nullptr,
     0},

    /* the teaching ladder, rung by rung */
    {{"naive", 1, 0, "one thread per output, dot product from global memory",
      kAB16 | kAB32, kCDAll, kPrecFma, kT},
     0,
     run_ladder,
     {},
     nullptr,
     ladder::run_naive,
     0},
    {{"smem-tiled", 2, 0, "32x32 tiles of A and B staged in shared memory",
      kAB16 | kAB32, kCDAll, kPrecFma, kT},
     ROW_MAPPED,
     run_ladder,
     {},
     nullptr,
     ladder::run_smem_tiled,
     0},
    {{"reg-tiled-2d", 3, 0,
      "64x64 smem tiles, each thread an 8x8 block of C in registers",
      kAB16 | kAB32, kCDAll, kPrecFma, kT},
     0,
     run_ladder,
     {},
     nullptr,
     ladder::run_reg_tiled_2d,
     0},
    {{"warp-tiled", 4, 0,
      "128x128 blocks, 64x64 warp tiles, 8x4 thread tiles (seed 000 v1)",
      kAB16 | kAB32, kCDAll, kPrecFma, kT},
     0,
     run_ladder,
     {},
     nullptr,
     ladder::run_warp_tiled,
     0},
    {{"wgmma-basic", 5, 0,
      "TMA + one warpgroup wgmma m64n64k16, 64x64x64 blocks, no pipeline",
      kAB16, kCDAll, 0, kT},
     0,
     run_ladder,
     {},
     nullptr,
     ladder::run_wgmma_basic,
     0},
    {{"wgmma-ws-tf32", 6, 0,
      "seed 001 made right: TMA producer warp + one wgmma tf32 warpgroup, "
      "3-stage mbarrier ring, 64x128x32 tiles (MN-major operands "
      "transposed by a pre-pass)",
      kAB32, kCDAll, kPrecTF32, kT},
     0,
     run_fp32,
     {0, 1, 0, 0, 0, 0},
     nullptr,
     nullptr,
     F32_RUNG6},

    /* production: 16-bit inputs, planned by shape (plan.cu) */
    {{"ws128x256", 0, 0,
      "warp-specialized TMA+WGMMA, 128x256 tiles, persistent", kAB16, kCDAll, 0,
      kT},
     ROW_TILED,
     run_tiled16,
     {256, 1, 1, 0, 0, 0},
     launch_n256,
     nullptr,
     0},
    {{"ws128x256e", 0, 0,
      "128x256 tiles with a TMA-store epilogue (stmatrix to swizzled smem, "
      "bulk tensor store under the next tile), 4 stages",
      kAB16, kCDAll, 0, kT},
     ROW_TILED,
     run_tiled16,
     {256, 1, 1, 0, 2, 0},
     launch_n256e2,
     nullptr,
     0},
    {{"ws128x256sk", 0, 0,
      "ws128x256e with a stream-K tail: the last partial wave's k-blocks "
      "spread evenly over every SM, partials summed in a fixed order",
      kAB16, kCDAll, 0, kT},
     ROW_TILED,
     run_tiled16,
     {256, 1, 1, 0, 2, 1},
     launch_n256e2,
     nullptr,
     0},
    {{"ws128x256e3", 0, 0,
      "128x256 tiles with a TMA-store epilogue, 64 KB output buffer, "
      "3 stages",
      kAB16, kCDAll, 0, kT},
     ROW_TILED,
     run_tiled16,
     {256, 1, 1, 0, 4, 0},
     launch_n256e4,
     nullptr,
     0},
    {{"ws128x192e", 0, 0,
      "128x192 tiles with a TMA-store epilogue (the whole 64 x 192 block of "
      "a consumer in one step), 4 stages: more tiles where 128 x 256 ones "
      "leave most of a wave idle",
      kAB16, kCDAll, 0, kT},
     ROW_TILED,
     run_tiled16,
     {192, 1, 1, 0, 3, 0},
     launch_n192e,
     nullptr,
     0},
    {{"ws128x192sk", 0, 0,
      "ws128x192e with a stream-K tail: the last partial wave's k-blocks "
      "spread evenly over every SM, partials summed in a fixed order",
      kAB16, kCDAll, 0, kT},
     ROW_TILED,
     run_tiled16,
     {192, 1, 1, 0, 3, 1},
     launch_n192e,
     nullptr,
     0},
    {{"ws128x128", 0, 0,
      "warp-specialized TMA+WGMMA, 128x128 tiles, persistent", kAB16, kCDAll, 0,
      kT},
     ROW_TILED,
     run_tiled16,
     {128, 1, 1, 0, 0, 0},
     launch_n128,
     nullptr,
     0},
    {{"ws128x64", 0, 0,
      "warp-specialized TMA+WGMMA, 128x64 tiles (skinny shapes)", kAB16, kCDAll,
      0, kT},
     ROW_TILED,
     run_tiled16,
     {64, 1, 1, 0, 0, 0},
     launch_n64,
     nullptr,
     0},
    {{"ws-swap", 0, 0,
      "decode shapes (M <= 128): D^T = B^T A^T, so N runs on 128-row tiles "
      "and M on wgmma's N (64 or 128), K split; the reduction writes D "
      "transposed (deterministic)",
      kAB16, kCDAll, 0, kT},
     0,
     run_swapped,
     {0, 1, -1, 0, 0, 0},
     nullptr,
     nullptr,
     0},
    {{"ws-decode", 0, 0,
      "decode shapes (M <= 128, A untransposed): D^T = B^T A^T on 64-row "
      "tiles, M rounded up to 8 on wgmma's N (8 to 128), one read of B, "
      "no K split; 128-row tiles, a consumer warpgroup on each 64, where "
      "M <= 64 and the 64-row tiles would be more than two an SM (256-row "
      "tiles, a consumer on each 128, there when B is row-major)",
      kAB16, kCDAll, 0, 0x5u},
     0,
     run_decode,
     {0, 1, 1, 0, 0, 0},
     nullptr,
     nullptr,
     0},
    {{"ws-decode-single", 0, 0,
      "ws-decode on 64-row tiles with one consumer always (for "
      "measurements)",
      kAB16, kCDAll, 0, 0x5u},
     0,
     run_decode,
     {0, 1, 1, 0, 0, 0},
     nullptr,
     nullptr,
     1},
    {{"ws-decode-pair", 0, 0,
      "ws-decode on 128-row tiles, a consumer warpgroup on each 64, always "
      "where M <= 64, else as ws-decode-single (for measurements)",
      kAB16, kCDAll, 0, 0x5u},
     0,
     run_decode,
     {0, 1, 1, 0, 0, 0},
     nullptr,
     nullptr,
     2},
    {{"ws-decode-quad", 0, 0,
      "ws-decode on 256-row tiles, a consumer warpgroup on each 128 (two "
      "wgmmas a k-step), always where M <= 64, else as ws-decode-single "
      "(for measurements)",
      kAB16, kCDAll, 0, 0x5u},
     0,
     run_decode,
     {0, 1, 1, 0, 0, 0},
     nullptr,
     nullptr,
     3},
    {{"grouped128x128", 0, 0,
      "persistent grouped kernel: the 128x128 tiles of many problems in one "
      "launch (gemmk_gemm_grouped; here one problem)",
      kAB16, kCDAll, 0, kT},
     0,
     run_grouped,
     {128, 1, 1, 0, 0, 0},
     nullptr,
     nullptr,
     0},
    {{"grouped128x256", 0, 0,
      "persistent grouped kernel, 128x256 tiles (gemmk_gemm_grouped picks "
      "it for wide problems; here one problem)",
      kAB16, kCDAll, 0, kT},
     0,
     run_grouped,
     {256, 1, 1, 0, 0, 0},
     nullptr,
     nullptr,
     0},
    {{"pp128x128", 0, 0, "ping-pong consumers, 128x128 tile per warpgroup",
      kAB16, kCDAll, 0, kT},
     ROW_TILED,
     run_tiled16,
     {128, 1, 1, 1, 0, 0},
     launch_pp128,
     nullptr,
     0},
    {{"ws128x256c2", 0, 0, "128x256 tiles, 2-CTA clusters with B multicast",
      kAB16, kCDAll, 0, kT},
     ROW_TILED,
     run_tiled16,
     {256, 2, 1, 0, 0, 0},
     launch_n256c2,
     nullptr,
     0},
    {{"ws128x256_splitk", 0, 0, "128x256 tiles, split-K (fp32 workspace)",
      kAB16, kCDAll, 0, kT},
     ROW_TILED,
     run_tiled16,
     {256, 1, -1, 0, 0, 0},
     launch_n256,
     nullptr,
     0},
    {{"ws128x128_splitk", 0, 0, "128x128 tiles, split-K (fp32 workspace)",
      kAB16, kCDAll, 0, kT},
     ROW_TILED,
     run_tiled16,
     {128, 1, -1, 0, 0, 0},
     launch_n128,
     nullptr,
     0},
    {{"ws128x256c2_splitk", 0, 0,
      "128x256 tiles, 2-CTA clusters, split-K (fp32 workspace)", kAB16, kCDAll,
      0, kT},
     ROW_TILED,
     run_tiled16,
     {256, 2, -1, 0, 0, 0},
     launch_n256c2,
     nullptr,
     0},

    /* production: fp32 inputs on the tf32 tensor cores */
    {{"ws-tf32", 0, 0,
      "fp32 as tf32 (rounded to nearest, as cuBLAS): warp-specialized "
      "TMA+WGMMA 128xBN, 128x256 tiles stored by TMA under the next tile "
      "with a stream-K tail where it pays; where a pre-pass would weigh, a "
      "column-major A read into registers and NN run as D^T stored "
      "transposed, else MN-major operands transposed by a pre-pass",
      kAB32, kCDAll, kPrecTF32, kT},
     0,
     run_fp32,
     {0, 1, 0, 0, 2, 0},
     nullptr,
     nullptr,
     F32_TF32},
    {{"ws-tf32r", 0, 0,
      "ws-tf32 with every tile stored from registers (no TMA-store "
      "epilogue, no stream-K tail)",
      kAB32, kCDAll, kPrecTF32, kT},
     0,
     run_fp32,
     {0, 1, 0, 0, 0, 0},
     nullptr,
     nullptr,
     F32_TF32},
    {{"ws-tf32e3", 0, 0,
      "ws-tf32 with a 64 KB output buffer (a consumer's block in two "
      "steps), 3 stages, no stream-K tail",
      kAB32, kCDAll, kPrecTF32, kT},
     0,
     run_fp32,
     {0, 1, 0, 0, 4, 0},
     nullptr,
     nullptr,
     F32_TF32},
    {{"ws-tf32sk", 0, 0,
      "ws-tf32 with a stream-K tail always: the last waves' k-blocks spread "
      "evenly over every SM, partials summed in a fixed order",
      kAB32, kCDAll, kPrecTF32, kT},
     0,
     run_fp32,
     {0, 1, 0, 0, 2, 1},
     nullptr,
     nullptr,
     F32_TF32},
    {{"ws-decode-tf32", 0, 0,
      "fp32 as tf32 (rounded, as cuBLAS) on decode shapes (M <= 128, A "
      "untransposed): D^T = B^T A^T on 64-row tiles, one read of B, B^T "
      "read into wgmma's A registers (or transposed in shared memory)",
      kAB32, kCDAll, kPrecTF32, 0x5u},
     0,
     run_fp32,
     {0, 1, 0, 0, 0, 0},
     nullptr,
     nullptr,
     F32_DECODE},
    {{"ws-decode-3xtf32", 0, 0,
      "fp32 accuracy, 3xTF32, on decode shapes (M <= 128, A untransposed): "
      "D^T = B^T A^T, one read of B, B split into tf32 big+small in "
      "registers, A's parts from a pre-pass, sums promoted to fp32",
      kAB32, kCDAll, kPrecFP32, 0x5u},
     0,
     run_fp32,
     {0, 1, 0, 0, 0, 0},
     nullptr,
     nullptr,
     F32_DECODE_X3},
    {{"ws-3xtf32", 0, 0,
      "fp32 accuracy, 3xTF32: pre-pass splits A, B into tf32 big+small, "
      "then one tf32 GEMM over 3K",
      kAB32, kCDAll, kPrecFP32, kT},
     0,
     run_fp32,
     {0, 1, 0, 0, 0, 0},
     nullptr,
     nullptr,
     F32_3X},
    {{"oz2-f32", 0, 0,
      "fp32 accuracy as Ozaki-II on the int8 tensor cores: fp32 A and B "
      "scaled to integers, ~7 int8 products mod p, exact CRT; fp32 C/D; "
      "3xTF32 where the inputs do not allow it",
      kAB32, 1u << GEMM_FP32, kPrecFP32, kT},
     0,
     run_fp32,
     {0, 1, 0, 0, 0, 0},
     nullptr,
     nullptr,
     F32_OZ},

    /* int8 A/B, int32 C/D (gemmk_gemm, or gemmk_gemm_s8 by name) */
    {{"ws-s8", 0, 0,
      "int8 x int8 -> int32, warp-specialized TMA+WGMMA k32 (pp-s8 by "
      "default); K-major operands in place, others transposed first "
      "(gemmk_gemm_s8)",
      kS8, kS32, 0, kT},
     0,
     run_s8,
     {},
     nullptr,
     nullptr,
     0},
    {{"pp-s8", 0, 0,
      "int8 ping-pong: a 128x128 tile per consumer warpgroup, one's "
      "epilogue under the other's main loop (gemmk_gemm_s8)",
      kS8, kS32, 0, kT},
     0,
     run_s8,
     {},
     nullptr,
     nullptr,
     2},
    {{"ws-s8x256", 0, 0,
      "int8 cooperative 128x256 tiles, two consumer warpgroups "
      "(gemmk_gemm_s8)",
      kS8, kS32, 0, kT},
     0,
     run_s8,
     {},
     nullptr,
     nullptr,
     3},
    {{"ws-s8x128", 0, 0, "int8 cooperative 128x128 tiles (gemmk_gemm_s8)", kS8,
      kS32, 0, kT},
     0,
     run_s8,
     {},
     nullptr,
     nullptr,
     1},

    /* fp64 (gemmk_gemm_f64, or gemmk_gemm by name) */
    {{"oz2-bytes", 0, 0,
      "fp64 as Ozaki-II (the default emulation): one int8 ping-pong GEMM "
      "per modulus keeping each product mod p as a byte, then a CRT "
      "reconstruction pass",
      kF64, kF64, 0, kT},
     0,
     run_f64,
     {},
     nullptr,
     nullptr,
     F64_BYTES},
    {{"oz2-unfused", 0, 0,
      "fp64 as Ozaki-II, one int8 GEMM per modulus with int32 products "
      "through memory (GEMMul8's structure)",
      kF64, kF64, 0, kT},
     0,
     run_f64,
     {},
     nullptr,
     nullptr,
     F64_UNFUSED},
    {{"oz2-complex", 0, 0,
      "complex128 (complex64) as one real Ozaki-II product of the real and "
      "imaginary parts stacked (the four real products; residues made "
      "once), on the fp64 (fp32) emulation",
      kZC, kZC, 0, kT},
     ROW_CONJ,
     run_zemul,
     {},
     nullptr,
     nullptr,
     0},
    {{"cublas-dgemm", 0, 0, "cuBLASLt DGEMM, the fp64 emulation's fallback",
      kF64, kF64, 0, kT},
     0,
     run_f64,
     {},
     nullptr,
     nullptr,
     F64_NATIVE},
    /* the emulation's scaling and residues alone (measurements) */
    {{"oz2-prep", 0, 0, "Ozaki-II preparation only (measurements)", kF64, kF64,
      0, kT},
     ROW_HIDDEN,
     nullptr,
     {},
     nullptr,
     nullptr,
     F64_PREP},

    /* the reference */
    {{"cublas", 0, 1,
      "cuBLASLt (heuristic's first algorithm), the reference; cuBLAS "
      "{D,C,Z}GEMM for the wide types (batched in a batch)",
      kAB16 | kAB32 | kWide, kCDAll | kWide, kPrecFma | kPrecTF32, kT},
     ROW_CONJ,
     run_reference,
     {},
     nullptr,
     nullptr,
     0},
};
constexpr int kNumRows = sizeof(kRows) / sizeof(kRows[0]);

/* The listing: rows not hidden, in table order (thread-safe static
 * init). */
struct Listing {
    const gemmk_kernel_desc *e[kNumRows];
    int n;
    Listing() : e(), n(0)
    {
        for (int i = 0; i < kNumRows; i++)
            if (!(kRows[i].flags & ROW_HIDDEN))
                e[n++] = &kRows[i].d;
    }
};

const Listing &listing()
{
    static const Listing l;
    return l;
}

bool is_wide(int t)
{
    return t >= 1 && t < 32 && (kWide & (1u << t)) != 0;
}

} // namespace

const Row *row_find(const char *name)
{
    if (!name)
        return nullptr;
    for (int i = 0; i < kNumRows; i++)
        if (strcmp(kRows[i].d.name, name) == 0)
            return &kRows[i];
    return nullptr;
}

const Row &row_auto()
{
    return kRows[0];
}

const Row *row_mapped()
{
    for (int i = 0; i < kNumRows; i++)
        if (kRows[i].flags & ROW_MAPPED)
            return &kRows[i];
    return nullptr;
}

const Row *row_s8(int v)
{
    for (int i = 0; i < kNumRows; i++)
        if (kRows[i].d.ab_types == kS8 && kRows[i].variant == v)
            return &kRows[i];
    return nullptr;
}

const Row &row_reference()
{
    return kRows[kNumRows - 1];
}

const Row *row_tiled(int bn, int cluster, bool split, int pp, int epi, int sk)
{
    for (int i = 0; i < kNumRows; i++) {
        const Row &r = kRows[i];
        if (!(r.flags & ROW_TILED))
            continue;
        if (r.tiling.pp != pp || r.tiling.epi != epi || r.tiling.sk != sk)
            continue;
        if (pp || epi) /* one row each: its tiling is the plan's */
            return &r;
        if (r.tiling.bn == bn && r.tiling.cluster == cluster &&
            (bn == 64 || (r.tiling.split == -1) == split))
            return &r;
    }
    return nullptr;
}

/* Static reasons only: the caller knows the kernel's name. A non-default
 * precision for other than fp32 inputs is a malformed request
 * (GEMM_ERR_INVALID), as gemmk_gemm's validation says too; everything
 * else a kernel cannot serve is GEMM_ERR_UNSUPPORTED. */
gemm_error row_check(const Row *r, const gemmk_problem *p, const char **why)
{
    if (!p) {
        *why = "no problem given";
        return GEMM_ERR_INVALID;
    }
    if (!r) {
        *why = "unknown kernel";
        return GEMM_ERR_UNSUPPORTED;
    }
    const gemmk_kernel_desc *d = &r->d;
    if (p->ab_type < GEMM_BF16 || p->ab_type > GEMM_INT32 ||
        p->cd_type < GEMM_BF16 || p->cd_type > GEMM_INT32) {
        *why = "unknown element type";
        return GEMM_ERR_DTYPE;
    }
    if ((p->ab_type == GEMM_INT8) != (p->cd_type == GEMM_INT32) ||
        p->ab_type == GEMM_INT32 || p->cd_type == GEMM_INT8) {
        *why = "int8 inputs need int32 C and D, and int32 C and D int8 "
               "inputs";
        return GEMM_ERR_DTYPE;
    }
    if (is_wide(p->ab_type) != is_wide(p->cd_type) ||
        (is_wide(p->ab_type) && p->ab_type != p->cd_type)) {
        *why = "fp64 and complex inputs need C and D of their own type";
        return GEMM_ERR_DTYPE;
    }
    if (p->precision != GEMM_PRECISION_DEFAULT && p->ab_type != GEMM_FP32) {
        *why = "a precision applies to fp32 inputs only (other inputs "
               "take the default)";
        return GEMM_ERR_INVALID;
    }
    if (p->precision < GEMM_PRECISION_DEFAULT ||
        p->precision > GEMM_PRECISION_FP32) {
        *why = "unknown precision";
        return GEMM_ERR_INVALID;
    }
    if (p->moduli != 0 && p->ab_type != GEMM_FP64 && p->ab_type != GEMM_FP32) {
        *why = "moduli (the Ozaki-II modulus count) applies to fp64 and fp32 "
               "inputs only: leave it 0";
        return GEMM_ERR_INVALID;
    }
    if (p->moduli != 0 && p->ab_type == GEMM_FP32 &&
        (p->cd_type != GEMM_FP32 || p->precision == GEMM_PRECISION_TF32)) {
        *why = "moduli on fp32 inputs needs fp32 C and D at fp32 precision "
               "(the Ozaki-II emulation, oz2-f32)";
        return GEMM_ERR_INVALID;
    }
    if (p->moduli != 0 &&
        (p->moduli < GEMM_OZ_MODULI_MIN || p->moduli > GEMM_OZ_MODULI_MAX)) {
        *why = "moduli must be 0 (automatic) or 2..20";
        return GEMM_ERR_INVALID;
    }
    if (p->moduli != 0 && !(r->flags & ROW_AUTO) &&
        !(r->d.ab_types == kF64 && r->variant != F64_NATIVE &&
          r->variant != F64_PREP) &&
        !(r->run == run_fp32 && r->variant == F32_OZ)) {
        *why = "moduli needs \"auto\" or an Ozaki-II kernel (oz2-bytes, "
               "oz2-unfused, oz2-f32): this kernel does not emulate";
        return GEMM_ERR_UNSUPPORTED;
    }
    if ((p->conj_a || p->conj_b) && p->ab_type != GEMM_COMPLEX64 &&
        p->ab_type != GEMM_COMPLEX128) {
        *why = "conjugation applies to complex inputs only";
        return GEMM_ERR_INVALID;
    }
    if (!(d->ab_types & (1u << p->ab_type))) {
        *why = d->ab_types == kAB16 ? "the kernel serves bf16/fp16 inputs only"
               : d->ab_types == kAB32 ? "the kernel serves fp32 inputs only"
               : d->ab_types == kF64  ? "the kernel serves fp64 inputs only"
               : d->ab_types == kS8   ? "the kernel serves int8 inputs only"
                                      : "the kernel does not serve this input "
                                        "type";
        return GEMM_ERR_UNSUPPORTED;
    }
    if (!(d->cd_types & (1u << p->cd_type))) {
        *why = "the kernel does not serve this output type";
        return GEMM_ERR_UNSUPPORTED;
    }
    if (p->ab_type == GEMM_FP32) {
        gemm_precision pr = p->precision == GEMM_PRECISION_DEFAULT
                                ? GEMM_PRECISION_FP32
                                : p->precision;
        if (!(d->precisions & (1u << pr))) {
            *why = pr == GEMM_PRECISION_FP32
                       ? "the kernel does not serve fp32 precision (ask for "
                         "tf32, or name another kernel)"
                       : "the kernel does not serve tf32 precision";
            return GEMM_ERR_UNSUPPORTED;
        }
    }
    unsigned t = (unsigned)(p->trans_a != 0) | (unsigned)(p->trans_b != 0) << 1;
    if (!(d->transposes & (1u << t))) {
        *why = "the kernel does not serve this transpose combination";
        return GEMM_ERR_UNSUPPORTED;
    }
    if ((p->conj_a || p->conj_b) && !(r->flags & ROW_CONJ)) {
        *why = "the kernel does not serve conjugate transposes";
        return GEMM_ERR_UNSUPPORTED;
    }
    if (!r->run) {
        *why = "the kernel has its own entry point";
        return GEMM_ERR_UNSUPPORTED;
    }
    return GEMM_OK;
}

} // namespace gemmk

using namespace gemmk;

extern "C" {

int gemmk_catalog_size(void)
{
    return listing().n;
}

const gemmk_kernel_desc *gemmk_catalog_entry(int i)
{
    const Listing &l = listing();
    return i >= 0 && i < l.n ? l.e[i] : nullptr;
}

const gemmk_kernel_desc *gemmk_catalog_find(const char *name)
{
    const Row *r = row_find(name);
    return r && !(r->flags & ROW_HIDDEN) ? &r->d : nullptr;
}

int gemmk_is_auto(const char *name)
{
    return !name || strcmp(name, row_auto().d.name) == 0;
}

gemm_error gemmk_check(const char *name, const gemmk_problem *p,
                       const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    *why = nullptr;
    const Row *r = row_find(name ? name : row_auto().d.name);
    if (r && (r->flags & ROW_HIDDEN))
        r = nullptr;
    return row_check(r, p, why);
}

} /* extern "C" */
