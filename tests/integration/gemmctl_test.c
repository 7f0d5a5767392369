/*
 * gemmctl_test.c: the kernel commands of gemmctl against a real gemmd:
 * `gemmctl kernels` (table and JSON), `gemmctl mm --kernel/--precision`
 * (correct, and clear errors with the documented exit codes) and
 * `gemmctl bench` (its table, and a CSV with the agreed header and one
 * row per kernel and size); `mm` from .npy files (bf16 as ml_dtypes saves
 * it) with D alone on stdout, `status` (JSON as Python's client.status()),
 * usage errors, and a stopped daemon within --timeout. gemmctl runs as a child
 * process with its stdout and stderr in files of the fixture's directory. The
 * binary is the one built here, or $GEMM_TEST_GEMMCTL.
 */
#include "util/daemon.h"

#include <criterion/criterion.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef GEMMCTL_PATH
#error "GEMMCTL_PATH must name the gemmctl program"
#endif

#define CSV_HEADER                                                             \
    "kernel,rung,dtype,precision,m,n,k,ms,tflops,ratio_vs_ref,max_rel_err"

extern char **environ;

TestSuite(gemmctl, .init = fixture_setup, .fini = fixture_teardown,
          .timeout = 120);

static char out_text[65536], err_text[65536];

static void slurp(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    size_t n = 0;
    if (f != NULL) {
        n = fread(buf, 1, len - 1, f);
        fclose(f);
    }
    buf[n] = '\0';
}

/* Runs gemmctl --url <the fixture's> with the NULL-terminated arguments;
 * returns its exit status (-1 if it did not exit) with its output in
 * out_text and err_text. */
