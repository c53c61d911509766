/* What a person reads while a kernel runs: without -o or --json, a table on stdout as OSU prints one
 * (a header naming the kernel, the library and the timing, then a row per size as it is measured);
 * otherwise a line per size on stderr beside the JSON Lines. Times in us, bandwidths in MB/s (1e6 B/s).
 * Rank 0 only. */
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

void cl_console_begin(struct cl_console *c, const struct cl_options *o, const struct cl_kernel *kernel,
                      const struct cl_context *ctx)
{
    *c = (struct cl_console){.table = o->output || o->json ? NULL : stdout, .progress = stderr, .kernel = kernel,
                             .bandwidth = cl_reads_as_bandwidth(kernel, o->params.window), .nprocs = ctx->nprocs,
                             .timing = o->timing, .integrity = o->integrity};
    if (ctx->rank != 0 || !c->table) return;
    char library[128];
    library_name(library, sizeof library);
    fprintf(c->table, "# commlens-kernels %s: %s\n# %s, %d ranks\n", kernel->name, kernel->metric, library, ctx->nprocs);
    if (o->timing == CL_TIMING_OSU) {
        long small[2], large[2];
        enum cl_osu_kind kind = cl_osu_kind(kernel, &o->params);
        cl_osu_counts(o, kind, 1, &small[0], &small[1]);
        cl_osu_counts(o, kind, CL_OSU_LARGE_MESSAGE_SIZE + 1, &large[0], &large[1]);
        fprintf(c->table, "# timing: osu: %ld iterations after %ld warm-up (above 8 KiB: %ld after %ld), each timed "
                          "on its own; the mean, as OSU reports\n", small[0], small[1], large[0], large[1]);
    } else if (o->iterations) {
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
    const char *centre = o->timing == CL_TIMING_OSU ? "mean" : "median";
    char headings[3][32];
    if (c->bandwidth) {
        fputs("# MB/s = 1e6 B/s; best: from the fastest sample; P99: from the 99th-percentile time\n", c->table);
        snprintf(headings[0], sizeof headings[0], "MB/s(%s)", centre);
        snprintf(headings[1], sizeof headings[1], "MB/s(best)");
        snprintf(headings[2], sizeof headings[2], "MB/s(P99)");
    } else {
        snprintf(headings[0], sizeof headings[0], "%c%s(us)", toupper((unsigned char)centre[0]), centre + 1);
        snprintf(headings[1], sizeof headings[1], "Min(us)");
        snprintf(headings[2], sizeof headings[2], "P99(us)");
    }
    fprintf(c->table, "# %-8s %14s %14s %14s %8s  %s\n", "Size", headings[0], headings[1], headings[2], "Samples",
            c->integrity ? "Settled  Errors" : "Settled");
    fflush(c->table);
}

void cl_console_point(const struct cl_console *c, const struct cl_point *p)
{
    struct row r = summarise(p, c->timing);
    char settled[32];
    if (p->settled) snprintf(settled, sizeof settled, "yes");
    else if (isfinite(p->rse)) snprintf(settled, sizeof settled, "no (rse %.1f%%)", 100 * p->rse);
    else snprintf(settled, sizeof settled, "no");
    if (c->table) {
        fprintf(c->table, "%-10zu %14.2f %14.2f %14.2f %8d  %s", p->size, shown(c, p->size, r.centre),
                shown(c, p->size, r.fastest), shown(c, p->size, r.p99), p->n, settled);
        if (c->integrity) fprintf(c->table, "  %ld", p->errors);
        fputc('\n', c->table);
        fflush(c->table);
        return;
    }
    const char *unit = c->bandwidth ? "MB/s" : "us", *centre = c->timing == CL_TIMING_OSU ? "mean" : "median";
    fprintf(c->progress, "%s %zu B: %s %.2f %s, %s %.2f %s, P99 %.2f %s; ", c->kernel->name, p->size, centre,
            shown(c, p->size, r.centre), unit, c->bandwidth ? "best" : "min", shown(c, p->size, r.fastest), unit,
            shown(c, p->size, r.p99), unit);
    if (c->timing == CL_TIMING_OSU) fprintf(c->progress, "%d iterations timed one by one", p->n);
    else fprintf(c->progress, "%d samples of %ld iteration%s", p->n, p->iterations, p->iterations == 1 ? "" : "s");
    fprintf(c->progress, ", settled: %s%s\n", settled, p->errors ? ", INTEGRITY ERRORS" : "");
}
