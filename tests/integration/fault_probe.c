/*
 * fault_probe.c: a client that dies mid-request, for faults_test.c (exec'ed
 * in a child: nng does not survive a fork). "die URL N [KERNEL]" connects,
 * registers a buffer of 3 N^2 fp32, uploads a resident tensor from it and
 * submits an fp32 N^3 GEMM. With KERNEL (the test hold) it then waits for
 * the test to SIGKILL it once the GEMM runs; without, it polls the
 * daemon's status until it has the GEMM queued or running and kills
 * itself with SIGKILL. Either way the reply is never read. The exit code names
 * the step that failed (it never exits 0).
 *
 * "batch URL N [KERNEL]" does the same with a strided batch of N fp32
 * 16^3 problems (batch_test.c): with KERNEL it waits to be killed while
 * its first problem is held; without, it kills itself once the daemon
 * has more than one job queued or running (the batch behind the test's
 * held GEMM).
 */
#include <gemm/gemm.h>

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int die_mid_request(const char *url, uint64_t n, const char *kernel)
{
    gemm_client *c;
    gemm_buffer *buf;
    gemm_request *r;
    gemm_status st;
    uint64_t tid;
    size_t nn = (size_t)(n * n);
    if (gemm_client_open(&c, url) != GEMM_OK)
        return 10;
    if (gemm_buffer_alloc(c, 3 * nn * 4, &buf) != GEMM_OK)
        return 11;
    float *p = gemm_buffer_data(buf);
    for (size_t i = 0; i < 2 * nn; i++)
        p[i] = (float)(i % 7) * 0.25f - 0.5f;
    gemm_matrix src = {.buf = buf};
    if (gemm_tensor_upload(c, &src, 64, 64, GEMM_FP32, &tid) != GEMM_OK)
        return 12;
    gemm_op op;
    gemm_op_init(&op, n, n, n, GEMM_FP32, GEMM_FP32);
    op.a.buf = op.b.buf = op.d.buf = buf;
    op.b.offset = nn * 4;
    op.d.offset = 2 * nn * 4;
    op.kernel = kernel;
    if (gemm_submit(c, &op, &r) != GEMM_OK)
        return 13;
    if (kernel != NULL) /* held: the test kills us once the GEMM runs */
        for (;;)
            pause();
    for (int i = 0; i < 1000; i++) {
        if (gemm_get_status(c, &st) != GEMM_OK)
            return 14;
        if (st.queue_depth > 0)
            break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    raise(SIGKILL);
    return 15;
}

static int die_mid_batch(const char *url, uint64_t n, const char *kernel)
{
    gemm_client *c;
    gemm_buffer *buf;
    gemm_request *r;
    gemm_status st;
    if (gemm_client_open(&c, url) != GEMM_OK)
        return 10;
    if (gemm_buffer_alloc(c, (2 + n) * 1024, &buf) != GEMM_OK)
        return 11;
    float *p = gemm_buffer_data(buf);
    for (size_t i = 0; i < 512; i++)
        p[i] = (float)(i % 5) * 0.25f - 0.5f;
    gemm_op op;
    gemm_op_init(&op, 16, 16, 16, GEMM_FP32, GEMM_FP32);
    op.a.buf = op.b.buf = op.d.buf = buf;
    op.b.offset = 1024;
    op.d.offset = 2048;
    op.kernel = kernel;
    gemm_batch b;
    gemm_batch_init(&b, &op);
    b.count = n;
    b.stride_d = 1024;
    if (gemm_batch_submit(c, &b, &r) != GEMM_OK)
        return 13;
    if (kernel != NULL) /* held: the test kills us once it runs */
        for (;;)
            pause();
    for (int i = 0; i < 10000; i++) {
        if (gemm_get_status(c, &st) != GEMM_OK)
            return 14;
        if (st.queue_depth > 1)
            break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    raise(SIGKILL);
    return 15;
}

int main(int argc, char **argv)
{
    if ((argc == 4 || argc == 5) && strcmp(argv[1], "batch") == 0)
        return die_mid_batch(argv[2], strtoull(argv[3], NULL, 10),
                             argc == 5 ? argv[4] : NULL);
    if ((argc == 4 || argc == 5) && strcmp(argv[1], "die") == 0)
        return die_mid_request(argv[2], strtoull(argv[3], NULL, 10),
                               argc == 5 ? argv[4] : NULL);
    return 2;
}