static int ctl(const char *arg, ...)
{
    const char *argv[64];
    int argc = 0;
    const char *bin = getenv("GEMM_TEST_GEMMCTL");
    argv[argc++] = bin != NULL && bin[0] != '\0' ? bin : GEMMCTL_PATH;
    argv[argc++] = "--url";
    argv[argc++] = g_gemmd.url;
    va_list ap;
    va_start(ap, arg);
    for (const char *a = arg; a != NULL && argc < 63;
         a = va_arg(ap, const char *))
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;

    char out_path[256], err_path[256];
    snprintf(out_path, sizeof(out_path), "%s/ctl.out", g_gemmd.dir);
    snprintf(err_path, sizeof(err_path), "%s/ctl.err", g_gemmd.dir);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_path,
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 2, err_path,
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid;
    int rv =
        posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    cr_assert_eq(rv, 0, "cannot run %s: %s", argv[0], strerror(rv));
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    slurp(out_path, out_text, sizeof(out_text));
    slurp(err_path, err_text, sizeof(err_text));
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#define EXPECT_IN(hay, needle)                                                 \
    cr_expect(strstr((hay), (needle)) != NULL, "'%s' not in:\n%s", (needle),   \
              (hay))

/* The backend's reference kernel and one other that serves bf16 -> fp32
 * ("auto" aside: the reply names what it picked; NULL if none). */
static void two_kernels(const char **ref, const char **other)
{
    static gemm_kernel_info *ks;
    size_t n;
    cr_assert_eq(gemm_list_kernels(g_client, &ks, &n), GEMM_OK);
    *ref = *other = NULL;
    for (size_t i = 0; i < n; i++) {
        if (ks[i].reference && *ref == NULL)
            *ref = ks[i].name;
        else if (!ks[i].reference && *other == NULL &&
                 strcmp(ks[i].name, "auto") != 0 &&
                 (ks[i].ab_types & (1u << GEMM_BF16)) &&
                 (ks[i].cd_types & (1u << GEMM_FP32)))
            *other = ks[i].name;
    }
    cr_assert_not_null(*ref);
    /* ks stays allocated: the names are used until the test ends */
}

Test(gemmctl, kernels_table_and_json)
{
    const char *ref, *other;
    two_kernels(&ref, &other);
    cr_assert_eq(ctl("kernels", NULL), 0, "stderr: %s", err_text);
    EXPECT_IN(out_text, "KERNEL");
    EXPECT_IN(out_text, "TRANSPOSES");
    EXPECT_IN(out_text, ref);
    EXPECT_IN(out_text, " ref ");
    if (other != NULL)
        EXPECT_IN(out_text, other);
    cr_assert_eq(ctl("kernels", "--json", NULL), 0, "stderr: %s", err_text);
    cr_expect_eq(out_text[0], '[', "JSON array: %s", out_text);
    char want[96];
    snprintf(want, sizeof(want), "{\"name\": \"%s\"", ref);
    EXPECT_IN(out_text, want);
    EXPECT_IN(out_text, "\"reference\": true");
    EXPECT_IN(out_text, "\"transposes\": [");
    cr_expect_eq(ctl("kernels", "--bogus", NULL), 2);
    EXPECT_IN(err_text, "unknown argument");
}

Test(gemmctl, mm_with_kernel_and_precision)
{
    const char *ref, *other;
    two_kernels(&ref, &other);
    cr_assert_eq(ctl("mm", "-m", "50", "-n", "40", "-k", "30", "--kernel", ref,
                     "--check", NULL),
                 0, "stdout: %s\nstderr: %s", out_text, err_text);
    char want[64];
    snprintf(want, sizeof(want), "kernel: %s", ref);
    EXPECT_IN(err_text, want);
    EXPECT_IN(out_text, "PASS");
    cr_assert_eq(ctl("mm", "-m", "33", "-n", "17", "-k", "65", "--precision",
                     "tf32", "--check", NULL),
                 0, "stdout: %s\nstderr: %s", out_text, err_text);
    EXPECT_IN(err_text, "precision tf32");
    EXPECT_IN(out_text, "(tf32): PASS");
    cr_assert_eq(ctl("mm", "-m", "33", "-n", "17", "-k", "65", "--precision",
                     "fp32", "--check", "--ta", NULL),
                 0, "stdout: %s\nstderr: %s", out_text, err_text);
    EXPECT_IN(out_text, "(fp32): PASS");
    if (other != NULL) {
        cr_assert_eq(ctl("mm", "-m", "20", "-n", "24", "-k", "28", "--dtype",
                         "bf16", "--cd-dtype", "fp32", "--kernel", other,
                         "--check", NULL),
                     0, "stdout: %s\nstderr: %s", out_text, err_text);
        snprintf(want, sizeof(want), "kernel: %s", other);
        EXPECT_IN(err_text, want);
        EXPECT_IN(out_text, "PASS");
    }
}

Test(gemmctl, mm_errors)
{
    cr_expect_eq(ctl("mm", "-m", "8", "-n", "8", "-k", "8", "--kernel",
                     "no-such-kernel", NULL),
                 1);
    EXPECT_IN(err_text, "kernel 'no-such-kernel' is not available");
    cr_expect_eq(ctl("mm", "-m", "8", "-n", "8", "-k", "8", "--kernel",
                     "bad name", NULL),
                 1);
    EXPECT_IN(err_text, "kernel name");
    cr_expect_eq(
        ctl("mm", "-m", "8", "-n", "8", "-k", "8", "--kernel", "", NULL), 2);
    cr_expect_eq(
        ctl("mm", "-m", "8", "-n", "8", "-k", "8", "--precision", "tf64", NULL),
        2);
    EXPECT_IN(err_text, "--precision wants default, tf32 or fp32");
    cr_expect_eq(ctl("mm", "-m", "8", "-n", "8", "-k", "8", "--dtype", "bf16",
                     "--precision", "tf32", NULL),
                 2);
    EXPECT_IN(err_text, "is for fp32 inputs");
    tu_assert_healthy(g_client);
}

/* --moduli: fp64 only, 2..20, the kernel line says what ran (the cpu
 * backend: native), --check passes; the daemon is not asked for what
 * gemmctl can refuse itself. */
Test(gemmctl, mm_moduli)
{
    cr_assert_eq(ctl("mm", "-m", "40", "-n", "30", "-k", "50", "--dtype",
                     "fp64", "--moduli", "14", "--check", NULL),
                 0, "stdout: %s\nstderr: %s", out_text, err_text);
    EXPECT_IN(out_text, "PASS");
    if (strcmp(tu_backend(), "cpu") == 0)
        EXPECT_IN(err_text, "native fp64 (the 14 moduli asked for were not "
                            "used)");
    else
        cr_expect(strstr(err_text, "Ozaki-II with 14 moduli") != NULL ||
                      strstr(err_text, "native fp64") != NULL,
                  "stderr: %s", err_text);
    cr_expect_eq(ctl("mm", "-m", "8", "-n", "8", "-k", "8", "--dtype", "fp64",
                     "--moduli", "1", NULL),
                 2);
    EXPECT_IN(err_text, "--moduli wants 2..20");
    cr_expect_eq(ctl("mm", "-m", "8", "-n", "8", "-k", "8", "--dtype", "fp64",
                     "--moduli", "21", NULL),
                 2);
    EXPECT_IN(err_text, "--moduli wants 2..20");
    /* fp32: the emulation at fp32 accuracy on cuda, SGEMM on the cpu */
    cr_assert_eq(ctl("mm", "-m", "24", "-n", "16", "-k", "40", "--dtype",
                     "fp32", "--moduli", "7", "--check", NULL),
                 0, "stdout: %s\nstderr: %s", out_text, err_text);
    EXPECT_IN(out_text, "PASS");
    if (strcmp(tu_backend(), "cpu") == 0)
        EXPECT_IN(err_text, "native fp32 (the 7 moduli asked for were not "
                            "used)");
    else
        EXPECT_IN(err_text, "Ozaki-II with 7 moduli");
    cr_expect_eq(ctl("mm", "-m", "8", "-n", "8", "-k", "8", "--dtype", "bf16",
                     "--moduli", "14", NULL),
                 2);
    EXPECT_IN(err_text, "--moduli is for fp64 and fp32 inputs");
    cr_expect_eq(ctl("mm", "-m", "8", "-n", "8", "-k", "8", "--dtype", "fp32",
                     "--precision", "tf32", "--moduli", "7", NULL),
                 2);
    EXPECT_IN(err_text, "--moduli on fp32 inputs");
    cr_expect_eq(ctl("mm", "--help", NULL), 0);
    EXPECT_IN(out_text, "--moduli N");
    tu_assert_healthy(g_client);
}

/* Counts lines of s. */
static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

Test(gemmctl, bench_table_and_csv)
{
    const char *ref, *other;
    two_kernels(&ref, &other);
    char csv[256], list[96];
    snprintf(csv, sizeof(csv), "%s/bench.csv", g_gemmd.dir);
    snprintf(list, sizeof(list), "%s%s%s", ref, other ? "," : "",
             other ? other : "");
    cr_assert_eq(ctl("bench", "--kernels", list, "--sizes", "48,64x40x24",
                     "--repeat", "2", "--csv", csv, NULL),
                 0, "stdout: %s\nstderr: %s", out_text, err_text);
    EXPECT_IN(out_text, "KERNEL");
    EXPECT_IN(out_text, "TFLOP/S");
    EXPECT_IN(out_text, "VS REF");
    EXPECT_IN(out_text, "MAX REL ERR");
    EXPECT_IN(out_text, "48x48x48");
    EXPECT_IN(out_text, "64x40x24");
    static char text[16384];
    slurp(csv, text, sizeof(text));
    cr_assert(strncmp(text, CSV_HEADER "\n", strlen(CSV_HEADER) + 1) == 0,
              "CSV header: %s", text);
    int kernels = other ? 2 : 1;
    cr_expect_eq(lines(text), 1 + 2 * kernels, "CSV:\n%s", text);
    /* every row: 11 fields; the reference's ratio is 1 and error 0 */
    char *save = NULL, *line = strtok_r(text, "\n", &save);
    int rows = 0;
    while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
        int commas = 0;
        for (const char *p = line; *p; p++)
            commas += *p == ',';
        cr_expect_eq(commas, 10, "row: %s", line);
        char name[64], dtype[16], prec[16];
        unsigned rung;
        unsigned long m, n, k;
        double ms, tf, ratio, err;
        int got = sscanf(line,
                         "%63[^,],%u,%15[^,],%15[^,],%lu,%lu,%lu,%lf,%lf,%lf,"
                         "%lf",
                         name, &rung, dtype, prec, &m, &n, &k, &ms, &tf, &ratio,
                         &err);
        cr_assert_eq(got, 11, "row: %s", line);
        cr_expect_str_eq(dtype, "bf16");
        cr_expect_gt(ms, 0.0, "row: %s", line);
        cr_expect_gt(tf, 0.0, "row: %s", line);
        cr_expect_lt(err, 1e-2, "row: %s", line);
        if (strcmp(name, ref) == 0) {
            cr_expect_eq(ratio, 1.0, "row: %s", line);
            cr_expect_eq(err, 0.0, "row: %s", line);
        }
        rows++;
    }
    cr_expect_eq(rows, 2 * kernels);
}

