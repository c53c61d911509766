/* commlens_run: the one entry point of every kernel, behind both the
 * commlens-kernels binary (program.c) and libcommlens-kernels.so.
 *
 *   mpiexec -n 2 commlens-kernels pingpong.send -m 1:4Mi -o run.jsonl
 *
 * Rank 0 times each sample (measure.c: a batch of iterations after a barrier; osu.c, with --osu: one
 * iteration), decides when a size has enough samples and writes the JSON Lines records (records.c: one
 * "run", then mpit.c's "mpi_t" (the library's control variables), one "point" per size, one "end") and what a
 * person reads (console.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commlens.h"
#include "console.h"
#include "harness.h"
#include "mpit.h"

static MPI_Datatype datatype_of(const char *name)
{
    if (strcmp(name, "int") == 0) return MPI_INT;
    if (strcmp(name, "double") == 0) return MPI_DOUBLE;
    return MPI_BYTE;
}

void cl_answer(enum cl_action action)
{
    if (action == CL_LIST) cl_list_kernels(stdout);
    if (action == CL_LIST_JSON) cl_describe_kernels(stdout, MPI_VERSION, MPI_SUBVERSION);
    if (action == CL_HELP) cl_usage(stdout);
    fflush(stdout);
}

/* Room for the samples of any one size. */
static size_t samples_room(const struct cl_options *o, const struct cl_kernel *kernel, const size_t *sizes, size_t n)
{
    if (o->timing != CL_TIMING_OSU) return (size_t)o->max_samples;
    size_t room = 1;
    for (size_t i = 0; i < n; i++) {
        long iterations, warmup;
        cl_osu_counts(o, cl_osu_kind(kernel, &o->params), sizes[i], &iterations, &warmup);
        if ((size_t)iterations > room) room = (size_t)iterations;
    }
    return room;
}

/* Everything after MPI is up: parse, set up, measure, write the records, undo the set-up.
 * Errors return the binary's exit status (2: usage or set-up, 3: memory or output) on every
 * rank alike, so a caller that keeps MPI running is never left with ranks out of step. */
