/*
 * gemm_e2e.c: the end-to-end benchmark of gemmd (issue 4, point 8). P client
 * processes (fork) stream GEMMs of one shape and dtype through
 * libgemmclient to a running gemmd, each with Q requests in flight
 * (gemm_submit/gemm_wait over Q buffer sets, every operand in POSIX shm), and
 * the run reports what a client sees: requests/s, TFLOP/s, the H2D and D2H
 * bytes per second the traffic implies, the share of the PCIe floor reached
 * (bytes / 55 GB/s per direction, directions overlapped), p50/p99 round
 * trips, errors, and the daemon's own compute time per request.
 *
 * --check validates replies against an fp64 CPU reference on sampled rows
 * (warm-up replies and a final round with D poisoned, outside the timed
 * window; --check-every N also checks every Nth timed reply). --latency runs
 * tiny GEMMs one at a time; --ping-baseline times a bare round trip
 * (gemm_ping) in the same processes for comparison. --resident-b keeps B on
 * the daemon (gemm_tensor_upload) when the library has resident tensors.
 *
 * A benchmark program, not a test: random inputs (uniform in [-1, 1), never
 * zero), warm-up, percentiles over every request, table printed last, CSV
 * with --csv. Uses only the public API (gemm/gemm.h). How to run it and the
 * figures: docs/e2e-bench.md.
 */
#include "../bench_util.h"

#include <gemm/gemm.h>

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_INFLIGHT 16
#define MAX_PROCS    256
#define MAX_SAMPLES  (1u << 20) /* round trips kept per process and phase */
#define PCIE_GBS     55.0       /* measured per direction on the H100 host */
#define ALIGN        4096       /* operands start on pages in a buffer set */

enum phase { PH_PING, PH_GEMM, PH_N };

typedef struct options {
    const char *url;
    int procs;
    int inflight;
    double seconds; /* > 0: timed phase runs this long */
    long requests;  /* else: this many per process */
    uint64_t m, n, k;
    gemm_dtype ab, cd;
    int cd_given;
    int ta, tb;
    float alpha, beta;
    int check;
    int check_every; /* > 0: also check every Nth timed reply */
    int check_rows;  /* rows of D checked per reply */
    int resident_b;
    int latency;
    int ping;
    int warmup; /* untimed rounds per buffer set */
    const char *csv;
    const char *label;
    unsigned seed;
} options;

/* One process's tally of one phase, in shared memory written by that child
 * only. */
typedef struct tally {
    int ran;
    uint64_t ok;
    uint64_t errors;
    uint64_t checked, wrong;
    double worst_rel; /* largest relative Frobenius error seen */
    double t_start, t_end;
    double compute_us, queued_us, daemon_us; /* sums over OK replies */
    uint32_t nsamples;
    int first_err;
    char first_msg[256];
} tally;

static options opt = {
    .procs = 1,
    .inflight = 2,
    .m = 1024,
    .n = 1024,
    .k = 1024,
    .ab = GEMM_BF16,
    .cd = GEMM_BF16,
    .alpha = 1.0f,
    .check_rows = 8,
    .warmup = 2,
    .seed = 1,
};

static tally *tallies;    /* [procs][PH_N] */
static gemm_status dstat; /* the daemon's, after the run */
static int have_dstat;
static float *samples; /* [procs][PH_N][MAX_SAMPLES], round trips in us */

static tally *tally_of(int proc, int ph)
{
    return &tallies[proc * PH_N + ph];
}

static float *samples_of(int proc, int ph)
{
    return samples + ((size_t)proc * PH_N + (size_t)ph) * MAX_SAMPLES;
}

/* ---- small helpers -------------------------------------------------- */

static uint64_t align_up(uint64_t x, uint64_t a)
{
    return (x + a - 1) / a * a;
}

static void note_error(tally *t, int rv, const char *what)
{
    t->errors++;
    if (t->first_err == 0) {
        t->first_err = rv;
        snprintf(t->first_msg, sizeof(t->first_msg), "%s: %s: %s", what,
                 gemm_strerror(rv), gemm_last_error_message());
    }
}

/* ---- one buffer set: A, B, (C), D in one shm buffer ------------------ */

typedef struct slot {
    gemm_buffer *buf;
    gemm_op op;
    gemm_request *pend;
    double t_sent;
    uint64_t replies;   /* timed replies, for --check-every */
    const char *b_host; /* B's stored values (the uploaded copy if
                           resident), for the reference */
} slot;

static uint64_t a_rows(void)
{
    return opt.ta ? opt.k : opt.m;
}
static uint64_t a_cols(void)
{
    return opt.ta ? opt.m : opt.k;
}
static uint64_t b_rows(void)
{
    return opt.tb ? opt.n : opt.k;
}
static uint64_t b_cols(void)
{
    return opt.tb ? opt.k : opt.n;
}

/* Bytes the daemon copies in and out per request (as the client stores
 * them; the daemon's padded pitch is not counted). */
static double bytes_in(void)
{
    double s = (double)gemm_dtype_size(opt.ab), c = 0;
    double b = opt.resident_b ? 0 : (double)(opt.k * opt.n) * s;
    if (opt.beta != 0)
        c = (double)(opt.m * opt.n) * (double)gemm_dtype_size(opt.cd);
    return (double)(opt.m * opt.k) * s + b + c;
}

