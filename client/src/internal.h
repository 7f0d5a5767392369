/*
 * internal.h: what the files of libgemmclient share and the public header
 * hides: the client and buffer structs, the request machinery (one nng
 * context and aio per request, so any number may be in flight) and the
 * thread-local error message. Nothing here is exported.
 */
#ifndef GEMM_CLIENT_INTERNAL_H
#define GEMM_CLIENT_INTERNAL_H

#include <gemm/gemm.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include <pthread.h>
#include <stdatomic.h>

#include "gemm.pb-c.h"

#define CLI_URL_MAX 256

/* Round trips remembered per request kind and shape (waitspin.c). */
#define CLI_RTT_SLOTS 16
struct cli_rtt {
    uint64_t key;   /* cli_wait_key(); 0: free */
    uint32_t us;    /* the last round trip */
    uint32_t used;  /* rtt_clock when last used */
    uint16_t skip;  /* requests of this key still to wait without spinning */
    uint8_t misses; /* spins in a row that ended before the reply */
};

struct gemm_client {
    nng_socket sock;
    nng_dialer dialer;
    char url[CLI_URL_MAX];
    atomic_int timeout_ms;             /* per request; -1 = forever */
    atomic_uint_fast64_t next_id;      /* request ids, from 1 */
    pthread_mutex_t mtx;               /* guards the fields below */
    bool lost;                         /* the daemon's pipe went away */
    struct gemm_request *pending;      /* requests in flight (doubly linked) */
    struct gemm_buffer *buffers;       /* buffers allocated on this client */
    pthread_mutex_t fd_mtx;            /* guards fdchan: one exchange at once */
    int fdchan;                        /* descriptor channel, -1 until used */
    struct cli_rtt rtt[CLI_RTT_SLOTS]; /* under mtx */
    uint32_t rtt_clock;                /* under mtx */
    atomic_int spin_us;                /* waitspin.c's limit; 0: off */
    atomic_uint features;              /* GEMM_FEATURE_*, the last ping's */
    atomic_bool pinged;                /* features holds a ping's answer */
};

struct gemm_buffer {
    gemm_client *client;             /* NULL once the client is closed */
    void *data;                      /* the mapping, page-aligned */
    size_t size;                     /* mapped size (page multiple) */
    uint64_t id;                     /* the daemon's buffer id */
    bool imported;                   /* the caller's mapping: not unmapped */
    bool lent;                       /* a spare gemmd made and pinned */
    struct gemm_buffer *prev, *next; /* on client->buffers */
};

/*
 * One request on the wire. Created by cli_req_start(), consumed by
 * cli_req_finish(). The public gemm_request of gemm_submit() is this.
 */
struct gemm_request {
    gemm_client *client;
    nng_ctx ctx;
    nng_aio *aio;
    uint64_t id;                      /* Request.id */
    uint64_t t0_ns;                   /* CLOCK_MONOTONIC when sent */
    int timeout_ms;                   /* as it was when the request started */
    const char *what;                 /* "gemm", "ping", ... for messages */
    bool cancelable;                  /* a job: Cancel it on a timeout */
    uint64_t key;                     /* cli_wait_key() of the request */
    atomic_int done;                  /* the aio's operation ended */
    pthread_mutex_t mtx;              /* with cv: done's changes */
    pthread_cond_t cv;                /* CLOCK_MONOTONIC */
    struct gemm_request *prev, *next; /* on client->pending */
};

/*
 * Packs req (version and id are filled here), sends it on a fresh context and
 * posts the receive of its reply. On success *out is the pending request;
 * the caller must pass it to cli_req_finish(). On failure nothing is left
 * and the error message is set. Thread-safe.
 */
int cli_req_start(gemm_client *c, Gemm__Request *req, const char *what,
                  struct gemm_request **out);

/*
 * Waits for r's reply, checks the envelope (version, id), frees r and maps
 * Reply.status to the return value. On GEMM_OK *out is the decoded reply and
 * the caller frees it with gemm__reply__free_unpacked(*out, NULL); on
 * failure *out is untouched, and the thread's error message says why.
 * *rtt_us, if non-NULL, gets the measured round trip. Any thread, once.
 */
int cli_req_finish(struct gemm_request *r, Gemm__Reply **out, uint64_t *rtt_us);

