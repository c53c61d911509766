/* MPI-4 partitioned point-to-point: a ping-pong whose every message is cut into --partitions equal
 * partitions, each filled and marked ready (MPI_Pready) by a thread of its own, as threads that compute
 * parts of a halo would. pingpong.persistent and pingpong.send are its twins: the same half round trip
 * between ranks 0 and 1, timed at rank 0. Other ranks wait at the harness barrier.
 *
 * The requests (MPI_Psend_init/MPI_Precv_init) are made in the first batch of a size (its warm-up) and
 * restarted every iteration. The threads are started once, in set-up: partition 0 is the calling
 * thread's; the others spin briefly for the next round, then sleep on a condition variable, so that
 * on a node with fewer cores than threads the idle ones leave the cores to those with work. */
#include "patterns.h"

#if CL_MPI4_CALLS
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct partitioned {
    struct cl_context *ctx;
    MPI_Request send, recv;
    size_t size;               /* the size the requests were made for */
    int made, partitions, helpers_started;
    pthread_t *helpers;        /* partitions - 1 of them */
    atomic_long round;         /* the calling thread bumps it (under `lock`) to start a round of fills */
    atomic_int finished;       /* helpers done with the round */
    atomic_int stop;           /* set under `lock` */
    pthread_mutex_t lock;
    pthread_cond_t next_round;
    /* The round's work, written before `round` is bumped. */
    unsigned char *message;
    size_t partition_bytes;
    long iteration;
    int leg;
};

static struct partitioned part;

/* Partition k of this round's message: the integrity pattern (if on), then ready for MPI to send. */
static void fill_and_mark(int k)
{
    cl_fill(part.ctx, part.message + (size_t)k * part.partition_bytes, part.partition_bytes, part.iteration, part.leg);
    MPI_Pready(k, part.send);
}

/* The round after `seen`, or -1 once told to stop: spins about as long as a short round trip, then sleeps. */
static long next_round(long seen)
{
    enum { SPINS = 2000 };
    for (int i = 0; i < SPINS; i++) {
        long now = atomic_load_explicit(&part.round, memory_order_acquire);
        if (now != seen) return now;
        if (atomic_load_explicit(&part.stop, memory_order_acquire)) return -1;
    }
    pthread_mutex_lock(&part.lock);
    while (atomic_load(&part.round) == seen && !atomic_load(&part.stop)) pthread_cond_wait(&part.next_round, &part.lock);
    long now = atomic_load(&part.stop) ? -1 : atomic_load(&part.round);
    pthread_mutex_unlock(&part.lock);
    return now;
}

static void start_round(void)
{
    pthread_mutex_lock(&part.lock);
    atomic_fetch_add_explicit(&part.round, 1, memory_order_release);
    pthread_cond_broadcast(&part.next_round);
    pthread_mutex_unlock(&part.lock);
}

static void *helper(void *arg)
{
    int k = (int)(intptr_t)arg;
    for (long seen = 0; (seen = next_round(seen)) >= 0;) {
        fill_and_mark(k);
        atomic_fetch_add_explicit(&part.finished, 1, memory_order_release);
    }
    return NULL;
}

static void stop_helpers(void)
{
    pthread_mutex_lock(&part.lock);
    atomic_store_explicit(&part.stop, 1, memory_order_release);
    pthread_cond_broadcast(&part.next_round);
    pthread_mutex_unlock(&part.lock);
    for (int k = 0; k < part.helpers_started; k++) pthread_join(part.helpers[k], NULL);
    part.helpers_started = 0;
    free(part.helpers);
    part.helpers = NULL;
}

static const char *thread_level_name(int level)
{
    return level == MPI_THREAD_SINGLE ? "MPI_THREAD_SINGLE" : level == MPI_THREAD_FUNNELED ? "MPI_THREAD_FUNNELED"
           : level == MPI_THREAD_SERIALIZED ? "MPI_THREAD_SERIALIZED" : "MPI_THREAD_MULTIPLE";
}

