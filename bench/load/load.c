/*
 * load.c: gemm_load, the load and soak harness of gemmd. It starts a gemmd
 * (or uses one given with --url), forks P client processes that each send R
 * GEMMs (or run for --seconds) of mixed sizes, dtype pairs, transposes,
 * alpha/beta, leading dimensions and offsets, several in flight per client,
 * and checks every reply against an fp64 reference computed here, as well as
 * the padding around each result (which must stay untouched).
 *
 * It fails (exit 1) on any lost, failed or wrong reply; when the daemon's
 * request counter does not grow by exactly the number of requests sent (a
 * lost or duplicated reply); or when the daemon's RSS or its count of
 * mappings grew beyond a slack once the clients are gone, or buffers are
 * left registered. Uses only the public API (gemm/gemm.h).
 *
 * A benchmark program, not a test: it prints a table last. Its figures are
 * in docs/reliability.md; scripts/load.sh runs a short form in CI.
 */
#include "../bench_util.h"

#include <gemm/gemm.h>

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_DEPTH     16
#define SLOT_BYTES    (1u << 20) /* one buffer per in-flight request */
#define MAX_DIM_LIMIT 240        /* what fits in a slot with padding */
#define HIST_STEPS    16 /* latency histogram: 16 log buckets per octave */
#define HIST_N        (HIST_STEPS * 34)

typedef struct options {
    int clients;
    long requests;
    double seconds; /* > 0: run this long instead of `requests` */
    int depth;      /* requests in flight per client */
    int max_dim;
    const char *url;
    const char *gemmd;
    pid_t pid; /* the daemon's pid with --url, for /proc figures */
    int threads;
    long rss_slack_kb;
    int maps_slack;
    unsigned seed;
} options;

/* One client's tally, in shared memory written by that child only. */
typedef struct tally {
    uint64_t sent;   /* requests to the daemon of any kind */
    uint64_t gemms;  /* GEMMs answered OK and checked */
    uint64_t wrong;  /* answered OK, result or padding wrong */
    uint64_t failed; /* answered with an error */
    uint64_t lost;   /* no answer: timeout, closed */
    uint64_t setup;  /* could not connect or allocate */
    uint64_t flops;
    int first_err;
    char first_msg[256];
    double max_us;
    uint64_t hist[HIST_N]; /* round trip, us: see record() */
} tally;

static options opt = {
    .clients = 16,
    .requests = 1000,
    .depth = 2,
    .max_dim = 200,
    .threads = 2,
    .rss_slack_kb = 16384,
    .maps_slack = 8,
    .seed = 1,
};

/* ---- small helpers -------------------------------------------------- */

/* ---- the daemon's figures ------------------------------------------- */

typedef struct daemon_mem {
    long rss_kb; /* -1: unknown */
    long maps;
} daemon_mem;

static daemon_mem read_mem(pid_t pid)
{
    daemon_mem m = {-1, -1};
    char path[64], line[512];
    if (pid <= 0)
        return m;
    snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
    FILE *f = fopen(path, "r");
    if (f != NULL) {
        while (fgets(line, sizeof(line), f) != NULL)
            if (sscanf(line, "VmRSS: %ld", &m.rss_kb) == 1)
                break;
        fclose(f);
    }
    snprintf(path, sizeof(path), "/proc/%ld/maps", (long)pid);
    f = fopen(path, "r");
    if (f != NULL) {
        m.maps = 0;
        while (fgets(line, sizeof(line), f) != NULL)
            m.maps++;
        fclose(f);
    }
    return m;
}

/* ---- one GEMM: build, reference, check ------------------------------ */

typedef struct job {
    gemm_op op;
    gemm_buffer *buf;
    float *a, *b, *c; /* fp32 copies of the stored inputs */
    uint64_t ldc_ref;
    double t_sent;
} job;

static size_t esz(gemm_dtype t)
{
    return gemm_dtype_size(t);
}

