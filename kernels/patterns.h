/* Communication patterns shared by several kernel families.  They are static
 * inline and called with constant modes, so each kernel gets its own specialised
 * loop: no branch on the mode inside the timed region. */
#ifndef COMMLENS_PATTERNS_H
#define COMMLENS_PATTERNS_H

#include "harness/harness.h"

enum cl_send_mode { CL_SEND, CL_SSEND, CL_ISEND, CL_BSEND, CL_ISSEND };
enum cl_recv_mode { CL_RECV, CL_IRECV, CL_IPROBE, CL_ANY_TAG, CL_ANY_SOURCE };

#define CL_INLINE static inline __attribute__((always_inline))

/* MPI-4's persistent collectives and partitioned communication (MPI_Bcast_init, MPI_Psend_init, ...):
 * in every MPI 4.0 mpi.h, and in Open MPI 5's, which has them but still says MPI 3.1. A family's MPI-4
 * kernels are compiled only where this is 1; elsewhere the catalogue reports them unavailable. */
#if MPI_VERSION >= 4
#define CL_MPI4_CALLS 1
#elif defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5
#define CL_MPI4_CALLS 1
#else
#define CL_MPI4_CALLS 0
#endif

CL_INLINE void cl_send_one(struct cl_context *ctx, const void *buf, int count, int peer,
                           enum cl_send_mode mode)
{
    MPI_Request request;
    switch (mode) {
    case CL_SEND: MPI_Send(buf, count, ctx->datatype, peer, 0, ctx->comm); break;
    case CL_SSEND: MPI_Ssend(buf, count, ctx->datatype, peer, 0, ctx->comm); break;
    case CL_BSEND: MPI_Bsend(buf, count, ctx->datatype, peer, 0, ctx->comm); break;
    case CL_ISEND:
        MPI_Isend(buf, count, ctx->datatype, peer, 0, ctx->comm, &request);
        MPI_Wait(&request, MPI_STATUS_IGNORE);
        break;
    case CL_ISSEND:
        MPI_Issend(buf, count, ctx->datatype, peer, 0, ctx->comm, &request);
        MPI_Wait(&request, MPI_STATUS_IGNORE);
        break;
    }
}

CL_INLINE void cl_recv_one(struct cl_context *ctx, void *buf, int count, int peer,
                           enum cl_recv_mode mode)
{
    MPI_Request request;
    int arrived = 0;
    switch (mode) {
    case CL_RECV: MPI_Recv(buf, count, ctx->datatype, peer, 0, ctx->comm, MPI_STATUS_IGNORE); break;
    case CL_ANY_TAG: MPI_Recv(buf, count, ctx->datatype, peer, MPI_ANY_TAG, ctx->comm, MPI_STATUS_IGNORE); break;
    case CL_ANY_SOURCE: MPI_Recv(buf, count, ctx->datatype, MPI_ANY_SOURCE, 0, ctx->comm, MPI_STATUS_IGNORE); break;
    case CL_IRECV:
        MPI_Irecv(buf, count, ctx->datatype, peer, 0, ctx->comm, &request);
        MPI_Wait(&request, MPI_STATUS_IGNORE);
        break;
    case CL_IPROBE:
        while (!arrived) MPI_Iprobe(peer, 0, ctx->comm, &arrived, MPI_STATUS_IGNORE);
        MPI_Recv(buf, count, ctx->datatype, peer, 0, ctx->comm, MPI_STATUS_IGNORE);
        break;
    }
}

/* A ping-pong with `peer`: the initiator sends first.  Returns 2 (legs per iteration). */
CL_INLINE double cl_pingpong(struct cl_context *ctx, size_t size, long iterations, int peer,
                             int initiator, enum cl_send_mode send, enum cl_recv_mode recv)
{
    int count = cl_count(ctx, size);
    for (long i = 0; i < iterations; i++) {
        unsigned char *out = cl_message(&ctx->send, i), *in = cl_message(&ctx->recv, i);
        if (initiator) {
            cl_fill(ctx, out, size, i, 0);
            cl_send_one(ctx, out, count, peer, send);
            cl_recv_one(ctx, in, count, peer, recv);
            cl_check(ctx, in, size, i, 1);
        } else {
            cl_recv_one(ctx, in, count, peer, recv);
            cl_check(ctx, in, size, i, 0);
            cl_fill(ctx, out, size, i, 1);
            cl_send_one(ctx, out, count, peer, send);
        }
    }
    return 2;
}

/* A window of messages posted to `peer` (Isends, each filled for integrity as `leg`) or from it (Irecvs):
 * messages first .. first + window - 1 of the buffers, with `tag`; their requests from `requests` on. */
CL_INLINE void cl_post_window(struct cl_context *ctx, size_t size, long first, int peer, int sending, int leg,
                              int tag, MPI_Request *requests)
{
    int window = ctx->params.window, count = cl_count(ctx, size);
    for (int j = 0; j < window; j++) {
        if (sending) {
            unsigned char *out = cl_message(&ctx->send, first + j);
            cl_fill(ctx, out, size, first + j, leg);
            MPI_Isend(out, count, ctx->datatype, peer, tag, ctx->comm, &requests[j]);
        } else {
            MPI_Irecv(cl_message(&ctx->recv, first + j), count, ctx->datatype, peer, tag, ctx->comm, &requests[j]);
        }
    }
}

/* The received window's messages checked (integrity mode only). */
CL_INLINE void cl_check_window(struct cl_context *ctx, size_t size, long first, int leg)
{
    for (int j = 0; j < ctx->params.window; j++)
        cl_check(ctx, cl_message(&ctx->recv, first + j), size, first + j, leg);
}

/* A window of messages to `peer` (and from it, when bidirectional), then a one-byte
 * acknowledgement so the sender knows the window arrived.  Returns the window. */
CL_INLINE double cl_stream(struct cl_context *ctx, size_t size, long iterations, int peer,
                           int sender, int bidirectional)
{
    MPI_Request requests[2 * CL_MAX_WINDOW];
    int window = ctx->params.window;
    char ack = 0;
    for (long i = 0; i < iterations; i++) {
        int n = 0;
        if (!sender || bidirectional) {
            cl_post_window(ctx, size, i * window, peer, 0, 0, 1, requests);
            n += window;
        }
        if (sender || bidirectional) {
            cl_post_window(ctx, size, i * window, peer, 1, sender ? 0 : 1, 1, requests + n);
            n += window;
        }
        MPI_Waitall(n, requests, MPI_STATUSES_IGNORE);
        if (!sender || bidirectional) cl_check_window(ctx, size, i * window, sender ? 1 : 0);
        if (sender) MPI_Recv(&ack, 1, MPI_CHAR, peer, 2, ctx->comm, MPI_STATUS_IGNORE);
        else MPI_Send(&ack, 1, MPI_CHAR, peer, 2, ctx->comm);
    }
    return window;
}

#endif
