/*
 * scheduler_test.c: the scheduler's word to the backend about the load it
 * runs a job under (daemon/scheduler.c, gemmd_job.crowded): a job taken
 * while other jobs still wait on its device is crowded (more work than
 * workers: the pipeline then leaves it whole), one taken with none
 * waiting is not. A fake backend of one device with one worker records
 * what each job saw and when it ran; the first job holds the worker until
 * two more wait.
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
static atomic_int order[NJOBS]; /* the n-th job the worker ran */
static atomic_int started, finished;

static int fake_gemm(gemmd_backend *be, gemmd_job *j)
{
    (void)be;
    atomic_store(&crowded[j->owner], j->crowded ? 1 : 0);
    atomic_store(&order[j->owner], atomic_fetch_add(&started, 1));
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

static bool first_running(sched *s)
{
    sched_dev_stats st;
    sched_device(s, 0, &st);
    return st.running == 1 && st.queued == 0;
}
static bool two_waiting(sched *s)
{
    sched_dev_stats st;
    sched_device(s, 0, &st);
    return st.running == 1 && st.queued == 2;
}
static bool all_done(sched *s)
{
    return atomic_load(&finished) == NJOBS && sched_idle(s);
}

static void job_init(gemmd_job *j, uint32_t owner)
{
    memset(j, 0, sizeof(*j));
    j->kind = JOB_GEMM;
    j->owner = owner;
    j->m = j->n = j->k = 64;
    j->ab_type = j->cd_type = GEMM_FP32;
}

Test(scheduler, crowded_while_others_wait)
{
    gemmd_backend be;
    memset(&be, 0, sizeof(be));
    be.ops = &fake_ops;
    be.workers = 1;
    be.ndevices = 1;
    be.dev_workers = 1;
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
    cr_assert(wait_for(&s, first_running), "job 0 never started");
    cr_assert_eq(sched_submit(&s, &j[1]), GEMM_OK);
    cr_assert_eq(sched_submit(&s, &j[2]), GEMM_OK);
    cr_assert(wait_for(&s, two_waiting), "jobs 1 and 2 did not wait");
    sem_post(&release_first);
    cr_assert(wait_for(&s, all_done), "the jobs did not finish");
    sched_stop(&s);

    cr_expect_eq(atomic_load(&crowded[0]), 0, "job 0: nothing waited");
    /* jobs 1 and 2 in the order the worker took them */
    int second = atomic_load(&order[1]) == 1 ? 1 : 2;
    int third = 3 - second;
    cr_assert_eq(atomic_load(&order[third]), 2);
    cr_expect_eq(atomic_load(&crowded[second]), 1, "job %d: job %d waited",
                 second, third);
    cr_expect_eq(atomic_load(&crowded[third]), 0, "job %d: nothing waited",
                 third);
    sem_destroy(&release_first);
}
