/*
 * blas3.c: gemmctl blas3, one of the level-3 routines besides GEMM
 * (symm, hemm, syrk, herk, syr2k, her2k, trmm, trsm) on .npy files,
 * row-major as the files store them (CBLAS's CblasRowMajor meaning). The
 * operands go into one buffer, the request runs (gemm_blas3_run) and the
 * result is written to --out: C for symm .. her2k (the rank updates write
 * only the --uplo triangle: the other is --c's, or zero), B's new value
 * for trmm/trsm.
 */
#include "gemmctl.h"
#include "npy.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char blas3_usage[] =
    "usage: gemmctl blas3 ROUTINE --a A.npy [--b B.npy] [--c C.npy]\n"
    "       --out OUT.npy [--side left|right] [--uplo upper|lower]\n"
    "       [--trans N|T|C] [--diag non-unit|unit] [--alpha x] [--alpha-im "
    "x]\n"
    "       [--beta x] [--beta-im x]\n"
    "ROUTINE: symm hemm syrk herk syr2k her2k trmm trsm; the files float32,\n"
    "float64, complex64 or complex128, all of one type. Shapes (rows x "
    "cols):\n"
    "  symm/hemm    A ka x ka (ka: m, or n with --side right), B and C m x "
    "n\n"
    "  syrk/herk    A n x k (--trans N) or k x n, C n x n\n"
    "  syr2k/her2k  A and B as syrk's A, C n x n\n"
    "  trmm/trsm    A ka x ka, B m x n (OUT: alpha op(A) B, or X with\n"
    "               op(A) X = alpha B; --side right: B op(A), X op(A))\n"
    "Only A's --uplo triangle is read (default upper).\n";

struct b3_args {
    const char *a, *b, *c, *out;
    gemm_blas3_op op;
};

static int b3_routine(const char *s, gemm_routine *out)
{
    for (int r = 1; r < GEMM_ROUTINE_COUNT; r++)
        if (strcmp(s, gemm_routine_name((gemm_routine)r)) == 0) {
            *out = (gemm_routine)r;
            return EXIT_OK;
        }
    return ctl_error(EXIT_USAGE,
                     "blas3: no routine %s (symm, hemm, syrk, herk, syr2k, "
                     "her2k, trmm, trsm)",
                     s);
}

static int b3_word(const char *opt, const char *s, const char *yes,
                   const char *no, bool *out)
{
    if (strcmp(s, yes) == 0 || (s[0] == yes[0] && s[1] == '\0'))
        *out = true;
    else if (strcmp(s, no) == 0 || (s[0] == no[0] && s[1] == '\0'))
        *out = false;
    else
        return ctl_error(EXIT_USAGE, "blas3: %s takes %s or %s, not %s", opt,
                         yes, no, s);
    return EXIT_OK;
}

