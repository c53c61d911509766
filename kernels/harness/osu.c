/* --osu: one size measured as osu_latency and osu_bw measure it (OSU Micro-Benchmarks 7.4), so that
 * numbers can be held side by side with theirs: after a barrier, the warm-up iterations, then every
 * timed iteration on its own between two timer calls on rank 0, with no barrier between iterations;
 * OSU reports the mean. Each iteration's time is kept as a sample (iters_per_sample 1), so the mean of
 * a point's samples is OSU's number. */
#include "harness.h"

/* OSU 7.4's defaults (osu_util.h): iterations and warm-up up to 8 KiB and above it, by kind of test. */
static const struct { long iterations[2], warmup[2]; } OSU_DEFAULTS[] = {
    [CL_OSU_LATENCY] = {{10000, 1000}, {100, 10}},   /* LAT_LOOP_*, LAT_SKIP_* */
    [CL_OSU_BANDWIDTH] = {{100, 20}, {10, 2}},       /* BW_LOOP_*, BW_SKIP_* */
    [CL_OSU_COLLECTIVE] = {{1000, 100}, {100, 10}},  /* COLL_LOOP_*, COLL_SKIP_* */
};

enum cl_osu_kind cl_osu_kind(const struct cl_kernel *kernel, const struct cl_params *params)
{
    if (kernel->slots == CL_SLOTS_WINDOW && params->window > 1) return CL_OSU_BANDWIDTH;
    if (cl_kernel_tagged(kernel, "collective")) return CL_OSU_COLLECTIVE;
    return CL_OSU_LATENCY;
}

void cl_osu_counts(const struct cl_options *o, enum cl_osu_kind kind, size_t size, long *iterations, long *warmup)
{
    int large = size > CL_OSU_LARGE_MESSAGE_SIZE;
    *iterations = o->iterations ? o->iterations : OSU_DEFAULTS[kind].iterations[large];
    *warmup = o->warmup_given ? o->warmup : OSU_DEFAULTS[kind].warmup[large];
}

void cl_measure_size_osu(const struct cl_options *o, const struct cl_kernel *kernel, struct cl_context *ctx,
                         size_t size, double *samples, struct cl_point *point)
{
    long iterations, warmup;
    cl_osu_counts(o, cl_osu_kind(kernel, &o->params), size, &iterations, &warmup);
    struct cl_stopping_rule rule = {o->rse_target, o->min_samples, o->max_samples, o->max_point_time_s};
    struct cl_running running = {0};
    double subtracted = 0;
    ctx->errors = 0;
    ctx->iteration_base = 0;
    MPI_Barrier(ctx->comm);
    if (warmup) cl_run_batch(kernel, ctx, size, warmup, o->timer, NULL);
    for (long i = 0; i < iterations; i++) {
        /* Integrity patterns change from one iteration to the next, as they do within a batch. */
        ctx->iteration_base = warmup + i;
        double units, elapsed = cl_run_batch(kernel, ctx, size, 1, o->timer, &units);
        if (ctx->rank == 0) {
            samples[i] = units > 0 ? elapsed / units : ctx->measured;
            subtracted += units > 0 ? 0 : ctx->subtracted;
            ctx->exit_skews[i] = ctx->exit_skew;
            cl_running_add(&running, samples[i]);
        }
        cl_keep_pair_times(ctx, 1, (int)i);
    }
    ctx->iteration_base = 0;
    cl_finish_point(ctx, &rule, &running, size, 1, samples, subtracted, point);
}