static double bytes_out(void)
{
    return (double)(opt.m * opt.n) * (double)gemm_dtype_size(opt.cd);
}

/* Writes rows x cols random values of type t, tight, at p. */
static void fill(void *p, gemm_dtype t, uint64_t rows, uint64_t cols,
                 uint64_t *rng, float *row)
{
    size_t es = gemm_dtype_size(t);
    for (uint64_t i = 0; i < rows; i++) {
        for (uint64_t j = 0; j < cols; j++)
            row[j] = rng_unit(rng);
        gemm_convert((char *)p + i * cols * es, t, row, GEMM_FP32, cols);
    }
}

/* Allocates a buffer set and fills A, B and C. Returns a gemm_error. */
static int slot_init(gemm_client *c, slot *s, uint64_t *rng)
{
    size_t sab = gemm_dtype_size(opt.ab), scd = gemm_dtype_size(opt.cd);
    uint64_t oa = 0;
    uint64_t ob = align_up(oa + a_rows() * a_cols() * sab, ALIGN);
    uint64_t oc = align_up(ob + b_rows() * b_cols() * sab, ALIGN);
    uint64_t od =
        opt.beta != 0 ? align_up(oc + opt.m * opt.n * scd, ALIGN) : oc;
    uint64_t size = align_up(od + opt.m * opt.n * scd, ALIGN);
    uint64_t widest = a_cols() > b_cols() ? a_cols() : b_cols();
    if (opt.n > widest)
        widest = opt.n;
    float *row = malloc(sizeof(float) * widest);
    int rv;
    if (row == NULL)
        return GEMM_ERR_NOMEM;
    if ((rv = gemm_buffer_alloc(c, size, &s->buf)) != GEMM_OK) {
        free(row);
        return rv;
    }
    char *base = gemm_buffer_data(s->buf);
    fill(base + oa, opt.ab, a_rows(), a_cols(), rng, row);
    fill(base + ob, opt.ab, b_rows(), b_cols(), rng, row);
    if (opt.beta != 0)
        fill(base + oc, opt.cd, opt.m, opt.n, rng, row);
    free(row);
    gemm_op_init(&s->op, opt.m, opt.n, opt.k, opt.ab, opt.cd);
    s->op.trans_a = opt.ta;
    s->op.trans_b = opt.tb;
    s->op.alpha = opt.alpha;
    s->op.beta = opt.beta;
    s->op.a = (gemm_matrix){.buf = s->buf, .offset = oa};
    s->op.b = (gemm_matrix){.buf = s->buf, .offset = ob};
    if (opt.beta != 0)
        s->op.c = (gemm_matrix){.buf = s->buf, .offset = oc};
    s->op.d = (gemm_matrix){.buf = s->buf, .offset = od};
    s->b_host = base + ob;
    return GEMM_OK;
}

/* NaN everywhere in D, so that a reply that did not write it fails. */
static void poison_d(slot *s)
{
    memset((char *)gemm_buffer_data(s->buf) + s->op.d.offset, 0xff,
           opt.m * opt.n * gemm_dtype_size(opt.cd));
}

/* ---- resident B -------------------------------------------------------- */

/*
 * With --resident-b every process uploads its first set's B once and all
 * its requests name that tensor. Compiled only when gemm.h has resident
 * tensors (CMake checks that this block compiles: GEMM_E2E_TENSORS).
 */
#ifdef GEMM_E2E_TENSORS
static uint64_t b_tensor;

static int resident_b_setup(gemm_client *c, slot *slots)
{
    gemm_matrix src = slots[0].op.b;
    int rv = gemm_tensor_upload(c, &src, b_rows(), b_cols(), opt.ab, &b_tensor);
    if (rv != GEMM_OK)
        return rv;
    for (int i = 0; i < opt.inflight; i++) {
        slots[i].op.b = (gemm_matrix){.tensor = b_tensor};
        slots[i].b_host = slots[0].b_host;
    }
    return GEMM_OK;
}

static void resident_b_free(gemm_client *c)
{
    if (b_tensor != 0)
        gemm_tensor_free(c, b_tensor);
}
#define HAVE_RESIDENT 1
#else
static int resident_b_setup(gemm_client *c, slot *slots)
{
    (void)c, (void)slots;
    return GEMM_ERR_UNSUPPORTED;
}
static void resident_b_free(gemm_client *c)
{
    (void)c;
}
#define HAVE_RESIDENT 0
#endif

/* ---- the fp64 reference ------------------------------------------------ */

/* The loosest relative Frobenius error allowed for the types (as gemmctl
 * mm --check): fp64 1e-12, fp32 1e-5, fp16 2e-3, bf16 1e-2. */
static double tolerance(void)
{
    if (opt.ab == GEMM_FP64 && opt.cd == GEMM_FP64)
        return 1e-12;
    if (opt.ab == GEMM_BF16 || opt.cd == GEMM_BF16)
        return 1e-2;
    if (opt.ab == GEMM_FP16 || opt.cd == GEMM_FP16)
        return 2e-3;
    return 1e-5;
}

/*
 * Checks check_rows rows of D (spread over M, first and last included)
 * against an fp64 reference computed from the inputs as stored in the
 * buffers (B from where it was uploaded, with --resident-b).
 * Returns 1 when right; fills *rel with the relative Frobenius error over
 * those rows and why with the first bad element.
 */
