/*
 * dial.c: connecting a client's nng socket to gemmd within the caller's
 * timeout, and the words for each way it fails. nng's synchronous dial
 * reports a missing socket, a refused connection or a denied permission at
 * once, but waits up to its own 10 s for the handshake of a daemon that
 * accepted the connection and does not answer (stopped, hung); so the dial
 * runs on a short-lived thread and the caller's thread gives up at its
 * deadline, leaving the socket to that thread, which closes it when its
 * dial returns (closing it under the dial can crash nng 1.5.2). Closing is
 * bounded
 * the same way: nng 1.5.2's nng_close() can deadlock once the daemon is
 * gone, and a library must not hang the program that loaded it.
 */
#include "internal.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* One dial in flight, shared by the dialing thread and the caller until
 * the caller gives up; then the dialing thread owns it (and the client). */
struct dial_job {
    pthread_mutex_t mtx;
    pthread_cond_t cv; /* signalled when done turns true */
    gemm_client *c;
    void (*free_client)(gemm_client *);
    nng_dialer dialer;
    int rv;         /* nng_dial()'s result */
    bool done;      /* nng_dial() returned */
    bool abandoned; /* the caller gave up: the dialing thread cleans up */
};

static void dial_job_free(struct dial_job *j)
{
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mtx);
    free(j);
}

/* The dialing thread: one synchronous nng_dial(), then signals; when the
 * caller has given up by then, closes the dialer and the socket (only now:
 * nng 1.5.2 can crash when a socket is closed under a dial in progress)
 * and frees the client (free_client), whose pipe callback the close may
 * still call. */
static void *dial_main(void *arg)
{
    struct dial_job *j = arg;
    nng_dialer d = NNG_DIALER_INITIALIZER;
    int rv = nng_dial(j->c->sock, j->c->url, &d, 0);

    pthread_mutex_lock(&j->mtx);
    j->rv = rv;
    j->dialer = d;
    j->done = true;
    bool abandoned = j->abandoned;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mtx);
    if (abandoned) {
        if (rv == 0)
            nng_dialer_close(d);
        nng_close(j->c->sock);
        j->free_client(j->c);
        dial_job_free(j);
    }
    return NULL;
}

/*
 * Runs nng_dial(c->sock, c->url) and waits at most timeout_ms (-1: until
 * it returns). Returns nng_dial()'s result, or NNG_ETIMEDOUT when the
 * deadline passed first: then *handed is true, and the socket and c
 * belong to the dialing thread, which closes and frees them once its dial
 * returns (nng's handshake limit, or the daemon answering or going away),
 * freeing c with free_client.
 * The opening thread only.
 */
static int dial_bounded(gemm_client *c, int timeout_ms,
                        void (*free_client)(gemm_client *), bool *handed)
{
    struct dial_job *j;
    pthread_condattr_t ca;
    pthread_t th;
    struct timespec dl;
    int rv;

    *handed = false;
    if (timeout_ms < 0 || (j = calloc(1, sizeof(*j))) == NULL)
        return nng_dial(c->sock, c->url, &c->dialer, 0);
    j->c = c;
    j->free_client = free_client;
    pthread_mutex_init(&j->mtx, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&j->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&th, NULL, dial_main, j) != 0) {
        dial_job_free(j);
        return nng_dial(c->sock, c->url, &c->dialer, 0);
    }
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&j->mtx);
    while (!j->done &&
           pthread_cond_timedwait(&j->cv, &j->mtx, &dl) != ETIMEDOUT) {
    }
    bool done = j->done;
    if (!done)
        j->abandoned = true;
    pthread_mutex_unlock(&j->mtx);
    if (!done) {
        pthread_detach(th);
        *handed = true;
        return NNG_ETIMEDOUT;
    }
    pthread_join(th, NULL);
    rv = j->rv;
    c->dialer = j->dialer;
    dial_job_free(j);
    return rv;
}

/*
 * The group that grants access to the ipc socket at path: the socket's own
 * group, or its directory's when the socket cannot be examined. Returns
 * false when neither can be read.
 */
static bool socket_group(const char *path, gid_t *gid)
{
    struct stat st;
    char dir[CLI_URL_MAX];
    char *slash;

    if (stat(path, &st) == 0) {
        *gid = st.st_gid;
        return true;
    }
    snprintf(dir, sizeof(dir), "%s", path);
    if ((slash = strrchr(dir, '/')) == NULL)
        return false;
    if (slash == dir)
        slash[1] = '\0';
    else
        *slash = '\0';
    if (stat(dir, &st) != 0)
        return false;
    *gid = st.st_gid;
    return true;
}

/* Whether this process holds gid as its group or a supplementary group. */
static bool in_group(gid_t gid)
{
    gid_t groups[256];
    int n;

    if (getegid() == gid)
        return true;
    if ((n = getgroups(256, groups)) < 0)
        return false;
    for (int i = 0; i < n; i++)
        if (groups[i] == gid)
            return true;
    return false;
}

/* GEMM_ERR_PERMISSION for a denied connect to url, naming the group that
 * grants access and the commands that join it. */
