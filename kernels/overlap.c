/* How much of a non-blocking exchange is hidden behind computation (OSU's overlap, NetPIPE's question of
 * the CPU left free): ranks 0 and 1 post MPI_Irecv+MPI_Isend, compute, then MPI_Waitall. The computation
 * is calibrated to take as long as the exchange alone (measured for each size at its first batch), and
 * timed alone the same way: that is subtracted_s, so the recorded time (raw less subtracted_s) is the
 * communication the computation did not hide, and overlap = 1 - time / subtracted_s. A library that moves
 * data only inside MPI calls hides little; one with a progress thread (or offload) hides more. */
#include <stdlib.h>

#include "patterns.h"

struct overlap {
    size_t size;          /* the size the calibration below is for */
    long units;           /* computation units that take as long as one exchange of `size` */
    double unit_s;        /* seconds per computation unit, measured at set-up */
};

static struct overlap overlap;
static volatile double sink;

/* One unit of computation: a dependent chain of multiply-adds the compiler cannot drop. */
__attribute__((noinline)) static void compute(long units)
{
    double x = sink;
    for (long u = 0; u < units; u++)
        for (int k = 0; k < 64; k++) x = x * 0.999999 + 1e-9;
    sink = x;
}

static double now(const struct cb_context *ctx) { return cb_now(ctx->timer); }

const char *overlap_setup(struct cb_context *ctx, size_t max_size)
{
    (void)max_size;
    if (ctx->integrity) return "overlap has no integrity mode";
    long units = 1000;
    double t0 = now(ctx);
    compute(units);
    while (now(ctx) - t0 < 0.01) {   /* long enough to time: 10 ms at least */
        units *= 2;
        t0 = now(ctx);
        compute(units);
    }
    overlap = (struct overlap){.size = (size_t)-1, .units = 0, .unit_s = (now(ctx) - t0) / (double)units};
    return NULL;
}

static void post(struct cb_context *ctx, size_t size, long i, MPI_Request requests[2])
{
    int peer = 1 - ctx->rank, count = cb_count(ctx, size);
    MPI_Irecv(cb_message(&ctx->recv, i), count, ctx->datatype, peer, 0, ctx->comm, &requests[0]);
    MPI_Isend(cb_message(&ctx->send, i), count, ctx->datatype, peer, 0, ctx->comm, &requests[1]);
}

/* The exchange alone, the shortest of a few, in rank 0's units of computation (both ranks use them). */
static void calibrate(struct cb_context *ctx, size_t size)
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

double overlap_isend(struct cb_context *ctx, size_t size, long iterations)
{
    if (ctx->rank > 1) return 1;
    if (overlap.size != size) calibrate(ctx, size);
    MPI_Request requests[2];
    double t0 = now(ctx);
    for (long i = 0; i < iterations; i++) {
        post(ctx, size, i, requests);
        compute(overlap.units);
        MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
    }
    double raw = (now(ctx) - t0) / (double)iterations;
    t0 = now(ctx);
    for (long i = 0; i < iterations; i++) compute(overlap.units);
    ctx->subtracted = (now(ctx) - t0) / (double)iterations;
    ctx->measured = raw;
    return 0;
}
