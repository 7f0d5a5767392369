/*
 * fuzz_daemon.c: libFuzzer target that drives a live gemmd. At start it
 * runs the gemmd built beside it (ASan + UBSan, --backend cpu, a private
 * socket), maps three 64 KiB memfds and registers them on its own
 * connection (descriptors through the descriptor channel). Each input is sent
 * as one request message: when it decodes as a gemm.Request without unknown
 * fields, the operand buffer ids of a Gemm or Blas3 are first mapped onto
 * the real buffers (id % 3; ids with id % 7 == 6 stay unknown) so that they
 * get past validation and run; otherwise the bytes go as they are.
 *
 * Checked: every message gets, within 10 s, a reply that decodes, carries a
 * known status and the request's id (0 when undecodable). A daemon that
 * dies (its sanitizer report is on stderr) or stops answering aborts the run;
 * at the end gemmd must exit 0 on SIGTERM (LeakSanitizer runs then).
 *
 * The daemon runs in another process, so libFuzzer sees only this file's
 * coverage: the mutations are guided by the request's shape, not by the
 * daemon's branches (fuzz_request covers those in-process).
 */
#include "proto_util.h"
#include "util/fdpass.h"

#include <gemm/types.h>

#include <fcntl.h>
#include <limits.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define NBUF      3
#define BUF_BYTES (64 * 1024)

static nng_socket sock;
static pid_t daemon_pid;
static uint64_t buf_ids[NBUF];
static char url[128];

static void die(const char *what, int rv)
{
    int ws = 0;
    fprintf(stderr, "fuzz_daemon: %s: %s\n", what, rv ? nng_strerror(rv) : "");
    if (daemon_pid > 0 && waitpid(daemon_pid, &ws, WNOHANG) == daemon_pid)
        fprintf(stderr, "fuzz_daemon: gemmd exited, status %#x\n", ws);
    else if (daemon_pid > 0)
        kill(daemon_pid, SIGKILL); /* hung: take it down with us */
    abort();
}

/* One round trip; returns the decoded reply (caller frees) or aborts. */
static Gemm__Reply *call(const void *data, size_t len)
{
    int rv;
    nng_msg *m;
    if ((rv = nng_msg_alloc(&m, len)) != 0)
        die("nng_msg_alloc", rv);
    if (len)
        memcpy(nng_msg_body(m), data, len);
    if ((rv = nng_sendmsg(sock, m, 0)) != 0)
        die("send (is gemmd alive?)", rv);
    if ((rv = nng_recvmsg(sock, &m, 0)) != 0)
        die("no reply within 10 s (is gemmd alive?)", rv);
    Gemm__Reply *r = gemm__reply__unpack(NULL, nng_msg_len(m), nng_msg_body(m));
    nng_msg_free(m);
    if (r == NULL)
        die("reply does not decode", 0);
    if (r->status < 0 || r->status > GEMM_ERR_BUFFER_FAULT ||
        strcmp(gemm_strerror(r->status), "unknown error") == 0)
        die("reply carries an unknown status", 0);
    return r;
}

/* At exit: SIGTERM must drain and exit 0; anything else (a leak report at
 * exit, a crash) fails the run. */
static void stop_daemon(void)
{
    int ws = 0;
    if (daemon_pid <= 0)
        return;
    nng_close(sock);
    kill(daemon_pid, SIGTERM);
    if (waitpid(daemon_pid, &ws, 0) == daemon_pid &&
        !(WIFEXITED(ws) && WEXITSTATUS(ws) == 0)) {
        fprintf(stderr, "fuzz_daemon: gemmd ended with status %#x\n", ws);
        _exit(1);
    }
}

