/*
 * scheduler_test.c: the scheduler's word to the backend about the load it
 * runs a job under (daemon/scheduler.c, gemmd_job.crowded): a job taken
 * while no other job of its device runs or waits is not crowded, one taken
 * while another runs is, and the device alone again gives the next job a
 * free run. A fake backend of one device with two workers records what
 * each job saw; the first job holds its worker until the second has run.
 */
#include "scheduler.h"

#include <gemm/types.h>

#include <criterion/criterion.h>

#include <semaphore.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#define NJOBS 3

static sem_t release_first; /* posted when job 0 may finish */
static atomic_int crowded[NJOBS];
static atomic_int finished;

static int fake_gemm(gemmd_backend *be, gemmd_job *j)
{
    (void)be;
    atomic_store(&crowded[j->owner], j->crowded ? 1 : 0);
    if (j->owner == 0)
        while (sem_wait(&release_first) != 0)
            ;
    return GEMM_OK;
}

static void done(void *arg, gemmd_job *j)
{
    (void)arg;
    (void)j;
    atomic_fetch_add(&finished, 1);
}

static const gemmd_backend_ops fake_ops = {.gemm = fake_gemm};

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* Polls until cond(s) holds, at most 5 s. */
static bool wait_for(sched *s, bool (*cond)(sched *))
{
    for (uint64_t end = now_ms() + 5000; now_ms() < end;) {
        if (cond(s))
            return true;
        struct timespec d = {0, 1000000};
        nanosleep(&d, NULL);
    }
    return cond(s);
}

static bool one_running(sched *s)
{
    sched_dev_stats st;
    sched_device(s, 0, &st);
    return st.running == 1 && st.queued == 0;
}
static bool one_done(sched *s)
{
    (void)s;
    return atomic_load(&finished) == 1;
}
static bool two_done(sched *s)
{
    return atomic_load(&finished) == 2 && sched_idle(s);
}
static bool three_done(sched *s)
{
    return atomic_load(&finished) == 3 && sched_idle(s);
}

static void job_init(gemmd_job *j, uint32_t owner)
{
    memset(j, 0, sizeof(*j));
    j->kind = JOB_GEMM;
    j->owner = owner;
    j->m = j->n = j->k = 64;
    j->ab_type = j->cd_type = GEMM_FP32;
}

Test(scheduler, crowded_only_beside_other_jobs)
{
    gemmd_backend be;
    memset(&be, 0, sizeof(be));
    be.ops = &fake_ops;
    be.workers = 2;
    be.ndevices = 1;
    be.dev_workers = 2;
    be.flops_rate = 1e12;
    be.copy_rate = 1e10;
    be.peer_rate = 1e10;
    cr_assert_eq(sem_init(&release_first, 0, 0), 0);
    sched s;
    memset(&s, 0, sizeof(s));
    cr_assert_eq(sched_start(&s, &be, done, NULL, 0), GEMM_OK);

    gemmd_job j[NJOBS];
    for (int i = 0; i < NJOBS; i++) {
        job_init(&j[i], (uint32_t)i);
        atomic_store(&crowded[i], -1);
    }
    cr_assert_eq(sched_submit(&s, &j[0]), GEMM_OK);
    cr_assert(wait_for(&s, one_running), "job 0 never started");
    cr_assert_eq(sched_submit(&s, &j[1]), GEMM_OK);
    cr_assert(wait_for(&s, one_done), "job 1 did not run beside job 0");
    sem_post(&release_first);
    cr_assert(wait_for(&s, two_done), "job 0 did not finish");
    cr_assert_eq(sched_submit(&s, &j[2]), GEMM_OK);
    cr_assert(wait_for(&s, three_done), "job 2 did not finish");
    sched_stop(&s);

    cr_expect_eq(atomic_load(&crowded[0]), 0, "job 0 ran alone");
    cr_expect_eq(atomic_load(&crowded[1]), 1, "job 1 ran beside job 0");
    cr_expect_eq(atomic_load(&crowded[2]), 0, "job 2 ran alone again");
    sem_destroy(&release_first);
}