Test(gemmctl, bench_ladder_fp32_and_errors)
{
    char csv[256];
    snprintf(csv, sizeof(csv), "%s/ladder.csv", g_gemmd.dir);
    cr_assert_eq(ctl("bench", "--ladder", "--dtype", "fp32", "--precision",
                     "fp32", "--sizes", "40", "--repeat", "1", "--csv", csv,
                     NULL),
                 0, "stdout: %s\nstderr: %s", out_text, err_text);
    static char text[16384];
    slurp(csv, text, sizeof(text));
    EXPECT_IN(text, ",fp32,fp32,40,40,40,");
    cr_expect_eq(
        ctl("bench", "--kernels", "no-such-kernel", "--sizes", "8", NULL), 2);
    EXPECT_IN(err_text, "no kernel 'no-such-kernel'");
    cr_expect_eq(ctl("bench", "--sizes", "0", NULL), 2);
    cr_expect_eq(ctl("bench", "--sizes", "12x", NULL), 2);
    cr_expect_eq(ctl("bench", "--ladder", "--kernels", "a", NULL), 2);
    cr_expect_eq(ctl("bench", "--dtype", "bf16", "--precision", "tf32", NULL),
                 2);
    cr_expect_eq(ctl("bench", "--repeat", "0", NULL), 2);
    cr_expect_eq(ctl("bench", "--warmup", "x", NULL), 2);
    cr_expect_eq(ctl("bench", "--kernels", "auto", "--sizes", "16", "--warmup",
                     "0", "--repeat", "1", NULL),
                 0, "stdout: %s\nstderr: %s", out_text, err_text);
    EXPECT_IN(out_text, "auto ");
    tu_assert_healthy(g_client);
}

/* Writes a .npy of descr ("<f8", "<c16", ...) and shape (a tuple's
 * inside, "2, 3") from raw little-endian data of bytes bytes. */
static void write_npy_shape(const char *path, const char *descr,
                            const char *shape, const void *data, size_t bytes)
{
    char dict[128];
    int n = snprintf(dict, sizeof(dict),
                     "{'descr': '%s', 'fortran_order': False, 'shape': "
                     "(%s), }",
                     descr, shape);
    size_t total = (10 + (size_t)n + 1 + 63) / 64 * 64;
    char hdr[256];
    memcpy(hdr, "\x93NUMPY\x01\x00", 8);
    hdr[8] = (char)((total - 10) & 0xff);
    hdr[9] = (char)((total - 10) >> 8);
    memcpy(hdr + 10, dict, (size_t)n);
    memset(hdr + 10 + n, ' ', total - 10 - (size_t)n - 1);
    hdr[total - 1] = '\n';
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(hdr, 1, total, f), total);
    cr_assert_eq(fwrite(data, 1, bytes, f), bytes);
    cr_assert_eq(fclose(f), 0);
}

/* A rows x cols matrix (write_npy_shape). */
static void write_npy(const char *path, const char *descr, int rows, int cols,
                      const void *data, size_t bytes)
{
    char shape[64];
    snprintf(shape, sizeof(shape), "%d, %d", rows, cols);
    write_npy_shape(path, descr, shape, data, bytes);
}

/* The .npy at path: its header text (first 128 bytes) into hdr and its
 * data into data (want bytes exactly). */
static void read_npy(const char *path, char *hdr, void *data, size_t want)
{
    static char raw[8192];
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    size_t got = fread(raw, 1, sizeof(raw), f);
    fclose(f);
    cr_assert_eq(got, 128 + want, "%s is %zu bytes", path, got);
    memcpy(hdr, raw, 128);
    hdr[127] = '\0';
    memcpy(data, raw + 128, want);
}

