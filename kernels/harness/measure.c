/* Measuring: the timer's resolution, the harness's own overhead, calibrating a sample's
 * iterations, and sampling one size until the stopping rule says enough. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "stopping.h"

#define MAX_ITERATIONS_PER_SAMPLE 100000000L
/* A sample shorter than this share of the minimum sample time shows that every batch the calibration
 * timed was slowed (another process held the core throughout): the size's samples start again, with
 * iterations enough at the rate this sample ran. Half: what the timer and the barrier before a batch may
 * take from a sample calibrated at its target without it being short. */
#define SHORT_SAMPLE 0.5
/* --test-slow-batches: what a slowed batch is read to have taken more, about a scheduler's time slice when
 * the core is shared. */
#define CL_SLOW_BATCH_S 2e-3

/* Smallest nonzero step the timer shows. */
double cl_timer_resolution(enum cl_timer timer)
{
    double best = INFINITY;
    for (int i = 0; i < 1000; i++) {
        double t0 = cl_now(timer), t1;
        while ((t1 = cl_now(timer)) == t0) {}
        if (t1 - t0 < best) best = t1 - t0;
    }
    return best;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* What the timed region costs with nothing in it: the median of up to 1001 empty samples.
 * Fewer when barriers are slow (ranks oversubscribed on cores take milliseconds each): past
 * a time budget rank 0 stops, between batches and for every rank, so all call the same
 * number of barriers. */
double cl_harness_overhead(const struct cl_kernel *kernel, struct cl_context *ctx, enum cl_timer timer)
{
    enum { N = 1001, BATCH = 25 };
    const double budget_s = 0.2;
    static double t[N];
    double since = cl_now(timer);
    int n = 0, more = 1;
    while (more) {
        for (int j = 0; j < BATCH && n < N; j++, n++) {
            MPI_Barrier(ctx->comm);
            double t0 = cl_now(timer);
            (void)kernel->run(ctx, 0, 0);
            t[n] = cl_now(timer) - t0;
        }
        more = n < N && cl_now(timer) - since < budget_s;
        MPI_Bcast(&more, 1, MPI_INT, 0, ctx->comm);
    }
    qsort(t, (size_t)n, sizeof t[0], compare_doubles);
    return t[n / 2];
}

double cl_run_batch(const struct cl_kernel *kernel, struct cl_context *ctx, size_t size, long iterations,
                    enum cl_timer timer, double *units)
{
    /* Only rank 0 reads the clock, as OSU's loops do: the others' timer calls would sit in its round trips. */
    ctx->exit_skew = NAN;   /* before the clock starts: nothing but the kernel is timed */
    if (ctx->pair_times) memset(ctx->pair_times, 0, (size_t)ctx->nprocs * (size_t)ctx->nprocs * sizeof *ctx->pair_times);
    double t0 = ctx->rank == 0 ? cl_now(timer) : 0;
    double per_iteration = kernel->run(ctx, size, iterations);
    double elapsed = ctx->rank == 0 ? cl_now(timer) - t0 : 0;
    if (ctx->rank == 0 && ctx->slow_batches_left > 0) {   /* read after the clock: nothing else is timed */
        ctx->slow_batches_left--;
        elapsed += CL_SLOW_BATCH_S;
    }
    if (units) *units = per_iteration;
    /* Every rank ran the same iterations, so every rank's cursors stay in step. */
    ctx->send.cursor = (ctx->send.cursor + iterations * ctx->slots_per_iteration) % ctx->send.slots;
    ctx->recv.cursor = (ctx->recv.cursor + iterations * ctx->slots_per_iteration) % ctx->recv.slots;
    return elapsed;
}

/* A sample: a barrier, then a batch. */
static double timed_batch(const struct cl_kernel *kernel, struct cl_context *ctx,
                          size_t size, long iterations, enum cl_timer timer, double *units)
{
    MPI_Barrier(ctx->comm);
    return cl_run_batch(kernel, ctx, size, iterations, timer, units);
}

/* How long a batch of `n` iterations lasted, as the calibration reads it: a kernel that times itself
 * (units 0) may spend more around its timed part (starting threads, measuring acknowledgements), so what
 * it timed. */
static double batch_seconds(const struct cl_context *ctx, double elapsed, double units, long n)
{
    return units > 0 ? elapsed : ctx->measured * (double)n;
}

/* Iterations that make a batch of `n` that lasted `lasted` seconds last 20% past `target`, growing at
 * most `growth` times (0 s: by `growth`), and no more than MAX_ITERATIONS_PER_SAMPLE. */
static long iterations_for(double target, long n, double lasted, double growth)
{
    double want = lasted > 0 ? ceil(1.2 * (double)n * target / lasted) : growth * (double)n;
    if (want > growth * (double)n) want = growth * (double)n;
    return want > MAX_ITERATIONS_PER_SAMPLE ? MAX_ITERATIONS_PER_SAMPLE : (long)want;
}

/* Iterations per sample so that one sample lasts at least `target` seconds at the fastest rate seen:
 * another process taking the core only ever slows a batch down, so a slow moment while calibrating
 * must not leave later samples short, and the rate comes from CALIBRATION_BATCHES batches at least
 * (two slow ones alone would settle on a single iteration). Two batches in a row must reach the target:
 * a first batch that is slow only because it ran cold would otherwise leave every later sample too short. */
static long calibrate(const struct cl_kernel *kernel, struct cl_context *ctx,
                      size_t size, double target, enum cl_timer timer)
{
    enum { CALIBRATION_BATCHES = 5 };
    long decision[2] = {1, 0}; /* iterations, done */
    int reached_once = 0, batches = 0;
    double fastest = INFINITY;  /* seconds per iteration of the fastest batch so far (rank 0) */
    while (!decision[1]) {
        long n = decision[0];
        double units, elapsed = timed_batch(kernel, ctx, size, n, timer, &units);
        if (ctx->rank == 0) {
            fastest = fmin(fastest, batch_seconds(ctx, elapsed, units, n) / (double)n);
            double expected = fastest * (double)n;
            batches++;
            if (expected >= target || n >= MAX_ITERATIONS_PER_SAMPLE) {
                decision[1] = reached_once && batches >= CALIBRATION_BATCHES;
                reached_once = 1;
            } else {
                reached_once = 0;
                long next = iterations_for(target, n, expected, 16);
                decision[0] = next > n ? next : n + 1;   /* n < MAX_ITERATIONS_PER_SAMPLE here */
            }
        }
        MPI_Bcast(decision, 2, MPI_LONG, 0, ctx->comm);
    }
    return decision[0];
}

int cl_fixed_batches(const struct cl_options *o, long *per_batch)
{
    *per_batch = o->iterations >= o->min_samples ? o->iterations / o->min_samples : 1;
    long batches = o->iterations / *per_batch;
    return batches < o->max_samples ? (int)batches : o->max_samples;
}

/* Samples one size: without -i, in calibrated batches until the mean is known to the target
 * precision, the sample limit is reached or the time cap for one size is spent; with -i N, N
 * iterations in --min-samples batches (fewer samples where N is smaller, then the point is not settled),
 * within the same time cap. Collective; `point` is filled on rank 0, its samples in `samples` (room for
 * --max-samples). */
void cl_measure_size(const struct cl_options *o, const struct cl_kernel *kernel, struct cl_context *ctx,
                     size_t size, double min_sample_time, double *samples, struct cl_point *point)
{
    ctx->errors = 0;
    ctx->iteration_base = 0;
    ctx->slow_batches_left = ctx->params.test_slow_batches;
    if (o->warmup) timed_batch(kernel, ctx, size, o->warmup, o->timer, NULL);
    long iterations;
    int planned = 0;   /* with -i, the batches; else the stopping rule says when */
    if (o->iterations) planned = cl_fixed_batches(o, &iterations);
    else iterations = calibrate(kernel, ctx, size, min_sample_time, o->timer);
    struct cl_stopping_rule rule = {o->rse_target, o->min_samples, o->max_samples, o->max_point_time_s};
    struct cl_running running = {0};
    double started = cl_now(o->timer), subtracted = 0;
    int short_dropped = 0;
    long next[2] = {1, iterations};   /* (rank 0's word) whether to take another sample, and its iterations */
    while (next[0]) {
        iterations = next[1];
        double units, elapsed = timed_batch(kernel, ctx, size, iterations, o->timer, &units);
        if (ctx->rank == 0) {
            samples[running.n] = units > 0 ? elapsed / ((double)iterations * units) : ctx->measured;
            subtracted += units > 0 ? 0 : ctx->subtracted;
            ctx->exit_skews[running.n] = ctx->exit_skew;
        }
        cl_keep_pair_times(ctx, iterations, running.n);
        if (ctx->rank == 0) {
            double spent = cl_now(o->timer) - started;
            double lasted = batch_seconds(ctx, elapsed, units, iterations);
            if (!o->iterations && lasted < SHORT_SAMPLE * min_sample_time && iterations < MAX_ITERATIONS_PER_SAMPLE
                && spent < o->max_point_time_s) {
                next[1] = iterations_for(min_sample_time, iterations, lasted, 1000);
                short_dropped += running.n + 1;
                running = (struct cl_running){0};
                subtracted = 0;
            } else {
                cl_running_add(&running, samples[running.n]);
                cl_running_check(&running, samples);
                next[0] = o->iterations ? running.n < planned && spent < o->max_point_time_s
                                        : !cl_sampling_done(&running, &rule, spent);
            }
        }
        MPI_Bcast(next, 2, MPI_LONG, 0, ctx->comm);
    }
    cl_finish_point(ctx, &rule, &running, size, iterations, samples, subtracted, point);
    point->short_dropped = short_dropped;
}

void cl_keep_pair_times(struct cl_context *ctx, long iterations, int n)
{
    if (!ctx->pair_times) return;
    size_t cells = (size_t)ctx->nprocs * (size_t)ctx->nprocs;
    double *kept = ctx->rank == 0 ? ctx->pair_samples + (size_t)n * cells : NULL;
    MPI_Reduce(ctx->pair_times, kept, (int)cells, MPI_DOUBLE, MPI_SUM, 0, ctx->comm);
    for (size_t i = 0; kept && i < cells; i++) kept[i] /= (double)iterations;
}

void cl_finish_point(struct cl_context *ctx, const struct cl_stopping_rule *rule, const struct cl_running *running,
                     size_t size, long iterations, const double *samples, double subtracted, struct cl_point *point)
{
    long errors = 0;
    MPI_Reduce(&ctx->errors, &errors, 1, MPI_LONG, MPI_SUM, 0, ctx->comm);
    /* The precision the point records is its median's over every sample it kept, worked out afresh: the
     * rule checks it only as the samples grow by a tenth. */
    struct cl_running final = *running;
    if (ctx->rank == 0 && final.n >= 2 && final.n != final.checked) {
        final.median_rse = cl_median_rse(samples, final.n);
        final.checked = final.n;
    }
    running = &final;
    int skews = 0;   /* a kernel gives an exit skew for every sample of a size or for none */
    for (int i = 0; ctx->rank == 0 && i < running->n; i++) skews |= isfinite(ctx->exit_skews[i]);
    *point = (struct cl_point){.size = size, .iterations = iterations, .n = running->n, .samples = samples,
                               .settled = cl_running_settled(running, rule), .rse = cl_running_rse(running),
                               .mean = running->mean, .subtracted = running->n ? subtracted / running->n : 0,
                               .errors = errors, .exit_skews = skews ? ctx->exit_skews : NULL,
                               .pair_samples = ctx->pair_times ? ctx->pair_samples : NULL, .nprocs = ctx->nprocs};
}
