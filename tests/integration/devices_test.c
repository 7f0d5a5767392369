/*
 * devices_test.c: one gemmd over several device objects (--devices): the
 * CPU backend's `--devices 3` (three CPU devices, a worker each), or on
 * a GPU host three device objects on GPU 0 (`--devices 0,0,0`;
 * $GEMM_TEST_DEVICES overrides the list). Status lists each device;
 * placement spreads work and follows the load; a resident tensor used on
 * another device is copied there once and stays; a GEMM split by panels
 * of D across the devices gives the one-device result bit for bit in
 * every type, transpose and odd shape; a device that keeps failing fails
 * only its own GEMMs and leaves placement; a client queued behind
 * another's flood on every device still gets through. The held GEMMs
 * (hold.h) exist on the CPU backend only; the forced fault needs
 * gemmd_test (GEMMD_TEST_FAIL_DEVICE).
 */
#include "util/cases.h"
#include "util/daemon.h"
#include "util/data.h"
#include "util/hold.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(devices, .fini = fixture_teardown, .timeout = 120);

#define NDEV 3

/* The --devices value for NDEV device objects on this backend. */
static const char *dev_list(void)
{
    const char *e = getenv("GEMM_TEST_DEVICES");
    if (e != NULL && *e != '\0')
        return e;
    return strcmp(tu_backend(), "cuda") == 0 ? "0,0,0" : "3";
}

/* Starts the fixture's daemon over NDEV devices, with more options. */
static void start_devices(const char *const *more)
{
    const char *args[24] = {"--devices", dev_list()};
    int n = 2;
    for (; more != NULL && *more != NULL && n < 22; more++)
        args[n++] = *more;
    args[n] = NULL;
    tu_hold_setup();
    fixture_start(args);
}

/* Each device of c's daemon; asserts there are NDEV. */
static void devices(gemm_client *c, gemm_device_status *d)
{
    size_t n = 0;
    int rv = gemm_get_devices(c, d, NDEV, &n);
    cr_assert_eq(rv, GEMM_OK, "gemm_get_devices: %s", gemm_strerror(rv));
    cr_assert_eq(n, NDEV, "%zu devices, want %d", n, NDEV);
}

/* A small fp32 case, drawn from seed. */
static tu_case small_case(uint64_t seed)
{
    return (tu_case){.m = 33,
                     .n = 21,
                     .k = 17,
                     .ab = GEMM_FP32,
                     .cd = GEMM_FP32,
                     .alpha = 1.0f,
                     .c_mode = TU_C_NONE,
                     .pad_a = 1,
                     .pad_b = TU_TIGHT,
                     .pad_c = TU_TIGHT,
                     .pad_d = 2,
                     .base = 64,
                     .seed = seed};
}

/* Polls until pred(devices) holds, for up to timeout_s. */
static bool wait_devices(gemm_client *c, gemm_device_status *d,
                         bool (*pred)(const gemm_device_status *, void *),
                         void *arg, double timeout_s)
{
    double until = tu_now() + timeout_s;
    for (;;) {
        devices(c, d);
        if (pred(d, arg))
            return true;
        if (tu_now() > until)
            return false;
        tu_sleep_ms(5);
    }
}

static bool each_running(const gemm_device_status *d, void *arg)
{
    (void)arg;
    for (int i = 0; i < NDEV; i++)
        if (d[i].running != 1)
            return false;
    return true;
}

Test(devices, status_lists_each_device_and_idle_work_spreads)
{
    start_devices(NULL);
    gemm_device_status d[NDEV];
    devices(g_client, d);
    for (int i = 0; i < NDEV; i++) {
        cr_expect_eq(d[i].index, (uint32_t)i);
        cr_expect_neq(d[i].name[0], '\0', "device %d has no name", i);
        cr_expect(d[i].placed, "device %d is not in placement", i);
        cr_expect_eq(d[i].jobs, 0);
    }
    gemm_buffer *buf;
    int rv = gemm_buffer_alloc(g_client, 1 << 20, &buf);
    cr_assert_eq(rv, GEMM_OK, "alloc: %s", gemm_strerror(rv));
    char why[512];
    for (int i = 0; i < 3 * NDEV; i++) {
        tu_case cs = small_case(100 + i);
        rv = tu_case_run(g_client, buf, &cs, why, sizeof(why));
        cr_assert_eq(rv, GEMM_OK, "GEMM %d: %s", i, why);
    }
    /* one at a time on idle devices: each takes its turn */
    devices(g_client, d);
    for (int i = 0; i < NDEV; i++)
        cr_expect_eq(d[i].jobs, 3, "device %d ran %llu of %d GEMMs", i,
                     (unsigned long long)d[i].jobs, 3 * NDEV);
    gemm_buffer_free(buf);
}

