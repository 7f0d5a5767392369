/*
 * gemmctl.h: what gemmctl's files share: exit codes, the subcommands and
 * the helpers (util.c) that turn a gemm_error into a message. gemmctl uses
 * only the public libgemmclient API.
 */
#ifndef GEMMCTL_H
#define GEMMCTL_H

#include <gemm/gemm.h>

#define EXIT_OK      0
#define EXIT_RUNTIME 1 /* the daemon, a file or a check failed */
#define EXIT_USAGE   2 /* bad command line */

/* Subcommands: argv[0] is the subcommand's name; url may be NULL (the
 * default URL). Each returns an exit code. */
int cmd_ping(const char *url, int argc, char **argv);
int cmd_status(const char *url, int argc, char **argv);
int cmd_mm(const char *url, int argc, char **argv);
int cmd_kernels(const char *url, int argc, char **argv);
int cmd_bench(const char *url, int argc, char **argv);
int cmd_blas3(const char *url, int argc, char **argv);

/* Prints "gemmctl: what: <the library's message>" to stderr for a failed
 * call that returned rv; returns EXIT_RUNTIME. */
int ctl_fail(int rv, const char *what);

/* Prints "gemmctl: <message>" to stderr; returns code. */
int ctl_error(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Sets the timeout in ms (-1: none) ctl_open gives each client; 0, the
 * start, leaves the library's defaults. main.c, before any subcommand. */
void ctl_set_timeout(int ms);

/* Opens a client on url (NULL: the default), printing why not. */
int ctl_open(const char *url, gemm_client **out);

/* Prints s as a JSON string (quoted, escaped) to stdout. */
void ctl_json_str(const char *s);

/* Fills n elements of type t at dst with uniform [-1, 1) values from the
 * splitmix64 stream *state (int8 and int32: uniform int8 values,
 * -128..127). */
void ctl_fill_random(void *dst, gemm_dtype t, size_t n, uint64_t *state);

/* Parses "default", "tf32", "fp32" for option opt of subcommand cmd;
 * prints a usage error and returns EXIT_USAGE if unknown. */
int ctl_parse_precision(const char *cmd, const char *opt, const char *s,
                        gemm_precision *out);

/* A kernel's bit masks and rung as words for tables (kernels.c); each
 * writes into buf and returns it ("-" for none). */
const char *ctl_types_str(uint32_t mask, char *buf, size_t len);
const char *ctl_precisions_str(const gemm_kernel_info *k, char *buf,
                               size_t len);
const char *ctl_transposes_str(uint32_t mask, char *buf, size_t len);
const char *ctl_rung_str(const gemm_kernel_info *k, char *buf, size_t len);

#endif /* GEMMCTL_H */
