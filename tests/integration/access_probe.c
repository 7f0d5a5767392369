/*
 * access_probe.c: the other user's side of access_test.c, exec'ed (through
 * fexecve, so from any clone location) as a uid that is neither the
 * daemon's nor the test's. "connect URL" must be refused for permission, the
 * message naming the group that grants it and the commands that join it. "serve
 * URL ROOT_BUFFER ROOT_TICKET" must be refused the test's buffer id and the
 * test's descriptor ticket, and then be served normally: a buffer of its
 * own (its memfd crosses to the daemon's uid), a GEMM checked against
 * fp64. The exit code names the check that failed (0: all held). Linked
 * statically with libgemmclient: the build tree may be out of its reach.
 */
#include "util/raw.h"

#include <gemm/gemm.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int try_connect(const char *url)
{
    gemm_client *c;
    int rv = gemm_client_open(&c, url);
    if (rv == GEMM_OK) {
        rv = gemm_ping(c, NULL);
        gemm_client_close(c);
        return rv == GEMM_OK ? 1 : 0;
    }
    /* refused for permission, with the group that grants it and the
     * commands that join it */
    const char *msg = gemm_last_error_message();
    if (rv != GEMM_ERR_PERMISSION)
        return 2;
    if (strstr(msg, "is not in group") == NULL ||
        strstr(msg, "usermod -aG") == NULL || strstr(msg, "newgrp") == NULL) {
        fprintf(stderr, "access_probe: message: %s\n", msg);
        return 3;
    }
    return 0;
}

static int try_serve(const char *url, uint64_t root_buffer,
                     uint64_t root_ticket)
{
    tu_raw r;
    Gemm__Reply *rep;
    if (tu_raw_open(&r, url, 5000) != 0)
        return 10;
    /* 1. the test's descriptor ticket: not this uid's */
    if (tu_raw_register(&r, NULL, 1, root_ticket, 1, 4096, &rep) != 0)
        return 11;
    int st = tu_reply_status(rep);
    gemm__reply__free_unpacked(rep, NULL);
    if (st != GEMM_ERR_INVALID)
        return 12;
    /* 2. compute with the test's buffer id: unknown here */
    Gemm__GemmRequest g;
    Gemm__Operand ops[4];
    tu_raw_gemm_init(&g, ops, root_buffer, 4, 4, 4, 0, 64, 128);
    if (tu_raw_gemm(&r, &g, &rep) != 0)
        return 13;
    st = tu_reply_status(rep);
    gemm__reply__free_unpacked(rep, NULL);
    if (st != GEMM_ERR_NO_BUFFER)
        return 14;
    /* 3. release it: unknown here too */
    if (tu_raw_release(&r, root_buffer, &rep) != 0)
        return 16;
    st = tu_reply_status(rep);
    gemm__reply__free_unpacked(rep, NULL);
    if (st != GEMM_ERR_NO_BUFFER)
        return 17;
    tu_raw_close(&r);
    /* 4. its own buffer works: the daemon serves this uid normally */
    gemm_client *c;
    if (gemm_client_open(&c, url) != GEMM_OK)
        return 18;
    gemm_buffer *b;
    if (gemm_buffer_alloc(c, 1 << 16, &b) != GEMM_OK)
        return 19;
    enum { N = 32 };
    float *a = gemm_buffer_data(b), *bb = a + N * N, *d = bb + N * N;
    for (int i = 0; i < N * N; i++) {
        a[i] = (float)((i * 7) % 11) - 5.0f;
        bb[i] = (float)((i * 5) % 13) - 6.0f;
    }
    gemm_op op;
    gemm_op_init(&op, N, N, N, GEMM_FP32, GEMM_FP32);
    op.a = (gemm_matrix){b, 0, 0, 0};
    op.b = (gemm_matrix){b, N * N * 4, 0, 0};
    op.d = (gemm_matrix){b, 2 * N * N * 4, 0, 0};
    int rv = gemm_run(c, &op, NULL);
    bool right = rv == GEMM_OK;
    for (int i = 0; right && i < N; i++)
        for (int j = 0; j < N; j++) {
            double want = 0;
            for (int k = 0; k < N; k++)
                want += (double)a[i * N + k] * bb[k * N + j];
            right &= fabs(d[i * N + j] - want) <= 1e-3;
        }
    gemm_buffer_free(b);
    gemm_client_close(c);
    return rv != GEMM_OK ? 20 : right ? 0 : 21;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "connect") == 0)
        return try_connect(argv[2]);
    if (argc == 5 && strcmp(argv[1], "serve") == 0)
        return try_serve(argv[2], strtoull(argv[3], NULL, 10),
                         strtoull(argv[4], NULL, 10));
    return 99;
}