Test(devices, one_device_is_one_entry)
{
    const char *one[] = {"--devices",
                         strcmp(tu_backend(), "cuda") == 0 ? "0" : "1", NULL};
    tu_hold_setup();
    fixture_start(one);
    gemm_status st;
    gemm_device_status d[2];
    size_t n = 0;
    cr_assert_eq(gemm_get_status(g_client, &st), GEMM_OK);
    cr_assert_eq(gemm_get_devices(g_client, d, 2, &n), GEMM_OK);
    cr_assert_eq(n, 1, "a daemon of one device lists %zu", n);
    cr_expect(d[0].placed);
    cr_expect_eq(d[0].pinned_bytes, st.pinned_bytes);
}

Test(devices, placement_follows_the_load)
{
    start_devices(NULL);
    tu_hold_need();
    gemm_buffer *hb[NDEV];
    gemm_op hop[NDEV];
    gemm_request *rq[NDEV];
    for (int i = 0; i < NDEV; i++) {
        tu_held_op(g_client, &hb[i], &hop[i]);
        cr_assert_eq(gemm_submit(g_client, &hop[i], &rq[i]), GEMM_OK);
        tu_hold_wait(10.0);
    }
    /* each held GEMM went to a device without one */
    gemm_device_status d[NDEV];
    cr_expect(wait_devices(g_client, d, each_running, NULL, 10.0),
              "held GEMMs not one per device: running %u %u %u", d[0].running,
              d[1].running, d[2].running);
    tu_hold_close();
    for (int i = 0; i < NDEV; i++) {
        cr_expect_eq(gemm_wait(rq[i], NULL), GEMM_OK);
        tu_held_check(&hop[i], hb[i], "held GEMM");
        gemm_buffer_free(hb[i]);
    }
}

/* The device whose jobs count grew since before[], or -1. */
static int ran_on(const gemm_device_status *before,
                  const gemm_device_status *now)
{
    for (int i = 0; i < NDEV; i++)
        if (now[i].jobs > before[i].jobs)
            return i;
    return -1;
}

/* The one device holding the tensor (asserts there is exactly one); d:
 * the devices' status, read now. */
static int tensor_home(gemm_device_status *d)
{
    devices(g_client, d);
    int home = -1;
    for (int i = 0; i < NDEV; i++)
        if (d[i].tensors == 1)
            home = home == -1 ? i : -2;
    cr_assert(home >= 0, "the tensor is not on exactly one device");
    return home;
}

/* Runs small GEMMs until idle placement's next turn is home's (idle
 * devices take turns); d: the devices' status, kept current. */
static void turn_to(int home, gemm_device_status *d)
{
    gemm_device_status before[NDEV];
    gemm_buffer *sb;
    cr_assert_eq(gemm_buffer_alloc(g_client, 1 << 20, &sb), GEMM_OK);
    char why[512];
    for (int i = 0;; i++) {
        cr_assert(i < 2 * NDEV, "idle placement never took turns");
        memcpy(before, d, sizeof(before));
        tu_case cs = small_case(200 + i);
        cr_assert_eq(tu_case_run(g_client, sb, &cs, why, sizeof(why)), GEMM_OK,
                     "%s", why);
        devices(g_client, d);
        if ((ran_on(before, d) + 1) % NDEV == home)
            break;
    }
    gemm_buffer_free(sb);
}

/* Puts a held GEMM on home (the next idle turn made home's first) and
 * waits until its worker holds it; *hb, *hr: its buffer and request. */
static void hold_home(int home, gemm_device_status *d, gemm_buffer **hb,
                      gemm_request **hr)
{
    turn_to(home, d);
    gemm_op hop;
    tu_held_op(g_client, hb, &hop);
    cr_assert_eq(gemm_submit(g_client, &hop, hr), GEMM_OK);
    tu_hold_wait(10.0);
    devices(g_client, d);
    cr_assert_eq(d[home].running, 1, "the held GEMM is not on the home");
}

