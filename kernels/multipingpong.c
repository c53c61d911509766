/* n messages from rank 0 to rank 1, then n back (EPCC's multi-ping-pong), and
 * "pieces": one message of a total size cut into k pieces the same way. */
#include "patterns.h"

/* Sends n messages (piece bytes each, the last `last` bytes) to peer with `mode`. */
CB_INLINE void send_all(struct cb_context *ctx, long first, int n, size_t piece, size_t last, int peer,
                        enum cb_send_mode mode, int leg, MPI_Request *requests)
{
    for (int j = 0; j < n; j++) {
        size_t bytes = j == n - 1 ? last : piece;
        unsigned char *out = cb_message(&ctx->send, first + j);
        cb_fill(ctx, out, bytes, first + j, leg);
        int count = cb_count(ctx, bytes);
        if (mode == CB_ISEND) MPI_Isend(out, count, ctx->datatype, peer, 0, ctx->comm, &requests[j]);
        else if (mode == CB_ISSEND) MPI_Issend(out, count, ctx->datatype, peer, 0, ctx->comm, &requests[j]);
        else cb_send_one(ctx, out, count, peer, mode);
    }
    if (mode == CB_ISEND || mode == CB_ISSEND) MPI_Waitall(n, requests, MPI_STATUSES_IGNORE);
}

CB_INLINE void receive_all(struct cb_context *ctx, long first, int n, size_t piece, size_t last, int peer,
                           int leg, MPI_Request *requests)
{
    for (int j = 0; j < n; j++)
        MPI_Irecv(cb_message(&ctx->recv, first + j), cb_count(ctx, j == n - 1 ? last : piece), ctx->datatype,
                  peer, 0, ctx->comm, &requests[j]);
    MPI_Waitall(n, requests, MPI_STATUSES_IGNORE);
    for (int j = 0; j < n; j++)
        cb_check(ctx, cb_message(&ctx->recv, first + j), j == n - 1 ? last : piece, first + j, leg);
}

enum { MAX_MESSAGES = 4096 };

CB_INLINE void there_and_back(struct cb_context *ctx, long iterations, int n, size_t piece, size_t last,
                              enum cb_send_mode mode)
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

CB_INLINE double multi(struct cb_context *ctx, size_t size, long iterations, enum cb_send_mode mode)
{
    int n = ctx->params.messages;
    if (ctx->rank < 2) there_and_back(ctx, iterations, n, size, size, mode);
    return 2.0 * n;
}

double multi_isend(struct cb_context *c, size_t s, long i) { return multi(c, s, i, CB_ISEND); }
double multi_send(struct cb_context *c, size_t s, long i) { return multi(c, s, i, CB_SEND); }
double multi_issend(struct cb_context *c, size_t s, long i) { return multi(c, s, i, CB_ISSEND); }
double multi_ssend(struct cb_context *c, size_t s, long i) { return multi(c, s, i, CB_SSEND); }

double pieces(struct cb_context *ctx, size_t size, long iterations)
{
    /* k pieces of ceil(size / k) bytes, whole elements each; the last takes the rest. */
    int k = ctx->params.pieces;
    size_t elements = size / ctx->type_size, per_piece = (elements + (size_t)k - 1) / (size_t)k;
    size_t piece = per_piece * ctx->type_size;
    int n = piece ? (int)((size + piece - 1) / piece) : 1;
    size_t last = size - piece * (size_t)(n - 1);
    if (ctx->rank < 2) there_and_back(ctx, iterations, n, piece, last, CB_ISEND);
    return 2;
}

const char *check_counts(struct cb_context *ctx, size_t max_size)
{
    (void)max_size;
    if (ctx->params.messages < 1 || ctx->params.messages > MAX_MESSAGES) return "--messages must be 1..4096";
    if (ctx->params.pieces < 1 || ctx->params.pieces > MAX_MESSAGES) return "--pieces must be 1..4096";
    return NULL;
}
