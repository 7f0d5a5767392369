/*
 * log.c: one line per message on stderr, prefixed with the syslog level in
 * the "<N>" form that journald understands (sd-daemon(3)), so levels survive
 * the trip into the journal without linking libsystemd.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int gemmd_log_level = LOG_INFO;

/* Copies s into out with control characters (newlines above all: journald
 * would read a "<N>" after one as a new line's level) and bytes >= 0x7f
 * written as \xNN, so text from clients can neither forge log lines nor
 * garble a terminal. */
static void escape(char *out, size_t len, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (; *s != '\0' && o + 5 < len; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch >= 0x20 && ch < 0x7f && ch != '\\') {
            out[o++] = (char)ch;
        } else if (ch == '\\') {
            out[o++] = '\\';
            out[o++] = '\\';
        } else {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[ch >> 4];
            out[o++] = hex[ch & 15];
        }
    }
    out[o] = '\0';
}

void gemmd_log_raw(int level, const char *fmt, ...)
{
    char raw[1024], line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof(raw), fmt, ap);
    va_end(ap);
    escape(line, sizeof(line), raw);
    /* One fprintf per line: stdio locks the stream, so lines from different
     * threads never interleave. A terminal gets the level by name. */
    static const char *names[] = {"emerg",   "alert",  "crit", "error",
                                  "warning", "notice", "info", "debug"};
    if (isatty(STDERR_FILENO))
        fprintf(stderr, "gemmd: %s: %s\n", names[level & 7], line);
    else
        fprintf(stderr, "<%d>%s\n", level & 7, line);
}

int gemmd_log_parse_level(const char *s)
{
    static const char *names[] = {"emerg",   "alert",  "crit", "err",
                                  "warning", "notice", "info", "debug"};
    if (s == NULL || *s == '\0')
        return -1;
    for (int i = 0; i < 8; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    if (strcmp(s, "error") == 0)
        return LOG_ERR;
    if (strcmp(s, "warn") == 0)
        return LOG_WARNING;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end == '\0' && v >= 0 && v <= 7)
        return (int)v;
    return -1;
}