Test(devices, tensor_migrates_once_and_stays)
{
    start_devices(NULL);
    tu_hold_need();
    gemm_buffer *buf;
    int rv = gemm_buffer_alloc(g_client, 1 << 20, &buf);
    cr_assert_eq(rv, GEMM_OK);
    char *base = gemm_buffer_data(buf);
    uint64_t seed = 5, tid;
    gemm_op op;
    gemm_op_init(&op, 48, 40, 32, GEMM_FP32, GEMM_FP32);
    op.a = (gemm_matrix){buf, 0, 0, 0};
    op.b = (gemm_matrix){buf, 65536, 0, 0};
    op.d = (gemm_matrix){buf, 131072, 0, 0};
    tu_fill(base, GEMM_FP32, 48, 32, 32, &seed);
    tu_fill(base + 65536, GEMM_FP32, 32, 40, 40, &seed);
    rv = gemm_tensor_upload(g_client, &op.a, 48, 32, GEMM_FP32, &tid);
    cr_assert_eq(rv, GEMM_OK, "upload: %s", gemm_last_error_message());
    gemm_device_status d[NDEV];
    int home = tensor_home(d);

    /* the home device busy with a held GEMM ... */
    gemm_buffer *hb;
    gemm_request *hr;
    hold_home(home, d, &hb, &hr);
    char why[512];

    /* ... a GEMM on the tensor runs elsewhere, on a copy, twice */
    op.a = (gemm_matrix){NULL, 0, 0, tid};
    for (int round = 0; round < 2; round++) {
        memset(base + 131072, 0, 48 * 40 * 4);
        rv = gemm_run(g_client, &op, NULL);
        cr_assert_eq(rv, GEMM_OK, "GEMM on the tensor: %s",
                     gemm_last_error_message());
        double ref[48 * 40], scale[48 * 40];
        gemm_op ro = op;
        ro.a = (gemm_matrix){buf, 0, 0, 0};
        tu_ref_gemm(&ro, base, base + 65536, NULL, ref, scale);
        cr_expect(tu_compare(&ro, base + 131072, ref, scale, why, sizeof(why)),
                  "round %d: %s", round, why);
        devices(g_client, d);
        uint64_t moved = 0;
        int copies = 0;
        for (int i = 0; i < NDEV; i++) {
            moved += d[i].migrations;
            copies += i != home && d[i].tensors == 1;
        }
        cr_expect_eq(moved, 1, "round %d: %llu copies made, want 1", round,
                     (unsigned long long)moved);
        cr_expect_eq(copies, 1, "round %d: the copy is on %d devices", round,
                     copies);
    }
    tu_hold_close();
    cr_expect_eq(gemm_wait(hr, NULL), GEMM_OK);
    cr_expect_eq(gemm_tensor_free(g_client, tid), GEMM_OK);
    double until = tu_now() + 5.0;
    uint32_t left;
    do {
        devices(g_client, d);
        left = d[0].tensors + d[1].tensors + d[2].tensors;
    } while (left != 0 && tu_now() < until && (tu_sleep_ms(5), 1));
    cr_expect_eq(left, 0, "%u tensor copies left after the free", left);
    gemm_buffer_free(hb);
    gemm_buffer_free(buf);
}

/*
 * Any backend: a burst of GEMMs on one resident tensor spreads past its
 * home once the home is busy, copying the tensor to each device it uses
 * once (the copies stay: a second burst makes no more than the devices
 * left), and every result is right.
 */