static int run_kernel(struct cl_context *ctx, int argc, char **argv)
{
    struct cl_options o;
    enum cl_action action;
    const char *error = cl_parse_options(argc, argv, &o, &action);
    const struct cl_kernel *kernel = NULL;
    size_t *sizes = NULL, nsizes = 0;
    double *samples = NULL;
    FILE *out = NULL;
    int status = 0;
    char problem_text[512];
    if (!error && action != CL_MEASURE) {
        if (ctx->rank == 0) cl_answer(action);
        return 0;
    }
    if (!error && !(nsizes = cl_size_schedule(&o.schedule, &sizes)))
        error = "no sizes: the schedule between -m's MIN and MAX is empty";
    if (!error && o.print_sizes) {
        for (size_t i = 0; ctx->rank == 0 && i < nsizes; i++) printf("%zu\n", sizes[i]);
        fflush(stdout);
        free(sizes);
        return 0;
    }
    if (!error) kernel = cl_runnable_kernel(o.kernel, ctx->nprocs, 1, problem_text, sizeof problem_text);
    if (!error && !kernel) error = problem_text;
    ctx->datatype = datatype_of(o.datatype);
    ctx->type_size = cl_datatype_size(o.datatype);
    if (!error) error = cl_check_sizes(sizes, nsizes, ctx->type_size, problem_text, sizeof problem_text);
    if (!error) error = cl_check_kernel_sizes(kernel, &o.params, sizes, nsizes, ctx->type_size, problem_text,
                                              sizeof problem_text);
    if (!error && kernel->pair_times && o.timing == CL_TIMING_OSU) {
        /* --osu keeps every iteration as a sample (up to 10000 a size): with a matrix each, too much. */
        snprintf(problem_text, sizeof problem_text, "%s times every pair of ranks and has no OSU counterpart: "
                 "measure it without --osu", kernel->name);
        error = problem_text;
    }
    if (error) {
        if (ctx->rank == 0) fprintf(stderr, "commlens-kernels: %s\n", error);
        free(sizes);
        return 2;
    }
    ctx->integrity = o.integrity;
    ctx->inject_fault = o.inject_fault;
    ctx->params = o.params;
    ctx->slots_per_iteration = cl_kernel_slots(kernel, &o.params, ctx->nprocs);
    ctx->timer = o.timer;
    ctx->cache_rotate = strcmp(o.cache_mode, "rotate") == 0;
    strcpy(ctx->info, "{}");

    size_t largest = 1;
    for (size_t i = 0; i < nsizes; i++) if (sizes[i] > largest) largest = sizes[i];
    int kernel_slots = ctx->slots_per_iteration;
    size_t buffer_bytes = cl_buffer_bytes(kernel, &o, largest, ctx->nprocs);
    size_t room = samples_room(&o, kernel, sizes, nsizes);
    /* Set-up may be collective (windows, files): no rank starts it unless every rank has its buffers. */
    int failed = cl_allocate(&ctx->send, buffer_bytes, o.align) || cl_allocate(&ctx->recv, buffer_bytes, o.align);
    if (failed) fprintf(stderr, "commlens-kernels: rank %d cannot allocate 2 x %zu bytes\n", ctx->rank, buffer_bytes);
    if (!failed && ctx->rank == 0 && !(samples = malloc(2 * room * sizeof *samples))) {
        fprintf(stderr, "commlens-kernels: cannot allocate room for %zu samples of one size\n", room);
        failed = 1;
    }
    ctx->exit_skews = samples ? samples + room : NULL;   /* beside the samples: one per sample */
    size_t pair_cells = (size_t)ctx->nprocs * (size_t)ctx->nprocs;
    if (!failed && kernel->pair_times) {
        ctx->pair_times = malloc(pair_cells * sizeof *ctx->pair_times);
        if (ctx->rank == 0) ctx->pair_samples = malloc(room * pair_cells * sizeof *ctx->pair_samples);
        if (!ctx->pair_times || (ctx->rank == 0 && !ctx->pair_samples)) {
            fprintf(stderr, "commlens-kernels: rank %d cannot allocate pair times for %zu samples of %d ranks\n",
                    ctx->rank, room, ctx->nprocs);
            failed = 1;
        }
    }
    int any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_LOR, ctx->comm);
    if (any_failed) { status = 3; goto done; }
    const char *problem = kernel->setup ? kernel->setup(ctx, largest) : NULL;
    failed = problem != NULL;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_LOR, ctx->comm);
    if (any_failed) {
        if (ctx->rank == 0) fprintf(stderr, "commlens-kernels: %s: %s\n", kernel->name,
                                    problem ? problem : "set-up failed on another rank");
        status = 2;
        goto done;
    }
    if (o.shuffle_seed >= 0) cl_shuffle_sizes(sizes, nsizes, o.shuffle_seed);

    failed = 0;
    if (ctx->rank == 0 && o.output && !(out = fopen(o.output, "w"))) {
        fprintf(stderr, "commlens-kernels: cannot write %s: %s\n", o.output, strerror(errno));
        failed = 1;
    }
    if (o.json) out = stdout;
    MPI_Bcast(&failed, 1, MPI_INT, 0, ctx->comm);
    if (failed) { status = 3; goto torn_down; }

    double measuring_since = cl_now(o.timer), resolution = 0, overhead = 0;
    if (ctx->rank == 0) resolution = cl_timer_resolution(o.timer);
    overhead = cl_harness_overhead(kernel, ctx, o.timer);
    MPI_Bcast(&resolution, 1, MPI_DOUBLE, 0, ctx->comm);
    MPI_Bcast(&overhead, 1, MPI_DOUBLE, 0, ctx->comm);
    cl_write_run_record(out, &o, kernel, ctx, resolution, overhead, sizes, nsizes, buffer_bytes);
    if (ctx->rank == 0 && out) cl_write_mpi_t_record(out);   /* what the library was set to (mpit.c) */
    struct cl_console console;
    cl_console_begin(&console, &o, kernel, ctx);

    /* A sample must dwarf both the timer's tick and the cost of timing it. */
    double min_sample_time = fmax(o.min_sample_time_s, fmax(100 * resolution, 100 * overhead));
    for (size_t i = 0; i < nsizes; i++) {
        /* Rank 0 stops answering; the others block in the next barrier: a real MPI hang. */
        if (o.hang_after >= 0 && (long)i == o.hang_after)
            for (;;) {
                if (ctx->rank == 0) sleep(3600);
                else MPI_Barrier(ctx->comm);
            }
        cl_lay_out(&ctx->send, &o, sizes[i], kernel_slots);
        cl_lay_out(&ctx->recv, &o, sizes[i], kernel_slots);
        struct cl_point point;
        if (o.timing == CL_TIMING_OSU) cl_measure_size_osu(&o, kernel, ctx, sizes[i], samples, &point);
        else cl_measure_size(&o, kernel, ctx, sizes[i], min_sample_time, samples, &point);
        if (ctx->rank == 0) {
            if (out) cl_write_point_record(out, &point, o.integrity);
            cl_console_point(&console, &point);
        }
    }

    if (ctx->rank == 0 && out) cl_write_end_record(out, nsizes, cl_now(o.timer) - measuring_since);
torn_down:
    if (kernel->teardown) kernel->teardown(ctx);
done:
    if (out && out != stdout) fclose(out);
    free(samples);
    free(ctx->pair_times);
    free(ctx->pair_samples);
    ctx->pair_times = ctx->pair_samples = NULL;
    free(sizes);
    free(ctx->send.base);
    free(ctx->recv.base);
    return status;
}

int commlens_run(MPI_Comm comm, int argc, char **argv)
{
    struct cl_context ctx = {0};
    /* A communicator of its own: a caller's messages on `comm` can never match the kernel's. */
    MPI_Comm_dup(comm, &ctx.comm);
    MPI_Comm_rank(ctx.comm, &ctx.rank);
    MPI_Comm_size(ctx.comm, &ctx.nprocs);
    int status = run_kernel(&ctx, argc, argv);
    MPI_Comm_free(&ctx.comm);
    return status;
}

int commlens_run_fortran_comm(MPI_Fint comm, int argc, char **argv)
{
    return commlens_run(MPI_Comm_f2c(comm), argc, argv);
}