/* 3-D stacks: numpy's matmul of a stack by a stack, by a broadcast stack
 * of one and by a matrix, with a stacked C; D is a 3-D .npy with the
 * exact products of small integers; counts that do not broadcast are a
 * usage error. */
Test(gemmctl, mm_stacks)
{
    float a[3][2][3], b[3][3][2], b2[3][2], c[3][2][2];
    for (int p = 0; p < 3; p++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 2; j++) {
                a[p][j][i] = (float)(p + i - j);
                b[p][i][j] = (float)(p * i + j - 1);
                b2[i][j] = (float)(i - 2 * j);
                if (i < 2)
                    c[p][i][j] = (float)(p - i + 3 * j);
            }
    char pa[256], pb[256], pb2[256], pa1[256], pc[256], pd[256];
    snprintf(pa, sizeof(pa), "%s/a.npy", g_gemmd.dir);
    snprintf(pb, sizeof(pb), "%s/b.npy", g_gemmd.dir);
    snprintf(pb2, sizeof(pb2), "%s/b2.npy", g_gemmd.dir);
    snprintf(pa1, sizeof(pa1), "%s/a1.npy", g_gemmd.dir);
    snprintf(pc, sizeof(pc), "%s/c.npy", g_gemmd.dir);
    snprintf(pd, sizeof(pd), "%s/d.npy", g_gemmd.dir);
    write_npy_shape(pa, "<f4", "3, 2, 3", a, sizeof(a));
    write_npy_shape(pb, "<f4", "3, 3, 2", b, sizeof(b));
    write_npy(pb2, "<f4", 3, 2, b2, sizeof(b2));
    write_npy_shape(pa1, "<f4", "1, 2, 3", a, sizeof(a[0]));
    write_npy_shape(pc, "<f4", "3, 2, 2", c, sizeof(c));
    char hdr[128];
    float d[3][2][2];
    /* stack x stack + stacked C, alpha 2, beta -1 */
    cr_assert_eq(ctl("mm", "--a", pa, "--b", pb, "--c", pc, "--alpha", "2",
                     "--beta", "-1", "--out", pd, "--check", NULL),
                 0, "stdout: %s\nstderr: %s", out_text, err_text);
    EXPECT_IN(out_text, "PASS");
    EXPECT_IN(err_text, "in one batch");
    read_npy(pd, hdr, d, sizeof(d));
    cr_expect(strstr(hdr + 10, "'shape': (3, 2, 2)") != NULL, "%s", hdr + 10);
    for (int p = 0; p < 3; p++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                float s = 0;
                for (int l = 0; l < 3; l++)
                    s += a[p][i][l] * b[p][l][j];
                cr_expect_eq(d[p][i][j], 2 * s - c[p][i][j],
                             "D[%d][%d][%d] = %g", p, i, j, d[p][i][j]);
            }
    /* stack x matrix, and a stack of one x stack (both broadcast) */
    const char *const pairs[2][2] = {{pa, pb2}, {pa1, pb}};
    for (int v = 0; v < 2; v++) {
        cr_assert_eq(ctl("mm", "--a", pairs[v][0], "--b", pairs[v][1], "--out",
                         pd, NULL),
                     0, "stdout: %s\nstderr: %s", out_text, err_text);
        EXPECT_IN(err_text, "broadcast");
        read_npy(pd, hdr, d, sizeof(d));
        cr_expect(strstr(hdr + 10, "'shape': (3, 2, 2)") != NULL, "%s",
                  hdr + 10);
        for (int p = 0; p < 3; p++)
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 2; j++) {
                    float s = 0;
                    for (int l = 0; l < 3; l++)
                        s += v == 0 ? a[p][i][l] * b2[l][j]
                                    : a[0][i][l] * b[p][l][j];
                    cr_expect_eq(d[p][i][j], s, "case %d: D[%d][%d][%d] = %g",
                                 v, p, i, j, d[p][i][j]);
                }
    }
    /* rules */
    write_npy_shape(pa1, "<f4", "2, 2, 3", a, 2 * sizeof(a[0]));
    cr_expect_eq(ctl("mm", "--a", pa1, "--b", pb, "--out", pd, NULL), 2);
    EXPECT_IN(err_text, "do not broadcast");
    cr_expect_eq(ctl("mm", "--a", pa, "--b", pb, NULL), 2);
    EXPECT_IN(err_text, "--out");
    cr_expect_eq(ctl("mm", "--a", pa, "--b", pa, "--out", pd, NULL), 2);
    EXPECT_IN(err_text, "inner dimensions");
    tu_assert_healthy(g_client);
}

/* fp64 and complex GEMMs through `gemmctl mm`: random inputs with every
 * operator and complex scalars pass --check; complex .npy files in and
 * out give the exact product of small integers (op C included); the rules
 * are usage errors with their reason. */