static int check_slot(const slot *s, double *rel, char *why, size_t len)
{
    const char *base = gemm_buffer_data(s->buf);
    uint64_t m = opt.m, n = opt.n, k = opt.k;
    uint64_t br = b_rows(), bc = b_cols(), ac = a_cols();
    size_t sab = gemm_dtype_size(opt.ab), scd = gemm_dtype_size(opt.cd);
    double *bf = malloc(sizeof(double) * br * bc);
    double *arow = malloc(sizeof(double) * k);
    double *drow = malloc(sizeof(double) * n);
    double *acc = malloc(sizeof(double) * n);
    double *mag = malloc(sizeof(double) * n); /* sum of |a * b| */
    int ok = 1;
    double num = 0, den = 0;
    /* a per-element bound on top of the Frobenius one (catches a few bad
     * elements): two ulps of D's type, plus the accumulation's error
     * (fp32's, fp64's for fp64 inputs) grown as sqrt(k) with 16x slack,
     * plus C's rounding, plus the smallest subnormal of D's type. Every
     * value is read in double, so fp64 results are judged as fp64. */
    const bool f64 = opt.cd == GEMM_FP64;
    double eps_cd = f64                   ? ldexp(1, -51)
                    : opt.cd == GEMM_FP32 ? ldexp(1, -22)
                    : opt.cd == GEMM_FP16 ? ldexp(1, -10)
                                          : ldexp(1, -7); /* 2 ulps */
    double eps_acc = opt.ab == GEMM_FP64 ? ldexp(1, -49) : ldexp(1, -20);
    double tiny = f64                   ? ldexp(1, -1074)
                  : opt.cd == GEMM_FP16 ? ldexp(1, -24)
                                        : ldexp(1, -126);
    if (bf == NULL || arow == NULL || drow == NULL || acc == NULL ||
        mag == NULL) {
        snprintf(why, len, "out of memory for the reference");
        ok = 0;
        goto out;
    }
    gemm_convert(bf, GEMM_FP64, s->b_host, opt.ab, br * bc);
    uint64_t nrows =
        (uint64_t)opt.check_rows < m ? (uint64_t)opt.check_rows : m;
    for (uint64_t r = 0; r < nrows && ok; r++) {
        uint64_t i = nrows == 1 ? 0 : r * (m - 1) / (nrows - 1);
        const char *a = base + s->op.a.offset;
        if (opt.ta)
            for (uint64_t p = 0; p < k; p++)
                gemm_convert(&arow[p], GEMM_FP64, a + (p * ac + i) * sab,
                             opt.ab, 1);
        else
            gemm_convert(arow, GEMM_FP64, a + i * ac * sab, opt.ab, k);
        if (opt.tb) {
            for (uint64_t x = 0; x < n; x++) {
                double sum = 0, sabs = 0;
                const double *bx = bf + x * bc;
                for (uint64_t p = 0; p < k; p++) {
                    double v = (double)arow[p] * bx[p];
                    sum += v;
                    sabs += fabs(v);
                }
                acc[x] = sum;
                mag[x] = sabs;
            }
        } else {
            memset(acc, 0, sizeof(double) * n);
            memset(mag, 0, sizeof(double) * n);
            for (uint64_t p = 0; p < k; p++) {
                double av = arow[p];
                const double *bp = bf + p * bc;
                for (uint64_t x = 0; x < n; x++) {
                    double v = av * bp[x];
                    acc[x] += v;
                    mag[x] += fabs(v);
                }
            }
        }
        gemm_convert(drow, GEMM_FP64, base + s->op.d.offset + i * n * scd,
                     opt.cd, n);
        const double *crow = NULL;
        double *cbuf = NULL;
        if (opt.beta != 0) {
            cbuf = malloc(sizeof(double) * n);
            if (cbuf == NULL) {
                ok = 0;
                snprintf(why, len, "out of memory for the reference");
                break;
            }
            gemm_convert(cbuf, GEMM_FP64, base + s->op.c.offset + i * n * scd,
                         opt.cd, n);
            crow = cbuf;
        }
        for (uint64_t x = 0; x < n; x++) {
            double ref = opt.alpha * acc[x];
            if (crow != NULL)
                ref += opt.beta * crow[x];
            double d = drow[x], e = d - ref;
            double bound =
                eps_cd * fabs(ref) +
                sqrt((double)k) * eps_acc * fabs(opt.alpha) * mag[x] +
                (crow ? eps_cd * fabs(opt.beta * crow[x]) : 0) + tiny;
            if (!isfinite(d) || fabs(e) > bound) {
                snprintf(why, len, "D[%llu][%llu] = %.9g, reference %.9g",
                         (unsigned long long)i, (unsigned long long)x, d, ref);
                ok = 0;
                break;
            }
            num += e * e;
            den += ref * ref;
        }
        free(cbuf);
    }
    *rel = den > 0 ? sqrt(num / den) : sqrt(num);
    if (ok && *rel > tolerance()) {
        snprintf(why, len, "relative error %.3g above %.0e", *rel, tolerance());
        ok = 0;
    }
out:
    free(bf);
    free(arow);
    free(drow);
    free(acc);
    free(mag);
    return ok;
}

static void record_check(tally *t, const slot *s)
{
    double rel = 0;
    char why[160];
    t->checked++;
    if (!check_slot(s, &rel, why, sizeof(why))) {
        t->wrong++;
        if (t->first_err == 0) {
            t->first_err = -1;
            snprintf(t->first_msg, sizeof(t->first_msg), "wrong result: %s",
                     why);
        }
    }
    if (rel > t->worst_rel)
        t->worst_rel = rel;
}

