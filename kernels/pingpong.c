/* Ping-pong between ranks 0 and 1; other ranks wait at the harness barrier. */
#include "harness/harness.h"

/* metric: half the round trip of a blocking MPI_Send / MPI_Recv exchange, timed at rank 0. */
static void pingpong_send(struct cb_context *ctx, size_t size, long iterations)
{
    int count = cb_count(ctx, size);
    if (ctx->rank == 0) {
        for (long i = 0; i < iterations; i++) {
            unsigned char *out = cb_message(&ctx->send, i), *in = cb_message(&ctx->recv, i);
            cb_fill(ctx, out, size, i, 0);
            MPI_Send(out, count, ctx->datatype, 1, 0, ctx->comm);
            MPI_Recv(in, count, ctx->datatype, 1, 0, ctx->comm, MPI_STATUS_IGNORE);
            cb_check(ctx, in, size, i, 1);
        }
    } else if (ctx->rank == 1) {
        for (long i = 0; i < iterations; i++) {
            unsigned char *out = cb_message(&ctx->send, i), *in = cb_message(&ctx->recv, i);
            MPI_Recv(in, count, ctx->datatype, 0, 0, ctx->comm, MPI_STATUS_IGNORE);
            cb_check(ctx, in, size, i, 0);
            cb_fill(ctx, out, size, i, 1);
            MPI_Send(out, count, ctx->datatype, 0, 0, ctx->comm);
        }
    }
}

const struct cb_kernel cb_pingpong_kernels[] = {
    {"pingpong.send",
     "half round trip of MPI_Send/MPI_Recv between ranks 0 and 1, timed at rank 0",
     2, 2, pingpong_send},
    {0},
};
