/* Ping-pong variants between ranks 0 and 1 (Sphinx's list); other ranks wait at
 * the harness barrier.  Every metric: half the round trip, timed at rank 0. */
#include <stdlib.h>

#include "patterns.h"

#define PINGPONG(fn, send, recv)                                                        \
    double fn(struct cl_context *ctx, size_t size, long iterations)                    \
    {                                                                                   \
        if (ctx->rank > 1) return 2;                                                    \
        return cl_pingpong(ctx, size, iterations, 1 - ctx->rank, ctx->rank == 0, send, recv); \
    }

PINGPONG(pingpong_send, CL_SEND, CL_RECV)
PINGPONG(pingpong_ssend, CL_SSEND, CL_RECV)
PINGPONG(pingpong_isend, CL_ISEND, CL_RECV)
PINGPONG(pingpong_irecv, CL_SEND, CL_IRECV)
PINGPONG(pingpong_iprobe, CL_SEND, CL_IPROBE)
PINGPONG(pingpong_anytag, CL_SEND, CL_ANY_TAG)
PINGPONG(pingpong_anysource, CL_SEND, CL_ANY_SOURCE)
PINGPONG(pingpong_bsend, CL_BSEND, CL_RECV)

/* MPI_Bsend needs a buffer attached, outside the timed loop. */
const char *attach_bsend_buffer(struct cl_context *ctx, size_t max_size)
{
    int bytes = (int)max_size + MPI_BSEND_OVERHEAD;
    if (max_size > (size_t)(1 << 30)) return "pingpong.bsend: messages above 1 GiB cannot be buffered";
    ctx->state = malloc((size_t)bytes);
    if (!ctx->state) return "pingpong.bsend: cannot allocate the attached buffer";
    MPI_Buffer_attach(ctx->state, bytes);
    return NULL;
}

void detach_bsend_buffer(struct cl_context *ctx)
{
    void *buffer;
    int bytes;
    MPI_Buffer_detach(&buffer, &bytes);
    free(ctx->state);
    ctx->state = NULL;
}