/* ---- the phases of one client process -------------------------------- */

/* Barrier with the parent: one byte up on `ready`, then wait until the
 * parent closes this phase's `go` pipe, which releases every process at
 * once. */
static void barrier(int ready, int go)
{
    char b = 'r';
    if (write(ready, &b, 1) != 1)
        return;
    while (read(go, &b, 1) > 0)
        ;
}

static int more(long done, double end)
{
    return opt.seconds > 0 ? now_s() < end : done < opt.requests;
}

static void add_sample(tally *t, float *smp, double secs)
{
    if (t->nsamples < MAX_SAMPLES)
        smp[t->nsamples++] = (float)(secs * 1e6);
}

static void ping_phase(gemm_client *c, tally *t, float *smp)
{
    long done = 0;
    double end = now_s() + opt.seconds;
    t->ran = 1;
    t->t_start = now_s();
    while (more(done, end)) {
        double t0 = now_s();
        int rv = gemm_ping(c, NULL);
        add_sample(t, smp, now_s() - t0);
        done++;
        if (rv == GEMM_OK)
            t->ok++;
        else
            note_error(t, rv, "ping");
    }
    t->t_end = now_s();
}

static void gemm_phase(gemm_client *c, slot *slots, tally *t, float *smp)
{
    int q = opt.inflight;
    long issued = 0;
    double end = now_s() + opt.seconds;
    t->ran = 1;
    t->t_start = now_s();
    for (int i = 0; i < q && more(issued, end); i++) {
        slots[i].t_sent = now_s();
        int rv = gemm_submit(c, &slots[i].op, &slots[i].pend);
        issued++;
        if (rv != GEMM_OK) {
            slots[i].pend = NULL;
            note_error(t, rv, "submit");
        }
    }
    /* requests finish in order per set; wait for the oldest, refill it */
    for (;;) {
        int s = -1;
        for (int i = 0; i < q; i++)
            if (slots[i].pend != NULL &&
                (s < 0 || slots[i].t_sent < slots[s].t_sent))
                s = i;
        if (s < 0)
            break;
        gemm_timings tm;
        int rv = gemm_wait(slots[s].pend, &tm);
        slots[s].pend = NULL;
        add_sample(t, smp, now_s() - slots[s].t_sent);
        if (rv == GEMM_OK) {
            t->ok++;
            t->compute_us += (double)tm.compute_us;
            t->queued_us += (double)tm.queued_us;
            t->daemon_us += (double)tm.total_us;
            if (opt.check_every > 0 &&
                ++slots[s].replies % (uint64_t)opt.check_every == 0)
                record_check(t, &slots[s]);
        } else {
            note_error(t, rv, "gemm");
        }
        if (more(issued, end)) {
            slots[s].t_sent = now_s();
            rv = gemm_submit(c, &slots[s].op, &slots[s].pend);
            issued++;
            if (rv != GEMM_OK) {
                slots[s].pend = NULL;
                note_error(t, rv, "submit");
            }
        }
    }
    t->t_end = now_s();
}

/* Untimed rounds; with --check, D poisoned first and every reply checked.
 * Returns the number of failed requests. */
static int checked_rounds(gemm_client *c, slot *slots, int rounds, tally *t)
{
    int bad = 0;
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < opt.inflight; i++) {
            if (opt.check)
                poison_d(&slots[i]);
            int rv = gemm_run(c, &slots[i].op, NULL);
            if (rv != GEMM_OK) {
                note_error(t, rv, "gemm (untimed)");
                bad++;
            } else if (opt.check) {
                record_check(t, &slots[i]);
            }
        }
    return bad;
}

/*
 * One client process: connects, allocates and fills its buffer sets (and
 * uploads B with --resident-b), warms up, then runs the ping phase
 * (--ping-baseline) and the GEMM phase, each started by the parent for all
 * processes at once, and a final checked round with --check. A process that
 * cannot set up still takes part in the barriers. Returns its exit status.
 */
static int client_main(int idx, int ready, const int *go)
{
    tally *tp = tally_of(idx, PH_PING), *tg = tally_of(idx, PH_GEMM);
    uint64_t rng = opt.seed * 0x100000001b3ull + (uint64_t)idx * 7919 + 1;
    slot slots[MAX_INFLIGHT];
    gemm_client *c = NULL;
    int rv, ok = 1;

    memset(slots, 0, sizeof(slots));
    if ((rv = gemm_client_open(&c, opt.url)) != GEMM_OK) {
        note_error(tg, rv, "connect");
        ok = 0;
    }
    if (ok)
        gemm_client_set_timeout(c, 120000);
    for (int i = 0; ok && i < opt.inflight; i++)
        if ((rv = slot_init(c, &slots[i], &rng)) != GEMM_OK) {
            note_error(tg, rv, "buffer set");
            ok = 0;
        }
    if (ok && opt.resident_b && (rv = resident_b_setup(c, slots)) != GEMM_OK) {
        note_error(tg, rv, "resident B upload");
        ok = 0;
    }
    if (ok && checked_rounds(c, slots, opt.warmup, tg) > 0)
        ok = 0;
    for (int i = 0; ok && opt.ping && i < 100; i++)
        gemm_ping(c, NULL);

    barrier(ready, go[0]);
    if (ok && opt.ping)
        ping_phase(c, tp, samples_of(idx, PH_PING));
    barrier(ready, go[1]);
    if (ok)
        gemm_phase(c, slots, tg, samples_of(idx, PH_GEMM));
    if (ok && opt.check)
        checked_rounds(c, slots, 1, tg);
    if (c != NULL)
        resident_b_free(c);
    for (int i = 0; i < opt.inflight; i++)
        gemm_buffer_free(slots[i].buf);
    gemm_client_close(c);
    return ok ? 0 : 1;
}

