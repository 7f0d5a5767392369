/*
 * pipe_plan_test.c: the cut of a large staged GEMM into blocks whose
 * copies overlap its kernels (daemon/pipe_plan.c): the copy order, every
 * block readied once and only after both its panels, plans that cover D
 * within their limits, the model's arithmetic, the choice it makes on the
 * shapes docs/e2e-bench.md measures, and the measured rates' folding.
 */
#include "pipe_plan.h"
#include "pipe_rates.h"

#include <gemm/types.h>

#include <criterion/criterion.h>

#include <math.h>
#include <string.h>

/* An H100-like GPU: 53 GB/s each way, bf16 at 700 TFLOP/s, 132 SMs. */
static const pipe_rates kH100Bf16 = {53, 53, 0.9, 700e3, 10000};
static const pipe_rates kH100Fp64 = {53, 53, 0.9, 58e3, 10000};

static pipe_shape shape(uint64_t m, uint64_t n, uint64_t k, double es)
{
    pipe_shape s;
    memset(&s, 0, sizeof(s));
    s.m = m;
    s.n = n;
    s.k = k;
    s.flops = 2.0 * m * n * k;
    s.a_bytes = (double)m * k * es;
    s.b_bytes = (double)k * n * es;
    s.d_bytes = (double)m * n * es;
    s.cut_rows = s.cut_cols = true;
    s.max_panels = 8;
    s.sms = 132;
    s.tile_m = 128;
    s.tile_n = es <= 2 ? 256 : 128;
    s.b_strided = true; /* B stored K x N: a column panel is strided */
    return s;
}

static void order_is(const pipe_plan *p, double a, double b, const char *want)
{
    pipe_step st[PIPE_MAX_STEPS];
    unsigned n = pipe_order(p, a, b, st);
    char got[2 * PIPE_MAX_STEPS + 1];
    for (unsigned i = 0; i < n; i++) {
        got[2 * i] = st[i].b ? 'B' : 'A';
        got[2 * i + 1] = (char)('0' + st[i].i);
    }
    got[2 * n] = '\0';
    cr_expect_str_eq(got, want, "order of %u x %u (a %g, b %g)", p->nr, p->nc,
                     a, b);
}

Test(pipe_plan, order)
{
    pipe_plan rows = {.nr = 4, .nc = 1}, cols = {.nr = 1, .nc = 3};
    pipe_plan grid = {.nr = 3, .nc = 3}, tall = {.nr = 4, .nc = 2};
    order_is(&rows, 1, 1, "B0A0A1A2A3"); /* B whole first, A streams */
    order_is(&cols, 1, 1, "A0B0B1B2");
    order_is(&grid, 1, 1, "A0B0A1B1A2B2");
    order_is(&tall, 1, 1, "B0A0A1B1A2A3");
    order_is(&grid, 0, 1, "A0A1A2B0B1B2"); /* resident A: there first */
    order_is(&grid, 1, 0, "B0B1B2A0A1A2");
}

