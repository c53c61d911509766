/* Every rank exchanges with both ring neighbours.  Metric: time per iteration
 * (one message to and from each neighbour), timed at rank 0. */
#include "patterns.h"

static double ring(struct cl_context *ctx, size_t size, long iterations, int together)
{
    int left = (ctx->rank + ctx->nprocs - 1) % ctx->nprocs, right = (ctx->rank + 1) % ctx->nprocs;
    int count = cl_count(ctx, size);
    MPI_Request r[4];
    for (long i = 0; i < iterations; i++) {
        unsigned char *to_right = cl_message(&ctx->send, 2 * i), *to_left = cl_message(&ctx->send, 2 * i + 1);
        unsigned char *from_left = cl_message(&ctx->recv, 2 * i), *from_right = cl_message(&ctx->recv, 2 * i + 1);
        cl_fill(ctx, to_right, size, i, 0);
        cl_fill(ctx, to_left, size, i, 1);
        if (together) {   /* 2 Irecv, 2 Isend, Waitall(4) */
            MPI_Irecv(from_left, count, ctx->datatype, left, 0, ctx->comm, &r[0]);
            MPI_Irecv(from_right, count, ctx->datatype, right, 1, ctx->comm, &r[1]);
            MPI_Isend(to_right, count, ctx->datatype, right, 0, ctx->comm, &r[2]);
            MPI_Isend(to_left, count, ctx->datatype, left, 1, ctx->comm, &r[3]);
            MPI_Waitall(4, r, MPI_STATUSES_IGNORE);
        } else {          /* rightwards, then leftwards: Irecv, Isend, Waitall(2) twice */
            MPI_Irecv(from_left, count, ctx->datatype, left, 0, ctx->comm, &r[0]);
            MPI_Isend(to_right, count, ctx->datatype, right, 0, ctx->comm, &r[1]);
            MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
            MPI_Irecv(from_right, count, ctx->datatype, right, 1, ctx->comm, &r[0]);
            MPI_Isend(to_left, count, ctx->datatype, left, 1, ctx->comm, &r[1]);
            MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
        }
        cl_check(ctx, from_left, size, i, 0);
        cl_check(ctx, from_right, size, i, 1);
    }
    return 1;
}

double ring_waitall2(struct cl_context *c, size_t s, long n) { return ring(c, s, n, 0); }
double ring_waitall4(struct cl_context *c, size_t s, long n) { return ring(c, s, n, 1); }
