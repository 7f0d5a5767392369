/*
 * config_test.c: gemmd's command line: defaults, each option, the values it
 * must refuse, and what it says about a socket group it cannot use or a
 * metrics endpoint beyond loopback.
 */
#include "config.h"

#include <criterion/criterion.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

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

/* Parses a1 a2 with stderr sent to a file; returns the status and copies
 * what was printed into out. */
static int parse_capture(gemmd_config *c, const char *a1, const char *a2,
                         char *out, size_t len)
{
    FILE *f = tmpfile();
    cr_assert_not_null(f);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(fileno(f), STDERR_FILENO);
    int rv = parse(c, a1, a2);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(f);
    size_t n = fread(out, 1, len - 1, f);
    out[n] = '\0';
    fclose(f);
    return rv;
}

/* A group the process is not in: refused at start with the reason and the
 * command that grants it. As root, the test drops to nobody first (each
 * test runs in its own process). */
Test(config, socket_group_needs_membership)
{
    if (geteuid() == 0) {
        cr_assert_eq(setgroups(0, NULL), 0);
        cr_assert_eq(setgid(65534), 0);
        cr_assert_eq(setuid(65534), 0);
    }
    struct group *g = getgrgid(0);
    if (g == NULL)
        cr_skip_test("skipped: no group with gid 0 to test with");
    gid_t mine[256];
    int n = getgroups(256, mine);
    for (int i = 0; i < n; i++)
        if (mine[i] == 0)
            cr_skip_test("skipped: this user is in group %s", g->gr_name);
    char name[64], err[1024];
    snprintf(name, sizeof(name), "%s", g->gr_name);
    gemmd_config c;
    cr_expect_eq(parse_capture(&c, "--socket-group", name, err, sizeof(err)),
                 2);
    cr_expect(strstr(err, "is not in group") != NULL, "said: %s", err);
    cr_expect(strstr(err, "usermod -aG") != NULL, "said: %s", err);
    cr_expect_eq(parse_capture(&c, "--socket-group", "no-such-group-gemmd", err,
                               sizeof(err)),
                 2);
    cr_expect(strstr(err, "there is no group") != NULL, "said: %s", err);
}

Test(config, socket_group_of_our_own)
{
    struct group *g = getgrgid(getegid());
    if (g == NULL)
        cr_skip_test("skipped: our group has no name");
    char name[64];
    snprintf(name, sizeof(name), "%s", g->gr_name);
    gemmd_config c;
    cr_expect_eq(parse(&c, "--socket-group", name), 0);
    cr_expect_str_eq(c.socket_group, name);
}

/* /metrics shows per-uid usage: a listener beyond loopback is taken with a
 * warning; loopback is taken silently. */
Test(config, metrics_beyond_loopback_warns)
{
    gemmd_config c;
    char err[1024];
    cr_expect_eq(
        parse_capture(&c, "--metrics-listen", "0.0.0.0:9464", err, sizeof(err)),
        0);
    cr_expect(strstr(err, "not a loopback address") != NULL, "said: %s", err);
    cr_expect(strstr(err, "per-uid") != NULL, "said: %s", err);
    const char *quiet[] = {"127.0.0.1:9464", "localhost:9464", "[::1]:9464"};
    for (size_t i = 0; i < sizeof(quiet) / sizeof(quiet[0]); i++) {
        cr_expect_eq(
            parse_capture(&c, "--metrics-listen", quiet[i], err, sizeof(err)),
            0);
        cr_expect_str_eq(err, "", "%s: said: %s", quiet[i], err);
    }
    cr_expect_eq(
        parse_capture(&c, "--metrics-listen", "[::]:9464", err, sizeof(err)),
        0);
    cr_expect(strstr(err, "not a loopback address") != NULL, "said: %s", err);
}

Test(config, devices)
{
    gemmd_config c;
    gemmd_config_defaults(&c);
    cr_expect_eq(c.ndevices, 0, "default: all devices");
    cr_expect_eq(parse(&c, "--devices", "0,1,0"), 0);
    cr_expect_eq(c.ndevices, 3);
    cr_expect(c.devices[0] == 0 && c.devices[1] == 1 && c.devices[2] == 0);
    cr_expect_eq(c.device, 0);
    cr_expect_eq(parse(&c, "--device", "2"), 0);
    cr_expect(c.ndevices == 1 && c.devices[0] == 2 && c.device == 2,
              "--device N is a list of one");
    cr_expect_eq(parse(&c, "--devices", "all"), 0);
    cr_expect_eq(c.ndevices, 0);
    cr_expect_eq(parse(&c, "--devices", "3"), 0);
    cr_expect(c.ndevices == 1 && c.devices[0] == 3);
    cr_expect_eq(parse(&c, "--split-volume", "0"), 0);
    cr_expect_eq(c.split_volume, 0);
    cr_expect_eq(parse(&c, "--device-fail-limit", "5"), 0);
    cr_expect_eq(c.device_fail_limit, 5);
    cr_expect_eq(parse(&c, "--devices", ""), 2);
    cr_expect_eq(parse(&c, "--devices", "0,,1"), 2);
    cr_expect_eq(parse(&c, "--devices", "0,"), 2);
    cr_expect_eq(parse(&c, "--devices", "x"), 2);
    cr_expect_eq(
        parse(&c, "--devices", "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16"), 2,
        "more than 16");
    cr_expect_eq(parse(&c, "--device-fail-limit", "0"), 2);
}
