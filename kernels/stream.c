/* Streaming bandwidth between ranks 0 and 1, as osu_bw / osu_bibw and NetPIPE's
 * streaming mode: a window of non-blocking messages, then a one-byte ack. */
#include "patterns.h"

double stream_uni(struct cl_context *ctx, size_t size, long iterations)
{
    if (ctx->rank > 1) return ctx->params.window;
    return cl_stream(ctx, size, iterations, 1 - ctx->rank, ctx->rank == 0, 0);
}

double stream_bi(struct cl_context *ctx, size_t size, long iterations)
{
    if (ctx->rank > 1) return ctx->params.window;
    return cl_stream(ctx, size, iterations, 1 - ctx->rank, ctx->rank == 0, 1);
}
