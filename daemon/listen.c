/*
 * listen.c: bind, listen, accept with caps and refusal, and the sweep
 * timer; see listen.h. gemmd does not use nng's listener: Debian's nng
 * 1.5.2 cannot be made safe for a multi-user service (a peer hanging up
 * mid-handshake stops its listener for good, nng#1518; no handshake or
 * partial-message timeout; no cap on connections).
 */
#include "listen.h"
#include "job.h"
#include "log.h"

#include <gemm/types.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

void lsn_init(lsn_listener *l, uv_loop_t *loop, const gemmd_config *cfg,
              gemmd_users *users)
{
    l->loop = loop;
    l->cfg = cfg;
    l->users = users;
    l->fd = l->reserve_fd = -1;
}

void lsn_set_accept(lsn_listener *l, lsn_accept_fn on_accept, void *arg)
{
    l->on_accept = on_accept;
    l->accept_arg = arg;
}

void lsn_add_sweeper(lsn_listener *l, lsn_sweep_fn fn, void *arg)
{
    if (l->nsweepers < LSN_SWEEPERS) {
        l->sweepers[l->nsweepers].fn = fn;
        l->sweepers[l->nsweepers].arg = arg;
        l->nsweepers++;
    }
}

/* ---- accepting ---- */

/* At EMFILE: spends the spare descriptor to take one connection off the
 * backlog and close it, so the listener does not stay readable forever. */
static void refuse_one(lsn_listener *l)
{
    if (l->reserve_fd >= 0) {
        close(l->reserve_fd);
        l->reserve_fd = -1;
    }
    int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0)
        close(fd);
    l->refused++;
    l->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* A new connection fd: checks the caps and hands it up, or refuses it. */
static void accept_one(lsn_listener *l, int fd)
{
    struct ucred cr;
    socklen_t cl = sizeof(cr);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0) {
        close(fd);
        return;
    }
    gemmd_user *u = users_get(l->users, (uint64_t)cr.uid);
    const char *why = NULL;
    if (u == NULL)
        why = "out of memory";
    else if (l->stopped)
        why = "gemmd is stopping";
    else if (l->nconns >= l->max_conns)
        why = "the daemon's connection limit is reached";
    else if (u->conns >= l->cfg->user_connections)
        why = "this user's connection limit is reached";
    if (why == NULL)
        why = l->on_accept(l->accept_arg, fd, (uint64_t)cr.uid, cr.pid, u);
    if (why != NULL) {
        if (u != NULL)
            u->refused++;
        l->refused++;
        gemmd_log(LOG_DEBUG, "connection from uid %u (pid %ld) refused: %s",
                  (unsigned)cr.uid, (long)cr.pid, why);
        close(fd);
    }
}

static void on_listen(uv_poll_t *h, int status, int events)
{
    lsn_listener *l = h->data;
    (void)events;
    if (status < 0)
        return;
    for (int i = 0; i < 64; i++) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            accept_one(l, fd);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if (errno == EMFILE || errno == ENFILE) {
            refuse_one(l);
            continue;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            gemmd_log(LOG_WARNING, "accept: %s", strerror(errno));
        return;
    }
}

void lsn_admitted(lsn_listener *l, gemmd_user *u)
{
    l->nconns++;
    if (u->conns++ == 0)
        l->users_active++;
    l->accepted++;
}

void lsn_release(lsn_listener *l, gemmd_user *u)
{
    l->nconns--;
    if (u != NULL && --u->conns == 0)
        l->users_active--;
}

/* ---- the sweep timer ---- */

static void on_sweep(uv_timer_t *t)
{
    lsn_listener *l = t->data;
    l->sweep_at_ns = 0;
    lsn_sweep(l);
}

/* The timer runs only when a deadline is pending: an idle daemon does not
 * wake. */
void lsn_arm(lsn_listener *l, uint64_t at_ns)
{
    if (l->stopped || (l->sweep_at_ns != 0 && l->sweep_at_ns <= at_ns))
        return;
    l->sweep_at_ns = at_ns;
    uint64_t now = gemmd_now_ns();
    uint64_t ms = at_ns > now ? (at_ns - now + 999999) / 1000000 : 0;
    uv_timer_start(&l->sweep_timer, on_sweep, ms, 0);
}

void lsn_sweep(lsn_listener *l)
{
    uint64_t now = gemmd_now_ns();
    uint64_t next = UINT64_MAX;
    for (unsigned i = 0; i < l->nsweepers; i++) {
        uint64_t at = l->sweepers[i].fn(l->sweepers[i].arg, now);
        if (at < next)
            next = at;
    }
    if (next != UINT64_MAX)
        lsn_arm(l, next);
}

/* ---- the listening socket ---- */

/* How many connections the descriptors allow: half of what is left after
 * a reserve for the rest of the daemon (the other half covers descriptor
 * tickets). */
