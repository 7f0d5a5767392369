/*
 * oz_passes.cuh: the Ozaki-II emulation's device passes, for ozaki.cu
 * (which has the scheme step by step): the statistics of op(A)'s rows and
 * op(B)'s columns, the split into int8 residues, and the reconstruction
 * of D from the modular products (residue bytes in row or fragment order,
 * or int32), each over fp32 or fp64 inputs and outputs; ozaki.h has the
 * arithmetic they share with the CPU tests.
 */
#ifndef GEMMK_OZ_PASSES_CUH
#define GEMMK_OZ_PASSES_CUH

#include <cuda_runtime_api.h>
#include <limits.h>
#include <stdint.h>

#include "ozaki.h"

namespace gemmk
{
namespace
{

struct RowPart {    /* one row's statistics over part of K */
    int emax;       /* largest exponent (ilogb) of a nonzero */
    int nnz;        /* finite nonzeros */
    unsigned flags; /* GEMMK_OZ_NONFINITE | GEMMK_OZ_DENORMAL */
    int pad;
    double ssq;  /* sum of (a 2^-emax)^2 */
    double esum; /* sum of the nonzeros' exponents */
};

struct DevStats { /* one operand, over all rows (atomics) */
    unsigned flags;
    int spread256; /* max over rows of the spread, times 256, rounded up */
    int nonzero;   /* rows with a nonzero */
    int pad;
};

struct ModConsts {
    int n;
    gemmk_oz_mod mod[GEMMK_OZ_MAX];
};

struct ReconConsts {
    int n;
    int ebias;
    double pinv;
    uint32_t pw[GEMMK_OZ_NW];
    uint32_t w[GEMMK_OZ_MAX][GEMMK_OZ_NW];
};

/* Folds 16 elements of T (widened to double) into a: the exponents,
 * counts and flags first (a subnormal of T, exponent below EMIN, sets
 * GEMMK_OZ_DENORMAL; inf/NaN set GEMMK_OZ_NONFINITE and count as zero),
 * then one rescale of the running sum of squares to the largest exponent
 * and the squares scaled by one power of two. */
template <int EMIN>
__device__ __forceinline__ void part_add16(RowPart &a, double (&v)[16])
{
    int emx = INT_MIN, cnt = 0;
    double es = 0;
#pragma unroll
    for (int j = 0; j < 16; j++) {
        const double x = v[j];
        const unsigned long long u =
            (unsigned long long)__double_as_longlong(x);
        const int ex = (int)((u >> 52) & 0x7ff);
        if (x == 0.0)
            continue;
        if (ex == 0x7ff) {
            a.flags |= GEMMK_OZ_NONFINITE;
            v[j] = 0.0;
            continue;
        }
        int e;
        if (ex == 0) {
            a.flags |= GEMMK_OZ_DENORMAL;
            e = ilogb(x);
        } else {
            e = ex - 1023;
            if (e < EMIN)
                a.flags |= GEMMK_OZ_DENORMAL;
        }
        emx = e > emx ? e : emx;
        cnt++;
        es += e;
    }
    if (cnt == 0)
        return;
    if (a.nnz == 0 || emx > a.emax) {
        a.ssq = a.nnz ? gemmk_oz_ldexp(a.ssq, 2 * (a.emax - emx)) : 0.0;
        a.emax = emx;
    }
    a.nnz += cnt;
    a.esum += es;
    const int sh = -a.emax;
    if (sh >= -1022 && sh <= 1023) {
        const double sc = gemmk_oz_pow2(sh);
#pragma unroll
        for (int j = 0; j < 16; j++) {
            const double w = v[j] * sc;
            a.ssq = fma(w, w, a.ssq);
        }
    } else {
        for (int j = 0; j < 16; j++) {
            const double w = scalbn(v[j], sh);
            a.ssq = fma(w, w, a.ssq);
        }
    }
}

__device__ __forceinline__ RowPart part_merge(RowPart a, const RowPart &b)
{
    a.flags |= b.flags;
    if (b.nnz == 0)
        return a;
    if (a.nnz == 0) {
        RowPart r = b;
        r.flags = a.flags;
        return r;
    }
    const int e = a.emax > b.emax ? a.emax : b.emax;
    a.ssq = gemmk_oz_ldexp(a.ssq, 2 * (a.emax - e)) +
            gemmk_oz_ldexp(b.ssq, 2 * (b.emax - e));
    a.emax = e;
    a.nnz += b.nnz;
    a.esum += b.esum;
    return a;
}

/* A tile of TR rows x TK of K of op(X) into t (zeros outside). Column h
 * is stored at 20 (h / 16) + h % 16 and rows are TROW doubles apart (TROW
 * = 1 mod 16): both loaders hit distinct banks. MN: X is stored K x rows
 * (ld), else rows x K. 32 x 128: a K-major row reads 1 KB, an MN one 256
 * bytes, and the split pass writes whole 128-byte lines of every
 * residue plane. */
constexpr int TR = 32, TK = 128, TROW = 161;
__device__ __forceinline__ int tcol(int h)
{
    return 20 * (h >> 4) + (h & 15);
}

/* One element into the tile: a double by cp.async (8 bytes, no register
 * on the way, so a whole tile is in flight at once); a float is widened,
 * so its load completes here. */
__device__ __forceinline__ void tile_put(double *s, const double *g)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(
                     (unsigned)__cvta_generic_to_shared(s)),
                 "l"(g)
                 : "memory");
}

