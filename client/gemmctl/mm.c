/*
 * mm.c: `gemmctl mm`, one GEMM through gemmd (stacks of them: mm_stack.c).
 * Either from .npy files
 * (--a, --b, optional --c) with D printed or written to --out, or from
 * random inputs (-m -n -k) timed over --repeat runs. --check compares D
 * with a reference computed here on the CPU from the inputs exactly as the
 * daemon saw them (after conversion to the request's dtype): in fp64 for
 * the 16/32-bit types, in long double for fp64, complex64 and complex128
 * (the "wide" types, which also take conjugate transposes and complex
 * alpha and beta), exactly in 64-bit integers for int8 (reduced modulo
 * 2^32, as the daemon's int32 arithmetic wraps).
 */
#include "mm.h"

#include <getopt.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reference work above which --check samples rows: 2^30 multiply-adds
 * (2^27 in long double complex for the wide types). */
#define MM_CHECK_FULL_MACS      (1ull << 30)
#define MM_CHECK_FULL_MACS_WIDE (1ull << 27)

static const char mm_usage[] =
    "usage: gemmctl [--url URL] mm --a A.npy --b B.npy [options]\n"
    "       gemmctl [--url URL] mm -m M -n N -k K [options]\n"
    "\n"
    "D = alpha * op(A) * op(B) + beta * C, row-major; op(A) is M x K and\n"
    "op(B) is K x N. With --ta, A is stored K x M (op(A) = A^T); with --tb,\n"
    "B is stored N x K.\n"
    "\n"
    "Inputs:\n"
    "  --a FILE, --b FILE   .npy matrices (bfloat16 as ml_dtypes saves\n"
    "                       it, float16, float32, float64, complex64,\n"
    "                       complex128, int8)\n"
    "  --c FILE             C, M x N (beta defaults to 1 with --c)\n"
    "                       3-D files are stacks (numpy's matmul): a stack\n"
    "                       times a stack (the same count, or one of them\n"
    "                       1) or a stack times a matrix, either side\n"
    "                       (broadcast); one batch request computes them\n"
    "                       all and D is a 3-D .npy (--out); C may be a\n"
    "                       matrix or a stack\n"
    "  -m M -n N -k K       random inputs, uniform in [-1, 1)\n"
    "  --seed S             random seed (default 42)\n"
    "Operation:\n"
    "  --alpha X            (default 1; int8: an integer in int32's\n"
    "                       range, as --beta: D = alpha op(A) op(B) +\n"
    "                       beta C in int32 that wraps on overflow)\n"
    "  --beta X             (default 0; needs --c with file inputs; random\n"
    "                       C with -m -n -k)\n"
    "  --alpha-im X, --beta-im X  imaginary parts (complex types)\n"
    "  --ta, --tb           transpose A, B\n"
    "  --op-a OP, --op-b OP N, T (= --ta, --tb) or C (conjugate transpose,\n"
    "                       complex types)\n"
    "  --dtype T            type of A and B on the daemon: bf16, fp16,\n"
    "                       fp32, fp64, c64, c128, int8 (default: fp16,\n"
    "                       bf16 or int8 if both files are float16, both\n"
    "                       bfloat16 or both int8, fp64 if both are\n"
    "                       float64, c64/c128 if one is complex, else fp32;\n"
    "                       fp32 for random inputs)\n"
    "  --cd-dtype T         type of C and D (default: as --dtype; int32\n"
    "                       for int8)\n"
    "  --kernel NAME        run this kernel (gemmctl kernels lists them;\n"
    "                       default: the daemon picks)\n"
    "  --precision P        fp32 inputs: default, tf32 (fast, ~1e-3) or\n"
    "                       fp32 (accurate); default is fp32\n"
    "  --moduli N           fp64 and fp32 inputs: the Ozaki-II emulation\n"
    "                       with N moduli, 2..20 (fewer: faster, less\n"
    "                       accurate; ~15 match DGEMM, ~7 SGEMM);\n"
    "                       default: the daemon picks native DGEMM (for\n"
    "                       fp32 3xTF32) or the emulation. The report\n"
    "                       says how many ran (the cpu backend computes\n"
    "                       natively)\n"
    "Output:\n"
    "  --out FILE           write D as .npy (else D is printed on stdout)\n"
    "  --out-dtype T        bf16 (read it with ml_dtypes), fp16, fp32,\n"
    "                       fp64, c64, c128 or int32 for --out\n"
    "                       (default: fp16 if D is fp16, D's type if it is\n"
    "                       fp64, complex or int32, else fp32)\n"
    "  --check              compare with a CPU reference (fp64; long double\n"
    "                       for fp64, c64, c128); prints the relative\n"
    "                       Frobenius error and PASS/FAIL (fp64 and c128\n"
    "                       1e-12, fp32 and c64 1e-5, tf32 2e-3, fp16 2e-3,\n"
    "                       bf16 1e-2; fp64 emulated with N < 15\n"
    "                       moduli 1e-12 * 16^(15-N), fp32 with N < 7\n"
    "                       1e-5 * 16^(7-N), estimates);\n"
    "                       int8: every element exactly against 64-bit\n"
    "                       integers modulo 2^32\n"
    "  --repeat R           run R times, report median and best (random)\n"
    "  -q, --quiet          no report: what ran, times and rates go to\n"
    "                       stderr (stdout has only D and --check's\n"
    "                       verdict); --quiet drops them\n";