static uint32_t conn_cap(const gemmd_config *cfg)
{
    struct rlimit rl;
    uint64_t fds = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        fds = rl.rlim_cur;
    uint64_t cap = fds > 512 ? (fds - 256) / 2 : fds / 4;
    if (cfg->max_connections != 0 && cfg->max_connections < cap)
        cap = cfg->max_connections;
    return cap > UINT32_MAX ? UINT32_MAX : (uint32_t)cap;
}

/* Whether something listens on path (a live daemon): connect() to it. */
static bool socket_alive(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    bool alive = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ||
                 errno != ECONNREFUSED;
    close(fd);
    return alive;
}

/* Fills msg with why bind() on the socket path failed, and the way out. */
static void bind_error(const char *path, int err, char *msg, size_t len)
{
    char dir[256];
    const char *slash = strrchr(path, '/');
    size_t n = slash == NULL ? 1 : (size_t)(slash - path);
    snprintf(dir, sizeof(dir), "%.*s", (int)(n ? n : 1),
             slash == NULL ? "." : path);
    if (err == ENOENT)
        snprintf(msg, len,
                 "cannot listen on %s: %s: %s does not exist (the unit's "
                 "RuntimeDirectory=gemmd makes it when systemd starts "
                 "gemmd); started by hand, pass --listen ipc://PATH in a "
                 "directory you can write, or set XDG_RUNTIME_DIR",
                 path, strerror(err), dir);
    else if (err == EACCES)
        snprintf(msg, len,
                 "cannot listen on %s: %s: this user cannot create files "
                 "in %s; pass --listen ipc://PATH in a directory you can "
                 "write",
                 path, strerror(err), dir);
    else
        snprintf(msg, len, "cannot listen on %s: %s", path, strerror(err));
}

int lsn_open(lsn_listener *l, char *msg, size_t len)
{
    const gemmd_config *cfg = l->cfg;
    const char *path = cfg->listen + strlen("ipc://");
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct stat st;
    l->fd = l->reserve_fd = -1;
    if (strlen(path) >= sizeof(sa.sun_path)) {
        snprintf(msg, len, "socket path too long (at most %zu bytes): %s",
                 sizeof(sa.sun_path) - 1, path);
        return GEMM_ERR_INVALID;
    }
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    snprintf(l->path, sizeof(l->path), "%s", path);
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            snprintf(msg, len, "%s exists and is not a socket", path);
            return GEMM_ERR_PERMISSION;
        }
        if (socket_alive(path)) {
            snprintf(msg, len, "another daemon listens on %s", path);
            return GEMM_ERR_PERMISSION;
        }
        unlink(path); /* a stale socket of a daemon that died */
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(msg, len, "socket: %s", strerror(errno));
        return GEMM_ERR_INTERNAL;
    }
    /* created with the final mode: no moment with wider permissions */
    mode_t old = umask(0777 & ~(mode_t)cfg->socket_mode);
    int rv = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    int err = errno;
    umask(old);
    if (rv != 0) {
        bind_error(path, err, msg, len);
        close(fd);
        return err == EADDRINUSE || err == EACCES ? GEMM_ERR_PERMISSION
                                                  : GEMM_ERR_INTERNAL;
    }
    if (cfg->socket_group[0] != '\0') {
        struct group *g = getgrnam(cfg->socket_group);
        if (g == NULL || chown(path, (uid_t)-1, g->gr_gid) != 0) {
            snprintf(msg, len, "cannot give %s to group %s: %s", path,
                     cfg->socket_group,
                     g == NULL ? "no such group" : strerror(errno));
            unlink(path);
            close(fd);
            return GEMM_ERR_PERMISSION;
        }
    }
    if (listen(fd, SOMAXCONN) != 0) {
        snprintf(msg, len, "listen on %s: %s", path, strerror(errno));
        unlink(path);
        close(fd);
        return GEMM_ERR_INTERNAL;
    }
    if (stat(path, &st) == 0) {
        l->dev = st.st_dev;
        l->ino = st.st_ino;
    }
    l->fd = fd;
    l->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    uv_timer_init(l->loop, &l->sweep_timer);
    l->sweep_timer.data = l;
    l->max_conns = conn_cap(cfg);
    uv_poll_init(l->loop, &l->poll, fd);
    l->poll.data = l;
    uv_poll_start(&l->poll, UV_READABLE, on_listen);
    return GEMM_OK;
}

void lsn_stopping(lsn_listener *l)
{
    l->stopped = true;
}

void lsn_stop_listening(lsn_listener *l)
{
    if (l->fd < 0)
        return;
    uv_poll_stop(&l->poll);
    uv_close((uv_handle_t *)&l->poll, NULL);
    close(l->fd);
    l->fd = -1;
    /* only our own socket: a daemon started meanwhile may have taken the
     * path over */
    struct stat st;
    if (lstat(l->path, &st) == 0 && st.st_dev == l->dev && st.st_ino == l->ino)
        unlink(l->path);
    if (l->reserve_fd >= 0)
        close(l->reserve_fd);
    l->reserve_fd = -1;
}

void lsn_close(lsn_listener *l)
{
    lsn_stop_listening(l);
    uv_close((uv_handle_t *)&l->sweep_timer, NULL);
}
