#ifndef COMMLENS_STOPPING_H
#define COMMLENS_STOPPING_H

struct cl_stopping_rule {
    double rse_target;
    int min_samples, max_samples;
    double max_time_s;
};

struct cl_running {
    int n;
    double mean, m2;
};

void cl_running_add(struct cl_running *r, double x);
double cl_running_rse(const struct cl_running *r);
int cl_running_settled(const struct cl_running *r, const struct cl_stopping_rule *rule);
int cl_sampling_done(const struct cl_running *r, const struct cl_stopping_rule *rule, double elapsed_s);

/* Applies the rule to a given stream of samples, each taken as lasting its own
 * value in seconds; returns how many it takes.  For tests on synthetic data. */
int cl_stopping_simulate(const double *samples, int available, double rse_target, int min_samples,
                         int max_samples, double max_time_s, double *rse, int *settled);

#endif