Test(gemmctl, mm_wide_types)
{
    static const char *const runs[][8] = {
        {"fp64", "N", "T", "1.5", "0", "-1", "0", NULL}, /* imaginary 0 */
        {"c64", "C", "T", "0.5", "2", "-1", "0.25", NULL},
        {"c128", "T", "C", "-1", "0.5", "0", "1", NULL},
        {"c128", "C", "C", "1", "0", "0", "0", NULL},
    };
    for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
        const char *const *r = runs[i];
        int rv =
            ctl("mm", "-m", "37", "-n", "29", "-k", "41", "--dtype", r[0],
                "--op-a", r[1], "--op-b", r[2], "--alpha", r[3], "--alpha-im",
                r[4], "--beta", r[5], "--beta-im", r[6], "--check", NULL);
        cr_expect_eq(rv, 0, "%s: stdout: %s\nstderr: %s", r[0], out_text,
                     err_text);
        EXPECT_IN(out_text, "PASS");
        EXPECT_IN(out_text, "long double reference");
    }
    /* A = [[1+2i, 3], [-1i, 2-1i], [4, 1+1i]] (3x2), B = [[1, 1i], [2-2i,
     * 0]] (2x2 stored, op C): D = A B^H with alpha = 1 */
    const double a[] = {1, 2, 3, 0, 0, -1, 2, -1, 4, 0, 1, 1};
    const double b[] = {1, 0, 0, 1, 2, -2, 0, 0};
    char pa[256], pb[256], pd[256];
    snprintf(pa, sizeof(pa), "%s/a.npy", g_gemmd.dir);
    snprintf(pb, sizeof(pb), "%s/b.npy", g_gemmd.dir);
    snprintf(pd, sizeof(pd), "%s/d.npy", g_gemmd.dir);
    write_npy(pa, "<c16", 3, 2, a, sizeof(a));
    write_npy(pb, "<c16", 2, 2, b, sizeof(b));
    cr_assert_eq(
        ctl("mm", "--a", pa, "--b", pb, "--op-b", "C", "--out", pd, NULL), 0,
        "stdout: %s\nstderr: %s", out_text, err_text);
    EXPECT_IN(err_text, "complex128");
    /* D[i][j] = sum_l A[i][l] conj(B[j][l]) */
    double want[12];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) {
            double re = 0, im = 0;
            for (int l = 0; l < 2; l++) {
                double ar = a[2 * (i * 2 + l)], ai = a[2 * (i * 2 + l) + 1];
                double br = b[2 * (j * 2 + l)], bi = -b[2 * (j * 2 + l) + 1];
                re += ar * br - ai * bi;
                im += ar * bi + ai * br;
            }
            want[2 * (i * 2 + j)] = re;
            want[2 * (i * 2 + j) + 1] = im;
        }
    static char text[4096];
    FILE *f = fopen(pd, "rb");
    cr_assert_not_null(f);
    size_t got = fread(text, 1, sizeof(text), f);
    fclose(f);
    cr_assert_eq(got, 128 + sizeof(want), "D.npy is %zu bytes", got);
    cr_expect(strstr(text + 10, "'descr': '<c16'") != NULL, "%.118s",
              text + 10);
    cr_expect(strstr(text + 10, "'shape': (3, 2)") != NULL, "%.118s",
              text + 10);
    cr_expect_arr_eq(text + 128, want, sizeof(want), "D = A B^H exactly");
    /* a float64 file pair runs as fp64 and writes float64 */
    const double x[] = {0.1, 0.2, 0.3, 0.4};
    write_npy(pa, "<f8", 2, 2, x, sizeof(x));
    cr_assert_eq(ctl("mm", "--a", pa, "--b", pa, "--check", NULL), 0,
                 "stdout: %s\nstderr: %s", out_text, err_text);
    EXPECT_IN(err_text, "fp64 in, fp64 out");
    /* rules */
    cr_expect_eq(ctl("mm", "-m", "4", "-n", "4", "-k", "4", "--dtype", "fp64",
                     "--op-a", "C", NULL),
                 2);
    EXPECT_IN(err_text, "complex inputs");
    cr_expect_eq(
        ctl("mm", "-m", "4", "-n", "4", "-k", "4", "--op-b", "X", NULL), 2);
    EXPECT_IN(err_text, "N, T or C");
    cr_expect_eq(
        ctl("mm", "-m", "4", "-n", "4", "-k", "4", "--alpha-im", "1", NULL), 2);
    EXPECT_IN(err_text, "complex inputs");
    cr_expect_eq(ctl("bench", "--dtype", "fp64", NULL), 2);
    EXPECT_IN(err_text, "reference alone");
    tu_assert_healthy(g_client);
}

/* bf16 bits of a float that bf16 holds exactly */
static uint16_t bf16_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return (uint16_t)(u >> 16);
}

Test(gemmctl, mm_d_alone_on_stdout_report_on_stderr)
{
    const float a[] = {1, 2, 3, 4, 5, 6}; /* 2x3 */
    const float b[] = {1, 0, 0, 1, 1, 1}; /* 3x2 */
    char pa[256], pb[256];
    snprintf(pa, sizeof(pa), "%s/a.npy", g_gemmd.dir);
    snprintf(pb, sizeof(pb), "%s/b.npy", g_gemmd.dir);
    write_npy(pa, "<f4", 2, 3, a, sizeof(a));
    write_npy(pb, "<f4", 3, 2, b, sizeof(b));
    cr_assert_eq(ctl("mm", "--a", pa, "--b", pb, NULL), 0, "stderr: %s",
                 err_text);
    /* D = [[4, 5], [10, 11]], and nothing else */
    float d[4];
    cr_expect_eq(sscanf(out_text, "%f %f %f %f", &d[0], &d[1], &d[2], &d[3]), 4,
                 "stdout: %s", out_text);
    cr_expect(d[0] == 4 && d[1] == 5 && d[2] == 10 && d[3] == 11, "stdout: %s",
              out_text);
    cr_expect_eq(lines(out_text), 2, "stdout: %s", out_text);
    cr_expect(strstr(out_text, "kernel") == NULL, "stdout: %s", out_text);
    EXPECT_IN(err_text, "mm 2x2x3");
    EXPECT_IN(err_text, "kernel: ");
    cr_assert_eq(ctl("mm", "--quiet", "--a", pa, "--b", pb, NULL), 0);
    cr_expect_eq(lines(out_text), 2, "stdout: %s", out_text);
    cr_expect_str_empty(err_text, "--quiet, stderr: %s", err_text);
}

