/* The stopping rule: sample until the mean is known to a relative standard
 * error of `rse_target`, taking at least min_samples and at most max_samples,
 * and no longer than the time cap.  Pure C, no MPI, so tests can drive it. */
#include <math.h>

#include "stopping.h"

void cl_running_add(struct cl_running *r, double x)
{
    double delta = x - r->mean;
    r->n++;
    r->mean += delta / r->n;          /* Welford: stable running mean and variance */
    r->m2 += delta * (x - r->mean);
}

double cl_running_rse(const struct cl_running *r)
{
    if (r->n < 2 || !(r->mean > 0)) return INFINITY;
    return sqrt(r->m2 / (r->n - 1) / r->n) / r->mean;
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
        elapsed += samples[r.n - 1];
        if (cl_sampling_done(&r, &rule, elapsed)) break;
    }
    *rse = cl_running_rse(&r);
    *settled = cl_running_settled(&r, &rule);
    return r.n;
}
