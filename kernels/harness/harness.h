/* commlens harness: the one place that owns timing, sizes, repetitions, buffers
 * and output records.  A kernel owns only its communication pattern. */
#ifndef COMMLENS_HARNESS_H
#define COMMLENS_HARNESS_H

#include <mpi.h>
#include <stddef.h>
#include <stdio.h>

#include "buffers.h"
#include "catalogue.h"
#include "options.h"
#include "stopping.h"

#define CL_RECORD_SCHEMA 1

/* What a kernel sees. */
struct cl_context {
    MPI_Comm comm;
    int rank;
    int nprocs;
    MPI_Datatype datatype; /* MPI_BYTE, MPI_INT or MPI_DOUBLE: sizes stay in bytes */
    size_t type_size;
    struct cl_buffer send, recv;
    struct cl_params params;
    int slots_per_iteration; /* message buffers one iteration uses (the kernel's slots) */
    int cache_rotate;        /* --cache rotate: buffers cycle through more slots than a kernel uses */
    int integrity;         /* fill and check every message, counting errors */
    int inject_fault;      /* corrupt one byte per batch: proves the check works */
    long errors;
    long iteration_base;   /* added to a batch's own iteration numbers in integrity patterns (--osu) */
    void *state;           /* a kernel's own, from setup to teardown */
    int timer;             /* the enum cl_timer in use, for kernels that time themselves */
    /* A kernel that times itself returns 0 from run() and leaves here, on rank 0, the
     * metric for the batch and, where it has one, an overhead measured the same way
     * that the analysis may subtract (recorded per point as subtracted_s). */
    double measured, subtracted;
    /* A kernel that gives each rank's finish (collectives timed in windows) leaves here, on rank 0, the
     * batch's exit skew: how far apart its ranks finished (NaN, set before each batch: none). The harness
     * keeps one per sample in exit_skews (rank 0, room for every sample of a size). */
    double exit_skew;
    double *exit_skews;
    /* A kernel that times pairs (pair_times in its catalogue entry) adds into pair_times[source * nprocs +
     * destination] each pair time it measured (seconds, summed over the batch's iterations; every rank has
     * the matrix, zeroed before each batch, and fills what it timed). The harness sums the ranks' matrices
     * on rank 0 after every sample and keeps one per sample, per iteration, in pair_samples (rank 0). */
    double *pair_times;
    double *pair_samples;
    long slow_batches_left; /* --test-slow-batches: of this size's batches, how many are still to be slowed */
    char info[1024];       /* a JSON object a kernel may fill in setup: recorded as kernel_info */
};

/* Message buffer number k (iteration i, message j of `slots` per iteration: k = i * slots + j). */
static inline unsigned char *cl_message(const struct cl_buffer *b, long k)
{
    unsigned char *first = b->base + b->align;
    return b->slots > 1 ? first + (size_t)((b->cursor + k) % b->slots) * b->stride : first;
}

/* Node of a rank when `nodes` nodes hold the ranks in blocks (how mpiexec and Slurm place them). */
static inline int cl_node_of(const struct cl_context *ctx, int rank)
{
    int nodes = ctx->params.nodes > 0 ? ctx->params.nodes : 1;
    int per_node = (ctx->nprocs + nodes - 1) / nodes;
    return rank / per_node;
}

static inline int cl_count(const struct cl_context *ctx, size_t size)
{
    return (int)(size / ctx->type_size);
}

/* Integrity mode: the pattern of byte j depends on the iteration and the leg of
 * the pattern, so a stale or misplaced message is caught too. */
static inline unsigned char cl_pattern(size_t j, long iteration, int leg)
{
    return (unsigned char)(j * 131u + (size_t)iteration * 7u + (size_t)leg * 101u + 1u);
}

void cl_fill_checked(struct cl_context *ctx, unsigned char *msg, size_t size, long iteration, int leg);
void cl_check_received(struct cl_context *ctx, const unsigned char *msg, size_t size, long iteration, int leg);

/* No-ops unless integrity mode is on. */
static inline void cl_fill(struct cl_context *ctx, unsigned char *msg, size_t size, long iteration, int leg)
{
    if (ctx->integrity) cl_fill_checked(ctx, msg, size, iteration, leg);
}

static inline void cl_check(struct cl_context *ctx, const unsigned char *msg, size_t size, long iteration, int leg)
{
    if (ctx->integrity) cl_check_received(ctx, msg, size, iteration, leg);
}

double cl_now(enum cl_timer timer);

/* yielding.c: waiting that leaves the core to others, for kernels whose ranks may outnumber cores (eight
 * virtual nodes on two) and share them with the processes that carry virtual nodes' links: a rank
 * spinning in MPI would keep the one being timed waiting until the scheduler takes the core from it. */
