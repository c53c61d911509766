/* Ping-pong between ranks 0 and 1; other ranks wait at the harness barrier. */
#include "harness/harness.h"

/* metric: half the round trip of a blocking MPI_Send / MPI_Recv exchange, timed at rank 0. */
static void pingpong_send(const struct cb_context *ctx, size_t size, long iterations)
{
    int count = (int)size;
    if (ctx->rank == 0) {
        for (long i = 0; i < iterations; i++) {
            MPI_Send(ctx->send_buf, count, MPI_BYTE, 1, 0, ctx->comm);
            MPI_Recv(ctx->recv_buf, count, MPI_BYTE, 1, 0, ctx->comm, MPI_STATUS_IGNORE);
        }
    } else if (ctx->rank == 1) {
        for (long i = 0; i < iterations; i++) {
            MPI_Recv(ctx->recv_buf, count, MPI_BYTE, 0, 0, ctx->comm, MPI_STATUS_IGNORE);
            MPI_Send(ctx->send_buf, count, MPI_BYTE, 0, 0, ctx->comm);
        }
    }
}

const struct cb_kernel cb_pingpong_kernels[] = {
    {"pingpong.send",
     "half round trip of MPI_Send/MPI_Recv between ranks 0 and 1, timed at rank 0",
     2, 2, pingpong_send},
    {0},
};
