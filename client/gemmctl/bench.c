/*
 * bench.c: `gemmctl bench`, the daemon's kernels timed through the daemon.
 * For each size: random A and B in shared memory; the backend's reference
 * kernel (cuBLAS on the GPU, OpenBLAS on the CPU) computes the expected D;
 * then each chosen kernel runs W times to warm up (default 3: the CUDA
 * backend spreads requests over three workers, each with its own cuBLAS
 * handle and tensor maps made on first use) and R times timed. A row
 * reports the median time of the kernel alone (the daemon's kernel_ns;
 * its compute time when the backend does not measure the kernel), TFLOP/s,
 * the ratio to the reference's TFLOP/s in the same run, and the largest
 * |D - D_ref| over the largest |D_ref|. A kernel that cannot serve the
 * request is skipped with the daemon's reason. The table comes last; --csv
 * writes the same rows in the format of the kernel benchmark (bench_ladder)
 * that scripts/plot-ladder.sh plots.
 */
#include "gemmctl.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_MAX_SIZES   64
#define BENCH_MAX_KERNELS 64
#define BENCH_CSV_HEADER                                                       \
    "kernel,rung,dtype,precision,m,n,k,ms,tflops,ratio_vs_ref,max_rel_err"

static const char bench_usage[] =
    "usage: gemmctl [--url URL] bench [--kernels A,B,...|--ladder]\n"
    "                                 [--sizes S,...] [options]\n"
    "\n"
    "Times the daemon's kernels (gemmctl kernels lists them) against its\n"
    "reference kernel on random inputs, through the daemon. For each size\n"
    "the reference computes the expected D; each kernel then runs W times\n"
    "to warm up and R times timed. Reported: the median time of the kernel\n"
    "alone (the daemon's compute time where it does not measure kernels),\n"
    "TFLOP/s, the ratio to the reference, and the max relative error\n"
    "max|D - D_ref| / max|D_ref|.\n"
    "\n"
    "  --kernels A,B,...    these kernels ('auto': what the daemon picks)\n"
    "  --ladder             the ladder's kernels in rung order\n"
    "                       (default: every kernel)\n"
    "  --sizes S,...        N (N x N x N) or MxNxK each\n"
    "                       (default 256,512,1024,2048,4096)\n"
    "  --dtype T            A and B: bf16, fp16 or fp32 (default bf16)\n"
    "  --cd-dtype T         C and D (default fp32)\n"
    "  --precision P        fp32 inputs: default, tf32 or fp32\n"
    "  --repeat R           timed runs per kernel and size (default 5)\n"
    "  --warmup W           untimed runs first (default 3)\n"
    "  --seed S             random seed (default 42)\n"
    "  --csv FILE           also write the rows as CSV:\n"
    "                       " BENCH_CSV_HEADER "\n";

struct bench_size {
    uint64_t m, n, k;
};

struct bench_args {
    const char *kernels; /* comma-separated names, or NULL */
    bool ladder;
    struct bench_size sizes[BENCH_MAX_SIZES];
    size_t nsizes;
    gemm_dtype ab, cd;
    gemm_precision precision;
    unsigned repeat, warmup;
    uint64_t seed;
    const char *csv;
};

/* One line of the table: a kernel at a size. */
struct bench_row {
    const gemm_kernel_info *k;
    struct bench_size s;
    double ms, tflops, ratio, err;
};

struct bench_run {
    struct bench_row *rows;
    size_t nrows, cap;
    int failures; /* runs that failed for another reason than support */
};

static const gemm_kernel_info auto_kernel = {
    .name = "auto",
    .summary = "what the daemon picks",
};

static int parse_size_item(const char *s, struct bench_size *out)
{
    uint64_t v[3];
    int n = 0;
    const char *p = s;
    while (n < 3) {
        char *end;
        if (*p < '0' || *p > '9')
            return -1;
        errno = 0;
        unsigned long long x = strtoull(p, &end, 10);
        if (errno != 0 || x == 0 || x > (1ull << 31))
            return -1;
        v[n++] = x;
        if (*end == '\0')
            break;
        if (*end != 'x' && *end != 'X')
            return -1;
        p = end + 1;
    }
    if (n == 1)
        v[1] = v[2] = v[0];
    else if (n != 3 || *p == '\0')
        return -1;
    out->m = v[0];
    out->n = v[1];
    out->k = v[2];
    return 0;
}