__device__ __forceinline__ void tile_put(double *s, const float *g)
{
    *s = (double)*g;
}

template <bool MN, typename T>
__device__ __forceinline__ void
load_tile(double (*t)[TROW], const T *x, long long ld, long long rows,
          long long k, long long r0, long long h0)
{
    /* element threadIdx.x + 256 i: MN, tile column b0 + 8 i of row a0;
     * else row a0 + 2 i, column b0. One pointer stepped by 8 or 2 rows of
     * X, the bounds against what is left of them, and the tile's offsets
     * known once i is. */
    constexpr int kIters = TR * TK / 256;
    const int a0 = MN ? threadIdx.x % TR : threadIdx.x / TK;
    const int b0 = MN ? threadIdx.x / TR : threadIdx.x % TK;
    const long long rleft = rows - (r0 + a0), hleft = k - (h0 + b0);
    const T *g =
        MN ? x + (h0 + b0) * ld + r0 + a0 : x + (r0 + a0) * ld + h0 + b0;
    const long long step = (MN ? 256 / TR : 256 / TK) * ld;
    double *s0 = &t[a0][MN ? b0 : tcol(b0)];
#pragma unroll
    for (int i = 0; i < kIters; i++, g += step) {
        /* MN: column b0 + 8 i sits at tcol = 20 (i / 2) + 8 (i % 2) + b0 */
        double *s = MN ? s0 + 20 * (i >> 1) + 8 * (i & 1) : s0 + 2 * i * TROW;
        const bool in =
            MN ? rleft > 0 && hleft > 8 * i : rleft > 2 * i && hleft > 0;
        if (in)
            tile_put(s, g);
        else
            *s = 0.0;
    }
}

/* Waits for this thread's cp.async copies of load_tile, then for the
 * block: the tile is whole. */
__device__ __forceinline__ void tile_landed()
{
    asm volatile("cp.async.wait_all;\n" ::: "memory");
    __syncthreads();
}

/* Thread (row tid / 8, chunk tid % 8) of a 32 x 128 tile: K offsets
 * 8 chunk + j and 64 + 8 chunk + j, j < 8 (the two halves). */
__device__ __forceinline__ int tile_h(int half, int chunk, int j)
{
    return 64 * half + 8 * chunk + j;
}

/* Where a thread's values lie in its row of the tile: value j of half h
 * at tile_vals(t, row, chunk)[80 h + j], that is tcol(tile_h(h, chunk,
 * j)) (8 chunk + j stays within one group of 16 columns), so a thread
 * computes one address and the rest are constant offsets. */
__device__ __forceinline__ const double *tile_vals(const double (*t)[TROW],
                                                   int row, int chunk)
{
    return &t[row][20 * (chunk >> 1) + 8 * (chunk & 1)];
}

/* The smallest normal exponent of T. */
template <typename T> constexpr int emin_of()
{
    return sizeof(T) == 4 ? -126 : -1022;
}

