/* The JSON Lines records a launch writes (the format is described in DESIGN.md and read by
 * commlens.io.raw): one "run" record, a "point" record per size, an "end" record. */
#define _GNU_SOURCE
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

#define NAME_LEN 256

static void cpu_binding(char *out, size_t len)
{
    cpu_set_t set;
    out[0] = '\0';
    if (sched_getaffinity(0, sizeof set, &set) != 0) { snprintf(out, len, "unknown"); return; }
    size_t used = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE && used + 8 < len; cpu++)
        if (CPU_ISSET(cpu, &set))
            used += (size_t)snprintf(out + used, len - used, "%s%d", used ? "," : "", cpu);
}

static void iso_now(char *out, size_t len)
{
    time_t now = time(NULL);
    strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
}

void cl_write_run_record(FILE *out, const struct cl_options *o, const struct cl_kernel *kernel,
                         const struct cl_context *ctx, double resolution, double overhead,
                         const size_t *sizes, size_t nsizes, size_t buffer_bytes)
{
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int version_len;
    MPI_Get_library_version(version, &version_len);

    char name[NAME_LEN] = {0}, binding[NAME_LEN] = {0};
    int name_len;
    MPI_Get_processor_name(name, &name_len);
    cpu_binding(binding, sizeof binding);
    char *names = NULL, *bindings = NULL;
    if (ctx->rank == 0) {
        names = calloc((size_t)ctx->nprocs, NAME_LEN);
        bindings = calloc((size_t)ctx->nprocs, NAME_LEN);
    }
    MPI_Gather(name, NAME_LEN, MPI_CHAR, names, NAME_LEN, MPI_CHAR, 0, ctx->comm);
    MPI_Gather(binding, NAME_LEN, MPI_CHAR, bindings, NAME_LEN, MPI_CHAR, 0, ctx->comm);
    if (ctx->rank != 0 || !out) {
        free(names);
        free(bindings);
        return;
    }

    char started[32];
    iso_now(started, sizeof started);
    fprintf(out, "{\"record\":\"run\",\"schema\":%d,\"kernel\":", CL_RECORD_SCHEMA);
    cl_json_string(out, kernel->name);
    fputs(",\"metric\":", out);
    cl_json_string(out, kernel->metric);
    fputs(",\"description\":", out);   /* the kernel's catalogue entry, as this build has it */
    cl_describe_kernel(out, kernel, MPI_VERSION, MPI_SUBVERSION);
    fputs(",\"library_version\":", out);
    cl_json_string(out, version);
    fprintf(out, ",\"nprocs\":%d,\"hosts\":[", ctx->nprocs);
    for (int r = 0; r < ctx->nprocs; r++) {
        if (r) fputc(',', out);
        cl_json_string(out, names + (size_t)r * NAME_LEN);
    }
    fputs("],\"cpu_binding\":[", out);
    for (int r = 0; r < ctx->nprocs; r++) {
        if (r) fputc(',', out);
        cl_json_string(out, bindings + (size_t)r * NAME_LEN);
    }
    fputs("],\"timer\":", out);
    cl_json_string(out, cl_timer_name(o->timer));
    fprintf(out, ",\"timer_resolution_s\":%.6g,\"harness_overhead_s\":%.6g,\"started\":\"%s\","
                 "\"kernel_info\":%s", resolution, overhead, started, ctx->info);
    fputs(",\"args\":{\"schedule\":", out);
    cl_json_string(out, o->schedule.name);
    fputs(",\"order\":[", out);
    for (size_t i = 0; i < nsizes; i++) fprintf(out, "%s%zu", i ? "," : "", sizes[i]);
    /* What -i and -x meant: --osu's iterations and warm-up up to 8 KiB and above it; the default
     * timing's warm-up and timed iterations (0: as many as the precision target takes) at every size. */
    long iterations[2] = {o->iterations, o->iterations}, warmup[2] = {o->warmup, o->warmup};
    char large_above[32] = "null";
    if (o->timing == CL_TIMING_OSU) {
        snprintf(large_above, sizeof large_above, "%d", CL_OSU_LARGE_MESSAGE_SIZE);
        enum cl_osu_kind kind = cl_osu_kind(kernel, &o->params);
        cl_osu_counts(o, kind, 1, &iterations[0], &warmup[0]);
        cl_osu_counts(o, kind, CL_OSU_LARGE_MESSAGE_SIZE + 1, &iterations[1], &warmup[1]);
    }
    fprintf(out, "],\"shuffle_seed\":%ld,\"timing\":\"%s\",\"warmup\":%ld,\"iterations\":%ld,"
                 "\"warmup_large\":%ld,\"iterations_large\":%ld,\"large_above\":%s,"
                 "\"rse_of\":\"median\",\"rse\":%.6g,"
                 "\"min_samples\":%d,\"max_samples\":%d,\"max_point_time_s\":%.6g,"
                 "\"min_sample_time_s\":%.6g,\"cache\":\"%s\",\"buffer_bytes\":%zu,\"align\":%zu,"
                 "\"datatype\":\"%s\",\"integrity\":%s,\"inject_fault\":%s,\"window\":%d,\"window_buffers\":\"%s\","
                 "\"messages\":%d,\"pieces\":%d,\"partitions\":%d,\"rma_sync\":\"%s\",\"halo\":\"%s\",\"nodes\":%d,"
                 "\"proc_grid\":[%d,%d],\"method\":\"%s\",\"io_sync\":%s,\"drop_cache\":%s}}\n",
            o->shuffle_seed, o->timing == CL_TIMING_OSU ? "osu" : "precision", warmup[0], iterations[0], warmup[1],
            iterations[1], large_above, o->rse_target, o->min_samples,
            o->max_samples, o->max_point_time_s, o->min_sample_time_s, o->cache_mode, buffer_bytes,
            o->align, o->datatype, o->integrity ? "true" : "false", o->inject_fault ? "true" : "false",
            o->params.window, o->params.distinct_window ? "distinct" : "shared", o->params.messages, o->params.pieces,
            o->params.partitions, o->params.sync, o->params.halo,
            o->params.nodes, o->params.proc_grid[0], o->params.proc_grid[1],
            o->params.method ? o->params.method : "default", o->params.io_sync ? "true" : "false",
            o->params.drop_cache ? "true" : "false");
    fflush(out);
    free(names);
    free(bindings);
}