Test(devices, tensor_copies_are_made_once_per_device)
{
    start_devices(NULL);
    bool cuda = strcmp(tu_backend(), "cuda") == 0;
    uint64_t n = cuda ? 2048 : 192;
    enum { BURST = 3 * NDEV };
    gemm_buffer *buf;
    size_t mat = n * n * 4;
    int rv = gemm_buffer_alloc(g_client, mat * (2 + BURST), &buf);
    cr_assert_eq(rv, GEMM_OK, "alloc: %s", gemm_strerror(rv));
    char *base = gemm_buffer_data(buf);
    uint64_t seed = 9, tid;
    gemm_op op;
    gemm_op_init(&op, n, n, n, GEMM_FP32, GEMM_FP32);
    op.a = (gemm_matrix){buf, 0, 0, 0};
    tu_fill(base, GEMM_FP32, n, n, n, &seed);
    tu_fill(base + mat, GEMM_FP32, n, n, n, &seed);
    rv = gemm_tensor_upload(g_client, &op.a, n, n, GEMM_FP32, &tid);
    cr_assert_eq(rv, GEMM_OK, "upload: %s", gemm_last_error_message());
    uint64_t after_first = 0;
    for (int burst = 0; burst < 2; burst++) {
        /* where the hold works (the CPU backend) the home is busy for
         * sure during the first burst, a held GEMM on it; elsewhere the
         * burst's own GEMMs keep it busy (on a loaded 2-core host a 192^3
         * GEMM could end before the next request was placed) */
        gemm_buffer *hb = NULL;
        gemm_request *hr = NULL;
        if (burst == 0 && tu_hold_have()) {
            gemm_device_status d0[NDEV];
            hold_home(tensor_home(d0), d0, &hb, &hr);
        }
        gemm_request *rq[BURST];
        gemm_op ops[BURST];
        for (int i = 0; i < BURST; i++) {
            ops[i] = op;
            ops[i].a = (gemm_matrix){NULL, 0, 0, tid};
            ops[i].b = (gemm_matrix){buf, mat, 0, 0};
            ops[i].d = (gemm_matrix){buf, mat * (2 + i), 0, 0};
            cr_assert_eq(gemm_submit(g_client, &ops[i], &rq[i]), GEMM_OK);
        }
        if (hr != NULL) { /* the GEMMs queued behind it go on */
            tu_hold_release();
            cr_assert_eq(gemm_wait(hr, NULL), GEMM_OK);
            gemm_buffer_free(hb);
        }
        for (int i = 0; i < BURST; i++)
            cr_assert_eq(gemm_wait(rq[i], NULL), GEMM_OK, "burst %d: %s", burst,
                         gemm_last_error_message());
        /* spot checks of each D against fp64 */
        for (int i = 0; i < BURST; i++) {
            gemm_op ro = ops[i];
            ro.a = (gemm_matrix){buf, 0, 0, 0};
            for (uint64_t e = 0; e < 4; e++) {
                size_t r = (e * 37) % n, c = (e * 61 + 5) % n;
                double ref, scale;
                tu_ref_elem(&ro, base, base + mat, NULL, r, c, &ref, &scale);
                double got = ((const float *)(base + mat * (2 + i)))[r * n + c];
                cr_expect(fabs(got - ref) <= 1e-4 * scale + 1e-6,
                          "burst %d GEMM %d D[%zu][%zu] = %g, want %g", burst,
                          i, r, c, got, ref);
            }
        }
        gemm_device_status d[NDEV];
        devices(g_client, d);
        uint64_t moved = 0;
        int holders = 0;
        for (int i = 0; i < NDEV; i++) {
            moved += d[i].migrations;
            holders += d[i].tensors == 1;
        }
        cr_expect_eq(holders, 1 + (int)moved,
                     "burst %d: %d devices hold the tensor after %llu copies",
                     burst, holders, (unsigned long long)moved);
        cr_expect_leq(moved, NDEV - 1, "burst %d: %llu copies for %d devices",
                      burst, (unsigned long long)moved, NDEV);
        if (burst == 0) {
            after_first = moved;
            cr_expect_geq(moved, 1, "a busy home kept the whole burst");
        } else {
            cr_expect_geq(moved, after_first);
        }
    }
    cr_expect_eq(gemm_tensor_free(g_client, tid), GEMM_OK);
    gemm_buffer_free(buf);
}

/* The types a split is checked in (A/B, C/D, precision). */
static const struct {
    gemm_dtype ab, cd;
    gemm_precision prec;
} kTypes[] = {
    {GEMM_BF16, GEMM_BF16, GEMM_PRECISION_DEFAULT},
    {GEMM_BF16, GEMM_FP32, GEMM_PRECISION_DEFAULT},
    {GEMM_FP16, GEMM_FP16, GEMM_PRECISION_DEFAULT},
    {GEMM_FP16, GEMM_FP32, GEMM_PRECISION_DEFAULT},
    {GEMM_FP32, GEMM_FP32, GEMM_PRECISION_DEFAULT},
    {GEMM_FP32, GEMM_FP32, GEMM_PRECISION_TF32},
    {GEMM_FP64, GEMM_FP64, GEMM_PRECISION_DEFAULT},
    {GEMM_COMPLEX64, GEMM_COMPLEX64, GEMM_PRECISION_DEFAULT},
    {GEMM_COMPLEX128, GEMM_COMPLEX128, GEMM_PRECISION_DEFAULT},
};

/* Runs op (A at 0, B, C, D after it in buf, filled from seed) on c and
 * leaves D in buf; returns the gemm_error. */
static int run_filled(gemm_client *c, gemm_buffer *buf, gemm_op *op,
                      uint64_t seed, size_t *d_off, size_t *d_bytes)
{
    char *base = gemm_buffer_data(buf);
    size_t r, cl, ld, off = 0;
    gemm_matrix *ms[4] = {&op->a, &op->b, &op->c, &op->d};
    for (int i = 0; i < 4; i++) {
        tu_shape(op, "abcd"[i], &r, &cl, &ld);
        gemm_dtype t = i < 2 ? op->ab_type : op->cd_type;
        *ms[i] = (gemm_matrix){buf, off, ld, 0};
        size_t bytes = tu_extent(r, cl, ld) * gemm_dtype_size(t);
        if (i < 3 && (t == GEMM_COMPLEX64 || t == GEMM_COMPLEX128))
            tu_fill(base + off, t == GEMM_COMPLEX64 ? GEMM_FP32 : GEMM_FP64, r,
                    2 * cl, 2 * ld, &seed); /* (re, im) pairs */
        else if (i < 3)
            tu_fill(base + off, t, r, cl, ld, &seed);
        else {
            memset(base + off, 0, bytes);
            *d_off = off;
            *d_bytes = bytes;
        }
        off = (off + bytes + 255) / 256 * 256;
    }
    return gemm_run(c, op, NULL);
}

