/* Clocks of all ranks on rank 0's time base, for operations started together (--method window).
 *
 * Each rank's clock is modelled against rank 0's as local = g + offset + drift * (g - t_ref), where g
 * is rank 0's clock and t_ref rank 0's time when the synchronisation began. The model is fitted from
 * ping-pongs with rank 0 spread over the synchronisation (the shortest of each burst: its midpoint is
 * the least disturbed), as ReproMPI's HCA does with offset and drift. The model is fitted once, at the
 * kernel's set-up, and extrapolated over the launch: the drift's error times the time since then adds to
 * the offset's (ReproMPI synchronises again between measurements; this does not yet). */
#ifndef COMMLENS_CLOCKS_H
#define COMMLENS_CLOCKS_H

#include <stddef.h>

#include "harness.h"

struct cl_clock_model {
    double offset, drift, t_ref;
};

/* This rank's clock: the run's timer, with the test's planted skew on the last rank
 * (--test-clock-offset, --test-clock-drift: ahead by offset + drift x time since synchronisation began). */
double cl_clock_local(const struct cl_context *ctx);

/* Fits every rank's model (collective over ctx->comm) and returns this rank's; rank 0 writes the fits
 * as JSON into `info`: the largest offset, drift, their stated errors and the fit's residual over every
 * rank, and each rank's (offset_s, drift, their errors, residual_s) for as many ranks as there is room. */
struct cl_clock_model cl_clock_sync(struct cl_context *ctx, char *info, size_t info_size);

static inline double cl_clock_to_global(const struct cl_clock_model *m, double local)
{
    return (local - m->offset + m->drift * m->t_ref) / (1 + m->drift);
}

static inline double cl_clock_to_local(const struct cl_clock_model *m, double global)
{
    return global + m->offset + m->drift * (global - m->t_ref);
}

#endif
