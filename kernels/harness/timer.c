#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "harness.h"

double cb_now(enum cb_timer timer)
{
    if (timer == CB_TIMER_CLOCK_MONOTONIC) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    }
    return MPI_Wtime();
}

const char *cb_timer_name(enum cb_timer timer)
{
    return timer == CB_TIMER_CLOCK_MONOTONIC ? "clock_gettime(CLOCK_MONOTONIC)" : "MPI_Wtime";
}