/* ---- the parent ------------------------------------------------------- */

/* Waits for one byte on `ready` from every live child (a child that died
 * counts as arrived), then lets them all go at once by closing `go`.
 * Returns the children still alive. */
static int release(int ready, int go, pid_t *kids, int alive)
{
    int got = 0;
    while (got < alive) {
        char b;
        fd_set rs;
        struct timeval tv = {0, 200000};
        FD_ZERO(&rs);
        FD_SET(ready, &rs);
        if (select(ready + 1, &rs, NULL, NULL, &tv) > 0 &&
            read(ready, &b, 1) == 1) {
            got++;
            continue;
        }
        for (int i = 0; i < opt.procs; i++) {
            int ws;
            if (kids[i] > 0 && waitpid(kids[i], &ws, WNOHANG) == kids[i]) {
                fprintf(stderr, "gemm_e2e: client %d exited early\n", i);
                kids[i] = -1;
                alive--;
            }
        }
    }
    close(go);
    return alive;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

typedef struct result {
    uint64_t ok, errors, checked, wrong;
    double wall, worst_rel;
    double compute_us, queued_us;
    double p50, p99, mean;
} result;

/* Sums one phase over the processes. */
static result gather(int ph)
{
    result r;
    memset(&r, 0, sizeof(r));
    double t0 = 0, t1 = 0;
    size_t ns = 0;
    for (int i = 0; i < opt.procs; i++)
        ns += tally_of(i, ph)->nsamples;
    float *all = malloc(sizeof(float) * (ns ? ns : 1));
    ns = 0;
    int first = 1;
    for (int i = 0; i < opt.procs; i++) {
        const tally *t = tally_of(i, ph);
        r.ok += t->ok;
        r.errors += t->errors;
        r.checked += t->checked;
        r.wrong += t->wrong;
        r.compute_us += t->compute_us;
        r.queued_us += t->queued_us;
        if (t->worst_rel > r.worst_rel)
            r.worst_rel = t->worst_rel;
        if (t->ran) {
            if (first || t->t_start < t0)
                t0 = t->t_start;
            if (first || t->t_end > t1)
                t1 = t->t_end;
            first = 0;
        }
        if (all != NULL) {
            memcpy(all + ns, samples_of(i, ph), sizeof(float) * t->nsamples);
            ns += t->nsamples;
        }
    }
    r.wall = t1 - t0;
    if (all != NULL && ns > 0) {
        double sum = 0;
        qsort(all, ns, sizeof(float), cmp_float);
        r.p50 = all[(size_t)ceil(0.50 * (double)ns) - 1];
        r.p99 = all[(size_t)ceil(0.99 * (double)ns) - 1];
        for (size_t i = 0; i < ns; i++)
            sum += all[i];
        r.mean = sum / (double)ns;
    }
    free(all);
    return r;
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: gemm_e2e [options]\n"
        "Streams GEMMs through a running gemmd from P client processes.\n\n"
        "  --url URL          the daemon (default: $GEMM_URL, then the\n"
        "                     usual socket)\n"
        "  --procs P          client processes (default 1)\n"
        "  --inflight Q       requests in flight per process, each with its\n"
        "                     own buffer set (default 2, at most %d)\n"
        "  --seconds S        timed phase length (default 5)\n"
        "  --requests R       or this many requests per process\n"
        "  -m M -n N -k K     shape (default 1024^3; 64^3 with --latency)\n"
        "  --dtype T          A and B: bf16, fp16, fp32 (default bf16)\n"
        "  --cd-dtype T       C and D (default: as --dtype)\n"
        "  --ta, --tb         A stored K x M, B stored N x K\n"
        "  --alpha X, --beta X  (default 1, 0; beta != 0 sends a random C)\n"
        "  --check            check warm-up replies and a final round (D\n"
        "                     poisoned) on sampled rows against fp64\n"
        "  --check-every N    also check every Nth timed reply\n"
        "  --check-rows N     rows of D checked per reply (default 8)\n"
        "  --warmup W         untimed rounds per buffer set (default 2)\n"
        "  --resident-b       upload B once (gemm_tensor_upload) and name\n"
        "                     the tensor in every request\n"
        "  --latency          tiny GEMMs one at a time: 64^3, Q = 1, and\n"
        "                     --ping-baseline\n"
        "  --ping-baseline    time bare round trips (gemm_ping) first\n"
        "  --label NAME       the run's name in the table and CSV\n"
        "  --csv FILE         also write the table as CSV\n"
        "  --seed N           random seed (default 1)\n"
        "Exit status: 0 ok, 1 errors or wrong results, 2 usage, 3 mode\n"
        "unavailable in this build.\n",
        MAX_INFLIGHT);
}