/* Whether t is computed in its own type (fp64, complex) rather than fp32. */
static bool wide(gemm_dtype t)
{
    return t == GEMM_FP64 || t == GEMM_COMPLEX64 || t == GEMM_COMPLEX128;
}

/* Whether two complex D regions of bytes agree within the type's
 * precision, relative to the largest magnitude. */
static bool near(const void *x, const void *y, size_t bytes, gemm_dtype t)
{
    bool f32 = t == GEMM_COMPLEX64;
    size_t n = bytes / (f32 ? 4 : 8);
    double top = 1e-30, diff = 0;
    for (size_t i = 0; i < n; i++) {
        double a = f32 ? ((const float *)x)[i] : ((const double *)x)[i];
        double b = f32 ? ((const float *)y)[i] : ((const double *)y)[i];
        if (a != a || b != b) /* NaN: only where both are (padding) */
            return (a != a) == (b != b);
        top = fabs(a) > top ? fabs(a) : top;
        diff = fabs(a - b) > diff ? fabs(a - b) : diff;
    }
    return diff / top <= (f32 ? 1e-5 : 1e-12);
}

/* D of op on the split daemon against the fp64 reference over bn's
 * inputs; what names the case. */
static void check_reference(const gemm_op *op, gemm_buffer *bn, size_t d_off,
                            const char *what)
{
    size_t elems = op->m * op->n * 2;
    double *ref = malloc(elems * sizeof(double));
    double *scale = malloc(elems * sizeof(double));
    char why[512];
    cr_assert(ref && scale);
    const char *bb = gemm_buffer_data(bn);
    tu_ref_gemm(op, bb + op->a.offset, bb + op->b.offset, bb + op->c.offset,
                ref, scale);
    cr_expect(tu_compare(op, bb + d_off, ref, scale, why, sizeof(why)),
              "%s: %s", what, why);
    free(ref);
    free(scale);
}

/*
 * Every type, transpose and odd shape, split across the devices: D equals
 * the one-device D bit for bit where the kernel's result does not depend
 * on the panel's shape (our GPU kernels, whose panels run the whole's
 * kernel; on the CPU `cpu-naive`, since OpenBLAS blocks and threads by the
 * shape), and the reference within tolerance everywhere (OpenBLAS too).
 */
