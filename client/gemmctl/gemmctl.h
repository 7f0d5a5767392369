/*
 * gemmctl.h: what gemmctl's files share: exit codes, the subcommands and
 * the helpers that turn a gemm_error into a message. gemmctl uses only the
 * public libgemmclient API.
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

/* Prints "gemmctl: what: <the library's message>" to stderr for a failed
 * call that returned rv; returns EXIT_RUNTIME. */
int ctl_fail(int rv, const char *what);

/* Prints "gemmctl: <message>" to stderr; returns code. */
int ctl_error(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Opens a client on url (NULL: the default), printing why not. */
int ctl_open(const char *url, gemm_client **out);

#endif /* GEMMCTL_H */
