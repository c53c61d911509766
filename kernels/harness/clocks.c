/* Rank clocks on rank 0's time base (see clocks.h). Stated errors: a ping-pong's midpoint is off by at
 * most half its round trip (the two legs may take different times), so each offset read is within h, the
 * largest half round trip among the bursts' shortest; the offset at t_ref is then within h + 3 standard
 * errors of the fit's intercept, and the drift within 2h / span + 3 standard errors of its slope. */
#include <math.h>
#include <stdio.h>

#include "clocks.h"

enum { ROUNDS = 12, PINGS = 20 };
#define SPACING_S 0.02   /* between bursts: the fit spans 0.22 s, enough to see a drift of 1e-4 */

static double plant_zero;   /* this rank's clock when the synchronisation began */

double cl_clock_local(const struct cl_context *ctx)
{
    double t = cl_now(ctx->timer);
    if (ctx->rank == ctx->nprocs - 1 && ctx->rank > 0)
        t += ctx->params.test_clock_offset + ctx->params.test_clock_drift * (t - plant_zero);
    return t;
}

/* Rank 0's side of one burst with `peer`: the exchange with the shortest round trip gives
 * (rank 0's midpoint, peer's clock minus it, half the round trip). */
static void burst(const struct cl_context *ctx, int peer, double *g, double *offset, double *half)
{
    double best = INFINITY;
    for (int p = 0; p < PINGS; p++) {
        double remote, t1 = cl_clock_local(ctx);
        MPI_Send(NULL, 0, MPI_BYTE, peer, 11, ctx->comm);
        MPI_Recv(&remote, 1, MPI_DOUBLE, peer, 11, ctx->comm, MPI_STATUS_IGNORE);
        double t2 = cl_clock_local(ctx);
        if (t2 - t1 < best) {
            best = t2 - t1;
            *g = (t1 + t2) / 2;
            *offset = remote - *g;
        }
    }
    *half = best / 2;
}

static void answer_burst(const struct cl_context *ctx)
{
    for (int p = 0; p < PINGS; p++) {
        MPI_Recv(NULL, 0, MPI_BYTE, 0, 11, ctx->comm, MPI_STATUS_IGNORE);
        double now = cl_clock_local(ctx);
        MPI_Send(&now, 1, MPI_DOUBLE, 0, 11, ctx->comm);
    }
}

/* Least squares of offset = a + b (g - t_ref): a, b, the residual's root mean square and the
 * standard errors of a and b. */
static void fit(const double *g, const double *offset, double t_ref, double out[5])
{
    double sx = 0, sy = 0;
    for (int k = 0; k < ROUNDS; k++) {
        sx += g[k] - t_ref;
        sy += offset[k];
    }
    double mx = sx / ROUNDS, my = sy / ROUNDS, sxx = 0, sxy = 0;
    for (int k = 0; k < ROUNDS; k++) {
        double x = g[k] - t_ref - mx;
        sxx += x * x;
        sxy += x * (offset[k] - my);
    }
    double b = sxy / sxx, a = my - b * mx, ss = 0;
    for (int k = 0; k < ROUNDS; k++) {
        double r = offset[k] - (a + b * (g[k] - t_ref));
        ss += r * r;
    }
    double s2 = ss / (ROUNDS - 2);
    out[0] = a;
    out[1] = b;
    out[2] = sqrt(ss / ROUNDS);
    out[3] = sqrt(s2 * (1.0 / ROUNDS + mx * mx / sxx));
    out[4] = sqrt(s2 / sxx);
}

struct cl_clock_model cl_clock_sync(struct cl_context *ctx, char *info, size_t info_size)
{
    struct cl_clock_model mine = {0, 0, 0};
    MPI_Barrier(ctx->comm);
    plant_zero = cl_now(ctx->timer);
    double t_ref = cl_clock_local(ctx);
    MPI_Bcast(&t_ref, 1, MPI_DOUBLE, 0, ctx->comm);
    mine.t_ref = t_ref;
    /* Rank 0: the largest of each over every rank (what Methods states), and each rank's fit for as
     * many ranks as the record has room for. */
    double worst[5] = {0, 0, 0, 0, 0};   /* |offset|, offset error, |drift|, drift error, residual */
    char ranks[700] = "";   /* with the rest, within the kernel's 1024-byte info */
    int used = 0, listed = 0;
    for (int peer = 1; peer < ctx->nprocs; peer++) {
        double g[ROUNDS], offset[ROUNDS], half[ROUNDS];
        for (int k = 0; k < ROUNDS; k++) {
            if (ctx->rank == 0) {
                burst(ctx, peer, &g[k], &offset[k], &half[k]);
                if (k + 1 < ROUNDS) cl_spin(ctx->timer, SPACING_S);
            } else if (ctx->rank == peer) {
                answer_burst(ctx);
            }
        }
        if (ctx->rank == 0) {
            double f[5], h = 0;
            fit(g, offset, t_ref, f);
            for (int k = 0; k < ROUNDS; k++) h = half[k] > h ? half[k] : h;
            double span = g[ROUNDS - 1] - g[0];
            double fitted[5] = {fabs(f[0]), h + 3 * f[3], fabs(f[1]), 2 * h / span + 3 * f[4], f[2]};
            for (int i = 0; i < 5; i++) worst[i] = fitted[i] > worst[i] ? fitted[i] : worst[i];
            MPI_Send(f, 2, MPI_DOUBLE, peer, 12, ctx->comm);
            int n = snprintf(ranks + used, sizeof ranks - (size_t)used,
                             "%s{\"rank\":%d,\"offset_s\":%.9g,\"offset_error_s\":%.3g,\"drift\":%.6g,"
                             "\"drift_error\":%.3g,\"residual_s\":%.3g}", listed ? "," : "", peer, f[0],
                             fitted[1], f[1], fitted[3], f[2]);
            if (n > 0 && used + n < (int)sizeof ranks) {
                used += n;
                listed++;
            } else {
                ranks[used] = '\0';
            }
        } else if (ctx->rank == peer) {
            double f[2];
            MPI_Recv(f, 2, MPI_DOUBLE, 0, 12, ctx->comm, MPI_STATUS_IGNORE);
            mine.offset = f[0];
            mine.drift = f[1];
        }
    }
    if (ctx->rank == 0)
        snprintf(info, info_size, "{\"clock_sync\":{\"rounds\":%d,\"pings\":%d,\"ranks_fitted\":%d,"
                 "\"largest\":{\"offset_s\":%.3g,\"offset_error_s\":%.3g,\"drift\":%.3g,\"drift_error\":%.3g,"
                 "\"residual_s\":%.3g},\"ranks\":[%s]}}", ROUNDS, PINGS, ctx->nprocs - 1, worst[0], worst[1],
                 worst[2], worst[3], worst[4], ranks);
    MPI_Barrier(ctx->comm);
    return mine;
}
