/* Computation for kernels that compute between their MPI calls (overlap, availability): a dependent
 * chain of multiply-adds the compiler cannot drop, and its rate. */
#include <math.h>
#include <stdlib.h>

#include "harness.h"

double cl_compute_unit_s_before_mpi = NAN;

static volatile double sink;

__attribute__((noinline)) void cl_compute(long units)
{
    double x = sink;
    for (long u = 0; u < units; u++)
        for (int k = 0; k < 64; k++) x = x * 0.999999 + 1e-9;
    sink = x;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Seconds per unit: units doubled until one run takes 10 ms, then the median of five such runs (the
 * median, not the fastest: the rate a computation gets over time, interruptions included). */
double cl_compute_unit_s(enum cl_timer timer)
{
    long units = 1000;
    double t0 = cl_now(timer);
    cl_compute(units);
    while (cl_now(timer) - t0 < 0.01) {
        units *= 2;
        t0 = cl_now(timer);
        cl_compute(units);
    }
    double runs[5];
    for (int i = 0; i < 5; i++) {
        t0 = cl_now(timer);
        cl_compute(units);
        runs[i] = (cl_now(timer) - t0) / (double)units;
    }
    qsort(runs, 5, sizeof runs[0], by_value);
    return runs[2];
}
