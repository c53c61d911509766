/* What a person reads while a kernel runs: without -o or --json, a table on stdout (a header naming the kernel,
 * the library and the timing, then a row per size as it is measured; with --osu, OSU's own table); otherwise a
 * line per size on stderr beside the JSON Lines. Times in us, bandwidths in MB/s (1e6 B/s). Rank 0 only.
 *
 * Every cell of a row is one word, so that `awk '{print $2}'` reads a column as it reads OSU's tables. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "console.h"

/* The statistics a row shows, from a point's samples (seconds per unit of the kernel's metric). */
struct row {
    double centre, fastest, p99;   /* centre: the median (default timing) or the mean (--osu) */
};

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of sorted values, interpolated between neighbours (numpy's default, as the dataset's). */
static double quantile(const double *sorted, int n, double q)
{
    double position = q * (n - 1);
    int below = (int)floor(position);
    if (below >= n - 1) return sorted[n - 1];
    return sorted[below] + (position - below) * (sorted[below + 1] - sorted[below]);
}

static struct row summarise(const struct cl_point *p, enum cl_timing timing)
{
    struct row r = {NAN, NAN, NAN};
    double *sorted = p->n ? malloc((size_t)p->n * sizeof *sorted) : NULL;
    if (!sorted) return r;
    memcpy(sorted, p->samples, (size_t)p->n * sizeof *sorted);
    qsort(sorted, (size_t)p->n, sizeof *sorted, compare_doubles);
    r.centre = timing == CL_TIMING_OSU ? p->mean : quantile(sorted, p->n, 0.5);
    r.fastest = sorted[0];
    r.p99 = quantile(sorted, p->n, 0.99);
    free(sorted);
    return r;
}

/* A time in us, or the bandwidth it gives in MB/s. */
static double shown(const struct cl_console *c, size_t size, double seconds)
{
    return c->bandwidth ? cl_bytes_moved(c->kernel, size, c->nprocs) / seconds / 1e6 : seconds * 1e6;
}

/* The library's version string up to its first line's first comma, blanks squeezed ("MPICH Version: 5.0.2"). */
static void library_name(char *out, size_t len)
{
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int version_len;
    MPI_Get_library_version(version, &version_len);
    size_t used = 0;
    for (const char *p = version; *p && *p != '\n' && *p != ',' && used + 1 < len; p++)
        if (!isspace((unsigned char)*p) || (used && !isspace((unsigned char)out[used - 1]))) out[used++] = *p == '\t' ? ' ' : *p;
    while (used && isspace((unsigned char)out[used - 1])) used--;
    out[used] = '\0';
}

/* --osu: OSU's own table, as osu_latency and osu_bw print it (osu_util.h, with FIELD_WIDTH 18 as OSU's configure
 * sets it), so that an old log diffs line by line against it: a blank line, the title, the datatype and the column
 * header, then per size the mean time or OSU's bandwidth (bytes over the mean time) with two decimals; with
 * --integrity, the Validation column of OSU's -c. The title alone differs from OSU's, which name their own
 * programs: it names this one and its kernel, so that no one takes the log for OSU's. */
#define OSU_SIZE_WIDTH 10
#define OSU_FIELD_WIDTH 18

static const char *osu_datatype(const char *datatype)
{
    if (strcmp(datatype, "int") == 0) return "MPI_INT";
    if (strcmp(datatype, "double") == 0) return "MPI_DOUBLE";
    return "MPI_BYTE";
}

static void osu_header(const struct cl_console *c, const struct cl_options *o)
{
    fprintf(c->table, "\n# commlens-kernels %s, timed as OSU MPI %s Test v" CL_OSU_VERSION "\n# Datatype: %s.\n",
            c->kernel->name, c->bandwidth ? "Bandwidth" : "Latency", osu_datatype(o->datatype));
    fprintf(c->table, "%-*s%*s", OSU_SIZE_WIDTH, "# Size", OSU_FIELD_WIDTH,
            c->bandwidth ? "Bandwidth (MB/s)" : "Avg Latency(us)");
    if (c->integrity) fprintf(c->table, "%*s", OSU_FIELD_WIDTH, "Validation");
    fputc('\n', c->table);
}

static void osu_row(const struct cl_console *c, const struct cl_point *p)
{
    fprintf(c->table, "%-*zu%*.2f", OSU_SIZE_WIDTH, p->size, OSU_FIELD_WIDTH, shown(c, p->size, p->mean));
    if (c->integrity) fprintf(c->table, "%*s", OSU_FIELD_WIDTH, p->errors ? "Fail" : "Pass");
    fputc('\n', c->table);
}