Test(gemmctl, mm_reads_and_writes_ml_dtypes_bf16)
{
    /* numpy saves ml_dtypes.bfloat16 with descr '<V2' */
    uint16_t a[6], b[6];
    const float av[] = {1, 2, 3, 4, 5, 6}, bv[] = {1, 0, 0, 1, 1, 1};
    for (int i = 0; i < 6; i++) {
        a[i] = bf16_of(av[i]);
        b[i] = bf16_of(bv[i]);
    }
    char pa[256], pb[256], pd[256];
    snprintf(pa, sizeof(pa), "%s/a.npy", g_gemmd.dir);
    snprintf(pb, sizeof(pb), "%s/b.npy", g_gemmd.dir);
    snprintf(pd, sizeof(pd), "%s/d.npy", g_gemmd.dir);
    write_npy(pa, "<V2", 2, 3, a, sizeof(a));
    write_npy(pb, "<V2", 3, 2, b, sizeof(b));
    cr_assert_eq(ctl("mm", "--a", pa, "--b", pb, "--out", pd, "--out-dtype",
                     "bf16", NULL),
                 0, "stderr: %s", err_text);
    EXPECT_IN(err_text, "bf16 in, bf16 out");
    static char text[4096];
    FILE *f = fopen(pd, "rb");
    cr_assert_not_null(f);
    size_t got = fread(text, 1, sizeof(text), f);
    fclose(f);
    cr_assert_eq(got, 128 + 4 * 2, "D.npy is %zu bytes", got);
    cr_expect(strstr(text + 10, "'descr': '<V2'") != NULL, "%.118s", text + 10);
    uint16_t want[4] = {bf16_of(4), bf16_of(5), bf16_of(10), bf16_of(11)};
    cr_expect_arr_eq(text + 128, want, sizeof(want), "D in bf16");
    /* and the bf16 D reads back as an input */
    cr_assert_eq(ctl("mm", "--quiet", "--a", pd, "--b", pd, "--tb", NULL), 0,
                 "stderr: %s", err_text);
}

Test(gemmctl, usage_errors_name_the_fix)
{
    const float a[] = {1, 2, 3, 4, 5, 6};
    char pa[256];
    snprintf(pa, sizeof(pa), "%s/a.npy", g_gemmd.dir);
    write_npy(pa, "<f4", 2, 3, a, sizeof(a));
    /* 2x3 times 2x3: inner dimensions differ */
    cr_expect_eq(ctl("mm", "--a", pa, "--b", pa, NULL), 2, "stderr: %s",
                 err_text);
    EXPECT_IN(err_text, "inner dimensions differ");
    /* a plain path for --url */
    cr_expect_eq(ctl("--url", "/run/gemmd/gemmd.sock", "ping", NULL), 1);
    EXPECT_IN(err_text, "ipc:///run/gemmd/gemmd.sock");
    /* the top-level help lists every type mm takes */
    cr_expect_eq(ctl("--help", NULL), 0);
    EXPECT_IN(out_text, "bf16, fp16, fp32, fp64,");
    EXPECT_IN(out_text, "c64 or c128");
}

Test(gemmctl, status_as_python_has_it)
{
    cr_assert_eq(ctl("status", "--json", NULL), 0, "stderr: %s", err_text);
    static const char *const keys[] = {
        "\"requests_served\": ", "\"connections\": ", "\"users\": ",
        "\"memory_budget\": ",   "\"memory_used\": ", "\"stage_d2h_us\": "};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        EXPECT_IN(out_text, keys[i]);
    EXPECT_IN(out_text, "\"gemms_served\": 0, \"gemms_failed\": 0");
    /* GEMMs apart from the other requests: one mm is one GEMM */
    cr_assert_eq(ctl("mm", "-m", "8", "-n", "8", "-k", "8", "--quiet", NULL), 0,
                 "stderr: %s", err_text);
    cr_assert_eq(ctl("status", NULL), 0, "stderr: %s", err_text);
    EXPECT_IN(out_text, "gemms           1 served, 0 failed");
    EXPECT_IN(out_text, "every kind");
    if (strcmp(tu_backend(), "cpu") == 0)
        EXPECT_IN(out_text, "h2d -  kernel");
}

Test(gemmctl, stopped_daemon_within_the_timeout)
{
    cr_assert_eq(kill(g_gemmd.pid, SIGSTOP), 0);
    double t0 = tu_now();
    int rc = ctl("--timeout", "300", "ping", NULL);
    double dt = tu_now() - t0;
    cr_assert_eq(kill(g_gemmd.pid, SIGCONT), 0);
    cr_expect_eq(rc, 1, "stderr: %s", err_text);
    cr_expect(dt < 3.0, "gemmctl --timeout 300 ping took %.2f s", dt);
    EXPECT_IN(err_text, "did not answer within 300 ms");
    tu_assert_healthy(g_client);
}

/* Reads the float64 data of a .npy that gemmctl wrote (128-byte header). */
static void read_f8(const char *path, double *out, size_t n)
{
    static char text[4096];
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    size_t got = fread(text, 1, sizeof(text), f);
    fclose(f);
    cr_assert_eq(got, 128 + n * sizeof(double), "%s is %zu bytes", path, got);
    cr_expect(strstr(text + 10, "'descr': '<f8'") != NULL, "%.118s", text + 10);
    memcpy(out, text + 128, n * sizeof(double));
}

