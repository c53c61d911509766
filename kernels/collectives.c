/* Collective operations, measured by the methods of Sphinx and SKaMPI.
 *
 * --method accurate (fan-out: bcast, scatter, scatterv; and scan, their default):
 *     for each rank r that receives data, repeated calls in which r sends a
 *     zero-byte acknowledgement to the root after each; r's latency is the time
 *     per call minus half the root-r acknowledgement round trip, measured the
 *     same way; the operation latency is the largest over r.  Scan: rank 0 waits
 *     for an acknowledgement from rank N-1 between calls.
 * --method lower: repeated calls timed at rank 0 (calls may overlap: a lower bound).
 * --method upper: each call followed by a barrier of zero-byte point-to-point
 *     messages (the barrier's time is included: an upper bound).
 * --method root (reduce, gather, gatherv): the time the root spends in the call
 *     when every other rank has already entered it.
 * --method window (every collective): the ranks' clocks are synchronised to rank 0's (harness/clocks.c)
 *     and every rank starts each call at the same global time, one window apart (SKaMPI's and
 *     ReproMPI's window-based timing); a call's latency is its last rank's finish less the common start,
 *     and a sample is the median of its windows' (one the scheduler stopped is not the call's time).
 *     A window some rank entered late is not counted (and the windows grow until most are entered in
 *     time); rank 0 prints how many were left out when the kernel ends. Each sample also gives its
 *     exit skew, the median of its windows' last finish less first (ctx->exit_skew).
 * Sizes are bytes per rank and destination: Alltoall's size is what each rank
 * sends to every other rank, as the reports define it.
 * The persistent twins (MPI-4: coll.bcast_init, coll.allreduce_init) are measured by the same methods, each
 * call an MPI_Start and MPI_Wait of a request made once per size. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/clocks.h"
#include "patterns.h"

enum coll_op { BCAST, SCATTER, SCATTERV, SCAN, REDUCE, GATHER, GATHERV, ALLREDUCE, ALLGATHER,
               ALLGATHERV, ALLTOALL, ALLTOALLV, REDUCE_SCATTER, BARRIER,
#if CL_MPI4_CALLS
               BCAST_INIT, ALLREDUCE_INIT,
#endif
};

struct coll {
    MPI_Datatype type;   /* the data's type; reductions need an arithmetic one */
    int *counts, *displs;
    double *half_ack;    /* per rank: half the median round trip of a zero-byte message with rank 0 */
    struct cl_clock_model clock;   /* --method window: this rank's clock against rank 0's */
    double window_s;     /* --method window: the current window length, for window_size */
    size_t window_size;
    long windows, late_windows;    /* rank 0: windows timed, windows some rank entered late */
    void (*call)(struct cl_context *, enum coll_op, size_t);   /* what the timed loops call (measure()) */
#if CL_MPI4_CALLS
    MPI_Request persistent;   /* the persistent twins' request, for persistent_count elements */
    int persistent_count;
#endif
};

static struct coll coll;

static const char *coll_setup(struct cl_context *ctx, size_t max_size)
{
    (void)max_size;
    if (ctx->integrity) return "collectives have no integrity mode";
    if (ctx->cache_rotate)
        return "collectives use one buffer per call: --cache rotate is not supported";
    /* MPI_SUM is not defined on MPI_BYTE; unsigned char has the same size. */
    coll.type = ctx->datatype == MPI_BYTE ? MPI_UNSIGNED_CHAR : ctx->datatype;
    coll.counts = malloc((size_t)ctx->nprocs * sizeof(int));
    coll.displs = malloc((size_t)ctx->nprocs * sizeof(int));
    coll.half_ack = calloc((size_t)ctx->nprocs, sizeof(double));
    if (!coll.counts || !coll.displs || !coll.half_ack) return "cannot allocate the count arrays";
    coll.window_s = 0;
    coll.window_size = 0;
    coll.windows = coll.late_windows = 0;
#if CL_MPI4_CALLS
    coll.persistent = MPI_REQUEST_NULL;
#endif
    ctx->state = &coll;
    return NULL;
}