Test(devices, split_gives_the_one_device_result_bit_for_bit, .timeout = 300)
{
    bool cuda = strcmp(tu_backend(), "cuda") == 0;
    gemmd_proc one;
    char why[512];
    const char *one_args[] = {"--devices", cuda ? "0" : "1", NULL};
    cr_assert_eq(gemmd_start(&one, one_args, why, sizeof(why)), 0, "%s", why);
    gemm_client *c1 = tu_client(&one, 60000);
    /* on one GPU: split across its device objects too */
    const char *more[] = {"--split-volume", "1", "--split-same-gpu", NULL};
    start_devices(more);

    static const uint64_t shapes[][3] = {
        {97, 45, 33}, {300, 17, 129}, {1000, 77, 65}, {513, 255, 40}};
    const size_t cap = 16 << 20;
    gemm_buffer *b1, *bn;
    cr_assert_eq(gemm_buffer_alloc(c1, cap, &b1), GEMM_OK);
    cr_assert_eq(gemm_buffer_alloc(g_client, cap, &bn), GEMM_OK);
    int runs = 0, bitwise = 0;
    for (size_t t = 0; t < sizeof(kTypes) / sizeof(kTypes[0]); t++) {
        for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
            for (int v = 0; v < 8; v++) {
                bool naive = v >= 4; /* the CPU's shape-blind kernel */
                if (naive && (cuda || wide(kTypes[t].ab)))
                    continue;
                gemm_op op;
                gemm_op_init(&op, shapes[s][0], shapes[s][1], shapes[s][2],
                             kTypes[t].ab, kTypes[t].cd);
                op.precision = kTypes[t].prec;
                op.trans_a = v & 1;
                op.trans_b = (v & 2) != 0;
                op.kernel = naive ? "cpu-naive" : NULL;
                gemm_op_set_scalars(&op, 1.5, 0.0, 0.5, 0.0);
                gemm_op o1 = op, on = op;
                size_t d1, dn, n1, nn;
                uint64_t seed = 1000 + runs++;
                char what[160];
                snprintf(what, sizeof(what),
                         "%s/%s%s %llux%llux%llu trans %d%d%s",
                         gemm_dtype_name(kTypes[t].ab),
                         gemm_dtype_name(kTypes[t].cd),
                         kTypes[t].prec == GEMM_PRECISION_TF32 ? " tf32" : "",
                         (unsigned long long)op.m, (unsigned long long)op.n,
                         (unsigned long long)op.k, op.trans_a, op.trans_b,
                         naive ? " cpu-naive" : "");
                int rv = run_filled(g_client, bn, &on, seed, &dn, &nn);
                cr_assert_eq(rv, GEMM_OK, "%s split: %s", what,
                             gemm_last_error_message());
                bool complex = kTypes[t].ab == GEMM_COMPLEX64 ||
                               kTypes[t].ab == GEMM_COMPLEX128;
                if (!complex) /* (the reference is real) */
                    check_reference(&on, bn, dn, what);
                bool bits = cuda ? !wide(kTypes[t].ab) : naive;
                if (!bits && !complex)
                    continue;
                rv = run_filled(c1, b1, &o1, seed, &d1, &n1);
                cr_assert_eq(rv, GEMM_OK, "%s one device: %s", what,
                             gemm_last_error_message());
                cr_assert_eq(n1, nn);
                const char *p1 = (const char *)gemm_buffer_data(b1) + d1;
                const char *pn = (const char *)gemm_buffer_data(bn) + dn;
                if (bits) {
                    cr_expect(memcmp(p1, pn, n1) == 0,
                              "%s: the split D differs from the one-device D",
                              what);
                    bitwise++;
                } else {
                    cr_expect(near(p1, pn, n1, kTypes[t].ab),
                              "%s: the split "
                              "D is not the one-device D within tolerance",
                              what);
                }
            }
        }
    }
    cr_expect_gt(bitwise, 0);
    gemm_device_status d[NDEV];
    devices(g_client, d);
    int split_on = 0;
    for (int i = 0; i < NDEV; i++)
        split_on += d[i].panels > 0;
    cr_expect_geq(split_on, 2, "panels ran on %d devices, want several",
                  split_on);
    gemm_buffer_free(b1);
    gemm_buffer_free(bn);
    gemm_client_close(c1);
    cr_expect_neq(gemmd_stop(&one, 20.0), -1);
}

Test(devices, a_failing_device_fails_only_its_gemms_and_leaves)
{
    setenv("GEMMD_TEST_FAIL_DEVICE", "1", 1);
    const char *more[] = {"--device-fail-limit", "3", NULL};
    start_devices(more);
    unsetenv("GEMMD_TEST_FAIL_DEVICE");
    if (!tu_log_wait(&g_gemmd, "test hook: GEMMs on device 1 fail", 0, 2.0))
        cr_skip_test("gemmd has no test hooks (the forced fault is "
                     "GEMMD_TEST_FAIL_DEVICE of gemmd_test)");
    gemm_buffer *buf;
    cr_assert_eq(gemm_buffer_alloc(g_client, 1 << 20, &buf), GEMM_OK);
    char why[512];
    int failed = 0;
    for (int i = 0; i < 10 * NDEV; i++) {
        tu_case cs = small_case(300 + i);
        int rv = tu_case_run(g_client, buf, &cs, why, sizeof(why));
        if (rv == GEMM_ERR_DEVICE) {
            failed++;
            cr_expect(strstr(gemm_last_error_message(), "device 1") != NULL,
                      "the failure does not name its device: %s",
                      gemm_last_error_message());
            continue;
        }
        cr_assert_eq(rv, GEMM_OK, "GEMM %d: %s (%s)", i, gemm_strerror(rv),
                     why);
    }
    cr_expect_eq(failed, 3, "%d GEMMs failed, want the limit (3)", failed);
    gemm_device_status d[NDEV];
    devices(g_client, d);
    cr_expect(!d[1].placed, "the failing device is still in placement");
    cr_expect_eq(d[1].failed, 3);
    cr_expect(d[0].placed && d[2].placed);
    cr_expect_eq(d[0].failed + d[2].failed, 0);
    cr_expect(tu_log_count(&g_gemmd, "device 1 left placement") == 1,
              "no log line says device 1 left placement");
    gemm_buffer_free(buf);
}