static int b3_parse(int argc, char **argv, struct b3_args *a)
{
    static const struct option opts[] = {
        {"a", required_argument, NULL, 'a'},
        {"b", required_argument, NULL, 'b'},
        {"c", required_argument, NULL, 'c'},
        {"out", required_argument, NULL, 'o'},
        {"side", required_argument, NULL, 's'},
        {"uplo", required_argument, NULL, 'l'},
        {"trans", required_argument, NULL, 't'},
        {"diag", required_argument, NULL, 'd'},
        {"alpha", required_argument, NULL, 'A'},
        {"alpha-im", required_argument, NULL, 'I'},
        {"beta", required_argument, NULL, 'B'},
        {"beta-im", required_argument, NULL, 'J'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    gemm_routine r = GEMM_ROUTINE_SYMM;
    if (argc < 2 || argv[1][0] == '-') {
        if (argc >= 2 && strcmp(argv[1], "--help") == 0) {
            fputs(blas3_usage, stdout);
            return -1;
        }
        fputs(blas3_usage, stderr);
        return EXIT_USAGE;
    }
    int rv = b3_routine(argv[1], &r);
    if (rv != EXIT_OK)
        return rv;
    gemm_blas3_init(&a->op, r, GEMM_FP64);
    bool lower = false, right = false, unit = false;
    int o;
    optind = 2;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        char *end = NULL;
        double v = 0;
        if (strchr("AIBJ", o) != NULL) {
            v = strtod(optarg, &end);
            if (end == optarg || *end != '\0')
                return ctl_error(EXIT_USAGE, "blas3: not a number: %s", optarg);
        }
        switch (o) {
        case 'a':
            a->a = optarg;
            break;
        case 'b':
            a->b = optarg;
            break;
        case 'c':
            a->c = optarg;
            break;
        case 'o':
            a->out = optarg;
            break;
        case 's':
            rv = b3_word("--side", optarg, "right", "left", &right);
            break;
        case 'l':
            rv = b3_word("--uplo", optarg, "lower", "upper", &lower);
            break;
        case 'd':
            rv = b3_word("--diag", optarg, "unit", "non-unit", &unit);
            break;
        case 't':
            if (strlen(optarg) != 1 || strchr("NTCntc", optarg[0]) == NULL)
                return ctl_error(EXIT_USAGE, "blas3: --trans takes N, T or C");
            a->op.trans = (char)(optarg[0] & ~0x20);
            break;
        case 'A':
            a->op.alpha_re = v;
            break;
        case 'I':
            a->op.alpha_im = v;
            break;
        case 'B':
            a->op.beta_re = v;
            break;
        case 'J':
            a->op.beta_im = v;
            break;
        case 'h':
            fputs(blas3_usage, stdout);
            return -1;
        default:
            return EXIT_USAGE;
        }
        if (rv != EXIT_OK)
            return rv;
    }
    a->op.lower = lower;
    a->op.right = right;
    a->op.unit_diag = unit;
    if (a->a == NULL || a->out == NULL)
        return ctl_error(EXIT_USAGE, "blas3: --a and --out are required");
    return EXIT_OK;
}

/* Loads path into *m, or says why. */
static int b3_load(const char *path, npy_matrix *m)
{
    char err[256];
    if (npy_read(path, m, err, sizeof(err)) != 0)
        return ctl_error(EXIT_RUNTIME, "blas3: %s", err);
    return EXIT_OK;
}

int cmd_blas3(const char *url, int argc, char **argv)
{
    struct b3_args a = {0};
    int rv = b3_parse(argc, argv, &a);
    if (rv != EXIT_OK)
        return rv < 0 ? EXIT_OK : rv;
    gemm_blas3_op *op = &a.op;
    gemm_routine r = op->routine;
    bool tri = r == GEMM_ROUTINE_TRMM || r == GEMM_ROUTINE_TRSM;
    bool rank = r >= GEMM_ROUTINE_SYRK && r <= GEMM_ROUTINE_HER2K;
    bool two = !rank || r == GEMM_ROUTINE_SYR2K || r == GEMM_ROUTINE_HER2K;
    npy_matrix A = {0}, B = {0}, C = {0};
    gemm_client *cl = NULL;
    gemm_buffer *buf = NULL;
    rv = EXIT_USAGE;
    if (two && a.b == NULL) {
        ctl_error(EXIT_USAGE, "blas3: %s needs --b", gemm_routine_name(r));
        goto out;
    }
    if ((!two && a.b != NULL) || (tri && a.c != NULL)) {
        ctl_error(EXIT_USAGE, "blas3: %s takes no --%s", gemm_routine_name(r),
                  tri ? "c" : "b");
        goto out;
    }
    if ((rv = b3_load(a.a, &A)) != EXIT_OK ||
        (a.b && (rv = b3_load(a.b, &B)) != EXIT_OK) ||
        (a.c && (rv = b3_load(a.c, &C)) != EXIT_OK))
        goto out;
    gemm_dtype t = A.dtype;
    rv = EXIT_RUNTIME;
    if ((t != GEMM_FP32 && t != GEMM_FP64 && t != GEMM_COMPLEX64 &&
         t != GEMM_COMPLEX128) ||
        (a.b && B.dtype != t) || (a.c && C.dtype != t)) {
        ctl_error(EXIT_RUNTIME,
                  "blas3: the files must all be float32, float64, complex64 "
                  "or complex128, of one type (%s is %s)",
                  a.a, npy_type_name(t));
        goto out;
    }
    op->dtype = t;
    size_t orows, ocols;
    if (rank) {
        bool n_ = op->trans == 'N';
        op->n = n_ ? A.rows : A.cols;
        op->k = n_ ? A.cols : A.rows;
        orows = ocols = op->n;
        if (a.b && (B.rows != A.rows || B.cols != A.cols)) {
            ctl_error(EXIT_RUNTIME, "blas3: --b is %zux%zu, --a %zux%zu",
                      B.rows, B.cols, A.rows, A.cols);
            goto out;
        }
    } else {
        op->m = B.rows;
        op->n = B.cols;
        orows = B.rows;
        ocols = B.cols;
        size_t ka = op->right ? B.cols : B.rows;
        if (A.rows != ka || A.cols != ka) {
            ctl_error(EXIT_RUNTIME,
                      "blas3: --a is %zux%zu; %s with --b %zux%zu needs "
                      "%zux%zu",
                      A.rows, A.cols, gemm_routine_name(r), B.rows, B.cols, ka,
                      ka);
            goto out;
        }
    }
    if (a.c && (C.rows != orows || C.cols != ocols)) {
        ctl_error(EXIT_RUNTIME, "blas3: --c is %zux%zu, C is %zux%zu", C.rows,
                  C.cols, orows, ocols);
        goto out;
    }
    size_t es = gemm_dtype_size(t);
    size_t sa = A.rows * A.cols * es, sb = a.b ? B.rows * B.cols * es : 0;
    size_t so = orows * ocols * es;
    size_t off_b = (sa + 4095) & ~(size_t)4095;
    size_t off_o = off_b + ((sb + 4095) & ~(size_t)4095);
    if ((rv = ctl_open(url, &cl)) != EXIT_OK)
        goto out;
    int g = gemm_buffer_alloc(cl, off_o + so, &buf);
    if (g != GEMM_OK) {
        rv = ctl_fail(g, "blas3: buffer");
        goto out;
    }
    char *base = gemm_buffer_data(buf);
    memcpy(base, A.data, sa);
    op->a = (gemm_matrix){buf, 0, 0, 0};
    gemm_matrix o = {buf, off_o, 0, 0};
    if (tri) {
        memcpy(base + off_o, B.data, so);
        op->b = o;
    } else {
        if (a.b) {
            memcpy(base + off_b, B.data, sb);
            op->b = (gemm_matrix){buf, off_b, 0, 0};
        }
        if (a.c)
            memcpy(base + off_o, C.data, so);
        else
            memset(base + off_o, 0, so);
        op->c = o;
    }
    gemm_timings tm;
    g = gemm_blas3_run(cl, op, &tm);
    if (g != GEMM_OK) {
        rv = ctl_fail(g, "blas3");
        goto out;
    }
    char err[256];
    if (npy_write(a.out, base + off_o, t, orows, ocols, err, sizeof(err))) {
        rv = ctl_error(EXIT_RUNTIME, "blas3: %s", err);
        goto out;
    }
    printf("%s %s: %zux%zu %s to %s (%s, %.3f ms)\n", gemm_routine_name(r),
           npy_type_name(t), orows, ocols, tri ? "B" : "C", a.out, tm.kernel,
           (double)tm.round_trip_us / 1e3);
    rv = EXIT_OK;
out:
    if (buf)
        gemm_buffer_free(buf);
    if (cl)
        gemm_client_close(cl);
    npy_free(&A);
    npy_free(&B);
    npy_free(&C);
    return rv;
}