/* Every block is readied exactly once, by the later of its two panels. */
Test(pipe_plan, every_block_ready_once)
{
    for (unsigned nr = 1; nr <= 8; nr++)
        for (unsigned nc = 1; nc <= 8; nc++) {
            pipe_plan p = {.nr = nr, .nc = nc};
            pipe_step st[PIPE_MAX_STEPS];
            unsigned ri[PIPE_MAX_BLOCKS], ci[PIPE_MAX_BLOCKS];
            unsigned ns = pipe_order(&p, 1, 1, st), nb = 0;
            int seen[8][8] = {{0}}, a_at[8], b_at[8];
            for (int i = 0; i < 8; i++)
                a_at[i] = b_at[i] = -1;
            for (unsigned s = 0; s < ns; s++) {
                (st[s].b ? b_at : a_at)[st[s].i] = (int)s;
                unsigned got = pipe_ready(st, s, ri + nb, ci + nb);
                for (unsigned y = nb; y < nb + got; y++) {
                    seen[ri[y]][ci[y]]++;
                    int a = a_at[ri[y]], b = b_at[ci[y]];
                    /* both panels in, and this step brought the later */
                    cr_expect(a >= 0 && b >= 0 && (a > b ? a : b) == (int)s,
                              "%u x %u: block (%u, %u) readied by step %u "
                              "(A in at %d, B at %d)",
                              nr, nc, ri[y], ci[y], s, a, b);
                }
                nb += got;
            }
            cr_expect_eq(ns, nr + nc);
            cr_expect_eq(nb, nr * nc, "%u x %u: %u blocks", nr, nc, nb);
            for (unsigned r = 0; r < nr; r++)
                for (unsigned c = 0; c < nc; c++) {
                    cr_expect_eq(seen[r][c], 1, "%u x %u: block (%u, %u)", nr,
                                 nc, r, c);
                }
        }
}

/* The chosen plan covers D in aligned panels within the limits, and the
 * model puts it no later than running whole. */
static void check_plan(const pipe_shape *s, const pipe_rates *r)
{
    pipe_plan p = pipe_choose(s, r);
    pipe_plan whole = {.nr = 1, .nc = 1, .rlen = s->m, .clen = s->n};
    cr_assert(p.nr >= 1 && p.nc >= 1 && p.nr * p.nc <= PIPE_MAX_BLOCKS);
    cr_expect(p.nr <= (s->cut_rows ? s->max_panels : 1));
    cr_expect(p.nc <= (s->cut_cols ? s->max_panels : 1));
    cr_expect(p.rlen * p.nr >= s->m && p.rlen * (p.nr - 1) < s->m,
              "%u rows panels of %llu for m = %llu", p.nr,
              (unsigned long long)p.rlen, (unsigned long long)s->m);
    cr_expect(p.clen * p.nc >= s->n && p.clen * (p.nc - 1) < s->n);
    if (p.nr > 1)
        cr_expect(p.rlen % PIPE_ALIGN == 0 && p.rlen >= 2 * PIPE_ALIGN);
    if (p.nc > 1)
        cr_expect(p.clen % PIPE_ALIGN == 0 && p.clen >= 2 * PIPE_ALIGN);
    if (s->max_block_flops != 0 && p.nr * p.nc > 1)
        cr_expect_leq(s->flops * p.rlen * p.clen / ((double)s->m * s->n),
                      (double)s->max_block_flops);
    cr_expect_leq(p.predicted_ns, pipe_predict(s, r, &whole));
    cr_expect_float_eq(p.predicted_ns, pipe_predict(s, r, &p), 1e-9);
}

Test(pipe_plan, plans_cover_d_within_limits)
{
    const uint64_t dims[] = {1000, 3001, 4096, 8192, 16384};
    for (size_t a = 0; a < 5; a++)
        for (size_t b = 0; b < 5; b++)
            for (int t = 0; t < 2; t++) {
                pipe_shape s = shape(dims[a], dims[b], 4096, t ? 8 : 2);
                check_plan(&s, t ? &kH100Fp64 : &kH100Bf16);
                s.max_block_flops = (uint64_t)(s.flops / 5);
                check_plan(&s, t ? &kH100Fp64 : &kH100Bf16);
                s.cut_cols = false;
                check_plan(&s, t ? &kH100Fp64 : &kH100Bf16);
                s.b_bytes = 0; /* resident B */
                check_plan(&s, t ? &kH100Fp64 : &kH100Bf16);
            }
}

