/* Every rank in a pair at once: how "up to 64 processors over 2 nodes" and
 * "tasks per node" sweeps are measured.  With nodes > 1, rank i of node 2k pairs
 * with rank i of node 2k+1 (off-node pairs); on one node, ranks 2j and 2j+1 pair.
 * The time of a sample runs until every pair has finished (a barrier ends it). */
#include "patterns.h"

struct pairing { int peer, initiator; };

const char *pair_up(struct cl_context *ctx, size_t max_size)
{
    (void)max_size;
    static struct pairing pairing;
    int nodes = ctx->params.nodes > 0 ? ctx->params.nodes : 1;
    if (ctx->nprocs % 2) return "multipair: needs an even number of ranks";
    if (nodes > 1) {
        int per_node = ctx->nprocs / nodes, node = cl_node_of(ctx, ctx->rank);
        if (ctx->nprocs % nodes || nodes % 2) return "multipair: off-node pairs need an even number of equally filled nodes";
        pairing.initiator = node % 2 == 0;
        pairing.peer = ctx->rank + (pairing.initiator ? per_node : -per_node);
    } else {
        pairing.initiator = ctx->rank % 2 == 0;
        pairing.peer = ctx->rank + (pairing.initiator ? 1 : -1);
    }
    ctx->state = &pairing;
    return NULL;
}

double multipair_pingpong(struct cl_context *ctx, size_t size, long iterations)
{
    const struct pairing *p = ctx->state;
    cl_pingpong(ctx, size, iterations, p->peer, p->initiator, CL_SEND, CL_RECV);
    MPI_Barrier(ctx->comm);
    return 2;
}

double multipair_stream(struct cl_context *ctx, size_t size, long iterations)
{
    const struct pairing *p = ctx->state;
    cl_stream(ctx, size, iterations, p->peer, p->initiator, 0);
    MPI_Barrier(ctx->comm);
    return ctx->params.window;
}
