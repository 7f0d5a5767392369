/*
 * kernels.c: `gemmctl kernels`, the daemon's kernel catalog as a table or
 * JSON: name, ladder rung, the types, precisions and transposes each
 * kernel serves, and a one-line summary. Also the formatting of those bit
 * masks, which `gemmctl bench` shares.
 */
#include "gemmctl.h"

#include <stdio.h>
#include <string.h>

static const char kernels_usage[] =
    "usage: gemmctl [--url URL] kernels [--json]\n"
    "\n"
    "Lists the kernels of the daemon's backend that a request may name\n"
    "(gemmctl mm --kernel NAME, gemmctl bench --kernels ...): the rung on\n"
    "the teaching ladder (ref: the reference the others are compared to),\n"
    "the A/B and C/D types, the precisions served for fp32 inputs, and the\n"
    "transposes (nn, tn = A transposed, nt = B transposed, tt).\n";

static const gemm_dtype all_types[] = {
    GEMM_BF16,      GEMM_FP16,       GEMM_FP32, GEMM_FP64,
    GEMM_COMPLEX64, GEMM_COMPLEX128, GEMM_INT8, GEMM_INT32};
static const char *const trans_names[] = {"nn", "tn", "nt", "tt"};

/* Appends word to buf (comma-separated). */
static void add_word(char *buf, size_t len, const char *word)
{
    size_t used = strlen(buf);
    snprintf(buf + used, len - used, "%s%s", used ? "," : "", word);
}

const char *ctl_types_str(uint32_t mask, char *buf, size_t len)
{
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof(all_types) / sizeof(all_types[0]); i++)
        if (mask & (1u << all_types[i]))
            add_word(buf, len, gemm_dtype_name(all_types[i]));
    if (buf[0] == '\0')
        snprintf(buf, len, "-");
    return buf;
}

const char *ctl_precisions_str(const gemm_kernel_info *k, char *buf, size_t len)
{
    buf[0] = '\0';
    if (!(k->ab_types & (1u << GEMM_FP32))) {
        snprintf(buf, len, "-");
        return buf;
    }
    if (k->precisions & (1u << GEMM_PRECISION_TF32))
        add_word(buf, len, "tf32");
    if (k->precisions &
        (1u << GEMM_PRECISION_FP32 | 1u << GEMM_PRECISION_DEFAULT))
        add_word(buf, len, "fp32");
    if (buf[0] == '\0')
        snprintf(buf, len, "-");
    return buf;
}

const char *ctl_transposes_str(uint32_t mask, char *buf, size_t len)
{
    buf[0] = '\0';
    if ((mask & 0xfu) == 0xfu) {
        snprintf(buf, len, "all");
        return buf;
    }
    for (unsigned t = 0; t < 4; t++)
        if (mask & (1u << t))
            add_word(buf, len, trans_names[t]);
    if (buf[0] == '\0')
        snprintf(buf, len, "-");
    return buf;
}

const char *ctl_rung_str(const gemm_kernel_info *k, char *buf, size_t len)
{
    if (k->reference)
        snprintf(buf, len, "ref");
    else if (k->ladder > 0)
        snprintf(buf, len, "%u", k->ladder);
    else
        snprintf(buf, len, "-");
    return buf;
}

/* A JSON array of the names of mask's bits, as the table shows them. */
static void json_list(const char *csv)
{
    putchar('[');
    if (strcmp(csv, "-") != 0) {
        const char *p = csv;
        for (int first = 1; *p; first = 0) {
            size_t n = strcspn(p, ",");
            printf("%s\"%.*s\"", first ? "" : ", ", (int)n, p);
            p += n + (p[n] == ',');
        }
    }
    putchar(']');
}

static void print_json(const gemm_kernel_info *ks, size_t n)
{
    char buf[64];
    printf("[");
    for (size_t i = 0; i < n; i++) {
        const gemm_kernel_info *k = &ks[i];
        printf("%s\n  {\"name\": ", i ? "," : "");
        ctl_json_str(k->name);
        printf(", \"ladder\": %u, \"reference\": %s, \"ab_types\": ", k->ladder,
               k->reference ? "true" : "false");
        json_list(ctl_types_str(k->ab_types, buf, sizeof(buf)));
        printf(", \"cd_types\": ");
        json_list(ctl_types_str(k->cd_types, buf, sizeof(buf)));
        printf(", \"precisions\": ");
        json_list(ctl_precisions_str(k, buf, sizeof(buf)));
        printf(", \"transposes\": ");
        if ((k->transposes & 0xfu) == 0xfu)
            json_list("nn,tn,nt,tt");
        else
            json_list(ctl_transposes_str(k->transposes, buf, sizeof(buf)));
        printf(", \"summary\": ");
        ctl_json_str(k->summary);
        printf("}");
    }
    printf("%s]\n", n ? "\n" : "");
}

/* The table; the type columns as wide as their longest entry (a kernel
 * of every type lists six). */
static void print_table(const gemm_kernel_info *ks, size_t n)
{
    char rung[16], ab[48], cd[48], pr[32], tr[32];
    int wab = 15, wcd = 15;
    for (size_t i = 0; i < n; i++) {
        int la = (int)strlen(ctl_types_str(ks[i].ab_types, ab, sizeof(ab)));
        int lc = (int)strlen(ctl_types_str(ks[i].cd_types, cd, sizeof(cd)));
        wab = la > wab ? la : wab;
        wcd = lc > wcd ? lc : wcd;
    }
    printf("%-16s %-4s %-*s %-*s %-10s %-11s %s\n", "KERNEL", "RUNG", wab,
           "A/B", wcd, "C/D", "FP32 AS", "TRANSPOSES", "SUMMARY");
    for (size_t i = 0; i < n; i++) {
        const gemm_kernel_info *k = &ks[i];
        printf("%-16s %-4s %-*s %-*s %-10s %-11s %s\n", k->name,
               ctl_rung_str(k, rung, sizeof(rung)), wab,
               ctl_types_str(k->ab_types, ab, sizeof(ab)), wcd,
               ctl_types_str(k->cd_types, cd, sizeof(cd)),
               ctl_precisions_str(k, pr, sizeof(pr)),
               ctl_transposes_str(k->transposes, tr, sizeof(tr)), k->summary);
    }
}

int cmd_kernels(const char *url, int argc, char **argv)
{
    gemm_kernel_info *ks;
    gemm_client *c;
    size_t n;
    int json = 0, rv, code;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(kernels_usage, stdout);
            return EXIT_OK;
        } else
            return ctl_error(EXIT_USAGE, "kernels: unknown argument '%s'",
                             argv[i]);
    }
    if ((code = ctl_open(url, &c)) != EXIT_OK)
        return code;
    rv = gemm_list_kernels(c, &ks, &n);
    gemm_client_close(c);
    if (rv != GEMM_OK)
        return ctl_fail(rv, "kernels");
    if (json)
        print_json(ks, n);
    else
        print_table(ks, n);
    gemm_kernel_info_free(ks);
    return EXIT_OK;
}
