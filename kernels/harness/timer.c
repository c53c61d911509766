#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "harness.h"

double cl_now(enum cl_timer timer)
{
    if (timer == CL_TIMER_CLOCK_MONOTONIC) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    }
    return MPI_Wtime();
}

/* Holds the core for `seconds` of `timer`: a wait that keeps the rank running where it is (a sleep would
 * give the core away, and waking again takes longer than the microseconds the kernels wait). */
void cl_spin(enum cl_timer timer, double seconds)
{
    double until = cl_now(timer) + seconds;
    while (cl_now(timer) < until) {}
}

const char *cl_timer_name(enum cl_timer timer)
{
    return timer == CL_TIMER_CLOCK_MONOTONIC ? "clock_gettime(CLOCK_MONOTONIC)" : "MPI_Wtime";
}
