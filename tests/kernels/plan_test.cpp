/*
 * plan_test.cpp: the 16-bit shape heuristic (kernels/src/plan.cu) at the
 * H100's and H200's 132 SMs, on the host: what `auto` runs for shapes
 * whose choice was measured on the H200 (docs/kernel-notes.md v14, v27,
 * v28: each is the kernel that ran in those calls and the best of ours
 * there, or within 1% of it). kernels_gpu_test asserts seven of them on
 * a GPU with 132 SMs; this runs them everywhere the kernels build.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

using namespace gemmk;

static gemmk_ctx *h200_ctx()
{
    static gemmk_ctx *ctx;
    if (!ctx) {
        ctx = (gemmk_ctx *)calloc(1, sizeof(gemmk_ctx));
        cr_assert_not_null(ctx);
        ctx->num_sms = 132;
        ctx->max_clusters2 = 66;
        for (int i = 0; i < KNOB_COUNT; i++) /* the defaults' choices */
            unsetenv(knob_name(i));
        knobs_read(&ctx->knobs);
    }
    return ctx;
}

/* The row `auto` resolves an untransposed bf16 or fp16 problem with a
 * 16-bit D and beta 0 to. */
static const char *auto_row(long long m, long long n, long long k, gemm_dtype t)
{
    gemmk_problem p;
    memset(&p, 0, sizeof p);
    p.m = m, p.n = n, p.k = k;
    p.ab_type = t, p.cd_type = t;
    p.lda = k, p.ldb = n, p.ldd = n;
    p.alpha = 1.f, p.beta = 0.f;
    Plan pl;
    plan(h200_ctx(), &p, row_auto().tiling, true, &pl);
    const Row *r = plan_row(pl);
    return r ? r->d.name : "(none)";
}

static void expect(long long m, long long n, long long k, const char *want)
{
    const gemm_dtype types[2] = {GEMM_BF16, GEMM_FP16};
    for (gemm_dtype t : types) {
        const char *got = auto_row(m, n, k, t);
        cr_expect_str_eq(got, want, "%lldx%lldx%lld %s: auto plans %s, want %s",
                         m, n, k, t == GEMM_BF16 ? "bf16" : "fp16", got, want);
    }
}

/* {m, n, k, the row auto runs}. Operands in L2: 128 x 256 tiles with the
 * TMA-store epilogue where they fill their waves, 128 x 192 where fewer
 * rounds of them win (v14), a stream-K tail where the last wave is
 * mostly empty (v15), whole-block stores over 8 waves at K <= 4096
 * (v11). Past L2 (v27): 128 x 192 tiles from M = 384 unless the 128 x
 * 256 tiles' stream-K tail, at its streamed cost, is faster; M = 256
 * stays on 128 x 256 (the rows from 512 x 12288 x 2048 to 512 x 28672 x
 * 8192 are kernels_gpu_test's plan check). */
static const struct {
    long long m, n, k;
    const char *want;
} kRows[] = {
    {2048, 2048, 2048, "ws128x256e"},  {4096, 4096, 4096, "ws128x256e"},
    {1536, 1536, 1536, "ws128x192e"},  {3072, 3072, 3072, "ws128x192e"},
    {1536, 1536, 4096, "ws128x192e"},  {3072, 2048, 1024, "ws128x192e"},
    {2560, 2560, 2560, "ws128x256sk"}, {1536, 3072, 2048, "ws128x192sk"},
    {1024, 1024, 1024, "ws128x64"},    {8192, 6144, 4096, "ws128x256e3"},
    {512, 12288, 2048, "ws128x192e"},  {384, 16384, 8192, "ws128x192e"},
    {384, 6144, 16384, "ws128x192e"},  {384, 12288, 4096, "ws128x256sk"},
    {640, 8192, 8192, "ws128x256sk"},  {256, 16384, 8192, "ws128x256e"},
    {512, 28672, 8192, "ws128x256sk"}, {5120, 1024, 4096, "ws128x256sk"},
    {1024, 5120, 8192, "ws128x256sk"}, {8192, 8192, 8192, "ws128x256e"},
};

Test(plan, measured_choices)
{
    for (const auto &r : kRows)
        expect(r.m, r.n, r.k, r.want);
}