static int parse_sizes(const char *list, struct bench_args *a)
{
    char item[64];
    a->nsizes = 0;
    for (const char *p = list;;) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof(item) || a->nsizes == BENCH_MAX_SIZES)
            return ctl_error(EXIT_USAGE,
                             "bench: --sizes wants up to %d items N or MxNxK "
                             "separated by commas, not '%s'",
                             BENCH_MAX_SIZES, list);
        memcpy(item, p, len);
        item[len] = '\0';
        if (parse_size_item(item, &a->sizes[a->nsizes]) != 0)
            return ctl_error(EXIT_USAGE,
                             "bench: --sizes: '%s' is not N or MxNxK "
                             "(each 1..2^31)",
                             item);
        a->nsizes++;
        if (p[len] == '\0')
            return EXIT_OK;
        p += len + 1;
    }
}

static int bench_parse(int argc, char **argv, struct bench_args *a)
{
    enum {
        O_KERNELS = 256,
        O_LADDER,
        O_SIZES,
        O_DTYPE,
        O_CD,
        O_PRECISION,
        O_REPEAT,
        O_WARMUP,
        O_SEED,
        O_CSV
    };
    static const struct option opts[] = {
        {"kernels", required_argument, NULL, O_KERNELS},
        {"ladder", no_argument, NULL, O_LADDER},
        {"sizes", required_argument, NULL, O_SIZES},
        {"dtype", required_argument, NULL, O_DTYPE},
        {"cd-dtype", required_argument, NULL, O_CD},
        {"precision", required_argument, NULL, O_PRECISION},
        {"repeat", required_argument, NULL, O_REPEAT},
        {"warmup", required_argument, NULL, O_WARMUP},
        {"seed", required_argument, NULL, O_SEED},
        {"csv", required_argument, NULL, O_CSV},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch, rv = EXIT_OK;
    char *end;

    memset(a, 0, sizeof(*a));
    a->ab = GEMM_BF16;
    a->cd = GEMM_FP32;
    a->repeat = 5;
    a->warmup = 3;
    a->seed = 42;
    parse_sizes("256,512,1024,2048,4096", a);
    optind = 0;
    opterr = 0;
    while (rv == EXIT_OK &&
           (ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (ch) {
        case O_KERNELS:
            a->kernels = optarg;
            break;
        case O_LADDER:
            a->ladder = true;
            break;
        case O_SIZES:
            rv = parse_sizes(optarg, a);
            break;
        case O_DTYPE:
        case O_CD:
            if (gemm_dtype_parse(optarg, ch == O_DTYPE ? &a->ab : &a->cd) !=
                GEMM_OK)
                rv =
                    ctl_error(EXIT_USAGE,
                              "bench: %s wants bf16, fp16 or fp32, not "
                              "'%s'",
                              ch == O_DTYPE ? "--dtype" : "--cd-dtype", optarg);
            break;
        case O_PRECISION:
            rv = ctl_parse_precision("bench", "--precision", optarg,
                                     &a->precision);
            break;
        case O_REPEAT:
            errno = 0;
            a->repeat = (unsigned)strtoul(optarg, &end, 10);
            if (errno != 0 || end == optarg || *end != '\0' ||
                optarg[0] == '-' || a->repeat == 0 || a->repeat > 10000)
                rv = ctl_error(EXIT_USAGE,
                               "bench: --repeat wants 1..10000, not '%s'",
                               optarg);
            break;
        case O_WARMUP:
            errno = 0;
            a->warmup = (unsigned)strtoul(optarg, &end, 10);
            if (errno != 0 || end == optarg || *end != '\0' ||
                optarg[0] == '-' || a->warmup > 1000)
                rv = ctl_error(EXIT_USAGE,
                               "bench: --warmup wants 0..1000, not '%s'",
                               optarg);
            break;
        case O_SEED:
            errno = 0;
            a->seed = strtoull(optarg, &end, 10);
            if (errno != 0 || end == optarg || *end != '\0')
                rv =
                    ctl_error(EXIT_USAGE,
                              "bench: --seed wants a number, not '%s'", optarg);
            break;
        case O_CSV:
            a->csv = optarg;
            break;
        case 'h':
            fputs(bench_usage, stdout);
            return -1;
        case ':':
            return ctl_error(EXIT_USAGE, "bench: %s needs an argument",
                             argv[optind - 1]);
        default:
            return ctl_error(EXIT_USAGE,
                             "bench: unknown option '%s' (see gemmctl "
                             "bench --help)",
                             argv[optind - 1]);
        }
    }
    if (rv != EXIT_OK)
        return rv;
    if (optind < argc)
        return ctl_error(EXIT_USAGE, "bench: unexpected argument '%s'",
                         argv[optind]);
    if (a->kernels != NULL && a->ladder)
        return ctl_error(EXIT_USAGE,
                         "bench: give --kernels or --ladder, not both");
    if (gemm_dtype_size(a->ab) > 4 || gemm_dtype_size(a->cd) > 4)
        return ctl_error(
            EXIT_USAGE,
            "bench: compares the kernels of the bf16, fp16 and "
            "fp32 types; %s runs on the reference alone (time "
            "it with gemmctl mm --dtype %s --repeat N)",
            gemm_dtype_name(gemm_dtype_size(a->ab) > 4 ? a->ab : a->cd),
            gemm_dtype_name(gemm_dtype_size(a->ab) > 4 ? a->ab : a->cd));
    if (gemm_dtype_is_integer(a->ab) || gemm_dtype_is_integer(a->cd))
        return ctl_error(EXIT_USAGE,
                         "bench: compares the kernels of the bf16, fp16 and "
                         "fp32 types against a floating-point reference; "
                         "time int8 with gemmctl mm --dtype int8 --repeat N "
                         "(--check compares it exactly)");
    if (a->ab == GEMM_FP32 && a->cd != GEMM_FP32)
        return ctl_error(EXIT_USAGE, "bench: fp32 inputs need --cd-dtype "
                                     "fp32");
    if (a->ab != GEMM_FP32 && a->precision != GEMM_PRECISION_DEFAULT)
        return ctl_error(EXIT_USAGE,
                         "bench: --precision %s is for fp32 inputs (--dtype "
                         "fp32)",
                         gemm_precision_name(a->precision));
    return EXIT_OK;
}

static int by_rung(const void *x, const void *y)
{
    const gemm_kernel_info *a = *(const gemm_kernel_info *const *)x;
    const gemm_kernel_info *b = *(const gemm_kernel_info *const *)y;
    return (a->ladder > b->ladder) - (a->ladder < b->ladder);
}

/* The kernels to run besides the reference, into sel (at most
 * BENCH_MAX_KERNELS). Returns EXIT_OK or a usage error. */
static int choose(const struct bench_args *a, const gemm_kernel_info *ks,
                  size_t n, const gemm_kernel_info **sel, size_t *nsel)
{
    *nsel = 0;
    if (a->kernels == NULL) {
        for (size_t i = 0; i < n && *nsel < BENCH_MAX_KERNELS; i++) {
            if (ks[i].reference || strcmp(ks[i].name, "auto") == 0)
                continue;
            if (a->ladder && ks[i].ladder == 0)
                continue;
            sel[(*nsel)++] = &ks[i];
        }
        if (a->ladder)
            qsort(sel, *nsel, sizeof(*sel), by_rung);
        return EXIT_OK;
    }
    char name[64];
    for (const char *p = a->kernels;;) {
        size_t len = strcspn(p, ",");
        const gemm_kernel_info *k = NULL;
        if (len == 0 || len >= sizeof(name))
            return ctl_error(EXIT_USAGE,
                             "bench: --kernels wants names separated by "
                             "commas, not '%s'",
                             a->kernels);
        memcpy(name, p, len);
        name[len] = '\0';
        for (size_t i = 0; i < n && k == NULL; i++)
            if (strcmp(ks[i].name, name) == 0)
                k = &ks[i];
        if (k == NULL && strcmp(name, "auto") == 0)
            k = &auto_kernel;
        if (k == NULL)
            return ctl_error(EXIT_USAGE,
                             "bench: the daemon has no kernel '%s' (gemmctl "
                             "kernels lists them)",
                             name);
        if (*nsel == BENCH_MAX_KERNELS)
            return ctl_error(EXIT_USAGE, "bench: at most %d kernels",
                             BENCH_MAX_KERNELS);
        if (!k->reference)
            sel[(*nsel)++] = k;
        if (p[len] == '\0')
            return EXIT_OK;
        p += len + 1;
    }
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

/* Runs op `warmup` times (at least once: a refusal shows there), then
 * `repeat` times; *ns is the median time of the kernel (or the compute
 * time). Returns the first failure's code. */
static int timed(gemm_client *c, const gemm_op *op, unsigned warmup,
                 unsigned repeat, uint64_t *times, uint64_t *ns)
{
    gemm_timings t;
    int rv = gemm_run(c, op, &t);
    for (unsigned r = 1; rv == GEMM_OK && r < warmup; r++)
        rv = gemm_run(c, op, &t);
    for (unsigned r = 0; rv == GEMM_OK && r < repeat; r++) {
        if ((rv = gemm_run(c, op, &t)) == GEMM_OK)
            times[r] = t.kernel_ns ? t.kernel_ns : t.compute_us * 1000;
    }
    if (rv != GEMM_OK)
        return rv;
    qsort(times, repeat, sizeof(*times), cmp_u64);
    *ns = times[repeat / 2];
    return GEMM_OK;
}

/* max|d - ref| / max|ref| over count elements; NaN in d counts as
 * infinite. */
static double max_rel_err(const float *d, const float *ref, size_t count)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < count; i++) {
        double e = fabs((double)d[i] - (double)ref[i]);
        if (!(e <= num))
            num = isnan(e) ? INFINITY : e;
        if (fabs((double)ref[i]) > den)
            den = fabs((double)ref[i]);
    }
    return den > 0.0 ? num / den : num;
}

static int add_row(struct bench_run *run, const struct bench_row *row)
{
    if (run->nrows == run->cap) {
        size_t cap = run->cap ? run->cap * 2 : 32;
        struct bench_row *r = realloc(run->rows, cap * sizeof(*r));
        if (r == NULL)
            return ctl_error(EXIT_RUNTIME, "bench: out of memory");
        run->rows = r;
        run->cap = cap;
    }
    run->rows[run->nrows++] = *row;
    return EXIT_OK;
}

/* The precision column: what fp32 inputs ran as; "-" for 16-bit inputs. */
static const char *prec_word(const struct bench_args *a)
{
    if (a->ab != GEMM_FP32)
        return "-";
    return a->precision == GEMM_PRECISION_TF32 ? "tf32" : "fp32";
}

/* The buffers of one size. */
struct bench_bufs {
    gemm_buffer *a, *b, *dref, *d;
    float *ref32, *d32;
};

static void bufs_free(struct bench_bufs *b)
{
    gemm_buffer_free(b->a);
    gemm_buffer_free(b->b);
    gemm_buffer_free(b->dref);
    gemm_buffer_free(b->d);
    free(b->ref32);
    free(b->d32);
    memset(b, 0, sizeof(*b));
}

/* Remembers the last reason each kernel was skipped, so a reason that
 * holds for every size is printed once. */
struct skip_note {
    const gemm_kernel_info *k;
    char why[256];
};

static void note_skip(struct skip_note *notes, size_t *nnotes,
                      const gemm_kernel_info *k, const struct bench_size *s,
                      int rv, const char *msg)
{
    struct skip_note *sn = NULL;
    for (size_t i = 0; i < *nnotes && sn == NULL; i++)
        if (notes[i].k == k)
            sn = &notes[i];
    if (sn == NULL && *nnotes < BENCH_MAX_KERNELS + 1) {
        sn = &notes[(*nnotes)++];
        sn->k = k;
        sn->why[0] = '\0';
    }
    if (sn != NULL && strcmp(sn->why, msg) == 0)
        return;
    if (sn != NULL)
        snprintf(sn->why, sizeof(sn->why), "%s", msg);
    printf("skipped %s at %" PRIu64 "x%" PRIu64 "x%" PRIu64 ": %s (%s)\n",
           k->name, s->m, s->n, s->k, msg[0] ? msg : gemm_strerror(rv),
           gemm_strerror(rv));
}

/* One size: the reference, then every selected kernel. */
static int bench_size(gemm_client *c, const struct bench_args *a,
                      const struct bench_size *s, const gemm_kernel_info *ref,
                      const gemm_kernel_info *const *sel, size_t nsel,
                      struct bench_run *run, struct skip_note *notes,
                      size_t *nnotes)
{
    struct bench_bufs b = {0};
    size_t es = gemm_dtype_size(a->ab), cs = gemm_dtype_size(a->cd);
    uint64_t *times = calloc(a->repeat, sizeof(*times));
    uint64_t state = a->seed + s->m * 31 + s->n * 17 + s->k;
    double flops = 2.0 * (double)s->m * (double)s->n * (double)s->k;
    uint64_t ns;
    gemm_op op;
    int rv, code = EXIT_OK;

    if (s->m > SIZE_MAX / s->k / es || s->k > SIZE_MAX / s->n / es ||
        s->m > SIZE_MAX / s->n / sizeof(float)) {
        free(times);
        return ctl_error(EXIT_RUNTIME,
                         "bench: %" PRIu64 "x%" PRIu64 "x%" PRIu64
                         " is too large",
                         s->m, s->n, s->k);
    }
    size_t mn = (size_t)(s->m * s->n);
    if (times == NULL || (b.ref32 = malloc(mn * sizeof(float))) == NULL ||
        (b.d32 = malloc(mn * sizeof(float))) == NULL) {
        code = ctl_error(EXIT_RUNTIME, "bench: out of memory");
        goto out;
    }
    if ((rv = gemm_buffer_alloc(c, s->m * s->k * es, &b.a)) != GEMM_OK ||
        (rv = gemm_buffer_alloc(c, s->k * s->n * es, &b.b)) != GEMM_OK ||
        (rv = gemm_buffer_alloc(c, mn * cs, &b.dref)) != GEMM_OK ||
        (rv = gemm_buffer_alloc(c, mn * cs, &b.d)) != GEMM_OK) {
        code = ctl_fail(rv, "bench: buffers");
        goto out;
    }
    ctl_fill_random(gemm_buffer_data(b.a), a->ab, s->m * s->k, &state);
    ctl_fill_random(gemm_buffer_data(b.b), a->ab, s->k * s->n, &state);

    gemm_op_init(&op, s->m, s->n, s->k, a->ab, a->cd);
    op.precision = a->precision;
    op.a.buf = b.a;
    op.b.buf = b.b;
    op.d.buf = b.dref;
    op.kernel = ref->name;
    if ((rv = timed(c, &op, a->warmup, a->repeat, times, &ns)) != GEMM_OK) {
        char what[128];
        snprintf(what, sizeof(what),
                 "bench: reference %s at %" PRIu64 "x%" PRIu64 "x%" PRIu64,
                 ref->name, s->m, s->n, s->k);
        code = ctl_fail(rv, what);
        goto out;
    }
    gemm_convert(b.ref32, GEMM_FP32, gemm_buffer_data(b.dref), a->cd, mn);
    struct bench_row ref_row = {ref, *s, ns / 1e6, flops / (double)ns / 1e3,
                                1.0, 0.0};
    if ((code = add_row(run, &ref_row)) != EXIT_OK)
        goto out;

    op.d.buf = b.d;
    for (size_t i = 0; i < nsel; i++) {
        op.kernel = sel[i]->name;
        memset(gemm_buffer_data(b.d), 0xff, mn * cs); /* NaN: unwritten */
        rv = timed(c, &op, a->warmup, a->repeat, times, &ns);
        if (rv == GEMM_ERR_UNSUPPORTED || rv == GEMM_ERR_DTYPE) {
            note_skip(notes, nnotes, sel[i], s, rv, gemm_last_error_message());
            continue;
        }
        if (rv == GEMM_ERR_CLOSED || rv == GEMM_ERR_CONNECT) {
            code = ctl_fail(rv, "bench");
            goto out;
        }
        if (rv != GEMM_OK) {
            char what[128];
            snprintf(what, sizeof(what),
                     "bench: %s at %" PRIu64 "x%" PRIu64 "x%" PRIu64,
                     sel[i]->name, s->m, s->n, s->k);
            ctl_fail(rv, what);
            run->failures++;
            continue;
        }
        gemm_convert(b.d32, GEMM_FP32, gemm_buffer_data(b.d), a->cd, mn);
        double tf = flops / (double)ns / 1e3;
        struct bench_row row = {sel[i],
                                *s,
                                ns / 1e6,
                                tf,
                                ref_row.tflops > 0 ? tf / ref_row.tflops : 0,
                                max_rel_err(b.d32, b.ref32, mn)};
        if ((code = add_row(run, &row)) != EXIT_OK)
            goto out;
    }
out:
    free(times);
    bufs_free(&b);
    return code;
}

static void print_table(const struct bench_args *a, const struct bench_run *r)
{
    char rung[16], size[64];
    printf("\n%-16s %-4s %-5s %-5s %-17s %10s %10s %7s %11s\n", "KERNEL",
           "RUNG", "DTYPE", "PREC", "M x N x K", "MS", "TFLOP/S", "VS REF",
           "MAX REL ERR");
    for (size_t i = 0; i < r->nrows; i++) {
        const struct bench_row *w = &r->rows[i];
        snprintf(size, sizeof(size), "%" PRIu64 "x%" PRIu64 "x%" PRIu64, w->s.m,
                 w->s.n, w->s.k);
        printf("%-16s %-4s %-5s %-5s %-17s %10.4f %10.4g %6.2fx %11.3g\n",
               w->k->name, ctl_rung_str(w->k, rung, sizeof(rung)),
               gemm_dtype_name(a->ab), prec_word(a), size, w->ms, w->tflops,
               w->ratio, w->err);
    }
}

static int write_csv(const struct bench_args *a, const struct bench_run *r)
{
    FILE *f = fopen(a->csv, "w");
    if (f == NULL)
        return ctl_error(EXIT_RUNTIME, "bench: cannot write %s: %s", a->csv,
                         strerror(errno));
    fprintf(f, "%s\n", BENCH_CSV_HEADER);
    for (size_t i = 0; i < r->nrows; i++) {
        const struct bench_row *w = &r->rows[i];
        fprintf(f,
                "%s,%u,%s,%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64
                ",%.6f,%.6g,%.6g,%.3e\n",
                w->k->name, w->k->ladder, gemm_dtype_name(a->ab), prec_word(a),
                w->s.m, w->s.n, w->s.k, w->ms, w->tflops, w->ratio, w->err);
    }
    if (fclose(f) != 0)
        return ctl_error(EXIT_RUNTIME, "bench: writing %s: %s", a->csv,
                         strerror(errno));
    printf("wrote %zu rows to %s\n", r->nrows, a->csv);
    return EXIT_OK;
}

int cmd_bench(const char *url, int argc, char **argv)
{
    struct bench_args a;
    struct bench_run run = {0};
    struct skip_note notes[BENCH_MAX_KERNELS + 1];
    const gemm_kernel_info *sel[BENCH_MAX_KERNELS], *ref = NULL;
    gemm_kernel_info *ks = NULL;
    gemm_client *c = NULL;
    size_t n = 0, nsel = 0, nnotes = 0;
    gemm_server_info info;
    int rv, code;

    if ((code = bench_parse(argc, argv, &a)) != EXIT_OK)
        return code < 0 ? EXIT_OK : code;
    if ((code = ctl_open(url, &c)) != EXIT_OK)
        return code;
    if ((rv = gemm_ping(c, &info)) != GEMM_OK ||
        (rv = gemm_list_kernels(c, &ks, &n)) != GEMM_OK) {
        code = ctl_fail(rv, "bench");
        goto out;
    }
    for (size_t i = 0; i < n && ref == NULL; i++)
        if (ks[i].reference)
            ref = &ks[i];
    if (ref == NULL) {
        code = ctl_error(EXIT_RUNTIME,
                         "bench: the %s backend lists no reference kernel",
                         info.backend);
        goto out;
    }
    if ((code = choose(&a, ks, n, sel, &nsel)) != EXIT_OK)
        goto out;
    printf("bench on %s (%s): %s in, %s out%s%s, reference %s, %u runs "
           "each\n",
           info.backend, info.device, gemm_dtype_name(a.ab),
           gemm_dtype_name(a.cd), a.ab == GEMM_FP32 ? ", precision " : "",
           a.ab == GEMM_FP32 ? prec_word(&a) : "", ref->name, a.repeat);
    fflush(stdout);
    for (size_t i = 0; i < a.nsizes; i++) {
        code = bench_size(c, &a, &a.sizes[i], ref, sel, nsel, &run, notes,
                          &nnotes);
        fflush(stdout);
        if (code != EXIT_OK)
            goto out;
    }
    print_table(&a, &run);
    if (a.csv != NULL && (code = write_csv(&a, &run)) != EXIT_OK)
        goto out;
    if (run.failures > 0)
        code = ctl_error(EXIT_RUNTIME,
                         "bench: %d kernel run(s) failed "
                         "(above)",
                         run.failures);
out:
    free(run.rows);
    gemm_kernel_info_free(ks);
    gemm_client_close(c);
    return code;
}