/* The matrices of one GEMM, in daemon buffers, plus fp32 copies of the
 * inputs as the daemon sees them (for --check). */
struct mm_job {
    uint64_t m, n, k;
    size_t a_rows, a_cols, b_rows, b_cols;
    gemm_buffer *a, *b, *c, *d;
    float *a32, *b32, *c32; /* converted back from the buffers */
};

static int parse_u64(const char *opt, const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-')
        return ctl_error(EXIT_USAGE,
                         "mm: %s wants a positive integer, "
                         "not '%s'",
                         opt, s);
    *out = v;
    return EXIT_OK;
}

static int parse_float(const char *opt, const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !isfinite(v))
        return ctl_error(EXIT_USAGE, "mm: %s wants a number, not '%s'", opt, s);
    *out = v;
    return EXIT_OK;
}

static int parse_dtype(const char *opt, const char *s, gemm_dtype *out)
{
    if (gemm_dtype_parse(s, out) != GEMM_OK)
        return ctl_error(EXIT_USAGE,
                         "mm: %s wants bf16, fp16, fp32, fp64, c64, c128, "
                         "int8 or int32, not '%s'",
                         opt, s);
    return EXIT_OK;
}

/* --op-a/--op-b: N, T or C into the transpose and conjugate flags. */
static int parse_op(const char *opt, const char *s, bool *trans, bool *conj)
{
    if (s[0] == '\0' || s[1] != '\0' || strchr("NnTtCc", s[0]) == NULL)
        return ctl_error(EXIT_USAGE,
                         "mm: %s wants N, T or C (conjugate transpose), not "
                         "'%s'",
                         opt, s);
    *trans = s[0] != 'N' && s[0] != 'n';
    *conj = s[0] == 'C' || s[0] == 'c';
    return EXIT_OK;
}

