/*
 * access_probe.c: the other user's side of access_test.c, exec'ed as
 * nobody:nogroup. "connect URL" must fail to connect; "trespass URL SHM ID"
 * must be refused root's shm object and root's buffer id, and then be
 * served normally on a buffer of its own. The exit code names the check
 * that failed (0: all held).
 */
#include "util/raw.h"

#include <gemm/gemm.h>

#include <stdlib.h>
#include <string.h>

struct probe {
    const char *url;
    const char *root_shm; /* an shm object owned by root */
    uint64_t root_buffer; /* a buffer id registered by root */
};

/* Child: connecting must fail. */
static int try_connect(const struct probe *p)
{
    gemm_client *c;
    int rv = gemm_client_open(&c, p->url);
    if (rv == GEMM_OK) {
        gemm_client_close(c);
        return 1;
    }
    return rv == GEMM_ERR_CONNECT ? 0 : 2;
}

/* Child: connected, but nothing of root's is reachable. Exit code says
 * which check failed. */
static int try_trespass(const struct probe *p)
{
    tu_raw r;
    Gemm__Reply *rep;
    if (tu_raw_open(&r, p->url, 5000) != 0)
        return 10;
    /* 1. register root's shm object: refused (open or owner check) */
    if (tu_raw_register(&r, p->root_shm, 1, 4096, &rep) != 0)
        return 11;
    int st = tu_reply_status(rep);
    gemm__reply__free_unpacked(rep, NULL);
    if (st != GEMM_ERR_PERMISSION && st != GEMM_ERR_SHM)
        return 12;
    /* 2. compute with root's buffer id: unknown here */
    Gemm__GemmRequest g;
    Gemm__Operand ops[4];
    tu_raw_gemm_init(&g, ops, p->root_buffer, 4, 4, 4, 0, 64, 128);
    if (tu_raw_gemm(&r, &g, &rep) != 0)
        return 13;
    st = tu_reply_status(rep);
    bool leaks = rep->message != NULL && strstr(rep->message, "gemm-") != NULL;
    gemm__reply__free_unpacked(rep, NULL);
    if (st != GEMM_ERR_NO_BUFFER)
        return 14;
    if (leaks)
        return 15;
    /* 3. release it: unknown here too */
    if (tu_raw_release(&r, p->root_buffer, &rep) != 0)
        return 16;
    st = tu_reply_status(rep);
    gemm__reply__free_unpacked(rep, NULL);
    if (st != GEMM_ERR_NO_BUFFER)
        return 17;
    /* 4. its own buffer works: the daemon serves this uid normally */
    gemm_client *c;
    if (gemm_client_open(&c, p->url) != GEMM_OK)
        return 18;
    gemm_buffer *b;
    if (gemm_buffer_alloc(c, 4096, &b) != GEMM_OK)
        return 19;
    gemm_op op;
    gemm_op_init(&op, 4, 4, 4, GEMM_FP32, GEMM_FP32);
    op.a = (gemm_matrix){b, 0, 0, 0};
    op.b = (gemm_matrix){b, 64, 0, 0};
    op.d = (gemm_matrix){b, 128, 0, 0};
    int rv = gemm_run(c, &op, NULL);
    gemm_buffer_free(b);
    gemm_client_close(c);
    tu_raw_close(&r);
    return rv == GEMM_OK ? 0 : 20;
}

int main(int argc, char **argv)
{
    struct probe p = {0};
    if (argc == 3 && strcmp(argv[1], "connect") == 0) {
        p.url = argv[2];
        return try_connect(&p);
    }
    if (argc == 5 && strcmp(argv[1], "trespass") == 0) {
        p.url = argv[2];
        p.root_shm = argv[3];
        p.root_buffer = strtoull(argv[4], NULL, 10);
        return try_trespass(&p);
    }
    return 99;
}