void cl_polite_barrier(MPI_Comm comm);                       /* sleeps 20 us between polls */
void cl_yielding_waitall(int count, MPI_Request *requests);  /* sched_yield between polls */
void cl_yielding_recv(void *buffer, int count, int peer, int tag, MPI_Comm comm);   /* bytes */

/* compute.c: computation for kernels that compute between their calls (the catalogue's `computes`). */
void cl_compute(long units);
/* Seconds per unit of cl_compute, the median of five runs of 10 ms at least. */
double cl_compute_unit_s(enum cl_timer timer);
/* The same, timed by commlens-kernels before MPI started (no library thread running yet) for a kernel
 * that computes; NaN where MPI was up first (libcommlens-kernels.so under mpi4py). */
extern double cl_compute_unit_s_before_mpi;
void cl_spin(enum cl_timer timer, double seconds);
const char *cl_timer_name(enum cl_timer timer);

/* One size's measurement, as its point record says it (rank 0). */
struct cl_point {
    size_t size;
    long iterations;   /* per sample */
    int n;             /* samples */
    const double *samples;
    int settled;
    double rse, mean, subtracted;
    long errors;       /* integrity errors over every rank */
    const double *exit_skews;   /* one per sample, or NULL: the kernel gave none */
    const double *pair_samples; /* nprocs x nprocs per sample (source-major), or NULL: the kernel times no pairs */
    int nprocs;
    int short_dropped; /* samples taken too short, before the size's samples started again (measure.c) */
};

/* measure.c: the default timing, to a precision target */
double cl_timer_resolution(enum cl_timer timer);
double cl_harness_overhead(const struct cl_kernel *kernel, struct cl_context *ctx, enum cl_timer timer);
/* `iterations` of the kernel, no barrier first; rank 0's elapsed time (0 on the others), *units set to
 * how many units of the kernel's metric one iteration holds. Collective. */
double cl_run_batch(const struct cl_kernel *kernel, struct cl_context *ctx, size_t size, long iterations,
                    enum cl_timer timer, double *units);
/* With -i N: the batches (samples) of a size, and *per_batch their iterations: N in --min-samples batches. */
int cl_fixed_batches(const struct cl_options *o, long *per_batch);
void cl_measure_size(const struct cl_options *o, const struct cl_kernel *kernel, struct cl_context *ctx,
                     size_t size, double min_sample_time, double *samples, struct cl_point *point);
/* After a sample of `iterations`: the ranks' pair times summed on rank 0 into sample `n`'s matrix, per
 * iteration (a no-op for a kernel that times no pairs). Collective. */
void cl_keep_pair_times(struct cl_context *ctx, long iterations, int n);
/* The point record of samples taken (rank 0), with every rank's integrity errors. Collective. */
void cl_finish_point(struct cl_context *ctx, const struct cl_stopping_rule *rule, const struct cl_running *running,
                     size_t size, long iterations, const double *samples, double subtracted, struct cl_point *point);

/* osu.c: --osu, OSU's fixed iterations, each timed on its own */
enum cl_osu_kind { CL_OSU_LATENCY, CL_OSU_BANDWIDTH, CL_OSU_COLLECTIVE };
#define CL_OSU_LARGE_MESSAGE_SIZE 8192   /* OSU's defaults change above this size (LARGE_MESSAGE_SIZE) */
/* Which of OSU's defaults a kernel takes: a stream's (a window of more than one message), a collective's,
 * or a latency test's. */
enum cl_osu_kind cl_osu_kind(const struct cl_kernel *kernel, const struct cl_params *params);
/* Timed and warm-up iterations for messages of `size`: -i and -x, or OSU's defaults. */
void cl_osu_counts(const struct cl_options *o, enum cl_osu_kind kind, size_t size, long *iterations, long *warmup);
/* `samples` has room for the iterations (cl_osu_counts). Collective; `point` filled on rank 0. */
void cl_measure_size_osu(const struct cl_options *o, const struct cl_kernel *kernel, struct cl_context *ctx,
                         size_t size, double *samples, struct cl_point *point);

/* main.c: prints what a command line that measures nothing asks for (--help, --list, --describe). */
void cl_answer(enum cl_action action);

/* records.c; the run record is collective (it gathers every rank's host and binding). */
void cl_write_run_record(FILE *out, const struct cl_options *o, const struct cl_kernel *kernel,
                         const struct cl_context *ctx, double resolution, double overhead,
                         const size_t *sizes, size_t nsizes, size_t buffer_bytes);
void cl_write_point_record(FILE *out, const struct cl_point *p, int integrity);
void cl_write_end_record(FILE *out, size_t points, double elapsed_s);

#endif