template <bool MN, typename T>
__global__ void __launch_bounds__(256)
    oz_stats_kernel(const T *__restrict__ x, long long ld, long long rows,
                    long long k, int tiles_per_block, RowPart *part)
{
    __shared__ double t[TR][TROW];
    const long long r0 = (long long)blockIdx.x * TR;
    const int rl = threadIdx.x >> 3, q = threadIdx.x & 7;
    RowPart a = {0, 0, 0u, 0, 0.0, 0.0};
    const long long ntiles = (k + TK - 1) / TK;
    const long long t0 = (long long)blockIdx.y * tiles_per_block;
    const long long t1 =
        t0 + tiles_per_block < ntiles ? t0 + tiles_per_block : ntiles;
    const double *tv = tile_vals(t, rl, q);
    for (long long ht = t0; ht < t1; ht++) {
        __syncthreads();
        load_tile<MN>(t, x, ld, rows, k, r0, ht * TK);
        tile_landed();
        double v[16];
#pragma unroll
        for (int j = 0; j < 16; j++)
            v[j] = tv[80 * (j >> 3) + (j & 7)];
        part_add16<emin_of<T>()>(a, v);
    }
#pragma unroll
    for (int o = 1; o < 8; o <<= 1) {
        RowPart b;
        b.emax = __shfl_xor_sync(0xffffffffu, a.emax, o);
        b.nnz = __shfl_xor_sync(0xffffffffu, a.nnz, o);
        b.flags = __shfl_xor_sync(0xffffffffu, a.flags, o);
        b.ssq = __shfl_xor_sync(0xffffffffu, a.ssq, o);
        b.esum = __shfl_xor_sync(0xffffffffu, a.esum, o);
        a = part_merge(a, b);
    }
    if (q == 0 && r0 + rl < rows)
        part[(long long)blockIdx.y * rows + r0 + rl] = a;
}

/* One thread per row: merges the partials, writes the row's packed scale
 * (gemmk_oz_rowscale; 0 for a zero row), folds the row into the operand's
 * DevStats. */
__global__ void __launch_bounds__(256)
    oz_rowfinal_kernel(const RowPart *part, int nparts, long long rows, int *E,
                       DevStats *g)
{
    const long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    RowPart a = {0, 0, 0u, 0, 0.0, 0.0};
    int e = 0, spread = 0;
    if (r < rows) {
        for (int i = 0; i < nparts; i++)
            a = part_merge(a, part[(long long)i * rows + r]);
        if (a.nnz > 0) {
            /* 2^E mu with mu 2^E > ||row||_2 (1 + 2^-20), packed */
            e = gemmk_oz_rowscale(a.ssq, a.emax);
            double sp = (double)a.emax - a.esum / a.nnz;
            spread = (int)ceil(sp * 256.0);
        }
        E[r] = e;
    }
    /* warp, then one atomic per warp */
    unsigned fl = a.flags;
    int nz = a.nnz > 0;
    for (int o = 16; o > 0; o >>= 1) {
        fl |= __shfl_xor_sync(0xffffffffu, fl, o);
        nz += __shfl_xor_sync(0xffffffffu, nz, o);
        int s2 = __shfl_xor_sync(0xffffffffu, spread, o);
        spread = s2 > spread ? s2 : spread;
    }
    if ((threadIdx.x & 31) == 0) {
        if (fl)
            atomicOr(&g->flags, fl);
        if (nz)
            atomicAdd(&g->nonzero, nz);
        atomicMax(&g->spread256, spread);
    }
}

/* Four residue words' low bytes as one word (byte j from w[j]). */
__device__ __forceinline__ uint32_t pack_low_bytes(uint32_t w0, uint32_t w1,
                                                   uint32_t w2, uint32_t w3)
{
    return __byte_perm(__byte_perm(w0, w1, 0x0040), __byte_perm(w2, w3, 0x0040),
                       0x5410);
}

/* The residue words of 8 values (low bytes) as 8 bytes at o. */
__device__ __forceinline__ void store_bytes8(uint8_t *o, const uint32_t (&b)[8])
{
    *reinterpret_cast<uint2 *>(o) =
        make_uint2(pack_low_bytes(b[0], b[1], b[2], b[3]),
                   pack_low_bytes(b[4], b[5], b[6], b[7]));
}

