/* Communication patterns shared by several kernel families.  They are static
 * inline and called with constant modes, so each kernel gets its own specialised
 * loop: no branch on the mode inside the timed region. */
#ifndef COMMBENCH_PATTERNS_H
#define COMMBENCH_PATTERNS_H

#include "harness/harness.h"

enum cb_send_mode { CB_SEND, CB_SSEND, CB_ISEND, CB_BSEND, CB_ISSEND };
enum cb_recv_mode { CB_RECV, CB_IRECV, CB_IPROBE, CB_ANY_TAG, CB_ANY_SOURCE };

#define CB_INLINE static inline __attribute__((always_inline))

/* MPI-4's persistent collectives and partitioned communication (MPI_Bcast_init, MPI_Psend_init, ...):
 * in every MPI 4.0 mpi.h, and in Open MPI 5's, which has them but still says MPI 3.1. A family's MPI-4
 * kernels are compiled only where this is 1; elsewhere the catalogue reports them unavailable. */
#if MPI_VERSION >= 4
#define CB_MPI4_CALLS 1
#elif defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5
#define CB_MPI4_CALLS 1
#else
#define CB_MPI4_CALLS 0
#endif

CB_INLINE void cb_send_one(struct cb_context *ctx, const void *buf, int count, int peer,
                           enum cb_send_mode mode)
{
    MPI_Request request;
    switch (mode) {
    case CB_SEND: MPI_Send(buf, count, ctx->datatype, peer, 0, ctx->comm); break;
    case CB_SSEND: MPI_Ssend(buf, count, ctx->datatype, peer, 0, ctx->comm); break;
    case CB_BSEND: MPI_Bsend(buf, count, ctx->datatype, peer, 0, ctx->comm); break;
    case CB_ISEND:
        MPI_Isend(buf, count, ctx->datatype, peer, 0, ctx->comm, &request);
        MPI_Wait(&request, MPI_STATUS_IGNORE);
        break;
    case CB_ISSEND:
        MPI_Issend(buf, count, ctx->datatype, peer, 0, ctx->comm, &request);
        MPI_Wait(&request, MPI_STATUS_IGNORE);
        break;
    }
}

CB_INLINE void cb_recv_one(struct cb_context *ctx, void *buf, int count, int peer,
                           enum cb_recv_mode mode)
{
    MPI_Request request;
    int arrived = 0;
    switch (mode) {
    case CB_RECV: MPI_Recv(buf, count, ctx->datatype, peer, 0, ctx->comm, MPI_STATUS_IGNORE); break;
    case CB_ANY_TAG: MPI_Recv(buf, count, ctx->datatype, peer, MPI_ANY_TAG, ctx->comm, MPI_STATUS_IGNORE); break;
    case CB_ANY_SOURCE: MPI_Recv(buf, count, ctx->datatype, MPI_ANY_SOURCE, 0, ctx->comm, MPI_STATUS_IGNORE); break;
    case CB_IRECV:
        MPI_Irecv(buf, count, ctx->datatype, peer, 0, ctx->comm, &request);
        MPI_Wait(&request, MPI_STATUS_IGNORE);
        break;
    case CB_IPROBE:
        while (!arrived) MPI_Iprobe(peer, 0, ctx->comm, &arrived, MPI_STATUS_IGNORE);
        MPI_Recv(buf, count, ctx->datatype, peer, 0, ctx->comm, MPI_STATUS_IGNORE);
        break;
    }
}

/* A ping-pong with `peer`: the initiator sends first.  Returns 2 (legs per iteration). */
CB_INLINE double cb_pingpong(struct cb_context *ctx, size_t size, long iterations, int peer,
                             int initiator, enum cb_send_mode send, enum cb_recv_mode recv)
{
    int count = cb_count(ctx, size);
    for (long i = 0; i < iterations; i++) {
        unsigned char *out = cb_message(&ctx->send, i), *in = cb_message(&ctx->recv, i);
        if (initiator) {
            cb_fill(ctx, out, size, i, 0);
            cb_send_one(ctx, out, count, peer, send);
            cb_recv_one(ctx, in, count, peer, recv);
            cb_check(ctx, in, size, i, 1);
        } else {
            cb_recv_one(ctx, in, count, peer, recv);
            cb_check(ctx, in, size, i, 0);
            cb_fill(ctx, out, size, i, 1);
            cb_send_one(ctx, out, count, peer, send);
        }
    }
    return 2;
}

/* A window of messages posted to `peer` (Isends, each filled for integrity as `leg`) or from it (Irecvs):
 * messages first .. first + window - 1 of the buffers, with `tag`; their requests from `requests` on. */
CB_INLINE void cb_post_window(struct cb_context *ctx, size_t size, long first, int peer, int sending, int leg,
                              int tag, MPI_Request *requests)
{
    int window = ctx->params.window, count = cb_count(ctx, size);
    for (int j = 0; j < window; j++) {
        if (sending) {
            unsigned char *out = cb_message(&ctx->send, first + j);
            cb_fill(ctx, out, size, first + j, leg);
            MPI_Isend(out, count, ctx->datatype, peer, tag, ctx->comm, &requests[j]);
        } else {
            MPI_Irecv(cb_message(&ctx->recv, first + j), count, ctx->datatype, peer, tag, ctx->comm, &requests[j]);
        }
    }
}

/* The received window's messages checked (integrity mode only). */
CB_INLINE void cb_check_window(struct cb_context *ctx, size_t size, long first, int leg)
{
    for (int j = 0; j < ctx->params.window; j++)
        cb_check(ctx, cb_message(&ctx->recv, first + j), size, first + j, leg);
}

/* A window of messages to `peer` (and from it, when bidirectional), then a one-byte
 * acknowledgement so the sender knows the window arrived.  Returns the window. */
CB_INLINE double cb_stream(struct cb_context *ctx, size_t size, long iterations, int peer,
                           int sender, int bidirectional)
{
    MPI_Request requests[2 * CB_MAX_WINDOW];
    int window = ctx->params.window;
    char ack = 0;
    for (long i = 0; i < iterations; i++) {
        int n = 0;
        if (!sender || bidirectional) {
            cb_post_window(ctx, size, i * window, peer, 0, 0, 1, requests);
            n += window;
        }
        if (sender || bidirectional) {
            cb_post_window(ctx, size, i * window, peer, 1, sender ? 0 : 1, 1, requests + n);
            n += window;
        }
        MPI_Waitall(n, requests, MPI_STATUSES_IGNORE);
        if (!sender || bidirectional) cb_check_window(ctx, size, i * window, sender ? 1 : 0);
        if (sender) MPI_Recv(&ack, 1, MPI_CHAR, peer, 2, ctx->comm, MPI_STATUS_IGNORE);
        else MPI_Send(&ack, 1, MPI_CHAR, peer, 2, ctx->comm);
    }
    return window;
}

#endif