/* Running whole, the model is the sum of the stages. */
Test(pipe_plan, whole_is_the_sum)
{
    pipe_shape s = shape(4096, 4096, 4096, 2);
    s.c_bytes = s.d_bytes;
    pipe_plan whole = {.nr = 1, .nc = 1, .rlen = 4096, .clen = 4096};
    double want = (s.a_bytes + s.b_bytes + s.c_bytes) / 53 +
                  s.flops / (700e3 * pipe_wave_eff(&s, 4096, 4096)) + 10000 +
                  s.d_bytes / 53;
    cr_expect_float_eq(pipe_predict(&s, &kH100Bf16, &whole), want, 1e-6);
}

Test(pipe_plan, wave_efficiency)
{
    pipe_shape s = shape(2048, 2048, 2048, 2);
    /* 2048^2 in 128 x 256 tiles: 128 tiles, one wave of 132 */
    cr_expect_float_eq(pipe_wave_eff(&s, 2048, 2048), 128.0 / 132, 1e-12);
    /* 133 tiles: two waves, the second nearly empty */
    cr_expect_float_eq(pipe_wave_eff(&s, 133 * 128, 256), 133.0 / 264, 1e-12);
    s.sms = 0;
    cr_expect_float_eq(pipe_wave_eff(&s, 100, 100), 1.0, 1e-12);
}

/* fp64 8192^3 moves its inputs in about as long as DGEMM computes: panels
 * of rows wait for all of B first, a grid of blocks starts computing once
 * an eighth of each operand is in. */
Test(pipe_plan, fp64_takes_a_grid)
{
    pipe_shape s = shape(8192, 8192, 8192, 8);
    pipe_plan p = pipe_choose(&s, &kH100Fp64);
    cr_expect(p.nr > 1 && p.nc > 1, "fp64 8192^3: %u x %u", p.nr, p.nc);
    s.cut_cols = false;
    pipe_plan rows = pipe_choose(&s, &kH100Fp64);
    cr_expect_eq(rows.nc, 1);
    cr_expect_lt(p.predicted_ns, 0.9 * rows.predicted_ns,
                 "grid %.2f ms, rows %.2f ms", p.predicted_ns / 1e6,
                 rows.predicted_ns / 1e6);
}

/* With B resident there is nothing to wait for but A's rows: panels of
 * rows. */
Test(pipe_plan, resident_b_streams_rows)
{
    pipe_shape s = shape(4096, 8192, 8192, 2);
    s.b_bytes = 0;
    pipe_plan p = pipe_choose(&s, &kH100Bf16);
    cr_expect_eq(p.nc, 1, "resident B: %u x %u", p.nr, p.nc);
    cr_expect_geq(p.nr, 4);
}

/* Where no cut is predicted clearly faster, the plain one runs:
 * PIPE_PLAIN_PANELS panels of rows for a square bf16 GEMM, B whole
 * first. */
Test(pipe_plan, plain_cut_unless_clearly_beaten)
{
    pipe_shape s = shape(8192, 8192, 8192, 2);
    s.max_panels = 16;
    pipe_plan p = pipe_choose(&s, &kH100Bf16);
    cr_expect(p.nr == PIPE_PLAIN_PANELS && p.nc == 1, "bf16 8192^3: %u x %u",
              p.nr, p.nc);
}

static double rows_only(void *arg, const pipe_plan *p)
{
    (*(int *)arg)++;
    return p->nc == 1 ? 0 : -1;
}

Test(pipe_plan, block_cost_refuses)
{
    pipe_shape s = shape(8192, 8192, 8192, 8);
    s.b_strided = false;
    int calls = 0;
    s.block_cost = rows_only;
    s.arg = &calls;
    pipe_plan p = pipe_choose(&s, &kH100Fp64);
    cr_expect_eq(p.nc, 1);
    cr_expect_gt(p.nr, 1);
    cr_expect_gt(calls, 0);
    cr_expect_lt(calls, 40, "block_cost asked %d times", calls);
}

/* A kernel that rewrites B whole in every panel of rows (3xTF32's split,
 * here at a slow 200 B/ns) makes more panels dearer: the cost is
 * charged, and fewer panels win, past the plain cut's margin. */