void cl_write_point_record(FILE *out, const struct cl_point *p, int integrity)
{
    fprintf(out, "{\"record\":\"point\",\"size\":%zu,\"iters_per_sample\":%ld,\"settled\":%s,"
                 "\"rse\":%.6g,\"errors\":",
            p->size, p->iterations, p->settled ? "true" : "false", isfinite(p->rse) ? p->rse : -1.0);
    if (integrity) fprintf(out, "%ld", p->errors);
    else fputs("null", out);
    if (p->subtracted > 0) fprintf(out, ",\"subtracted_s\":%.6g", p->subtracted);
    if (p->short_dropped > 0) fprintf(out, ",\"short_samples_dropped\":%d", p->short_dropped);
    fputs(",\"samples\":[", out);
    for (int i = 0; i < p->n; i++) fprintf(out, "%s%.9g", i ? "," : "", p->samples[i]);
    if (p->exit_skews) {
        fputs("],\"exit_skew_s\":[", out);
        for (int i = 0; i < p->n; i++) fprintf(out, "%s%.9g", i ? "," : "", p->exit_skews[i]);
    }
    if (p->pair_samples) {
        /* Per sample, the matrix source x destination, row after row; null where no pair was timed (a
         * rank and itself). */
        fputs("],\"pair_times_s\":[", out);
        size_t cells = (size_t)p->nprocs * (size_t)p->nprocs;
        for (int i = 0; i < p->n; i++) {
            fputs(i ? ",[" : "[", out);
            for (size_t c = 0; c < cells; c++) {
                double t = p->pair_samples[(size_t)i * cells + c];
                if (t > 0) fprintf(out, "%s%.9g", c ? "," : "", t);
                else fprintf(out, "%snull", c ? "," : "");
            }
            fputc(']', out);
        }
    }
    fputs("]}\n", out);
    fflush(out);
}

void cl_write_end_record(FILE *out, size_t points, double elapsed_s)
{
    char finished[32];
    iso_now(finished, sizeof finished);
    fprintf(out, "{\"record\":\"end\",\"status\":\"ok\",\"points\":%zu,\"finished\":\"%s\","
                 "\"elapsed_s\":%.6f}\n", points, finished, elapsed_s);
    fflush(out);
}
