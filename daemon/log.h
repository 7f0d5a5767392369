/*
 * log.h: the daemon's logger. Levels are syslog's numbers (LOG_ERR ..
 * LOG_DEBUG); lines go to stderr, where journald adds time and unit. The
 * level test happens before any formatting (as Redis' serverLog does), so a
 * disabled debug line costs one comparison. Thread-safe.
 */
#ifndef GEMMD_LOG_H
#define GEMMD_LOG_H

#include <syslog.h>

extern int gemmd_log_level;

void gemmd_log_raw(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define gemmd_log(level, ...)                                                  \
    do {                                                                       \
        if ((level) <= gemmd_log_level)                                        \
            gemmd_log_raw((level), __VA_ARGS__);                               \
    } while (0)

/* Parses "err", "warning", "notice", "info", "debug" or a number 0..7.
 * Returns the level, or -1 if unknown. */
int gemmd_log_parse_level(const char *s);

#endif