static uint64_t register_buffer(int i)
{
    (void)i;
    int fd = memfd_create("gemm-fuzz", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ftruncate(fd, BUF_BYTES) != 0 ||
        posix_fallocate(fd, 0, BUF_BYTES) != 0)
        die("memfd", 0);
    void *p = mmap(NULL, BUF_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        die("mmap", 0);
    for (size_t k = 0; k < BUF_BYTES / 4; k++) /* small finite floats */
        ((float *)p)[k] = (float)((k * 2654435761u) % 1000) / 1000.0f - 0.5f;
    uint64_t ticket;
    if (tu_fd_ticket(url, fd, &ticket) != 0)
        die("passing the memfd", 0);

    Gemm__Request rq = GEMM__REQUEST__INIT;
    Gemm__RegisterBufferRequest reg = GEMM__REGISTER_BUFFER_REQUEST__INIT;
    rq.has_version = 1;
    rq.version = GEMM_PROTOCOL_VERSION;
    rq.body_case = GEMM__REQUEST__BODY_REGISTER_BUFFER;
    rq.register_buffer = &reg;
    reg.has_fd_ticket = 1;
    reg.fd_ticket = ticket;
    reg.has_size = 1;
    reg.size = BUF_BYTES;
    uint8_t buf[512];
    size_t n = gemm__request__pack(&rq, buf);
    Gemm__Reply *r = call(buf, n);
    if (r->status != GEMM_OK ||
        r->body_case != GEMM__REPLY__BODY_REGISTER_BUFFER)
        die("RegisterBuffer failed", 0);
    uint64_t id = r->register_buffer->buffer_id;
    gemm__reply__free_unpacked(r, NULL);
    close(fd);
    return id; /* the mapping stays for the life of the run */
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    char path[PATH_MAX];
    const char *gemmd = getenv("GEMMD");
    if (gemmd == NULL) {
        /* build tree: fuzz/fuzz_daemon -> daemon/gemmd */
        ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 32);
        if (n < 0)
            die("readlink", 0);
        path[n] = '\0';
        strcpy(strrchr(path, '/'), "/../daemon/gemmd");
        gemmd = path;
    }
    snprintf(url, sizeof(url), "ipc:///tmp/gemm-fuzz-%ld.sock", (long)getpid());
    daemon_pid = fork();
    if (daemon_pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the fuzzer */
        execl(gemmd, "gemmd", "--listen", url, "--backend", "cpu", "--threads",
              "1", "--log-level", "err", (char *)NULL);
        perror(gemmd);
        _exit(127);
    }
    atexit(stop_daemon);
    (void)argv;

    int rv;
    if ((rv = nng_req0_open(&sock)) != 0)
        die("nng_req0_open", rv);
    nng_socket_set_ms(sock, NNG_OPT_RECVTIMEO, 10000);
    nng_socket_set_ms(sock, NNG_OPT_SENDTIMEO, 10000);
    nng_socket_set_ms(sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    for (int i = 0; (rv = nng_dial(sock, url, NULL, 0)) != 0; i++) {
        if (i == 200)
            die("cannot reach gemmd", rv);
        usleep(50000);
    }
    for (int i = 0; i < NBUF; i++)
        buf_ids[i] = register_buffer(i);
    return 0;
}

static void map_operand(Gemm__Operand *o)
{
    if (o != NULL && o->has_buffer_id && o->buffer_id % 7 != 6)
        o->buffer_id = buf_ids[o->buffer_id % NBUF];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Gemm__Request *rq = gemm__request__unpack(NULL, size, data);
    uint64_t id = 0;
    Gemm__Reply *r;
    /* protobuf-c keeps unknown fields (even an overlong tag 0) and may pack
     * them back as bytes it refuses: such inputs go as they are */
    if (rq != NULL &&
        (rq->body_case == GEMM__REQUEST__BODY_GEMM ||
         rq->body_case == GEMM__REQUEST__BODY_BLAS3 ||
         rq->body_case == GEMM__REQUEST__BODY_BATCH) &&
        !has_unknown(rq)) {
        if (rq->body_case == GEMM__REQUEST__BODY_GEMM) {
            map_operand(rq->gemm->a);
            map_operand(rq->gemm->b);
            map_operand(rq->gemm->c);
            map_operand(rq->gemm->d);
        } else if (rq->body_case == GEMM__REQUEST__BODY_BATCH) {
            const Gemm__BatchRequest *b = rq->batch;
            if (b->op != NULL) {
                map_operand(b->op->a);
                map_operand(b->op->b);
                map_operand(b->op->c);
                map_operand(b->op->d);
            }
            for (size_t i = 0; i < b->n_problems; i++) {
                map_operand(b->problems[i]->a);
                map_operand(b->problems[i]->b);
                map_operand(b->problems[i]->c);
                map_operand(b->problems[i]->d);
            }
        } else {
            map_operand(rq->blas3->a);
            map_operand(rq->blas3->b);
            map_operand(rq->blas3->c);
        }
        size_t n = gemm__request__get_packed_size(rq);
        uint8_t *buf = malloc(n ? n : 1);
        gemm__request__pack(rq, buf);
        r = call(buf, n);
        free(buf);
    } else {
        r = call(data, size);
    }
    if (rq != NULL) {
        id = rq->has_id ? rq->id : 0;
        /* a request too large for gemmd is refused before decoding */
        if (r->id != id && r->status != GEMM_ERR_TOO_LARGE) {
            fprintf(stderr,
                    "fuzz_daemon: request id %llu, reply id %llu, status "
                    "%d (%s)\n",
                    (unsigned long long)id, (unsigned long long)r->id,
                    r->status, r->message ? r->message : "");
            die("reply id differs from the request's", 0);
        }
        gemm__request__free_unpacked(rq, NULL);
    } else if (r->id != 0) {
        die("undecodable request got a nonzero reply id", 0);
    }
    gemm__reply__free_unpacked(r, NULL);
    return 0;
}