/* Residues of the rows of op(X) scaled by 2^(beta - E) mu (E[r] packed):
 * int8, plane l at out + l * plane, rows of kp bytes. NL == 0: each
 * integer as a signed 64-bit one (beta <= GEMMK_OZ_X64_MAX), its residues
 * on the fp64 and integer pipes (gemmk_oz_residue64); else NL limbs of
 * 13 bits (5 up to 2^65, 7 beyond) on the fp32 pipe. A thread takes 8
 * values of its row twice (fewer registers than 16 at once, so more
 * blocks hide the loads); each pass stores 8 bytes a modulus, a row's 8
 * threads 64 contiguous bytes. */
template <bool MN, int NL, typename T>
__global__ void __launch_bounds__(256)
    oz_split_kernel(const T *__restrict__ x, long long ld, long long rows,
                    long long k, long long kp, const int *__restrict__ E,
                    int beta, const __grid_constant__ ModConsts mc,
                    uint8_t *out, long long plane)
{
    __shared__ double t[TR][TROW];
    /* each modulus' constants where the residues read them as registers
     * (from the parameters they would be uniform ones, which the fp64
     * fma takes only after a move) */
    __shared__ double2 kd[GEMMK_OZ_MAX]; /* 2^32 mod p, 1/p */
    __shared__ uint2 kq[GEMMK_OZ_MAX];   /* p, 2^32 mod p */
    if (NL == 0 && threadIdx.x < mc.n) {
        const gemmk_oz_mod &md = mc.mod[threadIdx.x];
        kd[threadIdx.x] = make_double2(md.dc32, md.dinv);
        kq[threadIdx.x] = make_uint2(md.p, (uint32_t)md.c32);
    }
    const long long r0 = (long long)blockIdx.x * TR;
    const long long h0 = (long long)blockIdx.y * TK;
    load_tile<MN>(t, x, ld, rows, k, r0, h0);
    tile_landed();
    const int rl = threadIdx.x >> 3, q = threadIdx.x & 7;
    const long long r = r0 + rl;
    if (r >= rows)
        return;
    const int s = beta - gemmk_oz_rowscale_E(E[r]);
    const int mu = gemmk_oz_rowscale_j(E[r]);
    const double *tv = tile_vals(t, rl, q);
#pragma unroll 1
    for (int half = 0; half < 2; half++) {
        uint8_t *o = out + r * kp + h0 + tile_h(half, q, 0);
        uint32_t b[8];
        if (NL == 0) {
            int32_t xh[8];
            uint32_t xl[8];
            double xhd[8], xld[8];
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const int64_t v = gemmk_oz_scale64(tv[80 * half + j], s, mu);
                xh[j] = (int32_t)(v >> 32);
                xl[j] = (uint32_t)v;
                xhd[j] = (double)xh[j];
                xld[j] = (double)xl[j];
            }
            uint8_t *ol = o;
            for (int l = 0; l < mc.n; l++, ol += plane) {
                const double2 d = kd[l];
                const uint2 pc = kq[l];
#pragma unroll
                for (int j = 0; j < 8; j++)
                    b[j] = gemmk_oz_residue64(xh[j], xl[j], xhd[j], xld[j],
                                              pc.x, (int32_t)pc.y, d.x, d.y);
                store_bytes8(ol, b);
            }
        } else {
            float F[8][NL > 0 ? NL : 1];
#pragma unroll
            for (int j = 0; j < 8; j++)
                gemmk_oz_flimbs(tv[80 * half + j], s, mu, NL, F[j]);
            for (int l = 0; l < mc.n; l++) {
                const float p = mc.mod[l].fp, inv = mc.mod[l].finv;
#pragma unroll
                for (int j = 0; j < 8; j++)
                    b[j] =
                        gemmk_oz_fresidue_bits(F[j], NL, mc.mod[l].fc, p, inv);
                store_bytes8(o + (long long)l * plane, b);
            }
        }
    }
}

/* 1 / (j_i j_j) rounded, for the 64 pairs of row and column scales
 * (gemmk_oz_divisor_index): filled by every thread of a block before
 * anything returns. */
struct ReconRcp {
    double v[64];
};

__device__ __forceinline__ void rcp_fill(ReconRcp &t)
{
    if (threadIdx.x < 64)
        t.v[threadIdx.x] = 1.0 / gemmk_oz_divisor_at((int)threadIdx.x);
    __syncthreads();
}