/* `gemmctl blas3`: syrk writes its triangle and keeps --c's other one,
 * trsm solves (exactly, on small integers), and its rules say the fix. */
Test(gemmctl, blas3_syrk_trsm_and_errors)
{
    char pa[256], pc[256], pb[256], po[256];
    snprintf(pa, sizeof(pa), "%s/a.npy", g_gemmd.dir);
    snprintf(pb, sizeof(pb), "%s/b.npy", g_gemmd.dir);
    snprintf(pc, sizeof(pc), "%s/c.npy", g_gemmd.dir);
    snprintf(po, sizeof(po), "%s/o.npy", g_gemmd.dir);
    const double a[] = {1, 2, 3, 4, 5, 6}; /* 2 x 3 */
    const double c[] = {7, 7, 7, 7};
    write_npy(pa, "<f8", 2, 3, a, sizeof(a));
    write_npy(pc, "<f8", 2, 2, c, sizeof(c));
    /* lower triangle of A A^T + C: [[14+7, .], [32+7, 77+7]] */
    cr_assert_eq(ctl("blas3", "syrk", "--a", pa, "--c", pc, "--beta", "1",
                     "--uplo", "lower", "--out", po, NULL),
                 0, "stdout: %s\nstderr: %s", out_text, err_text);
    double o[4];
    read_f8(po, o, 4);
    const double want[] = {21, 7, 39, 84};
    cr_expect_arr_eq(o, want, sizeof(want), "syrk lower, upper kept");
    EXPECT_IN(out_text, "syrk");
    /* trsm: upper T = [[2, 1], [0, 4]] (the lower entry is never read),
     * T X = B with X = [[1, 2], [3, 4]] */
    const double t[] = {2, 1, 1e300, 4};
    const double b[] = {5, 8, 12, 16};
    write_npy(pa, "<f8", 2, 2, t, sizeof(t));
    write_npy(pb, "<f8", 2, 2, b, sizeof(b));
    cr_assert_eq(ctl("blas3", "trsm", "--a", pa, "--b", pb, "--out", po, NULL),
                 0, "stdout: %s\nstderr: %s", out_text, err_text);
    read_f8(po, o, 4);
    const double x[] = {1, 2, 3, 4};
    cr_expect_arr_eq(o, x, sizeof(x), "trsm solved T X = B");
    /* rules */
    cr_expect_eq(ctl("blas3", "gemv", "--a", pa, "--out", po, NULL), 2);
    EXPECT_IN(err_text, "syr2k");
    cr_expect_eq(ctl("blas3", "trsm", "--a", pa, "--out", po, NULL), 2);
    EXPECT_IN(err_text, "needs --b");
    cr_expect_eq(
        ctl("blas3", "syrk", "--a", pa, "--uplo", "middle", "--out", po, NULL),
        2);
    EXPECT_IN(err_text, "lower or upper");
    const double b3[] = {1, 2, 3, 4, 5, 6};
    write_npy(pb, "<f8", 3, 2, b3, sizeof(b3));
    cr_expect_eq(ctl("blas3", "symm", "--a", pa, "--b", pb, "--out", po, NULL),
                 1);
    EXPECT_IN(err_text, "needs 3x3");
    tu_assert_healthy(g_client);
}

/* int8 .npy files ('|i1', as numpy saves int8) in, int32 ('<i4') out: D
 * exact, written as int32 with numpy's header, printed as integers;
 * transposes and an int32 C with integer alpha and beta; a stack; the
 * random-input --check; and the refusals (a fractional alpha, float C/D,
 * float files into int8, int32 out of a float D) name the fix. */
