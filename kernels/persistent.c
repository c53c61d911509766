/* Persistent point-to-point (MPI_Send_init/MPI_Recv_init, MPI-1): pingpong.send's pattern with requests
 * made once per size and restarted every iteration, so that the two can be held side by side. Other ranks
 * wait at the harness barrier. Metric: half the round trip, timed at rank 0. */
#include "patterns.h"

struct persistent {
    MPI_Request send, recv;
    size_t size;     /* the size the requests were made for */
    int made;
};

static struct persistent persistent;

const char *persistent_setup(struct cl_context *ctx, size_t max_size)
{
    (void)max_size;
    if (ctx->cache_rotate) return "persistent requests are bound to one buffer: --cache rotate is not supported";
    persistent.made = 0;
    return NULL;
}

static void free_requests(void)
{
    if (!persistent.made) return;
    MPI_Request_free(&persistent.send);
    MPI_Request_free(&persistent.recv);
    persistent.made = 0;
}

void persistent_teardown(struct cl_context *ctx)
{
    (void)ctx;
    free_requests();
}

/* The requests for messages of `size`, made in the first batch of a size (its warm-up) and kept. */
static void make_requests(struct cl_context *ctx, size_t size, int peer)
{
    if (persistent.made && persistent.size == size) return;
    free_requests();
    int count = cl_count(ctx, size);
    MPI_Send_init(cl_message(&ctx->send, 0), count, ctx->datatype, peer, 0, ctx->comm, &persistent.send);
    MPI_Recv_init(cl_message(&ctx->recv, 0), count, ctx->datatype, peer, 0, ctx->comm, &persistent.recv);
    persistent.size = size;
    persistent.made = 1;
}

/* Rank 0 starts its receive and its send together (MPI_Startall) and waits for both; rank 1 receives,
 * then sends back. */
double pingpong_persistent(struct cl_context *ctx, size_t size, long iterations)
{
    if (ctx->rank > 1 || iterations == 0) return 2;
    int peer = 1 - ctx->rank;
    make_requests(ctx, size, peer);
    unsigned char *out = cl_message(&ctx->send, 0), *in = cl_message(&ctx->recv, 0);
    MPI_Request both[2] = {persistent.recv, persistent.send};
    for (long i = 0; i < iterations; i++) {
        if (ctx->rank == 0) {
            cl_fill(ctx, out, size, i, 0);
            MPI_Startall(2, both);
            MPI_Waitall(2, both, MPI_STATUSES_IGNORE);
            cl_check(ctx, in, size, i, 1);
        } else {
            MPI_Start(&persistent.recv);
            MPI_Wait(&persistent.recv, MPI_STATUS_IGNORE);
            cl_check(ctx, in, size, i, 0);
            cl_fill(ctx, out, size, i, 1);
            MPI_Start(&persistent.send);
            MPI_Wait(&persistent.send, MPI_STATUS_IGNORE);
        }
    }
    return 2;
}
