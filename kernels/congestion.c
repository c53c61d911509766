/* Many ranks at once: what the network as a whole delivers when they all talk, against what one pair
 * carries alone (line speed against end-point limits).
 *
 * fan.in and fan.out: every other rank sends a window of --window messages to rank 0 at once, or rank 0
 * sends one to every other rank at once, as OSU 7.5's osu_bw_fan_in and osu_bw_fan_out do: what the rank in
 * the middle, and the link of its node, take in or give out.
 *
 * bisection: the ranks in pairs of a random perfect matching, a new one every sample (ClusterKit's and
 * hp2p's random pairings), every pair exchanging a window both ways at once: across the matchings, what the
 * fabric carries between random halves of the ranks.
 *
 * All time themselves on rank 0 from one start: a sample is seconds per message (see each metric), and each
 * rank's own finish is a pair time (source, destination), so that one slow rank or pair shows. Ranks wait
 * yielding the core (cl_polite_barrier, cl_yielding_waitall): ranks may outnumber cores, on virtual nodes
 * with the processes that carry links. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>

#include "patterns.h"

enum { TAG_DATA = 21, TAG_READY = 22, TAG_ACK = 23 };

struct fan {
    MPI_Request *requests;   /* rank 0: a window per other rank, then one acknowledgement each */
    int *outstanding;        /* rank 0: per other rank, its requests not yet complete */
    int *indices;
    char *tokens;            /* rank 0: one acknowledgement byte per rank */
};

const char *fan_setup(struct cl_context *ctx, size_t max_size)
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

void fan_teardown(struct cl_context *ctx)
{
    struct fan *fan = ctx->state;
    free(fan->requests);
    free(fan->outstanding);
    free(fan->indices);
    free(fan->tokens);
}

/* Rank 0: polls `requests`, (ranks - 1) blocks of `per_rank`, the first rank 1's, then rank 2's, ...; as a
 * rank's block completes, the time since `started` per message of its window goes into its pair time: 0 -> r
 * where rank 0 sent (`outward`), r -> 0 where it received. Returns when the last block completed, since
 * `started`. */
static double time_each_rank(struct cl_context *ctx, struct fan *fan, MPI_Request *requests, int per_rank,
                             double started, int outward)
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
        double now = cl_now(ctx->timer) - started;
        for (int j = 0; j < done; j++) {
            int r = 1 + fan->indices[j] / per_rank;
            if (--fan->outstanding[r]) continue;
            ctx->pair_times[outward ? 0 * nprocs + r : r * nprocs + 0] += now / window;
            last = now;
            left--;
        }
    }
    return last;
}

/* Rank 0 posts a window of receives from each other rank and tells each that it is ready; each sends
 * its window at once. Timed at rank 0 from its ready messages to the last message of all. */
double fan_in(struct cl_context *ctx, size_t size, long iterations)
{
    struct fan *fan = ctx->state;
    int nprocs = ctx->nprocs, rank = ctx->rank, window = ctx->params.window, others = nprocs - 1;
    double total = 0;
    char token = 0;
    MPI_Request sends[CL_MAX_WINDOW];
    for (long i = 0; i < iterations; i++) {
        cl_polite_barrier(ctx->comm);
        if (rank == 0) {
            for (int r = 1; r < nprocs; r++)
                cl_post_window(ctx, size, i * window, r, 0, 0, TAG_DATA, fan->requests + (r - 1) * window);
            double started = cl_now(ctx->timer);
            for (int r = 1; r < nprocs; r++) MPI_Send(&token, 1, MPI_CHAR, r, TAG_READY, ctx->comm);
            total += time_each_rank(ctx, fan, fan->requests, window, started, 0);
            cl_check_window(ctx, size, i * window, 0);
        } else {
            cl_yielding_recv(&token, 1, 0, TAG_READY, ctx->comm);
            cl_post_window(ctx, size, i * window, 0, 1, 0, TAG_DATA, sends);
            cl_yielding_waitall(window, sends);
        }
    }
    if (rank == 0) ctx->measured = iterations ? total / ((double)iterations * others * window) : 0;
    return 0;   /* timed by the kernel itself: see ctx->measured */
}

/* Each other rank posts a window of receives and tells rank 0 that it is ready; rank 0, once all are,
 * sends a window to each at once. Timed at rank 0 from then to the last receiver's acknowledgement of its
 * whole window (osu_bw's acknowledgement). */
