/*
 * hello_gemm.c: the smallest complete libgemmclient program: connect,
 * put A (2x3) and B (3x2) in shared memory, ask gemmd for D = A*B, print D.
 * Build: cc hello_gemm.c $(pkg-config --cflags --libs gemmclient)
 */
#include <gemm/gemm.h>

#include <stdio.h>

int main(void)
{
    gemm_client *c;
    gemm_buffer *buf = NULL;
    gemm_op op;
    gemm_timings t;
    int rv;

    if ((rv = gemm_client_open(&c, NULL)) != GEMM_OK) { /* default URL */
        fprintf(stderr, "%s\n", gemm_last_error_message());
        return 1;
    }
    /* One buffer holds all three matrices: A at 0, B at 64, D at 128. */
    if ((rv = gemm_buffer_alloc(c, 4096, &buf)) != GEMM_OK)
        goto fail;
    float *base = gemm_buffer_data(buf);
    float *a = base, *b = base + 16, *d = base + 32;
    for (int i = 0; i < 6; i++) {
        a[i] = (float)(i + 1); /* A = [1 2 3; 4 5 6] */
        b[i] = (float)(i % 2); /* B = [0 1; 0 1; 0 1] */
    }

    gemm_op_init(&op, 2, 2, 3, GEMM_FP32, GEMM_FP32); /* m, n, k */
    op.a = (gemm_matrix){.buf = buf, .offset = 0};
    op.b = (gemm_matrix){.buf = buf, .offset = 64};
    op.d = (gemm_matrix){.buf = buf, .offset = 128};
    if ((rv = gemm_run(c, &op, &t)) != GEMM_OK)
        goto fail;
    printf("D = [%g %g; %g %g] in %llu us\n", d[0], d[1], d[2], d[3],
           (unsigned long long)t.round_trip_us);
    gemm_buffer_free(buf);
    gemm_client_close(c);
    return 0;

fail:
    fprintf(stderr, "%s: %s\n", gemm_strerror(rv), gemm_last_error_message());
    gemm_buffer_free(buf);
    gemm_client_close(c);
    return 1;
}