static int parse_dim(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v == 0 || v > (1ull << 20))
        return -1;
    *out = v;
    return 0;
}

static int parse_args(int argc, char **argv)
{
    enum {
        O_URL = 256,
        O_PROCS,
        O_INFL,
        O_SECS,
        O_REQS,
        O_DT,
        O_CDT,
        O_TA,
        O_TB,
        O_ALPHA,
        O_BETA,
        O_CHECK,
        O_CEVERY,
        O_CROWS,
        O_WARM,
        O_RES,
        O_LAT,
        O_PING,
        O_LABEL,
        O_CSV,
        O_SEED
    };
    static const struct option lo[] = {{"url", 1, 0, O_URL},
                                       {"procs", 1, 0, O_PROCS},
                                       {"inflight", 1, 0, O_INFL},
                                       {"seconds", 1, 0, O_SECS},
                                       {"requests", 1, 0, O_REQS},
                                       {"dtype", 1, 0, O_DT},
                                       {"cd-dtype", 1, 0, O_CDT},
                                       {"ta", 0, 0, O_TA},
                                       {"tb", 0, 0, O_TB},
                                       {"alpha", 1, 0, O_ALPHA},
                                       {"beta", 1, 0, O_BETA},
                                       {"check", 0, 0, O_CHECK},
                                       {"check-every", 1, 0, O_CEVERY},
                                       {"check-rows", 1, 0, O_CROWS},
                                       {"warmup", 1, 0, O_WARM},
                                       {"resident-b", 0, 0, O_RES},
                                       {"latency", 0, 0, O_LAT},
                                       {"ping-baseline", 0, 0, O_PING},
                                       {"label", 1, 0, O_LABEL},
                                       {"csv", 1, 0, O_CSV},
                                       {"seed", 1, 0, O_SEED},
                                       {"help", 0, 0, 'h'},
                                       {0, 0, 0, 0}};
    int ch, have_m = 0, have_n = 0, have_k = 0, have_q = 0, bad = 0;
    while ((ch = getopt_long(argc, argv, "m:n:k:h", lo, NULL)) != -1) {
        switch (ch) {
        case 'm':
            bad |= parse_dim(optarg, &opt.m);
            have_m = 1;
            break;
        case 'n':
            bad |= parse_dim(optarg, &opt.n);
            have_n = 1;
            break;
        case 'k':
            bad |= parse_dim(optarg, &opt.k);
            have_k = 1;
            break;
        case O_URL:
            opt.url = optarg;
            break;
        case O_PROCS:
            opt.procs = atoi(optarg);
            break;
        case O_INFL:
            opt.inflight = atoi(optarg);
            have_q = 1;
            break;
        case O_SECS:
            opt.seconds = atof(optarg);
            break;
        case O_REQS:
            opt.requests = atol(optarg);
            break;
        case O_DT:
            bad |= gemm_dtype_parse(optarg, &opt.ab) != 0;
            break;
        case O_CDT:
            bad |= gemm_dtype_parse(optarg, &opt.cd) != 0;
            opt.cd_given = 1;
            break;
        case O_TA:
            opt.ta = 1;
            break;
        case O_TB:
            opt.tb = 1;
            break;
        case O_ALPHA:
            opt.alpha = (float)atof(optarg);
            break;
        case O_BETA:
            opt.beta = (float)atof(optarg);
            break;
        case O_CHECK:
            opt.check = 1;
            break;
        case O_CEVERY:
            opt.check_every = atoi(optarg);
            break;
        case O_CROWS:
            opt.check_rows = atoi(optarg);
            break;
        case O_WARM:
            opt.warmup = atoi(optarg);
            break;
        case O_RES:
            opt.resident_b = 1;
            break;
        case O_LAT:
            opt.latency = 1;
            break;
        case O_PING:
            opt.ping = 1;
            break;
        case O_LABEL:
            opt.label = optarg;
            break;
        case O_CSV:
            opt.csv = optarg;
            break;
        case O_SEED:
            opt.seed = (unsigned)atol(optarg);
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return -1;
        }
    }
    if (opt.latency) {
        opt.m = have_m ? opt.m : 64;
        opt.n = have_n ? opt.n : 64;
        opt.k = have_k ? opt.k : 64;
        opt.inflight = have_q ? opt.inflight : 1;
        opt.ping = 1;
    }
    if (!opt.cd_given)
        opt.cd = opt.ab;
    if (opt.seconds <= 0 && opt.requests <= 0)
        opt.seconds = 5;
    if (opt.check_every > 0)
        opt.check = 1;
    if (opt.label == NULL)
        opt.label = opt.latency      ? "latency"
                    : opt.resident_b ? "resident-b"
                                     : "stream";
    if (bad || opt.procs < 1 || opt.procs > MAX_PROCS || opt.inflight < 1 ||
        opt.inflight > MAX_INFLIGHT || opt.check_rows < 1 || opt.warmup < 0 ||
        opt.check_every < 0 || optind != argc) {
        usage(stderr);
        return -1;
    }
    return 0;
}

/* ---- the table ------------------------------------------------------- */

static void print_header(void)
{
    printf("| run | shape (m x n x k) | A/B -> D | P x Q | requests | req/s "
           "| TFLOP/s | H2D GB/s | D2H GB/s | PCIe floor | p50 us | p99 us "
           "| daemon ms | kernel TFLOP/s | e2e/kernel | errors "
           "| checked (max rel err) |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---"
           "|---|---|\n");
}

