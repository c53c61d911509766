/* Computation beside a non-blocking exchange: ranks 0 and 1 post MPI_Irecv+MPI_Isend, compute, then
 * MPI_Waitall. The computation is calibrated to take as long as the exchange alone (measured for each
 * size at its first batch). Two questions, one kernel each:
 *
 * - overlap.isend, how much of the exchange the computation hides (OSU's overlap): the computation is
 *   timed alone the same way, that is subtracted_s, so raw less subtracted_s is the communication the
 *   computation did not hide, and overlap = 1 - (time - subtracted_s) / subtracted_s. A library that moves
 *   data only inside MPI calls hides little; one with a progress thread (or offload) hides more.
 * - availability.isend, how much of the CPU the computation keeps while the exchange is in flight
 *   (NetPIPE's question): the computation runs in slices with MPI_Testall between them (an application
 *   polling), and its time is compared with the same computation timed before MPI started, when no
 *   library thread ran: availability = subtracted_s / time. Polling costs the CPU the work of the calls
 *   that move the data; a progress thread moves it without them, on a CPU the computation may need. */
#include <stdio.h>

#include "patterns.h"

struct overlap {
    size_t size;          /* the size the calibration below is for */
    long units;           /* computation units that take as long as one exchange of `size` */
    double unit_s;        /* seconds per computation unit, measured at set-up */
};

static struct overlap overlap;

/* The computation polls this many times while the exchange is in flight (availability.isend). */
#define SLICES 16

static double now(const struct cl_context *ctx) { return cl_now(ctx->timer); }

const char *overlap_setup(struct cl_context *ctx, size_t max_size)
{
    (void)max_size;
    if (ctx->integrity) return "overlap has no integrity mode";
    overlap = (struct overlap){.size = (size_t)-1, .units = 0, .unit_s = cl_compute_unit_s(ctx->timer)};
    return NULL;
}

const char *availability_setup(struct cl_context *ctx, size_t max_size)
{
    if (!(cl_compute_unit_s_before_mpi > 0))
        return "availability needs its computation timed before MPI starts: run it with commlens-kernels";
    const char *refused = overlap_setup(ctx, max_size);
    if (refused) return refused;
    /* Rank 0's rates, to say in Methods what MPI being up (a progress thread's standing cost) took alone. */
    snprintf(ctx->info, sizeof ctx->info, "{\"compute_unit_s_before_mpi\":%.6g,\"compute_unit_s_with_mpi\":%.6g}",
             cl_compute_unit_s_before_mpi, overlap.unit_s);
    return NULL;
}

static void post(struct cl_context *ctx, size_t size, long i, MPI_Request requests[2])
{
    int peer = 1 - ctx->rank, count = cl_count(ctx, size);
    MPI_Irecv(cl_message(&ctx->recv, i), count, ctx->datatype, peer, 0, ctx->comm, &requests[0]);
    MPI_Isend(cl_message(&ctx->send, i), count, ctx->datatype, peer, 0, ctx->comm, &requests[1]);
}

/* The exchange alone, the shortest of a few, in rank 0's units of computation (both ranks use them). */
static void calibrate(struct cl_context *ctx, size_t size)
{
    MPI_Request requests[2];
    double best = 1e30;
    for (int i = 0; i < 20; i++) {
        double t0 = now(ctx);
        post(ctx, size, i, requests);
        MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
        double t = now(ctx) - t0;
        best = t < best ? t : best;
    }
    long units = (long)(best / overlap.unit_s + 0.5);
    if (ctx->rank == 0) MPI_Send(&units, 1, MPI_LONG, 1, 1, ctx->comm);
    else MPI_Recv(&units, 1, MPI_LONG, 0, 1, ctx->comm, MPI_STATUS_IGNORE);
    overlap.units = units > 0 ? units : 1;
    overlap.size = size;
}

double overlap_isend(struct cl_context *ctx, size_t size, long iterations)
{
    if (ctx->rank > 1) return 1;
    if (overlap.size != size) calibrate(ctx, size);
    MPI_Request requests[2];
    double t0 = now(ctx);
    for (long i = 0; i < iterations; i++) {
        post(ctx, size, i, requests);
        cl_compute(overlap.units);
        MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
    }
    double raw = (now(ctx) - t0) / (double)iterations;
    t0 = now(ctx);
    for (long i = 0; i < iterations; i++) cl_compute(overlap.units);
    ctx->subtracted = (now(ctx) - t0) / (double)iterations;
    ctx->measured = raw;
    return 0;
}

double availability_isend(struct cl_context *ctx, size_t size, long iterations)
{
    if (ctx->rank > 1) return 1;
    if (overlap.size != size) calibrate(ctx, size);
    long slice = overlap.units / SLICES > 0 ? overlap.units / SLICES : 1;
    MPI_Request requests[2];
    double computing = 0;
    for (long i = 0; i < iterations; i++) {
        post(ctx, size, i, requests);
        int done = 0;
        double t0 = now(ctx);
        for (int s = 0; s < SLICES; s++) {
            cl_compute(slice);
            if (!done) MPI_Testall(2, requests, &done, MPI_STATUSES_IGNORE);
        }
        computing += now(ctx) - t0;
        if (!done) MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
    }
    ctx->measured = computing / (double)iterations;
    ctx->subtracted = (double)(SLICES * slice) * cl_compute_unit_s_before_mpi;
    return 0;
}