static int mm_parse(int argc, char **argv, struct mm_args *a)
{
    enum {
        O_A = 256,
        O_B,
        O_C,
        O_ALPHA,
        O_BETA,
        O_TA,
        O_TB,
        O_DTYPE,
        O_CD,
        O_OUT,
        O_OUT_DTYPE,
        O_CHECK,
        O_REPEAT,
        O_SEED,
        O_KERNEL,
        O_PRECISION,
        O_ALPHA_IM,
        O_BETA_IM,
        O_OP_A,
        O_OP_B,
        O_QUIET,
        O_MODULI
    };
    static const struct option opts[] = {
        {"a", required_argument, NULL, O_A},
        {"b", required_argument, NULL, O_B},
        {"c", required_argument, NULL, O_C},
        {"alpha", required_argument, NULL, O_ALPHA},
        {"beta", required_argument, NULL, O_BETA},
        {"ta", no_argument, NULL, O_TA},
        {"tb", no_argument, NULL, O_TB},
        {"dtype", required_argument, NULL, O_DTYPE},
        {"cd-dtype", required_argument, NULL, O_CD},
        {"out", required_argument, NULL, O_OUT},
        {"out-dtype", required_argument, NULL, O_OUT_DTYPE},
        {"check", no_argument, NULL, O_CHECK},
        {"repeat", required_argument, NULL, O_REPEAT},
        {"seed", required_argument, NULL, O_SEED},
        {"kernel", required_argument, NULL, O_KERNEL},
        {"precision", required_argument, NULL, O_PRECISION},
        {"alpha-im", required_argument, NULL, O_ALPHA_IM},
        {"beta-im", required_argument, NULL, O_BETA_IM},
        {"op-a", required_argument, NULL, O_OP_A},
        {"op-b", required_argument, NULL, O_OP_B},
        {"quiet", no_argument, NULL, O_QUIET},
        {"moduli", required_argument, NULL, O_MODULI},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    uint64_t u = 0;
    int ch, rv = EXIT_OK;

    memset(a, 0, sizeof(*a));
    a->alpha = 1.0f;
    a->repeat = 1;
    a->seed = 42;
    optind = 0; /* GNU: restart scanning on the subcommand's argv */
    opterr = 0;
    while (rv == EXIT_OK &&
           (ch = getopt_long(argc, argv, ":m:n:k:hq", opts, NULL)) != -1) {
        switch (ch) {
        case O_A:
            a->a_path = optarg;
            break;
        case O_B:
            a->b_path = optarg;
            break;
        case O_C:
            a->c_path = optarg;
            break;
        case O_OUT:
            a->out_path = optarg;
            break;
        case O_ALPHA:
            rv = parse_float("--alpha", optarg, &a->alpha);
            break;
        case O_BETA:
            rv = parse_float("--beta", optarg, &a->beta);
            a->have_beta = true;
            break;
        case O_ALPHA_IM:
            rv = parse_float("--alpha-im", optarg, &a->alpha_im);
            break;
        case O_BETA_IM:
            rv = parse_float("--beta-im", optarg, &a->beta_im);
            a->have_beta = true;
            break;
        case O_OP_A:
            rv = parse_op("--op-a", optarg, &a->ta, &a->ca);
            break;
        case O_OP_B:
            rv = parse_op("--op-b", optarg, &a->tb, &a->cb);
            break;
        case O_TA:
            a->ta = true;
            break;
        case O_TB:
            a->tb = true;
            break;
        case O_CHECK:
            a->check = true;
            break;
        case O_DTYPE:
            rv = parse_dtype("--dtype", optarg, &a->dtype);
            a->have_dtype = true;
            break;
        case O_CD:
            rv = parse_dtype("--cd-dtype", optarg, &a->cd);
            a->have_cd = true;
            break;
        case O_OUT_DTYPE:
            rv = parse_dtype("--out-dtype", optarg, &a->out_dtype);
            a->have_out_dtype = true;
            break;
        case O_REPEAT:
            rv = parse_u64("--repeat", optarg, &u);
            if (rv == EXIT_OK && (u == 0 || u > 1000000))
                rv = ctl_error(EXIT_USAGE, "mm: --repeat must be 1..1000000");
            a->repeat = (unsigned)u;
            break;
        case O_SEED:
            rv = parse_u64("--seed", optarg, &a->seed);
            break;
        case O_KERNEL:
            if (optarg[0] == '\0' || strlen(optarg) > GEMM_KERNEL_NAME_MAX)
                rv = ctl_error(EXIT_USAGE,
                               "mm: --kernel wants a name of 1..%d bytes "
                               "(gemmctl kernels lists them)",
                               GEMM_KERNEL_NAME_MAX);
            a->kernel = optarg;
            break;
        case O_PRECISION:
            rv =
                ctl_parse_precision("mm", "--precision", optarg, &a->precision);
            break;
        case O_MODULI:
            rv = parse_u64("--moduli", optarg, &u);
            if (rv == EXIT_OK &&
                (u < GEMM_OZ_MODULI_MIN || u > GEMM_OZ_MODULI_MAX))
                rv = ctl_error(EXIT_USAGE,
                               "mm: --moduli wants %d..%d (leave it out to "
                               "let the daemon pick), not %s",
                               GEMM_OZ_MODULI_MIN, GEMM_OZ_MODULI_MAX, optarg);
            a->moduli = (unsigned)u;
            break;
        case O_QUIET:
            a->quiet = true;
            break;
        case 'q':
            a->quiet = true;
            break;
        case 'm':
            rv = parse_u64("-m", optarg, &a->m);
            a->have_m = true;
            break;
        case 'n':
            rv = parse_u64("-n", optarg, &a->n);
            a->have_n = true;
            break;
        case 'k':
            rv = parse_u64("-k", optarg, &a->k);
            a->have_k = true;
            break;
        case 'h':
            fputs(mm_usage, stdout);
            return -1;
        case ':':
            return ctl_error(EXIT_USAGE, "mm: %s needs an argument",
                             argv[optind - 1]);
        default:
            return ctl_error(EXIT_USAGE,
                             "mm: unknown option '%s' (see gemmctl mm "
                             "--help)",
                             argv[optind - 1]);
        }
    }
    if (rv != EXIT_OK)
        return rv;
    if (optind < argc)
        return ctl_error(EXIT_USAGE, "mm: unexpected argument '%s'",
                         argv[optind]);

    bool files = a->a_path || a->b_path || a->c_path;
    bool random = a->have_m || a->have_n || a->have_k;
    if (files && random)
        return ctl_error(EXIT_USAGE, "mm: give either --a/--b files or "
                                     "-m/-n/-k, not both");
    if (!files && !random)
        return ctl_error(EXIT_USAGE, "mm: give --a A.npy --b B.npy, or "
                                     "-m M -n N -k K (see gemmctl mm "
                                     "--help)");
    if (files && (!a->a_path || !a->b_path))
        return ctl_error(EXIT_USAGE, "mm: needs both --a and --b");
    if (random && !(a->have_m && a->have_n && a->have_k))
        return ctl_error(EXIT_USAGE, "mm: random inputs need all of -m, -n "
                                     "and -k");
    if (random && (a->m == 0 || a->n == 0 || a->k == 0))
        return ctl_error(EXIT_USAGE, "mm: -m, -n and -k must be positive");
    bool beta_nz = a->beta != 0.0 || a->beta_im != 0.0;
    if (files && a->have_beta && !a->c_path && beta_nz)
        return ctl_error(EXIT_USAGE, "mm: --beta needs --c C.npy");
    if (files && a->c_path && !a->have_beta)
        a->beta = 1.0;
    if (files && a->repeat != 1)
        return ctl_error(EXIT_USAGE, "mm: --repeat is for random inputs "
                                     "(-m -n -k)");
    return EXIT_OK;
}

/* A copy of a buffer's count elements as fp32 (for --check and output). */
static float *to_f32(const gemm_buffer *b, gemm_dtype t, size_t count)
{
    float *f = malloc(count * sizeof(float));
    if (f != NULL)
        gemm_convert(f, GEMM_FP32, gemm_buffer_data(b), t, count);
    return f;
}

/*
 * ||D - ref|| / ||ref|| (Frobenius) over the checked rows, ref computed in
 * fp64 from the fp32 copies of the inputs. Rows are sampled evenly when the
 * full product would be too slow; *rows_checked says how many.
 */
static double check_error(const struct mm_job *j, const struct mm_args *a,
                          const float *d32, uint64_t *rows_checked,
                          bool *absolute)
{
    uint64_t m = j->m, n = j->n, k = j->k;
    uint64_t rows = m;
    double num = 0.0, den = 0.0;
    double *acc = calloc(n, sizeof(double));
    float *bt = NULL; /* op(B) as k x n, row-major, when B is transposed */
    const float *bk = j->b32;

    if (acc == NULL)
        return NAN;
    if ((double)m * (double)n * (double)k > (double)MM_CHECK_FULL_MACS) {
        rows = MM_CHECK_FULL_MACS / (n * k);
        if (rows < 1)
            rows = 1;
        if (rows > m)
            rows = m;
    }
    if (a->tb) {
        if ((bt = malloc(k * n * sizeof(float))) == NULL) {
            free(acc);
            return NAN;
        }
        for (uint64_t p = 0; p < k; p++)
            for (uint64_t q = 0; q < n; q++)
                bt[p * n + q] = j->b32[q * k + p];
        bk = bt;
    }
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t i = rows == m ? r : r * m / rows;
        memset(acc, 0, n * sizeof(double));
        for (uint64_t p = 0; p < k; p++) {
            double av = a->ta ? j->a32[p * m + i] : j->a32[i * k + p];
            const float *brow = bk + p * n;
            for (uint64_t q = 0; q < n; q++)
                acc[q] += av * brow[q];
        }
        for (uint64_t q = 0; q < n; q++) {
            double ref = (double)a->alpha * acc[q];
            if (a->beta != 0.0f && j->c32 != NULL)
                ref += (double)a->beta * j->c32[i * n + q];
            double e = (double)d32[i * n + q] - ref;
            num += e * e;
            den += ref * ref;
        }
    }
    free(acc);
    free(bt);
    *rows_checked = rows;
    *absolute = den == 0.0;
    return den == 0.0 ? sqrt(num) : sqrt(num / den);
}

