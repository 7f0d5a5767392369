/*
 * notify.h: the sd_notify protocol without libsystemd. Under a unit with
 * Type=notify, systemd puts a datagram socket's path in $NOTIFY_SOCKET; we
 * send it "READY=1", "STOPPING=1" and "STATUS=..." lines. Elsewhere this
 * does nothing. Thread-safe.
 */
#ifndef GEMMD_NOTIFY_H
#define GEMMD_NOTIFY_H

/* Sends state (newline-separated assignments). Returns 1 if sent, 0 if
 * there is no notify socket, -1 on error. */
int gemmd_notify(const char *state);

#endif