void coll_teardown(struct cl_context *ctx)
{
    if (ctx->rank == 0 && coll.windows > 0)
        fprintf(stderr, "%s: %ld of %ld windows entered late by some rank, left out\n", "--method window",
                coll.late_windows, coll.windows);
    free(coll.counts);
    free(coll.displs);
    free(coll.half_ack);
#if CL_MPI4_CALLS
    if (coll.persistent != MPI_REQUEST_NULL) MPI_Request_free(&coll.persistent);
#endif
    ctx->state = NULL;
}

#if CL_MPI4_CALLS
/* A persistent twin's call: its request is made where the size changes (in the size's warm-up; every rank
 * makes it at the same call, as a collective needs), then started and waited for. */
static void start_persistent(struct cl_context *ctx, enum coll_op op, void *send, void *recv, int count)
{
    if (coll.persistent == MPI_REQUEST_NULL || coll.persistent_count != count) {
        if (coll.persistent != MPI_REQUEST_NULL) MPI_Request_free(&coll.persistent);
        if (op == BCAST_INIT)
            MPI_Bcast_init(send, count, coll.type, 0, ctx->comm, MPI_INFO_NULL, &coll.persistent);
        else
            MPI_Allreduce_init(send, recv, count, coll.type, MPI_SUM, ctx->comm, MPI_INFO_NULL, &coll.persistent);
        coll.persistent_count = count;
    }
    MPI_Start(&coll.persistent);
    MPI_Wait(&coll.persistent, MPI_STATUS_IGNORE);
}
#endif

/* One call of the operation with `size` bytes per rank (and per destination). */
static void call(struct cl_context *ctx, enum coll_op op, size_t size)
{
    void *send = ctx->send.base + ctx->send.align, *recv = ctx->recv.base + ctx->recv.align;
    int count = cl_count(ctx, size);
    for (int r = 0; r < ctx->nprocs; r++) {
        coll.counts[r] = count;
        coll.displs[r] = r * count;
    }
    MPI_Comm comm = ctx->comm;
    MPI_Datatype t = coll.type;
    switch (op) {
    case BCAST: MPI_Bcast(send, count, t, 0, comm); break;
    case SCATTER: MPI_Scatter(send, count, t, recv, count, t, 0, comm); break;
    case SCATTERV: MPI_Scatterv(send, coll.counts, coll.displs, t, recv, count, t, 0, comm); break;
    case SCAN: MPI_Scan(send, recv, count, t, MPI_SUM, comm); break;
    case REDUCE: MPI_Reduce(send, recv, count, t, MPI_SUM, 0, comm); break;
    case GATHER: MPI_Gather(send, count, t, recv, count, t, 0, comm); break;
    case GATHERV: MPI_Gatherv(send, count, t, recv, coll.counts, coll.displs, t, 0, comm); break;
    case ALLREDUCE: MPI_Allreduce(send, recv, count, t, MPI_SUM, comm); break;
    case ALLGATHER: MPI_Allgather(send, count, t, recv, count, t, comm); break;
    case ALLGATHERV: MPI_Allgatherv(send, count, t, recv, coll.counts, coll.displs, t, comm); break;
    case ALLTOALL: MPI_Alltoall(send, count, t, recv, count, t, comm); break;
    case ALLTOALLV:
        MPI_Alltoallv(send, coll.counts, coll.displs, t, recv, coll.counts, coll.displs, t, comm);
        break;
    case REDUCE_SCATTER: MPI_Reduce_scatter(send, recv, coll.counts, t, MPI_SUM, comm); break;
    case BARRIER: MPI_Barrier(comm); break;
#if CL_MPI4_CALLS
    case BCAST_INIT:
    case ALLREDUCE_INIT: start_persistent(ctx, op, send, recv, count); break;
#endif
    }
}

/* --test-late-entry: the last rank enters every call that much later, so that no call can take less. */
static void late_call(struct cl_context *ctx, enum coll_op op, size_t size)
{
    if (ctx->rank == ctx->nprocs - 1) cl_spin(ctx->timer, ctx->params.test_late_entry);
    call(ctx, op, size);
}

