/*
 * fdpass.h: the descriptor channel and the SP wire, spoken by hand, for
 * tests and fuzzers that talk to gemmd below libgemmclient: pass a memfd
 * and get its ticket; open a plain Unix socket, do (or half do) the SP
 * handshake, send frames and read replies without nng. Not thread-safe per
 * socket.
 */
#ifndef GEMM_TESTS_UTIL_FDPASS_H
#define GEMM_TESTS_UTIL_FDPASS_H

#include <stddef.h>
#include <stdint.h>

/* Connects a plain AF_UNIX stream socket to url ("ipc://PATH"); the fd or
 * -1. Blocking, with SO_RCVTIMEO/SO_SNDTIMEO of timeout_ms. */
int tu_sock_connect(const char *url, int timeout_ms);

/* Passes fd over a new descriptor channel to url. Returns 0 with *ticket,
 * the daemon's gemm_error (> 0), or -1 on a transport failure. */
int tu_fd_ticket(const char *url, int fd, uint64_t *ticket);

/* The same, and the channel stays open (*chan, the caller closes it) so
 * the ticket stays good past the second a closed channel's tickets have
 * (chan may be NULL: closed). */
int tu_fd_ticket_keep(const char *url, int fd, uint64_t *ticket, int *chan);

/* Asks a new descriptor channel to url for a spare of mib MiB (LEND).
 * Returns the daemon's status (0: *fd is the spare's memfd, the caller's,
 * and *ticket its ticket; else *fd is -1) or -1 on a transport failure.
 * With chan, the channel stays open (*chan, the caller closes it). */
int tu_fd_lend(const char *url, uint32_t mib, int *fd, uint64_t *ticket,
               int *chan);

/* Reads the daemon's greeting and sends an SP REQ header on sock. 0 or
 * -1. */
int tu_sp_handshake(int sock);

/* Sends one SP request frame: request id (high bit set here) + body. 0 or
 * -1. */
int tu_sp_send(int sock, uint32_t req_id, const void *body, size_t len);

/* Reads one SP reply frame: *req_id and the body into a malloc'd *body of
 * *len bytes (caller frees). 0 or -1 (timeout, EOF). */
int tu_sp_recv(int sock, uint32_t *req_id, uint8_t **body, size_t *len);

#endif
