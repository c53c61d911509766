/* Every ordered pair of ranks, each timed on its own: the network as a whole (mpiGraph's all-pairs
 * pattern, and one pair at a time for the links alone). Each pair time is seconds per message of
 * the size, of a window of --window messages, so that size / pair time is the pair's bandwidth. */
#include "patterns.h"

enum { TAG_DATA = 11, TAG_READY = 12, TAG_ACK = 13 };

/* Shifted rounds: in round k (1 .. P-1) rank r sends a window to r + k and receives one from r - k, every
 * rank at once, a barrier before each round. The receiver times from the round's start to its last
 * message: the pair (r - k -> r) under the load of every other pair. */
double allpairs_shifted(struct cl_context *ctx, size_t size, long iterations)
{
    MPI_Request requests[2 * CL_MAX_WINDOW];
    int nprocs = ctx->nprocs, rank = ctx->rank, window = ctx->params.window;
    for (long i = 0; i < iterations; i++)
        for (int k = 1; k < nprocs; k++) {
            int to = (rank + k) % nprocs, from = (rank - k + nprocs) % nprocs;
            MPI_Barrier(ctx->comm);
            double started = cl_now(ctx->timer);
            cl_post_window(ctx, size, i * window, from, 0, 0, TAG_DATA, requests);
            cl_post_window(ctx, size, i * window, to, 1, 0, TAG_DATA, requests + window);
            cl_yielding_waitall(window, requests);
            ctx->pair_times[from * nprocs + rank] += (cl_now(ctx->timer) - started) / window;
            cl_yielding_waitall(window, requests + window);
            cl_check_window(ctx, size, i * window, 0);
        }
    return (double)(nprocs - 1) * window;
}

/* One pair at a time, every ordered pair in turn, the other ranks waiting politely: the pair's links
 * alone. The destination posts its receives and says so; the source times its window from then until
 * the destination acknowledges the last message (osu_bw's window and acknowledgement). */
double allpairs_isolated(struct cl_context *ctx, size_t size, long iterations)
{
    MPI_Request requests[CL_MAX_WINDOW];
    int nprocs = ctx->nprocs, rank = ctx->rank, window = ctx->params.window;
    char token = 0;
    for (long i = 0; i < iterations; i++)
        for (int source = 0; source < nprocs; source++)
            for (int destination = 0; destination < nprocs; destination++) {
                if (source == destination) continue;
                cl_polite_barrier(ctx->comm);
                if (rank == source) {
                    cl_yielding_recv(&token, 1, destination, TAG_READY, ctx->comm);
                    double started = cl_now(ctx->timer);
                    cl_post_window(ctx, size, i * window, destination, 1, 0, TAG_DATA, requests);
                    cl_yielding_waitall(window, requests);
                    cl_yielding_recv(&token, 1, destination, TAG_ACK, ctx->comm);
                    ctx->pair_times[source * nprocs + destination] += (cl_now(ctx->timer) - started) / window;
                } else if (rank == destination) {
                    cl_post_window(ctx, size, i * window, source, 0, 0, TAG_DATA, requests);
                    MPI_Send(&token, 1, MPI_CHAR, source, TAG_READY, ctx->comm);
                    cl_yielding_waitall(window, requests);
                    MPI_Send(&token, 1, MPI_CHAR, source, TAG_ACK, ctx->comm);
                    cl_check_window(ctx, size, i * window, 0);
                }
            }
    cl_polite_barrier(ctx->comm);
    return (double)nprocs * (nprocs - 1) * window;
}