static void shape_str(char *s, size_t len)
{
    snprintf(s, len, "%llux%llux%llu%s%s%s", (unsigned long long)opt.m,
             (unsigned long long)opt.n, (unsigned long long)opt.k,
             opt.ta ? " ta" : "", opt.tb ? " tb" : "",
             opt.resident_b ? " B resident" : "");
}

static void print_ping(const result *r)
{
    printf("| %s: ping | - | - | %d x 1 | %llu | %.0f | - | - | - | - | "
           "%.1f | %.1f | - | - | - | %llu | - |\n",
           opt.label, opt.procs, (unsigned long long)r->ok,
           r->wall > 0 ? (double)r->ok / r->wall : 0, r->p50, r->p99,
           (unsigned long long)r->errors);
}

typedef struct rates {
    double rps, tflops, h2d, d2h, floor_pct;
    double dms;     /* the daemon's compute time per GEMM, ms */
    double ktflops; /* at its mean kernel stage time */
} rates;

static rates rates_of(const result *r)
{
    rates x;
    memset(&x, 0, sizeof(x));
    double flop = 2.0 * (double)opt.m * (double)opt.n * (double)opt.k;
    double bi = bytes_in(), bo = bytes_out();
    if (r->wall > 0) {
        x.rps = (double)r->ok / r->wall;
        x.tflops = x.rps * flop * 1e-12;
        x.h2d = x.rps * bi * 1e-9;
        x.d2h = x.rps * bo * 1e-9;
        /* the floor: both directions at PCIE_GBS at once */
        double floor_s = (double)r->ok * (bi > bo ? bi : bo) / (PCIE_GBS * 1e9);
        x.floor_pct = floor_s / r->wall * 100;
    }
    if (r->ok > 0)
        x.dms = r->compute_us / (double)r->ok * 1e-3;
    if (have_dstat && dstat.stage_kernel_us > 0)
        x.ktflops = flop / (dstat.stage_kernel_us * 1e-6) * 1e-12;
    return x;
}

static void print_gemm(const result *r)
{
    char shape[96], chk[48];
    rates x = rates_of(r);
    shape_str(shape, sizeof(shape));
    if (r->checked > 0)
        snprintf(chk, sizeof(chk), "%llu, %llu wrong (%.2g)",
                 (unsigned long long)r->checked, (unsigned long long)r->wrong,
                 r->worst_rel);
    else
        snprintf(chk, sizeof(chk), "-");
    printf("| %s | %s | %s -> %s | %d x %d | %llu | %.1f | %.3g | %.2f | "
           "%.2f | %.1f%% | %.1f | %.1f | %.3f | %.3g | %.1f%% | %llu | %s "
           "|\n",
           opt.label, shape, gemm_dtype_name(opt.ab), gemm_dtype_name(opt.cd),
           opt.procs, opt.inflight, (unsigned long long)r->ok, x.rps, x.tflops,
           x.h2d, x.d2h, x.floor_pct, r->p50, r->p99, x.dms, x.ktflops,
           x.ktflops > 0 ? x.tflops / x.ktflops * 100 : 0,
           (unsigned long long)r->errors, chk);
}

static void write_csv(const result *rp, const result *rg)
{
    FILE *f = fopen(opt.csv, "w");
    if (f == NULL) {
        fprintf(stderr, "gemm_e2e: %s: %s\n", opt.csv, strerror(errno));
        return;
    }
    fprintf(f, "label,phase,m,n,k,ab,cd,ta,tb,resident_b,procs,inflight,"
               "requests,errors,checked,wrong,max_rel_err,wall_s,req_s,"
               "tflops,h2d_gbs,d2h_gbs,pcie_floor_pct,p50_us,p99_us,mean_us,"
               "daemon_compute_ms,daemon_queued_ms,stage_queue_us,"
               "stage_h2d_us,stage_kernel_us,stage_d2h_us,kernel_tflops\n");
    for (int ph = 0; ph < PH_N; ph++) {
        const result *r = ph == PH_PING ? rp : rg;
        if (ph == PH_PING && !opt.ping)
            continue;
        rates x = ph == PH_GEMM ? rates_of(r) : (rates){0};
        if (ph == PH_PING && r->wall > 0)
            x.rps = (double)r->ok / r->wall;
        fprintf(f,
                "%s,%s,%llu,%llu,%llu,%s,%s,%d,%d,%d,%d,%d,%llu,%llu,"
                "%llu,%llu,%.3g,%.6f,%.3f,%.4f,%.4f,%.4f,%.2f,%.2f,%.2f,"
                "%.2f,%.4f,%.4f,%.2f,%.2f,%.2f,%.2f,%.3f\n",
                opt.label, ph == PH_PING ? "ping" : "gemm",
                (unsigned long long)opt.m, (unsigned long long)opt.n,
                (unsigned long long)opt.k, gemm_dtype_name(opt.ab),
                gemm_dtype_name(opt.cd), opt.ta, opt.tb, opt.resident_b,
                opt.procs, ph == PH_PING ? 1 : opt.inflight,
                (unsigned long long)r->ok, (unsigned long long)r->errors,
                (unsigned long long)r->checked, (unsigned long long)r->wrong,
                r->worst_rel, r->wall, x.rps, x.tflops, x.h2d, x.d2h,
                x.floor_pct, r->p50, r->p99, r->mean, x.dms,
                r->ok ? r->queued_us / (double)r->ok * 1e-3 : 0,
                dstat.stage_queue_us, dstat.stage_h2d_us, dstat.stage_kernel_us,
                dstat.stage_d2h_us, x.ktflops);
    }
    fclose(f);
}