/* A complex number in long double, for the wide reference. */
typedef struct ldc {
    long double re, im;
} ldc;

/* Element i of a wide matrix (fp64: imaginary part 0), conjugated when
 * conj. */
static ldc load_wide(const void *p, gemm_dtype t, size_t i, bool conj)
{
    ldc z = {0.0L, 0.0L};
    if (t == GEMM_FP64) {
        z.re = ((const double *)p)[i];
    } else if (t == GEMM_COMPLEX64) {
        z.re = ((const float *)p)[2 * i];
        z.im = ((const float *)p)[2 * i + 1];
    } else {
        z.re = ((const double *)p)[2 * i];
        z.im = ((const double *)p)[2 * i + 1];
    }
    if (conj)
        z.im = -z.im;
    return z;
}

static ldc ldc_mul(ldc x, ldc y)
{
    return (ldc){x.re * y.re - x.im * y.im, x.re * y.im + x.im * y.re};
}

/*
 * The same error for fp64, complex64 and complex128, with the reference in
 * long double (complex) from the buffers as the daemon read them (tight
 * A, B, C; D in its own buffer, so the inputs are unchanged), honouring
 * the conjugate transposes and complex alpha and beta. Rows are sampled
 * as in check_error().
 */
static double check_error_wide(const struct mm_job *j, const struct mm_args *a,
                               gemm_dtype ab, uint64_t *rows_checked,
                               bool *absolute)
{
    uint64_t m = j->m, n = j->n, k = j->k, rows = m;
    const void *A = gemm_buffer_data(j->a), *B = gemm_buffer_data(j->b);
    const void *C = j->c != NULL ? gemm_buffer_data(j->c) : NULL;
    const void *D = gemm_buffer_data(j->d);
    ldc alpha = {a->alpha, a->alpha_im}, beta = {a->beta, a->beta_im};
    long double num = 0.0L, den = 0.0L;
    ldc *acc = calloc(n, sizeof(ldc));

    if (acc == NULL)
        return NAN;
    if ((double)m * (double)n * (double)k > (double)MM_CHECK_FULL_MACS_WIDE) {
        rows = MM_CHECK_FULL_MACS_WIDE / (n * k);
        rows = rows < 1 ? 1 : rows > m ? m : rows;
    }
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t i = rows == m ? r : r * m / rows;
        memset(acc, 0, n * sizeof(ldc));
        if (a->tb) { /* B is n x k: a dot product per output */
            for (uint64_t q = 0; q < n; q++)
                for (uint64_t p = 0; p < k; p++) {
                    ldc x = a->ta ? load_wide(A, ab, p * m + i, a->ca)
                                  : load_wide(A, ab, i * k + p, false);
                    ldc pr = ldc_mul(x, load_wide(B, ab, q * k + p, a->cb));
                    acc[q].re += pr.re;
                    acc[q].im += pr.im;
                }
        } else { /* B is k x n: rows of B scaled and added */
            for (uint64_t p = 0; p < k; p++) {
                ldc x = a->ta ? load_wide(A, ab, p * m + i, a->ca)
                              : load_wide(A, ab, i * k + p, false);
                for (uint64_t q = 0; q < n; q++) {
                    ldc pr = ldc_mul(x, load_wide(B, ab, p * n + q, false));
                    acc[q].re += pr.re;
                    acc[q].im += pr.im;
                }
            }
        }
        for (uint64_t q = 0; q < n; q++) {
            ldc ref = ldc_mul(alpha, acc[q]);
            if (C != NULL) {
                ldc bc = ldc_mul(beta, load_wide(C, ab, i * n + q, false));
                ref.re += bc.re;
                ref.im += bc.im;
            }
            ldc got = load_wide(D, ab, i * n + q, false);
            long double er = got.re - ref.re, ei = got.im - ref.im;
            num += er * er + ei * ei;
            den += ref.re * ref.re + ref.im * ref.im;
        }
    }
    free(acc);
    *rows_checked = rows;
    *absolute = den == 0.0L;
    return (double)(den == 0.0L ? sqrtl(num) : sqrtl(num / den));
}

