/* The stopping rule: sample until the median, the statistic a point reports, is known to a relative
 * standard error of `rse_target`, taking at least min_samples and at most max_samples, and no longer
 * than the time cap.  Pure C, no MPI, so tests can drive it.
 *
 * The median's standard error comes two ways, and the larger counts:
 * - from the order statistics: the distribution-free 95% interval of a median runs between the samples
 *   of rank n/2 -+ 1.96 sqrt(n)/2, so half its width over 1.96 is a standard error that holds for any
 *   shape of noise, heavy tails included (a mean's sd/sqrt(n) does not: one rare delay moves it);
 * - from batch medians, once there are MIN_BATCHES batches of two samples or more: the samples, in the
 *   order taken, cut into about sqrt(n) runs; the spread of the runs' medians over sqrt(batches).
 *   Samples that follow each other are alike on a real machine (a neighbour's burst, a frequency
 *   step), which makes the order statistics too optimistic; runs long compared with that memory are
 *   nearly independent, and their spread shows it.
 * Working it out sorts the samples, so it is done again only when they have grown by a tenth. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stopping.h"

enum { MIN_BATCHES = 5, EVERY_SAMPLE_BELOW = 64 };
static const double Z95 = 1.959964;

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of values[0..n-1], which it sorts. */
static double sorted_median(double *values, int n)
{
    qsort(values, (size_t)n, sizeof *values, by_value);
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double cl_median_rse(const double *samples, int n)
{
    if (n < 2) return INFINITY;
    double *work = malloc((size_t)n * sizeof *work);
    if (!work) return INFINITY;   /* no estimate: the rule samples on, to its caps */
    memcpy(work, samples, (size_t)n * sizeof *work);
    double median = sorted_median(work, n);
    if (!(median > 0)) {
        free(work);
        return INFINITY;
    }
    double reach = Z95 * sqrt((double)n) / 2;
    int low = (int)floor(n / 2.0 - reach), high = (int)ceil(n / 2.0 + reach);
    if (low < 0) low = 0;
    if (high > n - 1) high = n - 1;
    double se = (work[high] - work[low]) / (2 * Z95);
    int length = (int)sqrt((double)n), batches = length > 1 ? n / length : 0;
    if (batches >= MIN_BATCHES) {
        double sum = 0, squares = 0;
        for (int b = 0; b < batches; b++) {
            memcpy(work, samples + (size_t)b * (size_t)length, (size_t)length * sizeof *work);
            double m = sorted_median(work, length);
            sum += m;
            squares += m * m;
        }
        double mean = sum / batches, variance = (squares - batches * mean * mean) / (batches - 1);
        double batch_se = variance > 0 ? sqrt(variance / batches) : 0;
        if (batch_se > se) se = batch_se;
    }
    free(work);
    return se / median;
}

void cl_running_add(struct cl_running *r, double x)
{
    double delta = x - r->mean;
    r->n++;
    r->mean += delta / r->n;          /* Welford: stable running mean and variance */
    r->m2 += delta * (x - r->mean);
    if (r->n < 2) r->median_rse = INFINITY;
}

void cl_running_check(struct cl_running *r, const double *samples)
{
    if (r->n < 2 || r->n == r->checked) return;
    if (r->n >= EVERY_SAMPLE_BELOW && r->n < r->checked + r->checked / 10) return;
    r->median_rse = cl_median_rse(samples, r->n);
    r->checked = r->n;
}

double cl_running_rse(const struct cl_running *r)
{
    return r->n < 2 ? INFINITY : r->median_rse;
}

int cl_running_settled(const struct cl_running *r, const struct cl_stopping_rule *rule)
{
    return r->n >= rule->min_samples && cl_running_rse(r) <= rule->rse_target;
}

int cl_sampling_done(const struct cl_running *r, const struct cl_stopping_rule *rule, double elapsed_s)
{
    return cl_running_settled(r, rule) || r->n >= rule->max_samples || elapsed_s >= rule->max_time_s;
}

int cl_stopping_simulate(const double *samples, int available, double rse_target, int min_samples,
                         int max_samples, double max_time_s, double *rse, int *settled)
{
    struct cl_stopping_rule rule = {rse_target, min_samples, max_samples, max_time_s};
    struct cl_running r = {0};
    double elapsed = 0;
    while (r.n < available) {
        cl_running_add(&r, samples[r.n]);
        cl_running_check(&r, samples);
        elapsed += samples[r.n - 1];
        if (cl_sampling_done(&r, &rule, elapsed)) break;
    }
    /* What the point records: the median's precision over every sample it kept. */
    if (r.n != r.checked) {
        r.median_rse = cl_median_rse(samples, r.n);
        r.checked = r.n;
    }
    *rse = cl_running_rse(&r);
    *settled = cl_running_settled(&r, &rule);
    return r.n;
}