static int permission_error(const char *url)
{
    const char *path = strncmp(url, "ipc://", 6) == 0 ? url + 6 : NULL;
    struct passwd *pw = getpwuid(geteuid());
    struct group *gr;
    char uname[64], gname[64];
    gid_t gid;

    if (path == NULL || !socket_group(path, &gid))
        return cli_error(GEMM_ERR_PERMISSION,
                         "cannot connect to gemmd at %s: permission denied "
                         "(this user may not use that socket)",
                         url);
    snprintf(uname, sizeof(uname), "%s", pw != NULL ? pw->pw_name : "$USER");
    if ((gr = getgrgid(gid)) != NULL)
        snprintf(gname, sizeof(gname), "%s", gr->gr_name);
    else
        snprintf(gname, sizeof(gname), "%lu", (unsigned long)gid);
    if (in_group(gid))
        return cli_error(GEMM_ERR_PERMISSION,
                         "cannot connect to gemmd at %s: permission denied, "
                         "although user %s is in group %s, the socket's "
                         "group (check the socket's and its directory's "
                         "modes)",
                         url, uname, gname);
    return cli_error(GEMM_ERR_PERMISSION,
                     "cannot connect to gemmd at %s: permission denied: user "
                     "%s is not in group %s, which may use gemmd; to join "
                     "it: sudo usermod -aG %s %s, then log in again (or run "
                     "newgrp %s)",
                     url, uname, gname, gname, uname, gname);
}

/* Words for a failed dial: ipc reports a missing socket file as ENOENT. */
static const char *dial_hint(int rv)
{
    switch (rv) {
    case NNG_ENOENT:
        return "no such socket";
    case NNG_ECONNREFUSED:
        return "connection refused";
    default:
        return nng_strerror(rv);
    }
}

/* The error for a failed dial of url (nng error rv), with its message. */
static int dial_error(const char *url, int rv, int timeout_ms)
{
    struct stat st;

    if (rv == NNG_EADDRINVAL || rv == NNG_ENOTSUP || rv == NNG_EINVAL) {
        if (strstr(url, "://") == NULL && url[0] == '/')
            return cli_error(GEMM_ERR_INVALID,
                             "cannot connect to gemmd: invalid URL '%s': a "
                             "socket path needs the ipc:// scheme: "
                             "ipc://%s",
                             url, url);
        return cli_error(GEMM_ERR_INVALID,
                         "cannot connect to gemmd: invalid URL '%s': %s", url,
                         nng_strerror(rv));
    }
    if (rv == NNG_EPERM)
        return permission_error(url);
    if (rv == NNG_ETIMEDOUT && timeout_ms >= 0)
        return cli_error(GEMM_ERR_NOT_ANSWERING,
                         "gemmd at %s accepted the connection but did not "
                         "answer within %d ms (is it stopped or hung?)",
                         url, timeout_ms);
    if (rv == NNG_ETIMEDOUT)
        return cli_error(GEMM_ERR_NOT_ANSWERING,
                         "gemmd at %s accepted the connection but did not "
                         "answer (is it stopped or hung?)",
                         url);
    /* nng reports a missing ipc socket file as "connection refused". */
    if (strncmp(url, "ipc://", 6) == 0 && stat(url + 6, &st) != 0 &&
        errno == ENOENT)
        return cli_error(GEMM_ERR_CONNECT,
                         "cannot connect to gemmd at %s: no socket at %s "
                         "(is gemmd running?)",
                         url, url + 6);
    return cli_error(GEMM_ERR_CONNECT,
                     "cannot connect to gemmd at %s: %s (is gemmd "
                     "running?)",
                     url, dial_hint(rv));
}

/* One nng_close() in flight, shared by the closing thread and the caller
 * (refs: whoever drops the last frees it). */
struct close_job {
    pthread_mutex_t mtx;
    pthread_cond_t cv;
    nng_socket sock;
    nng_dialer dialer;
    bool done;
    int refs;
};

static void close_job_put(struct close_job *j)
{
    pthread_mutex_lock(&j->mtx);
    bool last = --j->refs == 0;
    pthread_mutex_unlock(&j->mtx);
    if (last) {
        pthread_cond_destroy(&j->cv);
        pthread_mutex_destroy(&j->mtx);
        free(j);
    }
}

/* The closing thread: the dialer (no more reconnects), then the socket. */
static void *close_main(void *arg)
{
    struct close_job *j = arg;
    if (nng_dialer_id(j->dialer) > 0)
        nng_dialer_close(j->dialer);
    nng_close(j->sock);
    pthread_mutex_lock(&j->mtx);
    j->done = true;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mtx);
    close_job_put(j);
    return NULL;
}

bool cli_close_socket(gemm_client *c)
{
    struct close_job *j = calloc(1, sizeof(*j));
    pthread_condattr_t ca;
    pthread_t th;
    struct timespec dl;

    if (j == NULL) {
        nng_close(c->sock);
        return true;
    }
    pthread_mutex_init(&j->mtx, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&j->cv, &ca);
    pthread_condattr_destroy(&ca);
    j->sock = c->sock;
    j->dialer = c->dialer;
    j->refs = 2;
    if (pthread_create(&th, NULL, close_main, j) != 0) {
        nng_close(c->sock);
        j->refs = 1;
        close_job_put(j);
        return true;
    }
    pthread_detach(th);
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += CLI_CLOSE_WAIT_MS / 1000;
    dl.tv_nsec += (long)(CLI_CLOSE_WAIT_MS % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&j->mtx);
    while (!j->done &&
           pthread_cond_timedwait(&j->cv, &j->mtx, &dl) != ETIMEDOUT) {
    }
    bool done = j->done;
    pthread_mutex_unlock(&j->mtx);
    close_job_put(j);
    return done;
}

int cli_dial(gemm_client *c, int timeout_ms, void (*free_client)(gemm_client *),
             bool *handed)
{
    char url[CLI_URL_MAX];
    snprintf(url, sizeof(url), "%s", c->url); /* c may be gone after */
    int rv = dial_bounded(c, timeout_ms, free_client, handed);

    return rv == 0 ? GEMM_OK : dial_error(url, rv, timeout_ms);
}