/* int8: every element of D (sampled rows past 2^30 multiply-adds)
 * exactly against 64-bit integers modulo 2^32. */
static int do_check_s8(const struct mm_job *j, const struct mm_args *a)
{
    uint64_t step = 1, checked = 0;
    double macs = (double)j->m * (double)j->n * (double)j->k;
    if (macs > (double)MM_CHECK_FULL_MACS)
        step = (uint64_t)(macs / (double)MM_CHECK_FULL_MACS) + 1;
    uint64_t bad =
        mm_s8_mismatches(gemm_buffer_data(j->a), gemm_buffer_data(j->b),
                         j->c != NULL ? gemm_buffer_data(j->c) : NULL,
                         gemm_buffer_data(j->d), j->m, j->n, j->k, a->ta, a->tb,
                         (int32_t)a->alpha, (int32_t)a->beta, step, &checked);
    printf("check: %" PRIu64 " of %" PRIu64 " elements differ from the exact "
           "int64 reference (mod 2^32)%s: %s\n",
           bad, checked, step > 1 ? " (rows sampled)" : "",
           bad == 0 ? "PASS" : "FAIL");
    return bad == 0 ? EXIT_OK : EXIT_RUNTIME;
}

/* Prints an int32 D whole when small, else its top-left corner. */
static void print_int(const int32_t *d, uint64_t m, uint64_t n)
{
    bool whole = m <= 12 && n <= 12;
    uint64_t rm = whole ? m : (m < 4 ? m : 4), rn = whole ? n : (n < 4 ? n : 4);
    if (!whole)
        printf("D is %" PRIu64 "x%" PRIu64 " int32; top-left corner:\n", m, n);
    for (uint64_t i = 0; i < rm; i++) {
        for (uint64_t q = 0; q < rn; q++)
            printf("%s%11d", q ? " " : "", d[i * n + q]);
        printf("%s\n", rn < n ? " ..." : "");
    }
    if (rm < m)
        printf("         ...\n");
}

static int do_check(const struct mm_job *j, const struct mm_args *a,
                    gemm_dtype ab, gemm_dtype cd, unsigned moduli,
                    const float *d32)
{
    uint64_t rows = 0;
    bool absolute = false;
    const char *what;
    double tol = mm_tolerance(ab, cd, a->precision, moduli, &what);
    bool wide = mm_wide_type(ab);
    double err = wide ? check_error_wide(j, a, ab, &rows, &absolute)
                      : check_error(j, a, d32, &rows, &absolute);
    bool pass = err <= tol;

    printf("check: %s error %.3g vs %s reference",
           absolute ? "absolute" : "relative", err,
           wide ? "long double" : "fp64");
    if (rows < j->m)
        printf(" (%" PRIu64 " of %" PRIu64 " rows sampled)", rows, j->m);
    printf(", tolerance %.0e (%s): %s\n", tol, what, pass ? "PASS" : "FAIL");
    return pass ? EXIT_OK : EXIT_RUNTIME;
}

/* Prints D: whole when small, else a summary and its top-left corner. */
static void print_matrix(const float *d, uint64_t m, uint64_t n)
{
    if (m <= 12 && n <= 12) {
        for (uint64_t i = 0; i < m; i++) {
            for (uint64_t q = 0; q < n; q++)
                printf("%s%12.6g", q ? " " : "", d[i * n + q]);
            putchar('\n');
        }
        return;
    }
    double lo = INFINITY, hi = -INFINITY, sum = 0.0, sq = 0.0;
    for (uint64_t i = 0; i < m * n; i++) {
        double v = d[i];
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
        sum += v;
        sq += v * v;
    }
    printf("D is %" PRIu64 "x%" PRIu64 ": min %.6g, max %.6g, mean %.6g, "
           "Frobenius norm %.6g; top-left corner:\n",
           m, n, lo, hi, sum / (double)(m * n), sqrt(sq));
    uint64_t rm = m < 4 ? m : 4, rn = n < 4 ? n : 4;
    for (uint64_t i = 0; i < rm; i++) {
        for (uint64_t q = 0; q < rn; q++)
            printf("%s%12.6g", q ? " " : "", d[i * n + q]);
        printf("%s\n", rn < n ? " ..." : "");
    }
    if (rm < m)
        printf("         ...\n");
}

/* Prints a wide D (fp64, complex) whole when small, else its top-left
 * corner. */