static double split_b(void *arg, const pipe_plan *p)
{
    const pipe_shape *s = arg;
    return (p->nr - 1) * s->b_bytes * 3 / 200.0 / (p->nr * p->nc);
}

Test(pipe_plan, block_cost_is_charged)
{
    pipe_shape s = shape(8192, 8192, 8192, 4);
    pipe_rates r = {53, 53, 0, 100e3, 10000};
    s.cut_cols = false;
    s.max_panels = 16;
    pipe_plan free_split = pipe_choose(&s, &r);
    s.block_cost = split_b;
    s.arg = &s;
    pipe_plan p = pipe_choose(&s, &r);
    cr_expect_lt(p.nr, free_split.nr, "%u panels charged, %u free", p.nr,
                 free_split.nr);
    cr_expect_lt(p.nr, PIPE_PLAIN_PANELS);
    cr_expect_gt(p.extra_ns, 0);
    cr_expect_float_eq(p.predicted_ns, pipe_predict(&s, &r, &p), 1e-6);
}

/* Strided copies run at a share of the link's rate: with a small share
 * the grid (strided column panels of B, strided blocks of D) loses to
 * rows. */
Test(pipe_plan, strided_copies_are_charged)
{
    pipe_shape s = shape(8192, 8192, 8192, 8);
    pipe_rates cheap = kH100Fp64, dear = kH100Fp64;
    cheap.strided = 1;
    dear.strided = 0.5;
    pipe_plan a = pipe_choose(&s, &cheap), b = pipe_choose(&s, &dear);
    cr_expect_gt(a.nc, 1);
    cr_expect_eq(b.nc, 1, "strided at half the rate: %u x %u", b.nr, b.nc);
}

Test(pipe_plan, small_problems_run_whole)
{
    /* 512 rows cannot be cut into panels of at least 256 more than twice,
     * and at 300 x 300 nothing can be cut */
    pipe_shape s = shape(300, 300, 65536, 2);
    pipe_plan p = pipe_choose(&s, &kH100Bf16);
    cr_expect(p.nr == 1 && p.nc == 1);
}

Test(pipe_plan, rates_fold)
{
    pipe_rates_table t;
    pipe_rates_init(&t);
    unsigned c = pipe_class(GEMM_FP64, GEMM_PRECISION_DEFAULT);
    cr_expect_neq(c, pipe_class(GEMM_FP32, GEMM_PRECISION_TF32));
    cr_expect_neq(pipe_class(GEMM_FP32, GEMM_PRECISION_TF32),
                  pipe_class(GEMM_FP32, GEMM_PRECISION_FP32));
    pipe_rates r0 = pipe_rates_get(&t, c);
    cr_expect_gt(r0.in_bpns, 0);
    cr_expect_gt(r0.flops_pns, 0);
    /* in 50 B/ns, out 40 B/ns, kernels 60e3 flops/ns */
    pipe_sample a = {.bytes = {1e9, 4e8},
                     .ns = {2e7, 1e7},
                     .wave_flops = 6e13,
                     .kernel_ns = 1e9};
    pipe_rates_learn(&t, c, &a);
    pipe_rates r1 = pipe_rates_get(&t, c);
    cr_expect_float_eq(r1.in_bpns, 50, 1e-9);
    cr_expect_float_eq(r1.out_bpns, 40, 1e-9);
    cr_expect_float_eq(r1.flops_pns, 60e3, 1e-6);
    cr_expect_float_eq(r1.strided, r0.strided, 1e-9); /* none strided */
    cr_expect(pipe_rates_known(&t, c));
    cr_expect_not(
        pipe_rates_known(&t, pipe_class(GEMM_BF16, GEMM_PRECISION_DEFAULT)));
    /* in 100 B/ns; 5e7 strided bytes in at 30 B/ns against the new 75:
     * a share of 0.4 */
    pipe_sample b = {.bytes = {1e9}, .ns = {1e7}};
    b.sbytes[0] = 5e7;
    b.sns[0] = 5e7 / 30;
    pipe_rates_learn(&t, c, &b);
    pipe_rates r2 = pipe_rates_get(&t, c);
    cr_expect_float_eq(r2.in_bpns, 75, 1e-9);
    cr_expect_float_eq(r2.strided, 0.4, 1e-9);
    cr_expect_float_eq(r2.flops_pns, 60e3, 1e-6);
    /* 4 gaps of 5 us between blocks: the block cost */
    pipe_sample g = {.gaps = 4, .gap_ns = 20000};
    pipe_rates_learn(&t, c, &g);
    cr_expect_float_eq(pipe_rates_get(&t, c).block_ns, 5000, 1e-9);
    /* another class keeps its default */
    pipe_rates other =
        pipe_rates_get(&t, pipe_class(GEMM_BF16, GEMM_PRECISION_DEFAULT));
    cr_expect_gt(other.flops_pns, r1.flops_pns);
    pipe_sample bad = {.bytes = {NAN, 1},
                       .ns = {1, -1},
                       .wave_flops = -1,
                       .kernel_ns = 1,
                       .gaps = 1,
                       .gap_ns = NAN}; /* nonsense is ignored */
    pipe_rates_learn(&t, c, &bad);
    cr_expect_float_eq(pipe_rates_get(&t, c).in_bpns, 75, 1e-9);
    cr_expect_float_eq(pipe_rates_get(&t, c).out_bpns, 40, 1e-9);
    cr_expect_float_eq(pipe_rates_get(&t, c).flops_pns, 60e3, 1e-6);
    pipe_rates_destroy(&t);
}