/* alpha X + beta C in double, rounded once to T; NW limbs (ozaki.h). */
template <int NW, typename T>
__device__ __forceinline__ T finish(const uint64_t *sum, const ReconConsts &rc,
                                    const ReconRcp &rcp, int rs_i, int rs_j,
                                    double alpha, double beta, const T *c)
{
    double x = gemmk_oz_result_rd(sum, rc.pw, rc.pinv, rs_i, rs_j, rc.ebias, NW,
                                  rcp.v[gemmk_oz_divisor_index(rs_i, rs_j)]) *
               alpha;
    if (beta != 0.0)
        x = fma(beta, (double)*c, x);
    return (T)x;
}

/* Outputs a thread of a reconstruction pass holds: NW 64-bit columns
 * each (the kernels are instantiated for the column counts gemmk_oz_nw
 * gives: 2, 4 and GEMMK_OZ_NW). */
constexpr int kReconCols = 8;

/* The sums of kReconCols outputs from one modulus' residues, packed as
 * bytes in v (output j in byte j). */
template <int NW>
__device__ __forceinline__ void sadd_bytes(uint64_t (&sum)[kReconCols][NW],
                                           uint2 v, const uint32_t *w)
{
#pragma unroll
    for (int j = 0; j < kReconCols; j++)
        gemmk_oz_sadd_nw(sum[j], ((j < 4 ? v.x : v.y) >> (8 * (j & 3))) & 0xffu,
                         w, NW);
}

/* The sums of kReconCols outputs over every modulus, the residues 8
 * bytes a plane at R + l plane: the loads of kReconBatch planes go out
 * together before their sums (one at a time, a warp had 256 bytes in
 * flight and the pass waited on memory; 16 is every plane of sets up to
 * 16 moduli). */
constexpr int kReconBatch = 16;

template <int NW>
__device__ __forceinline__ void
sum_planes(uint64_t (&sum)[kReconCols][NW], const uint8_t *__restrict__ R,
           long long plane, const ReconConsts &rc)
{
    for (int l0 = 0; l0 < rc.n; l0 += kReconBatch) {
        uint2 v[kReconBatch];
#pragma unroll
        for (int b = 0; b < kReconBatch; b++)
            if (l0 + b < rc.n)
                v[b] = __ldg(reinterpret_cast<const uint2 *>(
                    R + (long long)(l0 + b) * plane));
#pragma unroll
        for (int b = 0; b < kReconBatch; b++)
            if (l0 + b < rc.n)
                sadd_bytes(sum, v[b], rc.w[l0 + b]);
    }
}

/* D from residue bytes R[l][i][j] (values in [0, p)), kReconCols columns
 * a thread. */
template <int NW, typename T>
__global__ void __launch_bounds__(256)
    oz_recon_bytes_kernel(const uint8_t *__restrict__ R, long long ldr,
                          long long plane,
                          const __grid_constant__ ReconConsts rc,
                          const int *__restrict__ ea,
                          const int *__restrict__ eb, double alpha, double beta,
                          const T *c, long long ldc, T *d, long long ldd,
                          long long m, long long n)
{
    __shared__ ReconRcp rcp;
    rcp_fill(rcp);
    const long long i = blockIdx.y;
    const long long j0 =
        ((long long)blockIdx.x * blockDim.x + threadIdx.x) * kReconCols;
    if (j0 >= n)
        return;
    uint64_t sum[kReconCols][NW] = {};
    sum_planes(sum, R + i * ldr + j0, plane, rc);
    const int ei = ea[i];
#pragma unroll
    for (int j = 0; j < kReconCols; j++) {
        const long long col = j0 + j;
        if (col < n)
            d[i * ldd + col] =
                finish<NW>(sum[j], rc, rcp, ei, eb[col], alpha, beta,
                           beta != 0.0 ? c + i * ldc + col : c);
    }
}

/* D from residue bytes in the ping-pong kernel's fragment order
 * (s8_pp_store, gemm_s8.cuh): block (tile, 8 groups of half x q); the
 * GEMM's thread g wrote 16 bytes per modulus, read here by threads 2g and
 * 2g + 1 (8 each). */