static void print_wide(const void *d, gemm_dtype t, uint64_t m, uint64_t n)
{
    bool cplx = gemm_dtype_is_complex(t);
    bool whole = m <= 12 && n <= 12;
    uint64_t rm = whole ? m : (m < 4 ? m : 4), rn = whole ? n : (n < 4 ? n : 4);
    if (!whole)
        printf("D is %" PRIu64 "x%" PRIu64 " %s; top-left corner:\n", m, n,
               gemm_dtype_name(t));
    for (uint64_t i = 0; i < rm; i++) {
        for (uint64_t q = 0; q < rn; q++) {
            ldc z = load_wide(d, t, i * n + q, false);
            if (cplx)
                printf("%s%12.6g%+.6gj", q ? " " : "", (double)z.re,
                       (double)z.im);
            else
                printf("%s%17.10g", q ? " " : "", (double)z.re);
        }
        printf("%s\n", rn < n ? " ..." : "");
    }
    if (rm < m)
        printf("         ...\n");
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

/* Shapes from the files; on mismatch a message naming both shapes. */
static int file_shapes(const struct mm_args *a, const npy_matrix *A,
                       const npy_matrix *B, const npy_matrix *C,
                       struct mm_job *j)
{
    uint64_t ka = a->ta ? A->rows : A->cols;
    uint64_t kb = a->tb ? B->cols : B->rows;

    j->m = a->ta ? A->cols : A->rows;
    j->n = a->tb ? B->rows : B->cols;
    j->k = ka;
    if (ka != kb) {
        char opa[64] = "", opb[64] = "";
        if (a->ta)
            snprintf(opa, sizeof(opa), "; with --ta op(A) is %zux%zu", A->cols,
                     A->rows);
        if (a->tb)
            snprintf(opb, sizeof(opb), "; with --tb op(B) is %zux%zu", B->cols,
                     B->rows);
        return ctl_error(EXIT_USAGE,
                         "mm: A is %zux%zu but B is %zux%zu: inner "
                         "dimensions differ (%" PRIu64 " vs %" PRIu64 ")%s%s",
                         A->rows, A->cols, B->rows, B->cols, ka, kb, opa, opb);
    }
    if (C != NULL && (C->rows != j->m || C->cols != j->n))
        return ctl_error(EXIT_USAGE,
                         "mm: C is %zux%zu but op(A)*op(B) is %" PRIu64
                         "x%" PRIu64,
                         C->rows, C->cols, j->m, j->n);
    return EXIT_OK;
}

int cmd_mm(const char *url, int argc, char **argv)
{
    struct mm_args a;
    struct mm_job j;
    npy_matrix A = {0}, B = {0}, C = {0};
    bool files;
    gemm_dtype ab, cd, outt;
    gemm_client *cl = NULL;
    gemm_timings t;
    gemm_op op;
    uint64_t *rtt = NULL, *comp = NULL, *kern = NULL;
    float *d32 = NULL;
    void *out = NULL;
    char err[512];
    int rv, code;

    if ((code = mm_parse(argc, argv, &a)) != EXIT_OK)
        return code < 0 ? EXIT_OK : code;
    memset(&j, 0, sizeof(j));
    files = a.a_path != NULL;

    /* Inputs and shapes, before talking to the daemon. */
    if (files) {
        code = EXIT_RUNTIME;
        if (npy_read_stack(a.a_path, &A, err, sizeof(err)) != 0 ||
            npy_read_stack(a.b_path, &B, err, sizeof(err)) != 0 ||
            (a.c_path && npy_read_stack(a.c_path, &C, err, sizeof(err)) != 0)) {
            ctl_error(EXIT_RUNTIME, "mm: %s", err);
            goto out;
        }
        if (A.ndim == 3 || B.ndim == 3) { /* stacks: a batch */
            code = mm_stack(url, &a, &A, &B, a.c_path ? &C : NULL);
            goto out;
        }
        if (a.c_path && C.ndim == 3) {
            code =
                ctl_error(EXIT_USAGE, "mm: C is a stack (3-D) but A and B are "
                                      "matrices");
            goto out;
        }
        if ((code = file_shapes(&a, &A, &B, a.c_path ? &C : NULL, &j)) !=
            EXIT_OK)
            goto out;
        j.a_rows = A.rows, j.a_cols = A.cols;
        j.b_rows = B.rows, j.b_cols = B.cols;
        ab = a.have_dtype ? a.dtype : mm_file_type(&A, &B);
    } else {
        j.m = a.m, j.n = a.n, j.k = a.k;
        j.a_rows = a.ta ? a.k : a.m, j.a_cols = a.ta ? a.m : a.k;
        j.b_rows = a.tb ? a.n : a.k, j.b_cols = a.tb ? a.k : a.n;
        ab = a.have_dtype ? a.dtype : GEMM_FP32;
    }
    cd = a.have_cd ? a.cd : mm_cd_default(ab);
    bool wide = mm_wide_type(ab), s8 = ab == GEMM_INT8;
    bool s64 = mm_scalars64(ab);
    if ((a.ca || a.cb) && !gemm_dtype_is_complex(ab)) {
        code = ctl_error(EXIT_USAGE,
                         "mm: op C (conjugate transpose) is for complex "
                         "inputs; these are %s (use T, or --dtype c64/c128)",
                         gemm_dtype_name(ab));
        goto out;
    }
    if ((a.alpha_im != 0.0 || a.beta_im != 0.0) && !gemm_dtype_is_complex(ab)) {
        code = ctl_error(EXIT_USAGE,
                         "mm: --alpha-im/--beta-im are for complex inputs; "
                         "these are %s",
                         gemm_dtype_name(ab));
        goto out;
    }
    if (!s64) { /* what the daemon computes with: float scalars */
        a.alpha = (float)a.alpha;
        a.beta = (float)a.beta;
    }
    if (ab != GEMM_FP32 && a.precision != GEMM_PRECISION_DEFAULT) {
        code = ctl_error(EXIT_USAGE,
                         "mm: --precision %s is for fp32 inputs; these are "
                         "%s (give --dtype fp32)",
                         gemm_precision_name(a.precision), gemm_dtype_name(ab));
        goto out;
    }
    if (ab != GEMM_FP64 && ab != GEMM_FP32 && a.moduli != 0) {
        code = ctl_error(EXIT_USAGE,
                         "mm: --moduli is for fp64 and fp32 inputs (the "
                         "Ozaki-II emulation); these are %s (give --dtype "
                         "fp64 or fp32, or leave --moduli out)",
                         gemm_dtype_name(ab));
        goto out;
    }
    if (ab == GEMM_FP32 && a.moduli != 0 &&
        (cd != GEMM_FP32 || a.precision == GEMM_PRECISION_TF32)) {
        code = ctl_error(EXIT_USAGE,
                         "mm: --moduli on fp32 inputs runs the Ozaki-II "
                         "emulation, which writes fp32 at fp32 precision: "
                         "leave --cd-dtype and --precision at their defaults, "
                         "or leave --moduli out");
        goto out;
    }
    outt = a.have_out_dtype ? a.out_dtype : mm_out_default(cd);
    if ((code = mm_check_out_type(outt, cd)) != EXIT_OK)
        goto out;
    if (j.m > SIZE_MAX / j.n || j.k > SIZE_MAX / j.m || j.k > SIZE_MAX / j.n) {
        code = ctl_error(EXIT_USAGE, "mm: dimensions too large");
        goto out;
    }

    if ((code = ctl_open(url, &cl)) != EXIT_OK)
        goto out;
    if ((code = mm_alloc(cl, j.m * j.k, ab, "A", &j.a)) != EXIT_OK ||
        (code = mm_alloc(cl, j.k * j.n, ab, "B", &j.b)) != EXIT_OK ||
        (code = mm_alloc(cl, j.m * j.n, cd, "D", &j.d)) != EXIT_OK)
        goto out;
    if ((a.beta != 0.0 || a.beta_im != 0.0) &&
        (code = mm_alloc(cl, j.m * j.n, cd, "C", &j.c)) != EXIT_OK)
        goto out;

    if (files) {
        if ((code = mm_load_input("A", gemm_buffer_data(j.a), ab, &A,
                                  j.m * j.k)) != EXIT_OK ||
            (code = mm_load_input("B", gemm_buffer_data(j.b), ab, &B,
                                  j.k * j.n)) != EXIT_OK ||
            (j.c != NULL &&
             (code = mm_load_input("C", gemm_buffer_data(j.c), cd, &C,
                                   j.m * j.n)) != EXIT_OK))
            goto out;
    } else {
        uint64_t state = a.seed;
        ctl_fill_random(gemm_buffer_data(j.a), ab, j.m * j.k, &state);
        ctl_fill_random(gemm_buffer_data(j.b), ab, j.k * j.n, &state);
        if (j.c != NULL)
            ctl_fill_random(gemm_buffer_data(j.c), cd, j.m * j.n, &state);
    }
    if (a.check && !wide && !s8) { /* the inputs as the daemon sees them */
        j.a32 = to_f32(j.a, ab, j.m * j.k);
        j.b32 = to_f32(j.b, ab, j.k * j.n);
        if (j.c != NULL)
            j.c32 = to_f32(j.c, cd, j.m * j.n);
        if (!j.a32 || !j.b32 || (j.c != NULL && !j.c32)) {
            code = ctl_error(EXIT_RUNTIME, "mm: out of memory for --check");
            goto out;
        }
    }

    gemm_op_init(&op, j.m, j.n, j.k, ab, cd);
    op.trans_a = a.ta;
    op.trans_b = a.tb;
    op.conj_a = a.ca;
    op.conj_b = a.cb;
    op.alpha = (float)a.alpha;
    op.beta = (float)a.beta;
    if (s64)
        gemm_op_set_scalars(&op, a.alpha, a.alpha_im, a.beta, a.beta_im);
    op.a.buf = j.a;
    op.b.buf = j.b;
    op.c.buf = j.c;
    op.d.buf = j.d;
    op.kernel = a.kernel;
    op.precision = a.precision;
    op.moduli = a.moduli;
    rtt = calloc(a.repeat, sizeof(*rtt));
    comp = calloc(a.repeat, sizeof(*comp));
    kern = calloc(a.repeat, sizeof(*kern));
    if (rtt == NULL || comp == NULL || kern == NULL) {
        code = ctl_error(EXIT_RUNTIME, "mm: out of memory");
        goto out;
    }
    for (unsigned r = 0; r < a.repeat; r++) {
        if ((rv = gemm_run(cl, &op, &t)) != GEMM_OK) {
            code = ctl_fail(rv, "mm");
            goto out;
        }
        rtt[r] = t.round_trip_us;
        comp[r] = t.compute_us;
        kern[r] = t.kernel_ns;
    }

    /* a complex multiply-add is 4 multiplies and 4 adds */
    double flops = (gemm_dtype_is_complex(ab) ? 8.0 : 2.0) * (double)j.m *
                   (double)j.n * (double)j.k;
    qsort(rtt, a.repeat, sizeof(*rtt), cmp_u64);
    qsort(comp, a.repeat, sizeof(*comp), cmp_u64);
    qsort(kern, a.repeat, sizeof(*kern), cmp_u64);
    double rt_med = (double)rtt[a.repeat / 2],
           cp_med = (double)comp[a.repeat / 2];
    mm_note(&a,
            "mm %" PRIu64 "x%" PRIu64 "x%" PRIu64 " (m x n x k), %s in, %s "
            "out%s%s, alpha %g",
            j.m, j.n, j.k, gemm_dtype_name(ab), gemm_dtype_name(cd),
            a.ta ? (a.ca ? ", A^H" : ", A^T") : "",
            a.tb ? (a.cb ? ", B^H" : ", B^T") : "", a.alpha);
    if (gemm_dtype_is_complex(ab))
        mm_note(&a, "%+gj", a.alpha_im);
    mm_note(&a, ", beta %g", a.beta);
    if (gemm_dtype_is_complex(ab))
        mm_note(&a, "%+gj", a.beta_im);
    mm_note(&a, "\n");
    mm_note(&a, "kernel: %s%s%s%s", t.kernel[0] ? t.kernel : "?",
            ab == GEMM_FP32 ? ", precision " : "",
            ab == GEMM_FP32 ? gemm_precision_name(op.precision) : "",
            ab == GEMM_FP32 && op.precision == GEMM_PRECISION_DEFAULT
                ? " (fp32)"
                : "");
    if (t.moduli != 0)
        mm_note(&a, ", Ozaki-II with %u moduli", t.moduli);
    else if (op.moduli != 0)
        mm_note(&a, ", native %s (the %u moduli asked for were not used)",
                gemm_dtype_name(ab), op.moduli);
    if (kern[a.repeat / 2] != 0)
        mm_note(&a, ", kernel time %s%.3f ms (%.3g TFLOP/s)",
                a.repeat > 1 ? "median " : "", (double)kern[a.repeat / 2] / 1e6,
                flops / (double)kern[a.repeat / 2] / 1e3);
    mm_note(&a, "\n");
    if (a.repeat > 1)
        mm_note(&a,
                "time: round trip median %.3f ms (best %.3f), daemon compute "
                "median %.3f ms (best %.3f), %u runs\n",
                rt_med / 1e3, (double)rtt[0] / 1e3, cp_med / 1e3,
                (double)comp[0] / 1e3, a.repeat);
    else
        mm_note(&a,
                "time: round trip %.3f ms, daemon compute %.3f ms (queued "
                "%.3f, total %.3f)\n",
                rt_med / 1e3, cp_med / 1e3, (double)t.queued_us / 1e3,
                (double)t.total_us / 1e3);
    mm_note(&a, "rate: %.3g TFLOP/s round trip, %.3g TFLOP/s compute\n",
            rt_med > 0 ? flops / (rt_med * 1e-6) / 1e12 : 0.0,
            cp_med > 0 ? flops / (cp_med * 1e-6) / 1e12 : 0.0);

    /* D as fp32 only where it is read: --check, or printing file results
     * (a random 4096^3 run skipped 16.7M conversions and 64 MiB) */
    if (!wide && !s8 && (a.check || (files && a.out_path == NULL)) &&
        (d32 = to_f32(j.d, cd, j.m * j.n)) == NULL) {
        code = ctl_error(EXIT_RUNTIME, "mm: out of memory");
        goto out;
    }
    code = EXIT_OK;
    if (a.check)
        code =
            s8 ? do_check_s8(&j, &a) : do_check(&j, &a, ab, cd, t.moduli, d32);
    if (a.out_path != NULL) {
        if ((out = malloc(j.m * j.n * gemm_dtype_size(outt))) == NULL) {
            code = ctl_error(EXIT_RUNTIME, "mm: out of memory");
            goto out;
        }
        gemm_convert(out, outt, gemm_buffer_data(j.d), cd, j.m * j.n);
        if (npy_write(a.out_path, out, outt, j.m, j.n, err, sizeof(err))) {
            code = ctl_error(EXIT_RUNTIME, "mm: %s", err);
            goto out;
        }
        mm_note(&a, "wrote D (%" PRIu64 "x%" PRIu64 ", %s) to %s\n", j.m, j.n,
                npy_type_name(outt), a.out_path);
    } else if (files && wide) {
        print_wide(gemm_buffer_data(j.d), cd, j.m, j.n);
    } else if (files && s8) {
        print_int(gemm_buffer_data(j.d), j.m, j.n);
    } else if (files) {
        print_matrix(d32, j.m, j.n);
    }

out:
    free(out);
    free(d32);
    free(rtt);
    free(comp);
    free(kern);
    free(j.a32);
    free(j.b32);
    free(j.c32);
    gemm_buffer_free(j.a);
    gemm_buffer_free(j.b);
    gemm_buffer_free(j.c);
    gemm_buffer_free(j.d);
    gemm_client_close(cl);
    npy_free(&A);
    npy_free(&B);
    npy_free(&C);
    return code;
}