double fan_out(struct cl_context *ctx, size_t size, long iterations)
{
    struct fan *fan = ctx->state;
    int nprocs = ctx->nprocs, rank = ctx->rank, window = ctx->params.window, others = nprocs - 1;
    double total = 0;
    char token = 0;
    MPI_Request receives[CL_MAX_WINDOW];
    for (long i = 0; i < iterations; i++) {
        cl_polite_barrier(ctx->comm);
        if (rank == 0) {
            for (int r = 1; r < nprocs; r++) cl_yielding_recv(&token, 1, r, TAG_READY, ctx->comm);
            MPI_Request *acks = fan->requests + others * window;
            for (int r = 1; r < nprocs; r++) MPI_Irecv(&fan->tokens[r], 1, MPI_CHAR, r, TAG_ACK, ctx->comm, &acks[r - 1]);
            double started = cl_now(ctx->timer);
            for (int r = 1; r < nprocs; r++)
                cl_post_window(ctx, size, i * window, r, 1, 0, TAG_DATA, fan->requests + (r - 1) * window);
            /* The acknowledgements are what is timed; the sends complete before them. */
            total += time_each_rank(ctx, fan, acks, 1, started, 1);
            cl_yielding_waitall(others * window, fan->requests);
        } else {
            cl_post_window(ctx, size, i * window, 0, 0, 0, TAG_DATA, receives);
            MPI_Send(&token, 1, MPI_CHAR, 0, TAG_READY, ctx->comm);
            cl_yielding_waitall(window, receives);
            MPI_Send(&token, 1, MPI_CHAR, 0, TAG_ACK, ctx->comm);
            cl_check_window(ctx, size, i * window, 0);
        }
    }
    if (rank == 0) ctx->measured = iterations ? total / ((double)iterations * others * window) : 0;
    return 0;
}

/* A random perfect matching of `nprocs` ranks, the same on every rank: partner[r] for each r, from a
 * Fisher-Yates shuffle driven by splitmix64 of the draw's number. */
static void random_matching(int nprocs, uint64_t draw, int *order, int *partner)
{
    uint64_t state = 0x636f6d6d62656e63ULL ^ (draw * 0x9e3779b97f4a7c15ULL);
    for (int r = 0; r < nprocs; r++) order[r] = r;
    for (int r = nprocs - 1; r > 0; r--) {
        uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        int j = (int)(z % (uint64_t)(r + 1)), swap = order[r];
        order[r] = order[j];
        order[j] = swap;
    }
    for (int k = 0; k < nprocs; k += 2) {
        partner[order[k]] = order[k + 1];
        partner[order[k + 1]] = order[k];
    }
}

struct matching {
    int *order, *partner;
    uint64_t draws;   /* batches run so far: each draws its own matching */
};

const char *bisection_setup(struct cl_context *ctx, size_t max_size)
{
    (void)max_size;
    static struct matching matching;
    if (ctx->nprocs % 2) return "bisection: needs an even number of ranks (a perfect matching)";
    matching.order = malloc((size_t)ctx->nprocs * sizeof *matching.order);
    matching.partner = malloc((size_t)ctx->nprocs * sizeof *matching.partner);
    if (!matching.order || !matching.partner) return "bisection: out of memory for its matching";
    matching.draws = 0;
    ctx->state = &matching;
    /* Every pair of ranks exchanges a byte before anything is timed: a library that connects a pair on
     * its first message (MPICH over TCP) would otherwise pay for it in the first sample of each new
     * matching (over 25 Mbit/s virtual links, some runs read 0.83 of the links' rate instead of 0.95). */
    for (int d = 1; d < ctx->nprocs; d++) {    /* shifted rounds, as mpiGraph's: every ordered pair once */
        char out = 0, in;
        MPI_Sendrecv(&out, 1, MPI_CHAR, (ctx->rank + d) % ctx->nprocs, 0, &in, 1, MPI_CHAR,
                     (ctx->rank - d + ctx->nprocs) % ctx->nprocs, 0, ctx->comm, MPI_STATUS_IGNORE);
    }
    return NULL;
}

void bisection_teardown(struct cl_context *ctx)
{
    struct matching *matching = ctx->state;
    free(matching->order);
    free(matching->partner);
}

/* One matching for the batch (so that each pair time is that pair's, over the batch's iterations); per
 * iteration every rank sends its partner a window and receives one, from a common start after a barrier,
 * and the slowest rank's time to its partner's last message is the iteration's. */
double bisection(struct cl_context *ctx, size_t size, long iterations)
{
    struct matching *matching = ctx->state;
    int nprocs = ctx->nprocs, rank = ctx->rank, window = ctx->params.window;
    MPI_Request requests[2 * CL_MAX_WINDOW];
    random_matching(nprocs, matching->draws++, matching->order, matching->partner);
    int partner = matching->partner[rank];
    double total = 0;
    for (long i = 0; i < iterations; i++) {
        cl_polite_barrier(ctx->comm);
        double started = cl_now(ctx->timer);
        cl_post_window(ctx, size, i * window, partner, 0, 0, TAG_DATA, requests);
        cl_post_window(ctx, size, i * window, partner, 1, 0, TAG_DATA, requests + window);
        cl_yielding_waitall(window, requests);
        double own = cl_now(ctx->timer) - started, slowest = 0;
        ctx->pair_times[partner * nprocs + rank] += own / window;
        cl_yielding_waitall(window, requests + window);
        cl_check_window(ctx, size, i * window, 0);
        /* Outside the timed part: each rank's clock read its own time, the slowest is the iteration's. */
        MPI_Reduce(&own, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, ctx->comm);
        total += slowest;
    }
    if (rank == 0) ctx->measured = iterations ? total / ((double)iterations * window) : 0;
    return 0;
}