/*
 * waitspin.c: the key of req's kind and shape (packed: its packed size);
 * cli_wait_near() sleeps until a margin before r's reply is due by the
 * round trip learnt for its key, then spins on r->done for the margin
 * (nothing without a learnt time or with c->spin_us 0); cli_wait_learn()
 * records a round trip; cli_wait_done() is r->aio's callback.
 */
uint64_t cli_wait_key(const Gemm__Request *req, size_t packed);
void cli_wait_near(struct gemm_request *r);
void cli_wait_learn(gemm_client *c, uint64_t key, uint64_t rtt_us);
void cli_wait_done(void *arg);

/* GEMM_CLIENT_SPIN_US when set to a number >= 0, else the default. */
int cli_spin_default(void);

/* cli_req_start() then cli_req_finish(). Thread-safe. */
int cli_call(gemm_client *c, Gemm__Request *req, const char *what,
             Gemm__Reply **out, uint64_t *rtt_us);

/*
 * Dials c->sock to c->url, waiting at most timeout_ms (-1: nng's own limit)
 * for the daemon's handshake (dial.c). Returns GEMM_OK (c->dialer set), or
 * the error with its message set: GEMM_ERR_CONNECT, GEMM_ERR_PERMISSION,
 * GEMM_ERR_NOT_ANSWERING, GEMM_ERR_INVALID. *handed is true when the
 * deadline passed first: c (and its socket) then belong to the dialing
 * thread, which closes the socket once its dial returns and then calls
 * free_client(c); the caller must not touch c again. The opening thread
 * only.
 */
int cli_dial(gemm_client *c, int timeout_ms, void (*free_client)(gemm_client *),
             bool *handed);

/*
 * Closes c's dialer, then c->sock, waiting at most CLI_CLOSE_WAIT_MS:
 * Debian's nng 1.5.2 can deadlock in nng_close() after the daemon went
 * away (nng issues 1543, 1813), and a library must not hang its host
 * program. Returns true when the close finished; false when it was left
 * running on its own thread, which may still call c's pipe callback, so
 * the caller must then leave c allocated. The closing thread only.
 */
bool cli_close_socket(gemm_client *c);
#define CLI_CLOSE_WAIT_MS 2000
/* A lost client's dialer waits this long before it would redial: never,
 * in practice (24 h). */
#define CLI_NO_REDIAL_MS (24 * 3600 * 1000)

/* Hands memfd fd to the daemon over the descriptor channel (fdchan.c);
 * on success *ticket names it in a RegisterBuffer. fd stays the caller's.
 * Thread-safe. */
int cli_pass_fd(gemm_client *c, int fd, uint64_t *ticket);

/* Asks gemmd for a spare of at least size bytes (GEMM_FEATURE_LEND): on
 * GEMM_OK *fd is its memfd (the caller's; its size is the file's) and
 * *ticket the ticket to register it under; else a gemm_error with a
 * message (GEMM_ERR_NO_BUFFER: none fits). */
int cli_lend_fd(gemm_client *c, size_t size, int *fd, uint64_t *ticket);

/* Closes the descriptor channel, if open. */
void cli_fdchan_close(gemm_client *c);

/* m as a wire Operand: its tensor id, or its buffer id, offset and ld
 * (m->buf must be set when m->tensor is 0). */
void cli_wire_operand(Gemm__Operand *w, const gemm_matrix *m);

/* Fills *g (initialised here) from op: types, transposes, scalars,
 * conjugates, timeout, precision, kernel (g->kernel points into op),
 * moduli, and with operands, A, B, D and (beta != 0 and given) C in
 * w[0..3] (A, B, C, D). Returns GEMM_OK, or GEMM_ERR_INVALID with the thread's
 * message set (what names the call). */
int cli_gemm_pack(const gemm_op *op, bool operands, Gemm__GemmRequest *g,
                  Gemm__Operand w[4], const char *what);

/* Sets the calling thread's error message (printf format); returns err so
 * that callers may `return cli_error(GEMM_ERR_X, "...")`. */
int cli_error(int err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Clears the calling thread's error message (start of a public call). */
void cli_clear_error(void);

/* CLOCK_MONOTONIC in nanoseconds (waitspin.c). */
uint64_t cli_now_ns(void);

#endif /* GEMM_CLIENT_INTERNAL_H */
