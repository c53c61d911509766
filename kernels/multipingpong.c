/* n messages from rank 0 to rank 1, then n back (EPCC's multi-ping-pong), and
 * "pieces": one message of a total size cut into k pieces the same way. */
#include "patterns.h"

/* Sends n messages (piece bytes each, the last `last` bytes) to peer with `mode`. */
CL_INLINE void send_all(struct cl_context *ctx, long first, int n, size_t piece, size_t last, int peer,
                        enum cl_send_mode mode, int leg, MPI_Request *requests)
{
    for (int j = 0; j < n; j++) {
        size_t bytes = j == n - 1 ? last : piece;
        unsigned char *out = cl_message(&ctx->send, first + j);
        cl_fill(ctx, out, bytes, first + j, leg);
        int count = cl_count(ctx, bytes);
        if (mode == CL_ISEND) MPI_Isend(out, count, ctx->datatype, peer, 0, ctx->comm, &requests[j]);
        else if (mode == CL_ISSEND) MPI_Issend(out, count, ctx->datatype, peer, 0, ctx->comm, &requests[j]);
        else cl_send_one(ctx, out, count, peer, mode);
    }
    if (mode == CL_ISEND || mode == CL_ISSEND) MPI_Waitall(n, requests, MPI_STATUSES_IGNORE);
}

CL_INLINE void receive_all(struct cl_context *ctx, long first, int n, size_t piece, size_t last, int peer,
                           int leg, MPI_Request *requests)
{
    for (int j = 0; j < n; j++)
        MPI_Irecv(cl_message(&ctx->recv, first + j), cl_count(ctx, j == n - 1 ? last : piece), ctx->datatype,
                  peer, 0, ctx->comm, &requests[j]);
    MPI_Waitall(n, requests, MPI_STATUSES_IGNORE);
    for (int j = 0; j < n; j++)
        cl_check(ctx, cl_message(&ctx->recv, first + j), j == n - 1 ? last : piece, first + j, leg);
}

enum { MAX_MESSAGES = 4096 };

CL_INLINE void there_and_back(struct cl_context *ctx, long iterations, int n, size_t piece, size_t last,
                              enum cl_send_mode mode)
{
    MPI_Request requests[MAX_MESSAGES];
    int peer = 1 - ctx->rank;
    for (long i = 0; i < iterations; i++) {
        long first = i * n;
        if (ctx->rank == 0) {
            send_all(ctx, first, n, piece, last, peer, mode, 0, requests);
            receive_all(ctx, first, n, piece, last, peer, 1, requests);
        } else {
            receive_all(ctx, first, n, piece, last, peer, 0, requests);
            send_all(ctx, first, n, piece, last, peer, mode, 1, requests);
        }
    }
}

CL_INLINE double multi(struct cl_context *ctx, size_t size, long iterations, enum cl_send_mode mode)
{
    int n = ctx->params.messages;
    if (ctx->rank < 2) there_and_back(ctx, iterations, n, size, size, mode);
    return 2.0 * n;
}

double multi_isend(struct cl_context *c, size_t s, long i) { return multi(c, s, i, CL_ISEND); }
double multi_send(struct cl_context *c, size_t s, long i) { return multi(c, s, i, CL_SEND); }
double multi_issend(struct cl_context *c, size_t s, long i) { return multi(c, s, i, CL_ISSEND); }
double multi_ssend(struct cl_context *c, size_t s, long i) { return multi(c, s, i, CL_SSEND); }

double pieces(struct cl_context *ctx, size_t size, long iterations)
{
    /* k pieces of ceil(size / k) bytes, whole elements each; the last takes the rest. */
    int k = ctx->params.pieces;
    size_t elements = size / ctx->type_size, per_piece = (elements + (size_t)k - 1) / (size_t)k;
    size_t piece = per_piece * ctx->type_size;
    int n = piece ? (int)((size + piece - 1) / piece) : 1;
    size_t last = size - piece * (size_t)(n - 1);
    if (ctx->rank < 2) there_and_back(ctx, iterations, n, piece, last, CL_ISEND);
    return 2;
}

const char *check_counts(struct cl_context *ctx, size_t max_size)
{
    (void)max_size;
    if (ctx->params.messages < 1 || ctx->params.messages > MAX_MESSAGES) return "--messages must be 1..4096";
    if (ctx->params.pieces < 1 || ctx->params.pieces > MAX_MESSAGES) return "--pieces must be 1..4096";
    return NULL;
}