/* A barrier of zero-byte messages: everyone reports to rank 0, rank 0 releases everyone. */
static void point_to_point_barrier(struct cl_context *ctx)
{
    if (ctx->rank == 0) {
        for (int r = 1; r < ctx->nprocs; r++) MPI_Recv(NULL, 0, MPI_BYTE, r, 9, ctx->comm, MPI_STATUS_IGNORE);
        for (int r = 1; r < ctx->nprocs; r++) MPI_Send(NULL, 0, MPI_BYTE, r, 9, ctx->comm);
    } else {
        MPI_Send(NULL, 0, MPI_BYTE, 0, 9, ctx->comm);
        MPI_Recv(NULL, 0, MPI_BYTE, 0, 9, ctx->comm, MPI_STATUS_IGNORE);
    }
}

static int compare(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Half the shortest round trip of a zero-byte message between rank 0 and each rank: measured once,
 * outside the timed calls, so its noise does not enter every sample. The shortest, not the median:
 * every timed iteration carries one acknowledgement, which takes at least half the shortest round
 * trip, so the corrected time per call stays positive however noisy the round trips were (with the
 * median, a busy moment while measuring them made it zero or less). */
static void measure_acknowledgements(struct cl_context *ctx)
{
    enum { TRIPS = 201 };
    double trips[TRIPS];
    for (int peer = 1; peer < ctx->nprocs; peer++) {
        MPI_Barrier(ctx->comm);
        for (int i = 0; i < TRIPS; i++) {
            double t0 = cl_now(ctx->timer);
            if (ctx->rank == 0) {
                MPI_Send(NULL, 0, MPI_BYTE, peer, 8, ctx->comm);
                MPI_Recv(NULL, 0, MPI_BYTE, peer, 8, ctx->comm, MPI_STATUS_IGNORE);
            } else if (ctx->rank == peer) {
                MPI_Recv(NULL, 0, MPI_BYTE, 0, 8, ctx->comm, MPI_STATUS_IGNORE);
                MPI_Send(NULL, 0, MPI_BYTE, 0, 8, ctx->comm);
            }
            trips[i] = cl_now(ctx->timer) - t0;
        }
        qsort(trips, TRIPS, sizeof trips[0], compare);
        coll.half_ack[peer] = trips[0] / 2;
    }
}

/* Calls in which `acker` acknowledges each one to rank 0: time per call at rank 0
 * less half the acknowledgement's round trip. */
static double acknowledged_latency(struct cl_context *ctx, enum coll_op op, size_t size, long iterations,
                                   int acker)
{
    MPI_Barrier(ctx->comm);
    double t0 = cl_now(ctx->timer);
    for (long i = 0; i < iterations; i++) {
        coll.call(ctx, op, size);
        if (ctx->rank == acker) MPI_Send(NULL, 0, MPI_BYTE, 0, 7, ctx->comm);
        else if (ctx->rank == 0) MPI_Recv(NULL, 0, MPI_BYTE, acker, 7, ctx->comm, MPI_STATUS_IGNORE);
    }
    return (cl_now(ctx->timer) - t0) / (double)iterations - coll.half_ack[acker];
}

static double root_time(struct cl_context *ctx, enum coll_op op, size_t size, long iterations)
{
    double in_call = 0;
    for (long i = 0; i < iterations; i++) {
        MPI_Barrier(ctx->comm);
        if (ctx->rank == 0) {
            /* Let every other rank enter the call first; only the root's own part is timed. */
            cl_spin(ctx->timer, 20e-6);
            double t0 = cl_now(ctx->timer);
            coll.call(ctx, op, size);
            in_call += cl_now(ctx->timer) - t0;
        } else {
            coll.call(ctx, op, size);
        }
    }
    return in_call / (double)iterations;
}

/* The slowest of a few calls, each followed by the point-to-point barrier, over every rank: the first
 * window length for a size. */
static double first_window(struct cl_context *ctx, enum coll_op op, size_t size)
{
    double t0 = cl_clock_local(ctx);
    for (int i = 0; i < 3; i++) {
        coll.call(ctx, op, size);
        point_to_point_barrier(ctx);
    }
    double mine = (cl_clock_local(ctx) - t0) / 3, slowest;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, ctx->comm);
    return 2 * slowest + 20e-6;
}