const char *partitioned_setup(struct cl_context *ctx, size_t max_size)
{
    static char problem[160];
    (void)max_size;
    if (ctx->cache_rotate) return "partitioned requests are bound to one buffer: --cache rotate is not supported";
    int level;
    MPI_Query_thread(&level);
    snprintf(ctx->info, sizeof ctx->info, "{\"partitions\":%d,\"threads\":%d,\"thread_level\":\"%s\"}",
             ctx->params.partitions, ctx->params.partitions, thread_level_name(level));
    if (ctx->params.partitions > 1 && level != MPI_THREAD_MULTIPLE) {
        snprintf(problem, sizeof problem, "MPI_Pready from %d threads needs MPI_THREAD_MULTIPLE; MPI gave %s",
                 ctx->params.partitions, thread_level_name(level));
        return problem;
    }
    part = (struct partitioned){.ctx = ctx, .partitions = ctx->params.partitions};
    pthread_mutex_init(&part.lock, NULL);
    pthread_cond_init(&part.next_round, NULL);
    if (ctx->rank > 1 || part.partitions == 1) return NULL;
    part.helpers = calloc((size_t)part.partitions - 1, sizeof *part.helpers);
    if (!part.helpers) return "cannot allocate the partitions' threads";
    for (int k = 1; k < part.partitions; k++) {
        if (pthread_create(&part.helpers[k - 1], NULL, helper, (void *)(intptr_t)k) != 0) {
            stop_helpers();
            return "cannot start a thread for every partition";
        }
        part.helpers_started = k;
    }
    return NULL;
}

static void free_requests(void)
{
    if (!part.made) return;
    MPI_Request_free(&part.send);
    MPI_Request_free(&part.recv);
    part.made = 0;
}

void partitioned_teardown(struct cl_context *ctx)
{
    (void)ctx;
    stop_helpers();
    free_requests();
    pthread_cond_destroy(&part.next_round);
    pthread_mutex_destroy(&part.lock);
}

static void make_requests(struct cl_context *ctx, size_t size, int peer)
{
    if (part.made && part.size == size) return;
    free_requests();
    /* Whole elements per partition: the harness refused sizes that are not a multiple of the partitions. */
    MPI_Count count = (MPI_Count)(size / ctx->type_size / (size_t)part.partitions);
    MPI_Psend_init(cl_message(&ctx->send, 0), part.partitions, count, ctx->datatype, peer, 0, ctx->comm,
                   MPI_INFO_NULL, &part.send);
    MPI_Precv_init(cl_message(&ctx->recv, 0), part.partitions, count, ctx->datatype, peer, 0, ctx->comm,
                   MPI_INFO_NULL, &part.recv);
    part.size = size;
    part.partition_bytes = size / (size_t)part.partitions;
    part.made = 1;
}

/* One partitioned send: every thread fills and marks its partition; then, as after an OpenMP parallel loop
 * of MPI_Pready, the calling thread waits for the message. Nothing waits in MPI while other threads mark
 * partitions ready: Open MPI 5.0 can lose a partition marked while another thread is in its progress
 * engine and never complete the send (open-mpi/ompi#12935). */
static void send_message(long iteration, int leg)
{
    part.message = cl_message(&part.ctx->send, 0);
    part.iteration = iteration;
    part.leg = leg;
    atomic_store_explicit(&part.finished, 0, memory_order_relaxed);
    MPI_Start(&part.send);
    start_round();
    fill_and_mark(0);
    while (atomic_load_explicit(&part.finished, memory_order_acquire) < part.partitions - 1) sched_yield();
    MPI_Wait(&part.send, MPI_STATUS_IGNORE);
}

static void check_message(struct cl_context *ctx, long iteration, int leg)
{
    const unsigned char *in = cl_message(&ctx->recv, 0);
    for (int k = 0; k < part.partitions; k++)
        cl_check(ctx, in + (size_t)k * part.partition_bytes, part.partition_bytes, iteration, leg);
}

/* Rank 0 posts its receive before it sends (as pingpong.persistent does), rank 1 receives, then sends back. */
double pingpong_partitioned(struct cl_context *ctx, size_t size, long iterations)
{
    if (ctx->rank > 1 || iterations == 0) return 2;
    make_requests(ctx, size, 1 - ctx->rank);
    for (long i = 0; i < iterations; i++) {
        MPI_Start(&part.recv);
        if (ctx->rank == 0) send_message(i, 0);
        MPI_Wait(&part.recv, MPI_STATUS_IGNORE);
        check_message(ctx, i, ctx->rank == 0 ? 1 : 0);
        if (ctx->rank == 1) send_message(i, 1);
    }
    return 2;
}
#endif