Test(devices, a_split_panel_that_fails_runs_again_elsewhere)
{
    setenv("GEMMD_TEST_FAIL_DEVICE", "1", 1);
    const char *more[] = {"--split-volume",      "1",    "--split-same-gpu",
                          "--device-fail-limit", "1000", NULL};
    start_devices(more);
    unsetenv("GEMMD_TEST_FAIL_DEVICE");
    if (!tu_log_wait(&g_gemmd, "test hook: GEMMs on device 1 fail", 0, 2.0))
        cr_skip_test("gemmd has no test hooks (the forced fault is "
                     "GEMMD_TEST_FAIL_DEVICE of gemmd_test)");
    gemm_buffer *buf;
    cr_assert_eq(gemm_buffer_alloc(g_client, 8 << 20, &buf), GEMM_OK);
    char why[512];
    for (int i = 0; i < 4; i++) {
        tu_case cs = small_case(500 + i);
        cs.m = 600; /* panels on every device, device 1's among them */
        cs.n = 70;
        cs.k = 90;
        int rv = tu_case_run(g_client, buf, &cs, why, sizeof(why));
        cr_assert_eq(rv, GEMM_OK, "split GEMM %d: %s (%s)", i,
                     gemm_strerror(rv), why);
    }
    gemm_device_status d[NDEV];
    devices(g_client, d);
    cr_expect_geq(d[1].failed, 1, "no panel failed on device 1");
    cr_expect_eq(d[0].failed + d[2].failed, 0);
    cr_expect(tu_log_count(&g_gemmd, "runs again on device") >= 1,
              "no log line says a panel ran again");
    gemm_buffer_free(buf);
}

Test(devices, a_split_gemm_past_its_deadline_leaves_d_alone)
{
    const char *more[] = {"--split-volume", "1", "--split-same-gpu", NULL};
    start_devices(more);
    tu_hold_need();
    gemm_buffer *hb;
    gemm_op hop;
    gemm_request *rq[NDEV];
    tu_held_op(g_client, &hb, &hop);
    for (int i = 0; i < NDEV; i++) { /* every device busy */
        cr_assert_eq(gemm_submit(g_client, &hop, &rq[i]), GEMM_OK);
        tu_hold_wait(10.0);
    }
    gemm_buffer *buf;
    cr_assert_eq(gemm_buffer_alloc(g_client, 8 << 20, &buf), GEMM_OK);
    tu_case cs = small_case(600);
    cs.m = 600;
    tu_prepared p;
    char why[512];
    cr_assert(tu_case_prepare(&cs, buf, &p, why, sizeof(why)), "%s", why);
    p.op.timeout_ms = 1;
    gemm_request *r;
    cr_assert_eq(gemm_submit(g_client, &p.op, &r), GEMM_OK);
    gemm_status st;
    double until = tu_now() + 5.0;
    do /* its panels queued, and its deadline behind it */
        cr_assert_eq(gemm_get_status(g_client, &st), GEMM_OK);
    while (st.queue_depth < NDEV + 1 && tu_now() < until);
    tu_sleep_ms(5); /* time passes the 1 ms deadline (the state is known) */
    tu_hold_close();
    int rv = gemm_wait(r, NULL);
    cr_expect_eq(rv, GEMM_ERR_TIMEOUT, "a split GEMM past its deadline: %s",
                 gemm_strerror(rv));
    /* no panel ran: the region, D included, is as it was */
    const uint8_t *now = p.data + p.lo;
    cr_expect(memcmp(now, p.snapshot, p.hi - p.lo) == 0,
              "a timed-out split GEMM changed its buffer");
    tu_case_free(&p);
    for (int i = 0; i < NDEV; i++)
        cr_expect_eq(gemm_wait(rq[i], NULL), GEMM_OK);
    gemm_buffer_free(buf);
    gemm_buffer_free(hb);
}

/* After one release: waits until the device whose worker took it has
 * settled (its next held GEMM reached the worker, or, where none of A's
 * is left there, it is idle) and returns that device; d[] is then its
 * status, before[] the status before the release. a_left[] counts A's
 * GEMMs not yet released on each device. */
static int settle(gemm_device_status *d, const gemm_device_status *before,
                  const unsigned *a_left)
{
    double until = tu_now() + 30.0;
    int dev;
    while ((dev = ran_on(before, d)) < 0) {
        cr_assert(tu_now() < until, "no device ran a GEMM after a release");
        tu_sleep_ms(1);
        devices(g_client, d);
    }
    if (a_left[dev] > 1) {
        tu_hold_wait(30.0);
        devices(g_client, d);
        return dev;
    }
    while (d[dev].running != 0 || d[dev].queued != 0) {
        cr_assert(tu_now() < until, "device %d never went idle", dev);
        tu_sleep_ms(1);
        devices(g_client, d);
    }
    return dev;
}

