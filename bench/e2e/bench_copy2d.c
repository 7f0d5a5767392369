/*
 * bench_copy2d.c: what a block of a row-major matrix costs to copy over
 * the link, by the width of its rows (issue 21, point 1: the pipeline's
 * model of the link, daemon/pipe_plan.c).
 *
 *   bench_copy2d [--mib N] [--pitch-kib P] [--reps R]
 *
 * Pinned host memory (cudaHostAlloc, as gemmd's registered buffers are
 * pinned) of N MiB (default 512) seen as rows of P KiB (default 64): for
 * each width from 1 KiB to all of P, cudaMemcpy2DAsync of N MiB's worth of
 * rows of that width host to device, then device to host, and both at
 * once on two streams; the median of R runs (default 5). Prints GB/s per
 * width and direction and the time a row costs beyond its bytes at the
 * whole-row rate (ns). Needs a GPU; says so when there is none.
 */
#include <cuda_runtime_api.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x)                                                                  \
    do {                                                                       \
        cudaError_t e_ = (x);                                                  \
        if (e_ != cudaSuccess) {                                               \
            fprintf(stderr, "bench_copy2d: %s: %s (%s:%d)\n", #x,              \
                    cudaGetErrorString(e_), __FILE__, __LINE__);               \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

static int cmp(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Median ms of reps timed runs: dir 0 host to device, 1 device to host,
 * 2 both at once (the time until both are done). */
static float run(void *host, void *dev, void *host2, void *dev2, size_t pitch,
                 size_t width, size_t rows, int dir, int reps,
                 cudaStream_t s[2], cudaEvent_t ev[3])
{
    float t[64];
    for (int r = 0; r < reps && r < 64; r++) {
        CK(cudaEventRecord(ev[0], s[0]));
        CK(cudaStreamWaitEvent(s[1], ev[0], 0));
        if (dir == 0 || dir == 2)
            CK(cudaMemcpy2DAsync(dev, pitch, host, pitch, width, rows,
                                 cudaMemcpyHostToDevice, s[0]));
        if (dir == 1 || dir == 2)
            CK(cudaMemcpy2DAsync(host2, pitch, dev2, pitch, width, rows,
                                 cudaMemcpyDeviceToHost, s[1]));
        CK(cudaEventRecord(ev[1], s[1]));
        CK(cudaStreamWaitEvent(s[0], ev[1], 0));
        CK(cudaEventRecord(ev[2], s[0]));
        CK(cudaEventSynchronize(ev[2]));
        CK(cudaEventElapsedTime(&t[r], ev[0], ev[2]));
    }
    qsort(t, (size_t)reps, sizeof(float), cmp);
    return t[reps / 2];
}

int main(int argc, char **argv)
{
    size_t mib = 512, pitch_kib = 64;
    int reps = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mib") && i + 1 < argc)
            mib = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--pitch-kib") && i + 1 < argc)
            pitch_kib = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else {
            fprintf(stderr,
                    "usage: bench_copy2d [--mib N] [--pitch-kib P] [--reps "
                    "R]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > 64 || mib == 0 || pitch_kib == 0) {
        fprintf(stderr, "bench_copy2d: --reps 1..64, --mib and --pitch-kib "
                        "above 0\n");
        return 2;
    }
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        fprintf(stderr, "bench_copy2d: no CUDA device: nothing to measure\n");
        return 77;
    }
    const size_t pitch = pitch_kib << 10, bytes = mib << 20;
    const size_t total_rows = bytes / pitch;
    void *host, *host2, *dev, *dev2;
    CK(cudaHostAlloc(&host, bytes, cudaHostAllocPortable));
    CK(cudaHostAlloc(&host2, bytes, cudaHostAllocPortable));
    CK(cudaMalloc(&dev, bytes));
    CK(cudaMalloc(&dev2, bytes));
    memset(host, 1, bytes);
    memset(host2, 2, bytes);
    cudaStream_t s[2];
    cudaEvent_t ev[3];
    for (int i = 0; i < 2; i++)
        CK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
    for (int i = 0; i < 3; i++)
        CK(cudaEventCreate(&ev[i]));
    /* warm the path */
    run(host, dev, host2, dev2, pitch, pitch, total_rows, 2, 1, s, ev);
    printf("pinned host memory, %zu MiB moved a run, rows %zu KiB apart, "
           "median of %d\n",
           mib, pitch_kib, reps);
    printf("| row width | rows | H2D GB/s | D2H GB/s | both GB/s (sum) | H2D "
           "ns a row over whole rows | D2H ns a row |\n");
    printf("|---|---|---|---|---|---|---|\n");
    double whole[2] = {0, 0};
    size_t widths[16], nw = 0;
    for (size_t w = 1024; w < pitch && nw < 15; w *= 2)
        widths[nw++] = w;
    widths[nw++] = pitch;
    /* the whole-row rate first: the baseline of the per-row cost */
    for (size_t x = nw; x-- > 0;) {
        const size_t w = widths[x];
        const size_t rows = bytes / w < total_rows ? bytes / w : total_rows;
        const double moved = (double)w * (double)rows;
        float ms[3];
        for (int d = 0; d < 3; d++)
            ms[d] = run(host, dev, host2, dev2, pitch, w, rows, d, reps, s, ev);
        double gbs[3] = {moved / ms[0] / 1e6, moved / ms[1] / 1e6,
                         2 * moved / ms[2] / 1e6};
        if (w == pitch) {
            whole[0] = gbs[0];
            whole[1] = gbs[1];
        }
        double over[2];
        for (int d = 0; d < 2; d++)
            over[d] = whole[d] > 0
                          ? (ms[d] * 1e6 - moved / whole[d]) / (double)rows
                          : 0;
        printf("| %zu KiB | %zu | %.1f | %.1f | %.1f | %.0f | %.0f |\n",
               w >> 10, rows, gbs[0], gbs[1], gbs[2], over[0], over[1]);
    }
    return 0;
}