/* ---- main -------------------------------------------------------------- */

int main(int argc, char **argv)
{
    int go[2][2], ready[2], fail = 0;

    if (parse_args(argc, argv) != 0)
        return 2;
    if (opt.resident_b && !HAVE_RESIDENT) {
        printf("gemm_e2e: --resident-b: mode unavailable: this "
               "libgemmclient has no resident tensors (gemm_tensor_upload "
               "in gemm/gemm.h)\n");
        return 3;
    }
    signal(SIGPIPE, SIG_IGN);
    size_t tbytes = sizeof(tally) * (size_t)opt.procs * PH_N;
    size_t sbytes = sizeof(float) * (size_t)opt.procs * PH_N * MAX_SAMPLES;
    tallies = mmap(NULL, tbytes, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    samples = mmap(NULL, sbytes, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (tallies == MAP_FAILED || samples == MAP_FAILED || pipe(go[0]) != 0 ||
        pipe(go[1]) != 0 || pipe(ready) != 0) {
        perror("gemm_e2e: mmap/pipe");
        return 1;
    }
    memset(tallies, 0, tbytes);
    /* The clients are forked before this process starts nng (whose threads
     * a fork would not carry over). */
    pid_t kids[MAX_PROCS];
    int alive = 0;
    fflush(stdout);
    for (int i = 0; i < opt.procs; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            int rd[2] = {go[0][0], go[1][0]};
            close(go[0][1]);
            close(go[1][1]);
            close(ready[0]);
            _exit(client_main(i, ready[1], rd));
        }
        if (kids[i] < 0) {
            perror("gemm_e2e: fork");
            fail = 1;
        } else {
            alive++;
        }
    }
    close(go[0][0]);
    close(go[1][0]);
    close(ready[1]);

    /* who we talk to, for the header line */
    gemm_client *c = NULL;
    gemm_server_info info;
    memset(&info, 0, sizeof(info));
    if (gemm_client_open(&c, opt.url) == GEMM_OK) {
        gemm_ping(c, &info);
        gemm_client_close(c);
    }

    double t0 = now_s();
    alive = release(ready[0], go[0][1], kids, alive); /* set up: ping */
    double setup_s = now_s() - t0;
    alive = release(ready[0], go[1][1], kids, alive); /* pinged: GEMMs */
    for (int i = 0; i < opt.procs; i++) {
        int ws;
        if (kids[i] > 0 && (waitpid(kids[i], &ws, 0) != kids[i] ||
                            !WIFEXITED(ws) || WEXITSTATUS(ws) != 0))
            fail = 1;
    }
    for (int i = 0; i < opt.procs; i++)
        for (int ph = 0; ph < PH_N; ph++)
            if (tally_of(i, ph)->first_err != 0)
                fprintf(stderr, "gemm_e2e: client %d: %s\n", i,
                        tally_of(i, ph)->first_msg);

    /* the daemon's stage times: means over every GEMM since it started */
    if (gemm_client_open(&c, opt.url) == GEMM_OK) {
        have_dstat = gemm_get_status(c, &dstat) == GEMM_OK;
        gemm_client_close(c);
    }
    result rp = gather(PH_PING), rg = gather(PH_GEMM);
    if (rg.errors || rg.wrong || rp.errors || rg.ok == 0)
        fail = 1;
    if (opt.csv != NULL)
        write_csv(&rp, &rg);

    printf("\ngemm_e2e: gemmd %s, backend %s (%s), %s; setup %.1f s; "
           "timed %.2f s; bytes per request %.1f MiB in, %.1f MiB out; "
           "PCIe floor at %.0f GB/s per direction, overlapped\n",
           info.server_version[0] ? info.server_version : "?",
           info.backend[0] ? info.backend : "?",
           info.device[0] ? info.device : "?",
           opt.url ? opt.url : "default url", setup_s, rg.wall,
           bytes_in() / 1048576.0, bytes_out() / 1048576.0, PCIE_GBS);
    if (have_dstat)
        printf("daemon, mean per GEMM since it started: queue %.1f us, H2D "
               "%.1f us, kernel %.1f us, D2H %.1f us; pinned %.1f MiB, "
               "device %.1f MiB, %u resident tensors, tensor maps %llu hits "
               "%llu misses\n",
               dstat.stage_queue_us, dstat.stage_h2d_us, dstat.stage_kernel_us,
               dstat.stage_d2h_us, (double)dstat.pinned_bytes / 1048576.0,
               (double)dstat.device_bytes / 1048576.0, dstat.tensors,
               (unsigned long long)dstat.tmap_hits,
               (unsigned long long)dstat.tmap_misses);
    print_header();
    if (opt.ping)
        print_ping(&rp);
    print_gemm(&rg);
    if (opt.ping && rp.ok > 0 && rg.ok > 0)
        printf("round trip over a bare ping: p50 %+.1f us, p99 %+.1f us\n",
               rg.p50 - rp.p50, rg.p99 - rp.p99);
    printf("%s\n", fail ? "FAIL" : "OK");
    return fail;
}
