/* Streaming bandwidth between ranks 0 and 1, as osu_bw / osu_bibw and NetPIPE's
 * streaming mode: a window of non-blocking messages, then a one-byte ack. */
#include "patterns.h"

static double stream_uni(struct cb_context *ctx, size_t size, long iterations)
{
    if (ctx->rank > 1) return ctx->params.window;
    return cb_stream(ctx, size, iterations, 1 - ctx->rank, ctx->rank == 0, 0);
}

static double stream_bi(struct cb_context *ctx, size_t size, long iterations)
{
    if (ctx->rank > 1) return ctx->params.window;
    return cb_stream(ctx, size, iterations, 1 - ctx->rank, ctx->rank == 0, 1);
}

const struct cb_kernel cb_stream_kernels[] = {
    {"stream.uni",
     "seconds per message of a window of MPI_Isend from rank 0 to rank 1 (then a 1-byte ack); bandwidth = size / time",
     2, stream_uni, 0, 0, cb_window_slots},
    {"stream.bi",
     "seconds per message in each direction of windows of MPI_Isend both ways between ranks 0 and 1; "
     "bidirectional bandwidth = 2 size / time",
     2, stream_bi, 0, 0, cb_window_slots},
    {0},
};
