/* One-sided communication between ranks 0 and 1 over a window on every rank's
 * receive buffer.  --rma-sync picks the synchronisation: fence (MPI_Win_fence
 * after each window of operations), lock (MPI_Win_lock/unlock around each
 * operation) or flush (MPI_Win_lock_all once, MPI_Win_flush after each window);
 * --window 1 gives latency, a larger window bandwidth. */
#include <string.h>

#include "patterns.h"

enum rma_sync { FENCE, LOCK, FLUSH, PSCW };
enum rma_op { PUT, GET };

struct rma_state {
    MPI_Win win;
    enum rma_sync sync;
    MPI_Group peer_group;
};

static struct rma_state rma;

static const char *create_window(struct cl_context *ctx, size_t max_size)
{
    (void)max_size;
    const char *sync = ctx->params.sync;
    rma.sync = strcmp(sync, "lock") == 0 ? LOCK : strcmp(sync, "flush") == 0 ? FLUSH
             : strcmp(sync, "pscw") == 0 ? PSCW : FENCE;
    MPI_Win_create(ctx->recv.base, (MPI_Aint)ctx->recv.bytes, 1, MPI_INFO_NULL, ctx->comm, &rma.win);
    if (rma.sync == FENCE) MPI_Win_fence(0, rma.win);
    if (rma.sync == FLUSH && ctx->rank == 0) MPI_Win_lock_all(0, rma.win);
    MPI_Group world;
    MPI_Comm_group(ctx->comm, &world);
    int peer = ctx->rank == 0 ? 1 : 0;
    MPI_Group_incl(world, 1, &peer, &rma.peer_group);
    MPI_Group_free(&world);
    ctx->state = &rma;
    return NULL;
}

const char *create_checked_window(struct cl_context *ctx, size_t max_size)
{
    if (ctx->integrity && strcmp(ctx->params.sync, "fence") != 0)
        return "integrity mode needs --rma-sync fence: only then does the target know a put has landed";
    return create_window(ctx, max_size);
}

const char *create_get_window(struct cl_context *ctx, size_t max_size)
{
    if (ctx->integrity) return "rma.get has no integrity mode: the target never learns what was read";
    return create_window(ctx, max_size);
}

void free_window(struct cl_context *ctx)
{
    if (rma.sync == FLUSH && ctx->rank == 0) MPI_Win_unlock_all(rma.win);
    if (rma.sync == FENCE) MPI_Win_fence(0, rma.win);
    MPI_Group_free(&rma.peer_group);
    MPI_Win_free(&rma.win);
    ctx->state = NULL;
}

static MPI_Aint displacement(const struct cl_context *ctx, long k)
{
    return (MPI_Aint)(cl_message(&ctx->recv, k) - ctx->recv.base);
}

CL_INLINE double one_sided(struct cl_context *ctx, size_t size, long iterations, enum rma_op op)
{
    int window = ctx->params.window, count = cl_count(ctx, size);
    for (long i = 0; i < iterations; i++) {
        if (ctx->rank == 0) {
            for (int j = 0; j < window; j++) {
                long k = i * window + j;
                if (rma.sync == LOCK) MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, rma.win);
                if (op == PUT) {
                    unsigned char *out = cl_message(&ctx->send, k);
                    cl_fill(ctx, out, size, k, 0);
                    MPI_Put(out, count, ctx->datatype, 1, displacement(ctx, k), count, ctx->datatype, rma.win);
                } else {
                    MPI_Get(cl_message(&ctx->send, k), count, ctx->datatype, 1, displacement(ctx, k), count,
                            ctx->datatype, rma.win);
                }
                if (rma.sync == LOCK) MPI_Win_unlock(1, rma.win);
            }
            if (rma.sync == FLUSH) MPI_Win_flush(1, rma.win);
        }
        if (rma.sync == FENCE) {
            MPI_Win_fence(0, rma.win);
            if (ctx->integrity && op == PUT) {
                if (ctx->rank == 1)
                    for (int j = 0; j < window; j++)
                        cl_check(ctx, cl_message(&ctx->recv, i * window + j), size, i * window + j, 0);
                /* The next puts may land as soon as a fence returns: hold them until checked. */
                MPI_Win_fence(0, rma.win);
            }
        }
    }
    return window;
}

double rma_put(struct cl_context *c, size_t s, long n) { return one_sided(c, s, n, PUT); }
double rma_get(struct cl_context *c, size_t s, long n) { return one_sided(c, s, n, GET); }

/* Each side puts into the other's window and waits for it (post-start-complete-wait). */
double rma_pingpong(struct cl_context *ctx, size_t size, long iterations)
{
    if (ctx->rank > 1) return 2;
    int count = cl_count(ctx, size), peer = 1 - ctx->rank;
    for (long i = 0; i < iterations; i++) {
        for (int turn = 0; turn < 2; turn++) {
            if ((turn == 0) == (ctx->rank == 0)) {        /* my turn to put */
                unsigned char *out = cl_message(&ctx->send, i);
                cl_fill(ctx, out, size, i, turn);
                MPI_Win_start(rma.peer_group, 0, rma.win);
                MPI_Put(out, count, ctx->datatype, peer, displacement(ctx, i), count, ctx->datatype, rma.win);
                MPI_Win_complete(rma.win);
            } else {                                       /* wait for the peer's put */
                MPI_Win_post(rma.peer_group, 0, rma.win);
                MPI_Win_wait(rma.win);
                cl_check(ctx, cl_message(&ctx->recv, i), size, i, turn);
            }
        }
    }
    return 2;
}

const char *create_pscw_window(struct cl_context *ctx, size_t max_size)
{
    ctx->params.sync = "pscw";
    return create_window(ctx, max_size);
}
