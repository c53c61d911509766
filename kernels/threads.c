/* Thread synchronisation on rank 0 (Sphinx's Pthreads tests).  Each kernel times
 * itself and also times an empty function call the same way: samples are the raw
 * times, subtracted_s the empty call's, and corrected = time - subtracted_s (kept
 * apart because a correction may exceed an operation that costs about nothing). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include "patterns.h"

__attribute__((noinline)) static void empty_call(void) { __asm__ __volatile__(""); }

static double now(const struct cl_context *ctx) { return cl_now(ctx->timer); }

static double empty_call_time(const struct cl_context *ctx, long iterations)
{
    double t0 = now(ctx);
    for (long i = 0; i < iterations; i++) empty_call();
    return (now(ctx) - t0) / (double)iterations;
}

/* Records a self-timed result: `raw` seconds per operation, and the empty call's. */
static double report(struct cl_context *ctx, double raw, long iterations)
{
    ctx->subtracted = empty_call_time(ctx, iterations);
    ctx->measured = raw;
    return 0;
}

const char *rank0_only(struct cl_context *ctx, size_t max_size)
{
    (void)max_size;
    return ctx->integrity ? "thread kernels have no integrity mode" : NULL;
}

/* threads.create: each thread creates the next one; the last wakes the main thread. */
struct chain {
    long remaining;
    pthread_mutex_t lock;
    pthread_cond_t done;
    int finished;
};

static void *link_in_chain(void *arg)
{
    struct chain *c = arg;
    if (--c->remaining > 0) {
        pthread_t next;
        if (pthread_create(&next, NULL, link_in_chain, c) == 0) pthread_detach(next);
        return NULL;
    }
    pthread_mutex_lock(&c->lock);
    c->finished = 1;
    pthread_cond_signal(&c->done);
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

double thread_create(struct cl_context *ctx, size_t size, long iterations)
{
    (void)size;
    if (ctx->rank != 0 || iterations == 0) return 1;
    struct chain c = {.remaining = iterations, .lock = PTHREAD_MUTEX_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};
    double t0 = now(ctx);
    pthread_t first;
    if (pthread_create(&first, NULL, link_in_chain, &c) == 0) pthread_detach(first);
    pthread_mutex_lock(&c.lock);
    while (!c.finished) pthread_cond_wait(&c.done, &c.lock);
    pthread_mutex_unlock(&c.lock);
    return report(ctx, (now(ctx) - t0) / (double)iterations, iterations);
}

/* Two threads taking turns: by sched_yield on one CPU, by a mutex-guarded turn, or by a condition. */
enum handoff { YIELD, MUTEX, COND };

struct pair {
    enum handoff how;
    long iterations;
    int turn, cpu;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    pthread_barrier_t start;
    const struct cl_context *ctx;
    double began, ended;
};

static void *take_turns(void *arg, int me)
{
    struct pair *p = arg;
    if (p->how == YIELD) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(p->cpu, &one);
        pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    }
    pthread_barrier_wait(&p->start);
    if (me == 0) p->began = now(p->ctx);
    for (long i = 0; i < p->iterations; i++) {
        switch (p->how) {
        case YIELD: sched_yield(); break;
        case MUTEX:
            /* Wait outside the lock: a thread spinning on lock/unlock would starve the other.
             * Yield while waiting: with both threads on one CPU (a rank bound to a core) a bare
             * spin holds the CPU for the rest of its time slice, milliseconds per hand-off. */
            while (__atomic_load_n(&p->turn, __ATOMIC_ACQUIRE) != me) sched_yield();
            pthread_mutex_lock(&p->lock);
            __atomic_store_n(&p->turn, 1 - me, __ATOMIC_RELEASE);
            pthread_mutex_unlock(&p->lock);
            break;
        case COND:
            pthread_mutex_lock(&p->lock);
            while (p->turn != me) pthread_cond_wait(&p->changed, &p->lock);
            p->turn = 1 - me;
            pthread_cond_signal(&p->changed);
            pthread_mutex_unlock(&p->lock);
            break;
        }
    }
    pthread_barrier_wait(&p->start);
    if (me == 0) p->ended = now(p->ctx);
    return NULL;
}

static void *second(void *arg) { return take_turns(arg, 1); }

static double handoffs(struct cl_context *ctx, long iterations, enum handoff how)
{
    if (ctx->rank != 0 || iterations == 0) return 1;
    cpu_set_t mine;
    sched_getaffinity(0, sizeof mine, &mine);
    int cpu = 0;
    while (cpu < CPU_SETSIZE - 1 && !CPU_ISSET(cpu, &mine)) cpu++;
    struct pair p = {.how = how, .iterations = iterations, .cpu = cpu, .ctx = ctx,
                     .lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER};
    pthread_barrier_init(&p.start, NULL, 2);
    pthread_t other;
    cpu_set_t saved = mine;
    if (pthread_create(&other, NULL, second, &p) != 0) {
        fprintf(stderr, "threads: cannot create a thread\n");
        MPI_Abort(ctx->comm, 6);
    }
    take_turns(&p, 0);
    pthread_join(other, NULL);
    pthread_barrier_destroy(&p.start);
    sched_setaffinity(0, sizeof saved, &saved);
    /* Yield: both threads yield `iterations` times; a hand-off moves the turn twice per iteration. */
    return report(ctx, (p.ended - p.began) / (2.0 * (double)iterations), iterations);
}

double thread_yield(struct cl_context *c, size_t s, long n) { (void)s; return handoffs(c, n, YIELD); }
double mutex_pingpong(struct cl_context *c, size_t s, long n) { (void)s; return handoffs(c, n, MUTEX); }
double cond_pingpong(struct cl_context *c, size_t s, long n) { (void)s; return handoffs(c, n, COND); }

double mutex_overhead(struct cl_context *ctx, size_t size, long iterations)
{
    (void)size;
    if (ctx->rank != 0 || iterations == 0) return 1;
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    double t0 = now(ctx);
    for (long i = 0; i < iterations; i++) {
        pthread_mutex_lock(&lock);
        pthread_mutex_unlock(&lock);
    }
    return report(ctx, (now(ctx) - t0) / (double)iterations, iterations);
}

double cond_signal_overhead(struct cl_context *ctx, size_t size, long iterations)
{
    (void)size;
    if (ctx->rank != 0 || iterations == 0) return 1;
    pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
    double t0 = now(ctx);
    for (long i = 0; i < iterations; i++) pthread_cond_signal(&cond);
    return report(ctx, (now(ctx) - t0) / (double)iterations, iterations);
}