/* Writes rows x cols random values (ld apart) of type t at byte off of the
 * buffer, and their exact fp32 values into host (rows x cols, tight). */
static void fill(gemm_buffer *buf, uint64_t off, gemm_dtype t, uint64_t rows,
                 uint64_t cols, uint64_t ld, float *host, uint64_t *rng)
{
    char *base = (char *)gemm_buffer_data(buf) + off;
    for (uint64_t i = 0; i < rows; i++) {
        float *row = host + i * cols;
        for (uint64_t j = 0; j < cols; j++)
            row[j] = rng_unit(rng);
        char *dst = base + i * ld * esz(t);
        gemm_convert(dst, t, row, GEMM_FP32, cols);
        gemm_convert(row, GEMM_FP32, dst, t, cols); /* the stored value */
    }
}

/* Sentinel for D's padding and, when beta == 0, D itself. */
static void poison(gemm_buffer *buf, uint64_t off, uint64_t bytes)
{
    memset((char *)gemm_buffer_data(buf) + off, 0x5a, bytes);
}

static uint64_t align_up(uint64_t x, uint64_t a)
{
    return (x + a - 1) / a * a;
}

/* Picks a random GEMM that fits in one slot buffer and writes its inputs. */
static void make_job(job *j, gemm_buffer *buf, float *scratch, uint64_t *rng)
{
    static const gemm_dtype ab_types[] = {GEMM_BF16, GEMM_FP16, GEMM_FP32};
    gemm_dtype ab = ab_types[rng_range(rng, 0, 2)];
    gemm_dtype cd =
        ab == GEMM_FP32 ? GEMM_FP32 : ab_types[rng_range(rng, 0, 2)];
    uint64_t m, n, k;
    /* mostly small, now and then up to max_dim */
    uint64_t hi = rng_range(rng, 0, 3) == 0 ? (uint64_t)opt.max_dim : 64;
    m = rng_range(rng, 1, hi);
    n = rng_range(rng, 1, hi);
    k = rng_range(rng, 1, hi);
    gemm_op *op = &j->op;
    gemm_op_init(op, m, n, k, ab, cd);
    op->trans_a = rng_next(rng) & 1;
    op->trans_b = rng_next(rng) & 1;
    switch (rng_range(rng, 0, 3)) {
    case 0:
        op->alpha = 1, op->beta = 0;
        break;
    case 1:
        op->alpha = rng_unit(rng) * 2, op->beta = 0;
        break;
    default:
        op->alpha = rng_unit(rng) * 2, op->beta = rng_unit(rng);
        break;
    }
    bool c_is_d = op->beta != 0 && (rng_next(rng) & 1);

    uint64_t ar = op->trans_a ? k : m, ac = op->trans_a ? m : k;
    uint64_t br = op->trans_b ? n : k, bc = op->trans_b ? k : n;
    uint64_t lda = ac + rng_range(rng, 0, 3) * rng_range(rng, 0, 5);
    uint64_t ldb = bc + rng_range(rng, 0, 3) * rng_range(rng, 0, 5);
    uint64_t ldd = n + rng_range(rng, 0, 3) * rng_range(rng, 0, 5);
    uint64_t ldc = c_is_d ? ldd : n + rng_range(rng, 0, 7);
    size_t sab = esz(ab), scd = esz(cd);
    uint64_t off = rng_range(rng, 0, 64) * sab; /* random, element-aligned */
    uint64_t aoff = off;
    uint64_t boff = align_up(aoff + ((ar - 1) * lda + ac) * sab, 8) +
                    rng_range(rng, 0, 8) * sab;
    uint64_t dbytes = ((m - 1) * ldd + n) * scd;
    uint64_t doff = align_up(boff + ((br - 1) * ldb + bc) * sab, 16) +
                    rng_range(rng, 0, 8) * scd;
    uint64_t coff = c_is_d ? doff : align_up(doff + dbytes, 16);

    j->buf = buf;
    j->a = scratch;
    j->b = j->a + ar * ac;
    j->c = j->b + br * bc;
    fill(buf, aoff, ab, ar, ac, lda, j->a, rng);
    fill(buf, boff, ab, br, bc, ldb, j->b, rng);
    poison(buf, doff, dbytes);
    if (op->beta != 0)
        fill(buf, coff, cd, m, n, ldc, j->c, rng);
    j->ldc_ref = ldc;
    op->a = (gemm_matrix){buf, aoff, lda, 0};
    op->b = (gemm_matrix){buf, boff, ldb, 0};
    op->d = (gemm_matrix){buf, doff, ldd, 0};
    if (op->beta != 0)
        op->c = (gemm_matrix){buf, coff, ldc, 0};
}