/*
 * Client A holds each device with a held GEMM and queues a flood of held
 * GEMMs behind them; client B then queues ordinary ones. The test lets
 * A's GEMMs go one at a time and counts, per device, A's GEMMs released
 * there and B's run there (a release goes to whichever held worker reads
 * it, so the bound is per device). Each device serves its clients in
 * turn, B's queue joining behind A's, so B's k-th GEMM on a device has
 * run once k + 1 of A's went there (the held one, then one per turn);
 * first come, first served runs it only after all of A's flood there.
 */
Test(devices, a_flood_on_every_device_does_not_starve_another_client)
{
    start_devices(NULL);
    tu_hold_need();
    enum { HELD = NDEV, FLOOD = 10 * NDEV, OTHER = NDEV };
    gemm_buffer *hb;
    gemm_op hop;
    gemm_request *ra[HELD + FLOOD], *rb[OTHER];
    tu_held_op(g_client, &hb, &hop);
    /* client A: a held GEMM on each device, then a held flood behind */
    for (int i = 0; i < HELD; i++) {
        cr_assert_eq(gemm_submit(g_client, &hop, &ra[i]), GEMM_OK);
        tu_hold_wait(10.0);
    }
    gemm_device_status d[NDEV], before[NDEV];
    cr_assert(wait_devices(g_client, d, each_running, NULL, 10.0),
              "held GEMMs not one per device");
    for (int i = 0; i < FLOOD; i++)
        cr_assert_eq(gemm_submit(g_client, &hop, &ra[HELD + i]), GEMM_OK);
    cr_assert(tu_wait_queue_depth(g_client, HELD + FLOOD, 10.0),
              "A's flood did not reach the daemon");
    devices(g_client, before);
    unsigned a_left[NDEV], a_went[NDEV] = {0}, b_on[NDEV], b_ran[NDEV] = {0};
    for (int i = 0; i < NDEV; i++) {
        cr_assert_geq(before[i].queued, FLOOD / NDEV,
                      "device %d: %u queued: the flood is not spread", i,
                      before[i].queued);
        a_left[i] = before[i].queued + 1; /* the held one runs */
    }
    /* client B, after the flood */
    gemm_client *b = tu_client(&g_gemmd, 30000);
    gemm_buffer *bb;
    cr_assert_eq(gemm_buffer_alloc(b, 1 << 20, &bb), GEMM_OK);
    tu_prepared prep[OTHER];
    char why[512];
    for (int i = 0; i < OTHER; i++) {
        tu_case cs = small_case(400 + i);
        cs.base = 64 + (uint64_t)i * 65536;
        cr_assert(tu_case_prepare(&cs, bb, &prep[i], why, sizeof(why)), "%s",
                  why);
        cr_assert_eq(gemm_submit(b, &prep[i].op, &rb[i]), GEMM_OK);
    }
    cr_assert(tu_wait_queue_depth(g_client, HELD + FLOOD + OTHER, 10.0),
              "B's GEMMs did not reach the daemon");
    devices(g_client, d);
    for (int i = 0; i < NDEV; i++)
        b_on[i] = d[i].queued - before[i].queued;
    /* A's GEMMs go one at a time until every one of B's has run */
    for (unsigned done = 0, released = 0; done < OTHER;) {
        memcpy(before, d, sizeof(d));
        tu_hold_release();
        released++;
        int dev = settle(d, before, a_left);
        unsigned ran = (unsigned)(d[dev].jobs - before[dev].jobs) - 1;
        a_left[dev]--;
        a_went[dev]++;
        b_ran[dev] += ran;
        done += ran;
        unsigned due =
            a_went[dev] - 1 < b_on[dev] ? a_went[dev] - 1 : b_on[dev];
        cr_assert_geq(b_ran[dev], due,
                      "device %d: %u of B's %u GEMMs there ran after %u of "
                      "A's went there (release %u): B's turn did not come",
                      dev, b_ran[dev], b_on[dev], a_went[dev], released);
    }
    for (int i = 0; i < OTHER; i++) {
        int rv = gemm_wait(rb[i], NULL);
        cr_expect_eq(rv, GEMM_OK, "B's GEMM %d: %s", i, gemm_strerror(rv));
        cr_expect(tu_case_verify(&prep[i], why, sizeof(why)), "%s", why);
        tu_case_free(&prep[i]);
    }
    tu_hold_close();
    for (int i = 0; i < HELD + FLOOD; i++) {
        int rv = gemm_wait(ra[i], NULL);
        cr_expect_eq(rv, GEMM_OK, "A's GEMM %d: %s", i, gemm_strerror(rv));
    }
    gemm_buffer_free(bb);
    gemm_client_close(b);
    gemm_buffer_free(hb);
}
