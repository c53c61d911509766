/* Both ranks 0 and 1 send to each other at the same time.  Metric: time per
 * iteration (one message each way, concurrently), timed at rank 0. */
#include "patterns.h"

enum exchange_mode { PINGPING, SENDRECV, SENDRECV_REPLACE, IRECV_ISEND };

CL_INLINE double exchange(struct cl_context *ctx, size_t size, long iterations, enum exchange_mode mode)
{
    if (ctx->rank > 1) return 1;
    int peer = 1 - ctx->rank, count = cl_count(ctx, size);
    MPI_Request requests[2];
    for (long i = 0; i < iterations; i++) {
        unsigned char *out = cl_message(&ctx->send, i), *in = cl_message(&ctx->recv, i);
        cl_fill(ctx, out, size, i, ctx->rank);
        switch (mode) {
        case PINGPING:
            MPI_Isend(out, count, ctx->datatype, peer, 0, ctx->comm, &requests[0]);
            MPI_Recv(in, count, ctx->datatype, peer, 0, ctx->comm, MPI_STATUS_IGNORE);
            MPI_Wait(&requests[0], MPI_STATUS_IGNORE);
            break;
        case SENDRECV:
            MPI_Sendrecv(out, count, ctx->datatype, peer, 0, in, count, ctx->datatype, peer, 0,
                         ctx->comm, MPI_STATUS_IGNORE);
            break;
        case SENDRECV_REPLACE:
            /* The message is replaced in place: what arrives is checked where it was sent from. */
            MPI_Sendrecv_replace(out, count, ctx->datatype, peer, 0, peer, 0, ctx->comm, MPI_STATUS_IGNORE);
            in = out;
            break;
        case IRECV_ISEND:
            MPI_Irecv(in, count, ctx->datatype, peer, 0, ctx->comm, &requests[0]);
            MPI_Isend(out, count, ctx->datatype, peer, 0, ctx->comm, &requests[1]);
            MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
            break;
        }
        cl_check(ctx, in, size, i, peer);
    }
    return 1;
}

double pingping(struct cl_context *c, size_t s, long n) { return exchange(c, s, n, PINGPING); }
double sendrecv(struct cl_context *c, size_t s, long n) { return exchange(c, s, n, SENDRECV); }
double sendrecv_replace(struct cl_context *c, size_t s, long n) { return exchange(c, s, n, SENDRECV_REPLACE); }
double isend_irecv(struct cl_context *c, size_t s, long n) { return exchange(c, s, n, IRECV_ISEND); }