/* Checks D against the fp64 reference and its padding against the
 * sentinel. Returns true when right; otherwise says where in why. */
static bool check_job(const job *j, float *row, char *why, size_t len)
{
    const gemm_op *op = &j->op;
    uint64_t m = op->m, n = op->n, k = op->k;
    size_t scd = esz(op->cd_type);
    /* output rounding: half an ulp of the type, doubled for slack, plus the
     * fp32 accumulation error; below the smallest normal number an ulp is
     * absolute (fp16: 2^-24) */
    double eps = op->cd_type == GEMM_FP32   ? 1.0 / (1 << 22)
                 : op->cd_type == GEMM_FP16 ? 1.0 / (1 << 10)
                                            : 1.0 / (1 << 7);
    double tiny = op->cd_type == GEMM_FP16 ? ldexp(1.0, -24) : ldexp(1.0, -126);
    const char *d = (const char *)gemm_buffer_data(j->buf) + op->d.offset;
    uint64_t ldd = op->d.ld;
    uint64_t ac = op->trans_a ? m : k, bc = op->trans_b ? k : n;
    for (uint64_t i = 0; i < m; i++) {
        gemm_convert(row, GEMM_FP32, d + i * ldd * scd, op->cd_type, n);
        for (uint64_t x = 0; x < n; x++) {
            double s = 0, sabs = 0;
            for (uint64_t p = 0; p < k; p++) {
                double av = op->trans_a ? j->a[p * ac + i] : j->a[i * ac + p];
                double bv = op->trans_b ? j->b[x * bc + p] : j->b[p * bc + x];
                s += av * bv;
                sabs += fabs(av * bv);
            }
            double ref = op->alpha * s, mag = fabs(op->alpha) * sabs;
            if (op->beta != 0) {
                double cv = j->c[i * n + x];
                ref += op->beta * cv;
                mag += fabs(op->beta * cv);
            }
            double tol = eps * fabs(ref) + 1e-6 * mag + tiny;
            if (!(fabs((double)row[x] - ref) <= tol)) {
                snprintf(why, len, "D[%llu][%llu] = %.9g, reference %.9g",
                         (unsigned long long)i, (unsigned long long)x,
                         (double)row[x], ref);
                return false;
            }
        }
        /* the padding between rows must be untouched */
        if (i + 1 < m)
            for (uint64_t b = n * scd; b < ldd * scd; b++)
                if ((unsigned char)d[i * ldd * scd + b] != 0x5a) {
                    snprintf(why, len,
                             "padding byte %llu of row %llu "
                             "written",
                             (unsigned long long)b, (unsigned long long)i);
                    return false;
                }
    }
    return true;
}

/* ---- a client process ------------------------------------------------ */

static void note_error(tally *t, int rv)
{
    if (t->first_err == 0) {
        t->first_err = rv;
        snprintf(t->first_msg, sizeof(t->first_msg), "%s: %s",
                 gemm_strerror(rv), gemm_last_error_message());
    }
}