void cl_console_begin(struct cl_console *c, const struct cl_options *o, const struct cl_kernel *kernel,
                      const struct cl_context *ctx)
{
    *c = (struct cl_console){.table = o->output || o->json ? NULL : stdout, .progress = stderr, .kernel = kernel,
                             .bandwidth = cl_reads_as_bandwidth(kernel, o->params.window), .nprocs = ctx->nprocs,
                             .timing = o->timing, .integrity = o->integrity};
    if (ctx->rank != 0 || !c->table) return;
    if (o->timing == CL_TIMING_OSU) {
        osu_header(c, o);
        fflush(c->table);
        return;
    }
    char library[128];
    library_name(library, sizeof library);
    fprintf(c->table, "# commlens-kernels %s: %s\n# %s, %d ranks\n", kernel->name, kernel->metric, library, ctx->nprocs);
    if (o->iterations) {
        long per_batch;
        int batches = cl_fixed_batches(o, &per_batch);
        fprintf(c->table, "# timing: precision: the median of %d timed batches of %ld iterations (-i %ld in "
                          "--min-samples batches; --osu: OSU's mean of single iterations)\n",
                batches, per_batch, o->iterations);
    } else {
        fprintf(c->table, "# timing: precision: the median of timed batches, sampled until the mean's relative "
                          "standard error is at most %g%% (--osu: OSU's mean of single iterations)\n",
                100 * o->rse_target);
    }
    const char *headings[3] = {"Median(us)", "Min(us)", "P99(us)"};
    if (c->bandwidth) {
        fputs("# MB/s = 1e6 B/s; best: from the fastest sample; P99: from the 99th-percentile time\n", c->table);
        headings[0] = "MB/s(median)", headings[1] = "MB/s(best)", headings[2] = "MB/s(P99)";
    }
    fputs("# Settled: whether the point met the precision target; RSE(%): the relative standard error of its median\n",
          c->table);
    fprintf(c->table, "# %-8s %14s %14s %14s %8s  %-7s  %6s%s\n", "Size", headings[0], headings[1], headings[2],
            "Samples", "Settled", "RSE(%)", c->integrity ? "  Errors" : "");
    fflush(c->table);
}

void cl_console_point(const struct cl_console *c, const struct cl_point *p)
{
    if (c->table && c->timing == CL_TIMING_OSU) {
        osu_row(c, p);
        fflush(c->table);
        return;
    }
    struct row r = summarise(p, c->timing);
    if (c->table) {
        char rse[16] = "-";   /* where the samples give none (fewer than two, or no positive mean) */
        if (isfinite(p->rse)) snprintf(rse, sizeof rse, "%.2f", 100 * p->rse);
        fprintf(c->table, "%-10zu %14.2f %14.2f %14.2f %8d  %-7s  %6s", p->size, shown(c, p->size, r.centre),
                shown(c, p->size, r.fastest), shown(c, p->size, r.p99), p->n, p->settled ? "yes" : "no", rse);
        if (c->integrity) fprintf(c->table, "  %6ld", p->errors);
        fputc('\n', c->table);
        fflush(c->table);
        return;
    }
    char settled[32];
    if (p->settled) snprintf(settled, sizeof settled, "yes");
    else if (isfinite(p->rse)) snprintf(settled, sizeof settled, "no (rse %.1f%%)", 100 * p->rse);
    else snprintf(settled, sizeof settled, "no");
    const char *unit = c->bandwidth ? "MB/s" : "us", *centre = c->timing == CL_TIMING_OSU ? "mean" : "median";
    fprintf(c->progress, "%s %zu B: %s %.2f %s, %s %.2f %s, P99 %.2f %s; ", c->kernel->name, p->size, centre,
            shown(c, p->size, r.centre), unit, c->bandwidth ? "best" : "min", shown(c, p->size, r.fastest), unit,
            shown(c, p->size, r.p99), unit);
    if (c->timing == CL_TIMING_OSU) fprintf(c->progress, "%d iterations timed one by one", p->n);
    else fprintf(c->progress, "%d samples of %ld iteration%s", p->n, p->iterations, p->iterations == 1 ? "" : "s");
    fprintf(c->progress, ", settled: %s%s\n", settled, p->errors ? ", INTEGRITY ERRORS" : "");
}
