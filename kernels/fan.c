/* Fan-in and fan-out: every other rank sends a window of --window messages to rank 0 at once (fan.in), or
 * rank 0 sends one to every other rank at once (fan.out), as OSU 7.5's osu_bw_fan_in and osu_bw_fan_out
 * do: what the rank in the middle, and the link of its node, take in or give out when all talk to it at
 * once, against what one pair carries alone (line speed against end-point limits).
 *
 * Both time themselves on rank 0 from one start: a sample is seconds per message over all the others
 * (aggregate bandwidth = size / time), and each other rank's own finish is a pair time (source,
 * destination), so that one slow sender or receiver shows. Ranks wait yielding the core (cb_polite_barrier,
 * cb_yielding_waitall): ranks may outnumber cores, on virtual nodes with the processes that carry links. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>

#include "patterns.h"

enum { TAG_DATA = 21, TAG_READY = 22, TAG_ACK = 23 };

struct fan {
    MPI_Request *requests;   /* rank 0: a window per other rank, then one acknowledgement each */
    int *outstanding;        /* rank 0: per other rank, its requests not yet complete */
    int *indices;
    char *tokens;            /* rank 0: one acknowledgement byte per rank */
};

const char *fan_setup(struct cb_context *ctx, size_t max_size)
{
    (void)max_size;
    static struct fan fan;
    int others = ctx->nprocs - 1, window = ctx->params.window;
    fan.requests = malloc((size_t)others * (size_t)(window + 1) * sizeof *fan.requests);
    fan.outstanding = malloc((size_t)ctx->nprocs * sizeof *fan.outstanding);
    fan.indices = malloc((size_t)others * (size_t)(window + 1) * sizeof *fan.indices);
    fan.tokens = malloc((size_t)ctx->nprocs);
    if (!fan.requests || !fan.outstanding || !fan.indices || !fan.tokens) return "fan: out of memory for its requests";
    ctx->state = &fan;
    return NULL;
}

void fan_teardown(struct cb_context *ctx)
{
    struct fan *fan = ctx->state;
    free(fan->requests);
    free(fan->outstanding);
    free(fan->indices);
    free(fan->tokens);
}

/* Rank 0: polls `requests`, (ranks - 1) blocks of `per_rank`, the first rank 1's, then rank 2's, ...;
 * as a rank's block completes, the time since `started` per message of its
 * window goes into its pair time (`into`: rank 0 is the destination, else the source). Returns the time
 * the last block completed, since `started`. */
static double time_each_rank(struct cb_context *ctx, struct fan *fan, MPI_Request *requests, int per_rank,
                             double started, int into)
{
    int nprocs = ctx->nprocs, window = ctx->params.window, left = nprocs - 1, done = 0;
    double last = 0;
    for (int r = 1; r < nprocs; r++) fan->outstanding[r] = per_rank;
    while (left) {
        MPI_Testsome(per_rank * (nprocs - 1), requests, &done, fan->indices, MPI_STATUSES_IGNORE);
        if (done == 0 || done == MPI_UNDEFINED) {
            sched_yield();
            continue;
        }
        double now = cb_now(ctx->timer) - started;
        for (int j = 0; j < done; j++) {
            int r = 1 + fan->indices[j] / per_rank;
            if (--fan->outstanding[r]) continue;
            ctx->pair_times[into ? 0 * nprocs + r : r * nprocs + 0] += now / window;
            last = now;
            left--;
        }
    }
    return last;
}

/* Rank 0 posts a window of receives from each other rank and tells each that it is ready; each sends
 * its window at once. Timed at rank 0 from its ready messages to the last message of all. */
double fan_in(struct cb_context *ctx, size_t size, long iterations)
{
    struct fan *fan = ctx->state;
    int nprocs = ctx->nprocs, rank = ctx->rank, window = ctx->params.window, others = nprocs - 1;
    double total = 0;
    char token = 0;
    MPI_Request sends[CB_MAX_WINDOW];
    for (long i = 0; i < iterations; i++) {
        cb_polite_barrier(ctx->comm);
        if (rank == 0) {
            for (int r = 1; r < nprocs; r++)
                cb_post_window(ctx, size, i * window, r, 0, 0, TAG_DATA, fan->requests + (r - 1) * window);
            double started = cb_now(ctx->timer);
            for (int r = 1; r < nprocs; r++) MPI_Send(&token, 1, MPI_CHAR, r, TAG_READY, ctx->comm);
            total += time_each_rank(ctx, fan, fan->requests, window, started, 0);
            cb_check_window(ctx, size, i * window, 0);
        } else {
            cb_yielding_recv(&token, 1, 0, TAG_READY, ctx->comm);
            cb_post_window(ctx, size, i * window, 0, 1, 0, TAG_DATA, sends);
            cb_yielding_waitall(window, sends);
        }
    }
    if (rank == 0) ctx->measured = iterations ? total / ((double)iterations * others * window) : 0;
    return 0;   /* timed by the kernel itself: see ctx->measured */
}

/* Each other rank posts a window of receives and tells rank 0 that it is ready; rank 0, once all are,
 * sends a window to each at once. Timed at rank 0 from then to the last receiver's acknowledgement of its
 * whole window (osu_bw's acknowledgement). */
double fan_out(struct cb_context *ctx, size_t size, long iterations)
{
    struct fan *fan = ctx->state;
    int nprocs = ctx->nprocs, rank = ctx->rank, window = ctx->params.window, others = nprocs - 1;
    double total = 0;
    char token = 0;
    MPI_Request receives[CB_MAX_WINDOW];
    for (long i = 0; i < iterations; i++) {
        cb_polite_barrier(ctx->comm);
        if (rank == 0) {
            for (int r = 1; r < nprocs; r++) cb_yielding_recv(&token, 1, r, TAG_READY, ctx->comm);
            MPI_Request *acks = fan->requests + others * window;
            for (int r = 1; r < nprocs; r++) MPI_Irecv(&fan->tokens[r], 1, MPI_CHAR, r, TAG_ACK, ctx->comm, &acks[r - 1]);
            double started = cb_now(ctx->timer);
            for (int r = 1; r < nprocs; r++)
                cb_post_window(ctx, size, i * window, r, 1, 0, TAG_DATA, fan->requests + (r - 1) * window);
            /* The acknowledgements are what is timed; the sends complete before them. */
            total += time_each_rank(ctx, fan, acks, 1, started, 1);
            cb_yielding_waitall(others * window, fan->requests);
        } else {
            cb_post_window(ctx, size, i * window, 0, 0, 0, TAG_DATA, receives);
            MPI_Send(&token, 1, MPI_CHAR, 0, TAG_READY, ctx->comm);
            cb_yielding_waitall(window, receives);
            MPI_Send(&token, 1, MPI_CHAR, 0, TAG_ACK, ctx->comm);
            cb_check_window(ctx, size, i * window, 0);
        }
    }
    if (rank == 0) ctx->measured = iterations ? total / ((double)iterations * others * window) : 0;
    return 0;
}