Test(gemmctl, mm_int8_npy_round_trip)
{
    /* A 3x4, B 4x2 (and B^T 2x4), C 3x2: values at int8's ends */
    const int8_t a[12] = {-128, 127, 1, -1, 0, 5, -7, 100, 127, 127, -128, 3};
    const int8_t b[8] = {127, -128, -1, 2, 64, -64, 3, 9};
    int8_t bt[8];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++)
            bt[j * 4 + i] = b[i * 2 + j];
    const int32_t c[6] = {2147483647, -5, 0, 1000000, -2147483647 - 1, 7};
    char pa[256], pb[256], pbt[256], pc[256], pd[256], pf[256];
    snprintf(pa, sizeof(pa), "%s/a8.npy", g_gemmd.dir);
    snprintf(pb, sizeof(pb), "%s/b8.npy", g_gemmd.dir);
    snprintf(pbt, sizeof(pbt), "%s/bt8.npy", g_gemmd.dir);
    snprintf(pc, sizeof(pc), "%s/c32.npy", g_gemmd.dir);
    snprintf(pd, sizeof(pd), "%s/d32.npy", g_gemmd.dir);
    snprintf(pf, sizeof(pf), "%s/f32.npy", g_gemmd.dir);
    write_npy(pa, "|i1", 3, 4, a, sizeof(a));
    write_npy(pb, "|i1", 4, 2, b, sizeof(b));
    write_npy(pbt, "<i1", 2, 4, bt, sizeof(bt)); /* either byte-order mark */
    write_npy(pc, "<i4", 3, 2, c, sizeof(c));
    /* the reference: alpha A B + beta C modulo 2^32 */
    int32_t want[2][6];
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 2; j++) {
                int64_t acc = 0;
                for (int l = 0; l < 4; l++)
                    acc += (int64_t)a[i * 4 + l] * b[l * 2 + j];
                uint64_t r = s == 0 ? (uint64_t)acc
                                    : (uint64_t)(-3 * acc) +
                                          (uint64_t)(int64_t)c[i * 2 + j] * 2u;
                want[s][i * 2 + j] = (int32_t)(uint32_t)r;
            }
    cr_assert_eq(ctl("mm", "--a", pa, "--b", pb, "--out", pd, NULL), 0,
                 "stdout: %s\nstderr: %s", out_text, err_text);
    EXPECT_IN(err_text, "int8 in, int32 out");
    EXPECT_IN(err_text, "wrote D (3x2, int32)");
    char hdr[128];
    int32_t d[6];
    read_npy(pd, hdr, d, sizeof(d));
    cr_expect(strstr(hdr + 10, "'descr': '<i4'") != NULL, "%.118s", hdr + 10);
    cr_expect(strstr(hdr + 10, "'shape': (3, 2)") != NULL, "%.118s", hdr + 10);
    cr_expect_arr_eq(d, want[0], sizeof(d), "D = A B exactly");
    /* B given transposed, alpha -3, beta 2 with an int32 C: wraps */
    cr_assert_eq(ctl("mm", "--a", pa, "--b", pbt, "--tb", "--c", pc, "--alpha",
                     "-3", "--beta", "2", "--out", pd, NULL),
                 0, "stdout: %s\nstderr: %s", out_text, err_text);
    read_npy(pd, hdr, d, sizeof(d));
    cr_expect_arr_eq(d, want[1], sizeof(d), "D = -3 A B + 2 C mod 2^32");
    /* printed: integers, D alone on stdout */
    cr_assert_eq(ctl("mm", "--a", pa, "--b", pb, "-q", NULL), 0, "%s",
                 err_text);
    char line[64];
    snprintf(line, sizeof(line), "%11d %11d\n", want[0][0], want[0][1]);
    cr_expect(strncmp(out_text, line, strlen(line)) == 0, "'%s' vs '%s'",
              out_text, line);
    /* --out-dtype fp64 widens exactly */
    cr_assert_eq(ctl("mm", "--a", pa, "--b", pb, "--out-dtype", "fp64", "--out",
                     pd, NULL),
                 0, "%s", err_text);
    double dd[6];
    read_npy(pd, hdr, dd, sizeof(dd));
    cr_expect(strstr(hdr + 10, "'descr': '<f8'") != NULL, "%.118s", hdr + 10);
    for (int i = 0; i < 6; i++)
        cr_expect_eq(dd[i], (double)want[0][i], "element %d", i);
    /* a stack of two A's times B: int32 stack out, checked exactly */
    int8_t a2[24];
    memcpy(a2, a, 12);
    for (int i = 0; i < 12; i++)
        a2[12 + i] = (int8_t)(-a[i] - 1);
    write_npy_shape(pf, "|i1", "2, 3, 4", a2, sizeof(a2));
    cr_assert_eq(ctl("mm", "--a", pf, "--b", pb, "--check", NULL), 0,
                 "stdout: %s\nstderr: %s", out_text, err_text);
    EXPECT_IN(out_text, "PASS");
    /* random int8 inputs, every transpose, checked exactly */
    const char *tr[][2] = {{"N", "N"}, {"T", "N"}, {"N", "T"}, {"T", "T"}};
    for (int t = 0; t < 4; t++) {
        cr_assert_eq(ctl("mm", "-m", "67", "-n", "45", "-k", "129", "--dtype",
                         "int8", "--op-a", tr[t][0], "--op-b", tr[t][1],
                         "--alpha", "2147483647", "--beta", "-1", "--check",
                         NULL),
                     0, "stdout: %s\nstderr: %s", out_text, err_text);
        EXPECT_IN(out_text, "0 of 3015 elements differ");
        EXPECT_IN(out_text, "PASS");
    }
    /* refusals */
    cr_expect_eq(ctl("mm", "--a", pa, "--b", pb, "--alpha", "0.5", NULL), 1);
    EXPECT_IN(err_text, "must be integers");
    cr_expect_eq(ctl("mm", "--a", pa, "--b", pb, "--cd-dtype", "fp32", NULL),
                 1);
    EXPECT_IN(err_text, "int32 C and D");
    cr_expect_eq(ctl("mm", "--a", pa, "--b", pb, "--dtype", "int32", NULL), 1);
    EXPECT_IN(err_text, "give int8 A and B");
    const float f[12] = {0.5f};
    write_npy(pf, "<f4", 3, 4, f, sizeof(f));
    cr_expect_eq(ctl("mm", "--a", pf, "--b", pb, "--dtype", "int8", NULL), 2);
    EXPECT_IN(err_text, "does not round or narrow into integers");
    cr_expect_eq(ctl("mm", "--a", pf, "--b", pf, "--tb", "--out-dtype", "int32",
                     "--out", pd, NULL),
                 2);
    EXPECT_IN(err_text, "only an int32 D is written as int32");
    cr_expect_eq(ctl("bench", "--dtype", "int8", NULL), 2);
    EXPECT_IN(err_text, "gemmctl mm --dtype int8");
    /* an int8 file with a float one multiplies in fp32 */
    cr_assert_eq(ctl("mm", "--a", pf, "--b", pa, "--tb", "--check", NULL), 0,
                 "stdout: %s\nstderr: %s", out_text, err_text);
    EXPECT_IN(err_text, "fp32 in, fp32 out");
    tu_assert_healthy(g_client);
}