Test(pipe_plan, cache)
{
    pipe_cache c;
    memset(&c, 0, sizeof(c));
    pipe_rates r = kH100Bf16;
    pipe_plan p = {.nr = 4, .nc = 1, .rlen = 1024, .clen = 4096}, got;
    uint64_t key[4] = {4096, 4096, 4096, 17};
    cr_expect_not(pipe_cache_get(&c, key, &r, &got));
    pipe_cache_put(&c, key, &r, &p);
    cr_expect(pipe_cache_get(&c, key, &r, &got));
    cr_expect(got.nr == 4 && got.rlen == 1024);
    pipe_rates drift = r;
    drift.in_bpns *= 1 + PIPE_CACHE_DRIFT / 2; /* within the drift */
    cr_expect(pipe_cache_get(&c, key, &drift, &got));
    drift.in_bpns = r.in_bpns * (1 + 2 * PIPE_CACHE_DRIFT); /* moved */
    cr_expect_not(pipe_cache_get(&c, key, &drift, &got));
    uint64_t other[4] = {4096, 4096, 4096, 18};
    cr_expect_not(pipe_cache_get(&c, other, &r, &got));
    /* the same key put again takes its old slot */
    p.nr = 8;
    pipe_cache_put(&c, key, &drift, &p);
    cr_expect(pipe_cache_get(&c, key, &drift, &got));
    cr_expect_eq(got.nr, 8);
    cr_expect_not(pipe_cache_get(&c, key, &r, &got));
    /* PIPE_CACHE_SLOTS other keys push it out */
    for (uint64_t i = 0; i < PIPE_CACHE_SLOTS; i++) {
        uint64_t k[4] = {i, i, i, i};
        pipe_cache_put(&c, k, &r, &p);
    }
    cr_expect_not(pipe_cache_get(&c, key, &drift, &got));
    /* measured: the first, then one in PIPE_MEASURE_EVERY */
    pipe_cache m;
    memset(&m, 0, sizeof(m));
    int n = 0;
    for (int i = 0; i < 3 * PIPE_MEASURE_EVERY; i++)
        n += pipe_measure(&m);
    cr_expect_eq(n, 3);
    cr_expect(pipe_measure(&m));
}