/* A sample's windows at most: the harness sizes a sample by the latency this returns, and a window lasts
 * many latencies, so a long --min-sample-time would otherwise ask for minutes and gigabytes. */
#define MAX_WINDOWS 4096L

static double median_in_place(double *values, long n)
{
    qsort(values, (size_t)n, sizeof values[0], compare);
    return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

/* `iterations` calls (MAX_WINDOWS at most), each started by every rank at the same global time: the median
 * over the windows every rank entered in time of the last finish less the common start (rank 0). The
 * sample's exit skew, the median over the same windows of the last finish less the first, is left in
 * ctx->exit_skew: how unevenly the operation lets its ranks go (a Bcast's root leaves early). */
static double window_latency(struct cl_context *ctx, enum coll_op op, size_t size, long iterations)
{
    if (iterations > MAX_WINDOWS) iterations = MAX_WINDOWS;
    if (coll.window_size != size || coll.window_s <= 0) {
        coll.window_s = first_window(ctx, op, size);
        coll.window_size = size;
    }
    double *finish = malloc((size_t)iterations * sizeof(double));
    double *last = malloc((size_t)iterations * sizeof(double));
    double *first = malloc((size_t)iterations * sizeof(double));   /* then, like `last`, the valid windows' skews */
    double latency = 0;
    for (int attempt = 0;; attempt++) {
        double start = 0;
        long valid = 0;
        if (ctx->rank == 0) start = cl_clock_to_global(&coll.clock, cl_clock_local(ctx)) + 2 * coll.window_s + 100e-6;
        MPI_Bcast(&start, 1, MPI_DOUBLE, 0, ctx->comm);
        for (long i = 0; i < iterations; i++) {
            double at = cl_clock_to_local(&coll.clock, start + (double)i * coll.window_s);
            int late = cl_clock_local(ctx) > at;
            while (cl_clock_local(ctx) < at) {}
            coll.call(ctx, op, size);
            finish[i] = late ? INFINITY : cl_clock_to_global(&coll.clock, cl_clock_local(ctx));
        }
        MPI_Reduce(finish, last, (int)iterations, MPI_DOUBLE, MPI_MAX, 0, ctx->comm);
        MPI_Reduce(finish, first, (int)iterations, MPI_DOUBLE, MPI_MIN, 0, ctx->comm);
        if (ctx->rank == 0) {
            for (long i = 0; i < iterations; i++)
                if (isfinite(last[i])) {
                    first[valid] = last[i] - first[i];
                    last[valid++] = last[i] - (start + (double)i * coll.window_s);
                }
            coll.windows += iterations;
            coll.late_windows += iterations - valid;
        }
        /* Again with windows twice as long while fewer than half were entered in time, 8 times at most;
         * every rank holds the same window length (first_window). None in time after that: the clocks'
         * model is off by more than the windows, and no latency can be given. */
        if (ctx->rank == 0 && valid == 0 && attempt >= 8) {
            fprintf(stderr, "--method window: no window of %ld entered in time by every rank, windows up to %g s: "
                            "the ranks' clocks disagree with their fitted model\n", iterations, coll.window_s);
            MPI_Abort(ctx->comm, 3);
        }
        int again = ctx->rank == 0 && 2 * valid < iterations && attempt < 8;
        MPI_Bcast(&again, 1, MPI_INT, 0, ctx->comm);
        if (ctx->rank == 0 && valid > 0) {   /* the median: a window the scheduler hit is not the call's */
            latency = median_in_place(last, valid);
            ctx->exit_skew = median_in_place(first, valid);
        }
        if (!again) break;
        coll.window_s *= 2;
    }
    free(finish);
    free(last);
    free(first);
    return latency;
}

static int is_fan_out(enum coll_op op)
{
#if CL_MPI4_CALLS
    if (op == BCAST_INIT) return 1;
#endif
    return op == BCAST || op == SCATTER || op == SCATTERV;
}

static double measure(struct cl_context *ctx, size_t size, long iterations, enum coll_op op)
{
    const char *method = ctx->params.method ? ctx->params.method
                         : (is_fan_out(op) || op == SCAN) ? "accurate" : "lower";
    if (iterations == 0) return 1;
    coll.call = ctx->params.test_late_entry > 0 ? late_call : call;
    if (strcmp(method, "lower") == 0 || ctx->nprocs == 1) {
        for (long i = 0; i < iterations; i++) coll.call(ctx, op, size);
        return 1;
    }
    if (strcmp(method, "upper") == 0) {
        for (long i = 0; i < iterations; i++) {
            coll.call(ctx, op, size);
            point_to_point_barrier(ctx);
        }
        return 1;
    }
    ctx->subtracted = 0;
    if (strcmp(method, "window") == 0) {
        ctx->measured = window_latency(ctx, op, size, iterations);
    } else if (strcmp(method, "root") == 0) {
        ctx->measured = root_time(ctx, op, size, iterations);
    } else if (op == SCAN) {
        ctx->measured = acknowledged_latency(ctx, op, size, iterations, ctx->nprocs - 1);
    } else {
        double slowest = 0;
        for (int r = 1; r < ctx->nprocs; r++) {
            double latency = acknowledged_latency(ctx, op, size, iterations, r);
            if (latency > slowest) slowest = latency;
        }
        ctx->measured = slowest;
    }
    return 0;   /* timed by the kernel itself: see ctx->measured */
}

static const char *check_method(struct cl_context *ctx, size_t max_size, int accurate_ok, int root_ok)
{
    const char *m = ctx->params.method;
    if (m && strcmp(m, "accurate") == 0 && !accurate_ok)
        return "--method accurate exists for bcast, bcast_init, scatter, scatterv and scan only (use lower and upper bounds)";
    if (m && strcmp(m, "root") == 0 && !root_ok) return "--method root exists for reduce, gather and gatherv only";
    return coll_setup(ctx, max_size);
}

/* --method window: the clocks synchronised once, their fits recorded as the kernel's info. */
static int windows_asked(struct cl_context *ctx)
{
    if (!ctx->params.method || strcmp(ctx->params.method, "window") != 0) return 0;
    coll.clock = cl_clock_sync(ctx, ctx->info, sizeof ctx->info);
    return 1;
}

const char *setup_fan_out(struct cl_context *ctx, size_t max_size)
{
    const char *problem = check_method(ctx, max_size, 1, 0);
    if (problem || windows_asked(ctx)) return problem;
    measure_acknowledgements(ctx);
    int used = snprintf(ctx->info, sizeof ctx->info, "{\"half_ack_round_trip_s\":[");
    for (int r = 1; r < ctx->nprocs && used < (int)sizeof ctx->info - 32; r++)
        used += snprintf(ctx->info + used, sizeof ctx->info - (size_t)used, "%s%.6g", r > 1 ? "," : "",
                         coll.half_ack[r]);
    snprintf(ctx->info + used, sizeof ctx->info - (size_t)used, "]}");
    return NULL;
}
const char *setup_fan_in(struct cl_context *c, size_t s)
{
    const char *problem = check_method(c, s, 0, 1);
    if (!problem) windows_asked(c);
    return problem;
}

const char *setup_bounds(struct cl_context *c, size_t s)
{
    const char *problem = check_method(c, s, 0, 0);
    if (!problem) windows_asked(c);
    return problem;
}

#define COLL(fn, op) double fn(struct cl_context *c, size_t s, long n) { return measure(c, s, n, op); }
COLL(coll_bcast, BCAST)
COLL(coll_scatter, SCATTER)
COLL(coll_scatterv, SCATTERV)
COLL(coll_scan, SCAN)
COLL(coll_reduce, REDUCE)
COLL(coll_gather, GATHER)
COLL(coll_gatherv, GATHERV)
COLL(coll_allreduce, ALLREDUCE)
COLL(coll_allgather, ALLGATHER)
COLL(coll_allgatherv, ALLGATHERV)
COLL(coll_alltoall, ALLTOALL)
COLL(coll_alltoallv, ALLTOALLV)
COLL(coll_reduce_scatter, REDUCE_SCATTER)
COLL(coll_barrier, BARRIER)
#if CL_MPI4_CALLS
COLL(coll_bcast_init, BCAST_INIT)
COLL(coll_allreduce_init, ALLREDUCE_INIT)
#endif