static bool is_lost(int rv)
{
    return rv == GEMM_ERR_TIMEOUT || rv == GEMM_ERR_CLOSED ||
           rv == GEMM_ERR_CONNECT || rv == GEMM_ERR_IO;
}

static void record(tally *t, double secs)
{
    double us = secs * 1e6;
    int b = us < 1 ? 0 : (int)(log2(us) * HIST_STEPS) + 1;
    t->hist[b >= HIST_N ? HIST_N - 1 : b]++;
    if (us > t->max_us)
        t->max_us = us;
}

static int client_main(int idx, tally *t)
{
    uint64_t rng = opt.seed * 0x100000001b3ull + (uint64_t)idx * 7919 + 1;
    gemm_client *c = NULL;
    gemm_buffer *bufs[MAX_DEPTH] = {0};
    job jobs[MAX_DEPTH];
    gemm_request *pend[MAX_DEPTH] = {0};
    size_t scratch_n = 3 * (size_t)(opt.max_dim + 8) * (opt.max_dim + 8);
    float *scratch = malloc(sizeof(float) * scratch_n * opt.depth);
    float *row = malloc(sizeof(float) * (opt.max_dim + 8));
    int rv;

    if (scratch == NULL || row == NULL) {
        t->setup++;
        return 1;
    }
    if ((rv = gemm_client_open(&c, opt.url)) != GEMM_OK) {
        note_error(t, rv);
        t->setup++;
        return 1;
    }
    gemm_client_set_timeout(c, 60000);
    for (int s = 0; s < opt.depth; s++) {
        t->sent++;
        if ((rv = gemm_buffer_alloc(c, SLOT_BYTES, &bufs[s])) != GEMM_OK) {
            note_error(t, rv);
            t->setup++;
            goto done;
        }
    }
    double end = opt.seconds > 0 ? now_s() + opt.seconds : 0;
    long issued = 0;
    for (;;) {
        bool more = opt.seconds > 0 ? now_s() < end : issued < opt.requests;
        int live = 0;
        for (int s = 0; s < opt.depth; s++) {
            if (pend[s] == NULL && more) {
                make_job(&jobs[s], bufs[s], scratch + s * scratch_n, &rng);
                jobs[s].t_sent = now_s();
                t->sent++;
                issued++;
                rv = gemm_submit(c, &jobs[s].op, &pend[s]);
                if (rv != GEMM_OK) {
                    pend[s] = NULL;
                    note_error(t, rv);
                    if (is_lost(rv))
                        t->lost++;
                    else
                        t->failed++;
                }
                more = opt.seconds > 0 ? now_s() < end : issued < opt.requests;
            }
            live += pend[s] != NULL;
        }
        if (live == 0 && !more)
            break;
        /* wait for the oldest in flight */
        int s = -1;
        for (int i = 0; i < opt.depth; i++)
            if (pend[i] != NULL && (s < 0 || jobs[i].t_sent < jobs[s].t_sent))
                s = i;
        if (s < 0)
            continue;
        rv = gemm_wait(pend[s], NULL);
        pend[s] = NULL;
        record(t, now_s() - jobs[s].t_sent);
        if (rv != GEMM_OK) {
            note_error(t, rv);
            if (is_lost(rv))
                t->lost++;
            else
                t->failed++;
            continue;
        }
        const gemm_op *op = &jobs[s].op;
        t->flops += 2 * op->m * op->n * op->k;
        char why[96];
        if (check_job(&jobs[s], row, why, sizeof(why))) {
            t->gemms++;
        } else {
            t->wrong++;
            if (t->first_err == 0) {
                t->first_err = -1;
                snprintf(t->first_msg, sizeof(t->first_msg),
                         "wrong result: m=%llu n=%llu k=%llu %s->%s ta=%d "
                         "tb=%d alpha=%g beta=%g: %s",
                         (unsigned long long)op->m, (unsigned long long)op->n,
                         (unsigned long long)op->k,
                         gemm_dtype_name(op->ab_type),
                         gemm_dtype_name(op->cd_type), op->trans_a, op->trans_b,
                         (double)op->alpha, (double)op->beta, why);
            }
        }
    }
done:
    for (int s = 0; s < opt.depth; s++) {
        if (bufs[s] != NULL)
            t->sent++; /* ReleaseBuffer */
        gemm_buffer_free(bufs[s]);
    }
    gemm_client_close(c);
    free(scratch);
    free(row);
    return 0;
}