template <int NW, typename T>
__global__ void __launch_bounds__(256)
    oz_recon_frag_kernel(const uint8_t *__restrict__ R, long long plane,
                         int num_n, const __grid_constant__ ReconConsts rc,
                         const int *__restrict__ ea, const int *__restrict__ eb,
                         double alpha, double beta, const T *c, long long ldc,
                         T *d, long long ldd, long long m, long long n)
{
    __shared__ ReconRcp rcp;
    rcp_fill(rcp);
    const long long t = blockIdx.x;
    const int half = blockIdx.y >> 2, q = blockIdx.y & 3;
    const int g = threadIdx.x >> 1, part = threadIdx.x & 1;
    const int warp = g >> 5, lane = g & 31;
    const long long base =
        t * (128 * 128) + 8192 * half + 2048 * q + 16 * g + kReconCols * part;
    uint64_t sum[kReconCols][NW] = {};
    sum_planes(sum, R + base, plane, rc);
    /* output j is accumulator 16 q + 8 part + j = 4 jj + 2 h + e: row h
     * (j / 2 % 2), column 2 jj + e (j / 4, j % 2) of the thread's two
     * rows and four columns, whose scales are loaded once */
    const long long mt = t / num_n, nt = t % num_n;
    const long long row0 = mt * 128 + 64 * half + 16 * warp + (lane >> 2);
    const long long col0 = nt * 128 + 8 * (4 * q + 2 * part) + 2 * (lane & 3);
    int er[2], ec[4];
#pragma unroll
    for (int h = 0; h < 2; h++)
        er[h] = row0 + 8 * h < m ? ea[row0 + 8 * h] : 0;
#pragma unroll
    for (int x = 0; x < 4; x++) {
        const long long col = col0 + 8 * (x >> 1) + (x & 1);
        ec[x] = col < n ? eb[col] : 0;
    }
#pragma unroll
    for (int j = 0; j < kReconCols; j++) {
        const int h = (j >> 1) & 1, x = 2 * (j >> 2) + (j & 1);
        const long long row = row0 + 8 * h;
        const long long col = col0 + 8 * (j >> 2) + (j & 1);
        if (row < m && col < n)
            d[row * ldd + col] =
                finish<NW>(sum[j], rc, rcp, er[h], ec[x], alpha, beta,
                           beta != 0.0 ? c + row * ldc + col : c);
    }
}

/* D from int32 products W[l][i][j] (pitch ldw, values in [0, p)), 4
 * columns a thread. */
template <int NW, typename T>
__global__ void __launch_bounds__(256)
    oz_recon_i32_kernel(const int32_t *__restrict__ W, long long ldw,
                        long long plane, const __grid_constant__ ReconConsts rc,
                        const int *__restrict__ ea, const int *__restrict__ eb,
                        double alpha, double beta, const T *c, long long ldc,
                        T *d, long long ldd, long long m, long long n)
{
    __shared__ ReconRcp rcp;
    rcp_fill(rcp);
    const long long i = blockIdx.y;
    const long long j0 = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * 4;
    if (j0 >= n)
        return;
    uint64_t sum[4][NW] = {};
    for (int l = 0; l < rc.n; l++) {
        const int4 v = *reinterpret_cast<const int4 *>(
            W + (long long)l * plane + i * ldw + j0);
        gemmk_oz_sadd_nw(sum[0], (uint32_t)v.x, rc.w[l], NW);
        gemmk_oz_sadd_nw(sum[1], (uint32_t)v.y, rc.w[l], NW);
        gemmk_oz_sadd_nw(sum[2], (uint32_t)v.z, rc.w[l], NW);
        gemmk_oz_sadd_nw(sum[3], (uint32_t)v.w, rc.w[l], NW);
    }
    const int ei = ea[i];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const long long col = j0 + j;
        if (col < n)
            d[i * ldd + col] =
                finish<NW>(sum[j], rc, rcp, ei, eb[col], alpha, beta,
                           beta != 0.0 ? c + i * ldc + col : c);
    }
}

/* alpha == 0: D = beta C (C not read when beta == 0, as BLAS). */
template <typename T>
__global__ void oz_scale_kernel(double beta, const T *c, long long ldc, T *d,
                                long long ldd, long long m, long long n)
{
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
         t < m * n; t += (long long)gridDim.x * blockDim.x) {
        long long i = t / n, j = t % n;
        d[i * ldd + j] =
            beta == 0.0 ? (T)0 : (T)(beta * (double)c[i * ldc + j]);
    }
}

} // namespace
} // namespace gemmk

#endif /* GEMMK_OZ_PASSES_CUH */
