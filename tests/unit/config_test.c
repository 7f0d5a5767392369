/*
 * config_test.c: gemmd's command line: defaults, each option, and the
 * values it must refuse.
 */
#include "config.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

static int parse(gemmd_config *c, const char *a1, const char *a2)
{
    char *argv[] = {"gemmd", (char *)a1, (char *)a2, NULL};
    int argc = 1 + (a1 != NULL) + (a2 != NULL);
    gemmd_config_defaults(c);
    return gemmd_config_parse(c, argc, argv);
}

Test(config, defaults_follow_environment)
{
    gemmd_config c;
    unsetenv("RUNTIME_DIRECTORY");
    setenv("XDG_RUNTIME_DIR", "/run/user/1234", 1);
    gemmd_config_defaults(&c);
    cr_expect_str_eq(c.listen, "ipc:///run/user/1234/gemmd.sock");
    unsetenv("XDG_RUNTIME_DIR");
    gemmd_config_defaults(&c);
    cr_expect_str_eq(c.listen, "ipc:///run/gemmd/gemmd.sock");
    setenv("RUNTIME_DIRECTORY", "/run/gemmd", 1);
    gemmd_config_defaults(&c);
    cr_expect_str_eq(c.listen, "ipc:///run/gemmd/gemmd.sock");
    unsetenv("RUNTIME_DIRECTORY");
    cr_expect_str_eq(c.backend, "auto");
    cr_expect_eq(c.socket_mode, 0660);
}

Test(config, options)
{
    gemmd_config c;
    cr_expect_eq(parse(&c, "--listen", "ipc:///tmp/x.sock"), 0);
    cr_expect_str_eq(c.listen, "ipc:///tmp/x.sock");
    cr_expect_eq(parse(&c, "--backend", "cpu"), 0);
    cr_expect_str_eq(c.backend, "cpu");
    cr_expect_eq(parse(&c, "--threads", "3"), 0);
    cr_expect_eq(c.threads, 3);
    cr_expect_eq(parse(&c, "--max-queue", "5"), 0);
    cr_expect_eq(c.max_queue, 5);
    cr_expect_eq(parse(&c, "--max-message-bytes", "4096"), 0);
    cr_expect_eq(c.max_message_bytes, 4096);
    cr_expect_eq(parse(&c, "--log-level", "debug"), 0);
    cr_expect_eq(c.log_level, LOG_DEBUG);
    cr_expect_eq(parse(&c, "--socket-mode", "0600"), 0);
    cr_expect_eq(c.socket_mode, 0600);
    cr_expect_eq(parse(&c, "--max-dim", "100"), 0);
    cr_expect_eq(c.max_dim, 100);
    cr_expect_eq(parse(&c, "--spin-us", "0"), 0);
    cr_expect_eq(c.spin_us, 0);
    cr_expect_eq(parse(&c, "--spin-us", "750"), 0);
    cr_expect_eq(c.spin_us, 750);
    gemmd_config_defaults(&c);
    cr_expect_eq(c.spin_us, 200);
}

Test(config, refusals)
{
    gemmd_config c;
    cr_expect_eq(parse(&c, "--listen", "tcp://1.2.3.4:5"), 2);
    cr_expect_eq(parse(&c, "--backend", "gpu"), 2);
    cr_expect_eq(parse(&c, "--threads", "-1"), 2);
    cr_expect_eq(parse(&c, "--threads", "12x"), 2);
    cr_expect_eq(parse(&c, "--max-queue", "0"), 2);
    cr_expect_eq(parse(&c, "--max-message-bytes", "10"), 2);
    cr_expect_eq(parse(&c, "--socket-mode", "0666"), 2);
    cr_expect_eq(parse(&c, "--log-level", "loud"), 2);
    cr_expect_eq(parse(&c, "--spin-us", "2000000"), 2);
    cr_expect_eq(parse(&c, "--spin-us", "fast"), 2);
    cr_expect_eq(parse(&c, "--no-such-option", NULL), 2);
    /* the nng era's options are gone, not silently taken */
    cr_expect_eq(parse(&c, "--watchdog", "1"), 2);
    cr_expect_eq(parse(&c, "--contexts", "4"), 2);
    cr_expect_eq(parse(&c, "stray", NULL), 2);
}