/* ---- the daemon ------------------------------------------------------ */

static pid_t daemon_pid;
static char own_url[128];

/* Starts gemmd on a private socket. Returns its pid, or -1. */
static pid_t start_daemon(void)
{
    char path[PATH_MAX], threads[16];
    if (opt.gemmd == NULL) {
        /* next to us in the build tree: bench/load/gemm_load ->
         * daemon/gemmd */
        ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 32);
        if (n < 0)
            return -1;
        path[n] = '\0';
        char *slash = strrchr(path, '/');
        snprintf(slash, sizeof(path) - (size_t)(slash - path),
                 "/../../daemon/gemmd");
        opt.gemmd = strdup(path);
    }
    snprintf(own_url, sizeof(own_url), "ipc:///tmp/gemm-load-%ld.sock",
             (long)getpid());
    snprintf(threads, sizeof(threads), "%d", opt.threads);
    pid_t pid = fork();
    if (pid == 0) {
        execl(opt.gemmd, "gemmd", "--listen", own_url, "--backend", "cpu",
              "--threads", threads, "--log-level", "notice", (char *)NULL);
        fprintf(stderr, "gemm_load: cannot run %s: %s\n", opt.gemmd,
                strerror(errno));
        _exit(127);
    }
    opt.url = own_url;
    return pid;
}

static int connect_wait(gemm_client **c)
{
    int rv = GEMM_ERR_CONNECT;
    for (int i = 0; i < 200; i++) {
        if ((rv = gemm_client_open(c, opt.url)) == GEMM_OK) {
            if ((rv = gemm_ping(*c, NULL)) == GEMM_OK)
                return GEMM_OK;
            gemm_client_close(*c);
            *c = NULL;
        }
        usleep(50000);
    }
    return rv;
}

/* Runs a few GEMMs of every dtype pair at the largest size, so that the
 * daemon's one-time allocations (thread pools, arenas) happen before the
 * "before" figures. Returns the number of requests sent. */
static uint64_t warm_up(gemm_client *c)
{
    uint64_t sent = 0, rng = 42;
    float *scratch = malloc(sizeof(float) * 3 * (opt.max_dim + 8) *
                            (size_t)(opt.max_dim + 8));
    gemm_buffer *buf = NULL;
    sent++;
    if (scratch == NULL || gemm_buffer_alloc(c, SLOT_BYTES, &buf) != GEMM_OK) {
        free(scratch);
        return sent;
    }
    for (int i = 0; i < 64; i++) {
        job j;
        make_job(&j, buf, scratch, &rng);
        sent++;
        gemm_run(c, &j.op, NULL);
    }
    gemm_buffer_free(buf);
    sent++;
    free(scratch);
    return sent;
}

/* ---- main ------------------------------------------------------------ */

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: gemm_load [options]\n"
        "  -c, --clients P       client processes (default 16)\n"
        "  -n, --requests R      GEMMs per client (default 1000)\n"
        "  -s, --seconds S       run S seconds instead of R requests (soak)\n"
        "  -d, --depth D         requests in flight per client (default 2)\n"
        "      --max-dim N       largest m, n, k (default 200, at most %d)\n"
        "      --url URL         use a running gemmd instead of starting one\n"
        "      --pid PID         its pid, for the RSS and mapping checks\n"
        "      --gemmd PATH      the gemmd to start (default: build tree)\n"
        "      --threads N       its --threads (default 2)\n"
        "      --rss-slack KB    allowed RSS growth (default 16384)\n"
        "      --maps-slack N    allowed growth of /proc/PID/maps (default 8)\n"
        "      --seed N          random seed (default 1)\n",
        MAX_DIM_LIMIT);
}

