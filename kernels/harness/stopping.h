#ifndef COMMBENCH_STOPPING_H
#define COMMBENCH_STOPPING_H

struct cb_stopping_rule {
    double rse_target;
    int min_samples, max_samples;
    double max_time_s;
};

struct cb_running {
    int n;
    double mean, m2;
};

void cb_running_add(struct cb_running *r, double x);
double cb_running_rse(const struct cb_running *r);
int cb_running_settled(const struct cb_running *r, const struct cb_stopping_rule *rule);
int cb_sampling_done(const struct cb_running *r, const struct cb_stopping_rule *rule, double elapsed_s);

/* Applies the rule to a given stream of samples, each taken as lasting its own
 * value in seconds; returns how many it takes.  For tests on synthetic data. */
int cb_stopping_simulate(const double *samples, int available, double rse_target, int min_samples,
                         int max_samples, double max_time_s, double *rse, int *settled);

#endif
