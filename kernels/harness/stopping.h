#ifndef COMMLENS_STOPPING_H
#define COMMLENS_STOPPING_H

struct cl_stopping_rule {
    double rse_target;
    int min_samples, max_samples;
    double max_time_s;
};

/* A point's samples so far: their running mean (what the console shows beside the median) and the
 * relative standard error of their median, the statistic a point reports and the rule stops on. */
struct cl_running {
    int n;
    double mean, m2;
    double median_rse;   /* as of `checked`: INFINITY until two samples */
    int checked;         /* the sample count median_rse was last worked out at */
};

void cl_running_add(struct cl_running *r, double x);
/* Works median_rse out again from the point's samples where it is due (see stopping.c). */
void cl_running_check(struct cl_running *r, const double *samples);
double cl_running_rse(const struct cl_running *r);
int cl_running_settled(const struct cl_running *r, const struct cl_stopping_rule *rule);
int cl_sampling_done(const struct cl_running *r, const struct cl_stopping_rule *rule, double elapsed_s);
/* The relative standard error of the median of n samples, in the order they were taken. */
double cl_median_rse(const double *samples, int n);

/* Applies the rule to a given stream of samples, each taken as lasting its own
 * value in seconds; returns how many it takes.  For tests on synthetic data. */
int cl_stopping_simulate(const double *samples, int available, double rse_target, int min_samples,
                         int max_samples, double max_time_s, double *rse, int *settled);

#endif