static double percentile(const uint64_t *hist, uint64_t total, double q)
{
    uint64_t want = (uint64_t)ceil(q * (double)total), acc = 0;
    for (int i = 0; i < HIST_N; i++) {
        acc += hist[i];
        if (acc >= want && want > 0)
            return i == 0 ? 0.5 : exp2((i - 0.5) / HIST_STEPS);
    }
    return 0;
}

static int parse_args(int argc, char **argv)
{
    enum {
        O_URL = 256,
        O_PID,
        O_GEMMD,
        O_THREADS,
        O_RSS,
        O_MAPS,
        O_SEED,
        O_MAXDIM
    };
    static const struct option lo[] = {
        {"clients", 1, 0, 'c'},     {"requests", 1, 0, 'n'},
        {"seconds", 1, 0, 's'},     {"depth", 1, 0, 'd'},
        {"url", 1, 0, O_URL},       {"pid", 1, 0, O_PID},
        {"gemmd", 1, 0, O_GEMMD},   {"threads", 1, 0, O_THREADS},
        {"rss-slack", 1, 0, O_RSS}, {"maps-slack", 1, 0, O_MAPS},
        {"seed", 1, 0, O_SEED},     {"max-dim", 1, 0, O_MAXDIM},
        {"help", 0, 0, 'h'},        {0, 0, 0, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "c:n:s:d:h", lo, NULL)) != -1) {
        switch (ch) {
        case 'c':
            opt.clients = atoi(optarg);
            break;
        case 'n':
            opt.requests = atol(optarg);
            break;
        case 's':
            opt.seconds = atof(optarg);
            break;
        case 'd':
            opt.depth = atoi(optarg);
            break;
        case O_URL:
            opt.url = optarg;
            break;
        case O_PID:
            opt.pid = (pid_t)atol(optarg);
            break;
        case O_GEMMD:
            opt.gemmd = optarg;
            break;
        case O_THREADS:
            opt.threads = atoi(optarg);
            break;
        case O_RSS:
            opt.rss_slack_kb = atol(optarg);
            break;
        case O_MAPS:
            opt.maps_slack = atoi(optarg);
            break;
        case O_SEED:
            opt.seed = (unsigned)atol(optarg);
            break;
        case O_MAXDIM:
            opt.max_dim = atoi(optarg);
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return -1;
        }
    }
    if (opt.clients < 1 || opt.requests < 1 || opt.depth < 1 ||
        opt.depth > MAX_DEPTH || opt.max_dim < 1 ||
        opt.max_dim > MAX_DIM_LIMIT || optind != argc) {
        usage(stderr);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    gemm_client *c = NULL;
    gemm_status st0, st1;
    int rv, fail = 0;

    if (parse_args(argc, argv) != 0)
        return 2;
    signal(SIGPIPE, SIG_IGN);
    if (opt.url == NULL) {
        if ((daemon_pid = start_daemon()) < 0)
            return 1;
        opt.pid = daemon_pid;
    }
    /* The clients are forked before this process starts nng (whose threads
     * a fork would not carry over); they wait for one byte each on `go`. */
    tally *tl = mmap(NULL, sizeof(tally) * (size_t)opt.clients,
                     PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int go[2];
    if (tl == MAP_FAILED || pipe(go) != 0) {
        perror("gemm_load: mmap/pipe");
        fail = 1;
        goto out;
    }
    pid_t *kids = calloc((size_t)opt.clients, sizeof(pid_t));
    for (int i = 0; i < opt.clients; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            char b;
            close(go[1]);
            if (read(go[0], &b, 1) != 1)
                _exit(0); /* the parent gave up */
            _exit(client_main(i, &tl[i]));
        }
        if (kids[i] < 0) {
            perror("fork");
            tl[i].setup++;
        }
    }
    close(go[0]);
    if ((rv = connect_wait(&c)) != GEMM_OK) {
        fprintf(stderr, "gemm_load: cannot reach gemmd at %s: %s\n", opt.url,
                gemm_strerror(rv));
        fail = 1;
    }
    if (!fail)
        warm_up(c);
    usleep(200000);
    daemon_mem mem0 = read_mem(opt.pid);
    if (!fail && (rv = gemm_get_status(c, &st0)) != GEMM_OK) {
        fprintf(stderr, "gemm_load: status: %s\n", gemm_strerror(rv));
        fail = 1;
    }
    if (fail) {
        close(go[1]);
        for (int i = 0; i < opt.clients; i++)
            if (kids[i] > 0)
                waitpid(kids[i], NULL, 0);
        goto out;
    }
    double t0 = now_s();
    for (int i = 0; i < opt.clients; i++)
        if (write(go[1], "g", 1) != 1)
            perror("gemm_load: write");
    close(go[1]);
    int crashed = 0;
    for (int i = 0; i < opt.clients; i++) {
        int ws;
        if (kids[i] > 0 && (waitpid(kids[i], &ws, 0) < 0 || !WIFEXITED(ws) ||
                            WEXITSTATUS(ws) != 0))
            crashed++;
    }
    double wall = now_s() - t0;
    free(kids);

    /* the clients are gone: wait for the daemon to close their pipes */
    for (int i = 0; i < 100; i++) {
        if (gemm_get_status(c, &st1) == GEMM_OK && st1.clients <= st0.clients &&
            st1.buffers <= st0.buffers && st1.queue_depth == 0)
            break;
        usleep(50000);
    }
    usleep(200000);
    daemon_mem mem1 = read_mem(opt.pid);
    if ((rv = gemm_get_status(c, &st1)) != GEMM_OK) {
        fprintf(stderr, "gemm_load: status: %s\n", gemm_strerror(rv));
        fail = 1;
        goto out;
    }

    tally sum;
    memset(&sum, 0, sizeof(sum));
    uint64_t *hist = calloc(HIST_N, sizeof(uint64_t));
    double pmax = 0;
    for (int i = 0; i < opt.clients; i++) {
        sum.sent += tl[i].sent;
        sum.gemms += tl[i].gemms;
        sum.wrong += tl[i].wrong;
        sum.failed += tl[i].failed;
        sum.lost += tl[i].lost;
        sum.setup += tl[i].setup;
        sum.flops += tl[i].flops;
        for (int b = 0; b < HIST_N; b++)
            hist[b] += tl[i].hist[b];
        if (tl[i].max_us > pmax)
            pmax = tl[i].max_us;
        if (tl[i].first_err != 0)
            fprintf(stderr, "gemm_load: client %d: %s\n", i, tl[i].first_msg);
    }
    uint64_t answered = sum.gemms + sum.wrong + sum.failed + sum.lost;
    /* the daemon counts a reply once it is sent: st0's own reply and the
     * status polls after the run (all but the last) come on top of the
     * clients' requests */
    uint64_t served = st1.requests_served - st0.requests_served;
    uint64_t dfailed = st1.requests_failed - st0.requests_failed;
    uint64_t expect_min = sum.sent + 1;
    /* status polls between: at least one, at most 100 */
    int64_t extra = (int64_t)served + (int64_t)dfailed - (int64_t)expect_min;
    bool counts_ok = extra >= 1 && extra <= 100 && dfailed == 0;
    long drss =
        (mem0.rss_kb >= 0 && mem1.rss_kb >= 0) ? mem1.rss_kb - mem0.rss_kb : 0;
    long dmaps = (mem0.maps >= 0 && mem1.maps >= 0) ? mem1.maps - mem0.maps : 0;

    printf("\n%-10s %8s %9s %8s %8s %8s %6s %6s %6s %6s %15s %11s\n", "clients",
           "requests", "req/s", "p50 us", "p99 us", "max us", "wrong", "failed",
           "lost", "crash", "RSS KiB", "maps");
    char rss[32], maps[32];
    snprintf(rss, sizeof(rss), "%ld->%ld", mem0.rss_kb, mem1.rss_kb);
    snprintf(maps, sizeof(maps), "%ld->%ld", mem0.maps, mem1.maps);
    printf("%-10d %8llu %9.0f %8.0f %8.0f %8.0f %6llu %6llu %6llu %6d %15s "
           "%11s\n",
           opt.clients, (unsigned long long)answered, (double)answered / wall,
           percentile(hist, answered, 0.50), percentile(hist, answered, 0.99),
           pmax, (unsigned long long)sum.wrong, (unsigned long long)sum.failed,
           (unsigned long long)sum.lost, crashed, rss, maps);
    printf("wall %.1f s, %.2f GFLOP/s; daemon: served +%llu (expected %llu "
           "+ status polls), failed +%llu, buffers %u -> %u, clients %u -> "
           "%u\n",
           wall, (double)sum.flops / wall * 1e-9, (unsigned long long)served,
           (unsigned long long)expect_min, (unsigned long long)dfailed,
           st0.buffers, st1.buffers, st0.clients, st1.clients);

    if (sum.wrong || sum.failed || sum.lost || sum.setup || crashed) {
        fprintf(stderr, "gemm_load: FAIL: wrong, failed, lost or crashed "
                        "clients\n");
        fail = 1;
    }
    if (opt.seconds <= 0 &&
        sum.gemms != (uint64_t)opt.clients * (uint64_t)opt.requests) {
        fprintf(stderr,
                "gemm_load: FAIL: %llu GEMMs checked, expected "
                "%llu\n",
                (unsigned long long)sum.gemms,
                (unsigned long long)opt.clients * opt.requests);
        fail = 1;
    }
    if (!counts_ok) {
        fprintf(stderr,
                "gemm_load: FAIL: the daemon answered %llu OK + "
                "%llu failed for %llu requests sent (+ status polls)"
                ": lost or duplicated replies\n",
                (unsigned long long)served, (unsigned long long)dfailed,
                (unsigned long long)expect_min);
        fail = 1;
    }
    if (st1.buffers != st0.buffers || st1.buffer_bytes != st0.buffer_bytes ||
        st1.clients != st0.clients) {
        fprintf(stderr, "gemm_load: FAIL: buffers or clients left over\n");
        fail = 1;
    }
    if (drss > opt.rss_slack_kb || dmaps > opt.maps_slack) {
        fprintf(stderr,
                "gemm_load: FAIL: daemon grew by %ld KiB RSS, %ld "
                "mappings (slack %ld KiB, %d)\n",
                drss, dmaps, opt.rss_slack_kb, opt.maps_slack);
        fail = 1;
    }
    if (mem0.rss_kb < 0)
        printf("(no /proc figures for the daemon: pass --pid)\n");
    free(hist);
    munmap(tl, sizeof(tally) * (size_t)opt.clients);
out:
    gemm_client_close(c);
    if (daemon_pid > 0) {
        int ws;
        kill(daemon_pid, SIGTERM);
        if (waitpid(daemon_pid, &ws, 0) == daemon_pid &&
            !(WIFEXITED(ws) && WEXITSTATUS(ws) == 0)) {
            fprintf(stderr,
                    "gemm_load: FAIL: gemmd did not exit cleanly "
                    "(status %#x)\n",
                    ws);
            fail = 1;
        }
    }
    printf("%s\n", fail ? "FAIL" : "PASS");
    return fail;
}
