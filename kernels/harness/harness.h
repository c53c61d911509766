/* commbench harness: the one place that owns timing, sizes, repetitions, buffers
 * and output records.  A kernel owns only its communication pattern. */
#ifndef COMMBENCH_HARNESS_H
#define COMMBENCH_HARNESS_H

#include <mpi.h>
#include <stddef.h>
#include <stdio.h>

#define CB_RECORD_SCHEMA 1

/* Message buffers as the cache mode lays them out.  With `slots` > 1 ("rotate",
 * NetPIPE's no-cache mode) iteration i uses slot i % slots of a buffer larger
 * than the last-level cache, so no message starts out cached. */
struct cb_buffer {
    unsigned char *base; /* page aligned allocation */
    size_t bytes;        /* of the allocation */
    size_t align;        /* offset of every message from a page boundary */
    size_t stride;       /* bytes between slots */
    long slots;
    long cursor;         /* slot the next batch starts at: rotation carries on across batches */
};

/* Kernel parameters from the command line (see --help); a kernel reads those it uses. */
struct cb_params {
    int window;          /* stream, rma: messages in flight per iteration (default 64; rma 1) */
    int distinct_window; /* stream, multipair.stream, rma: a buffer per message of a window instead of
                          * one for all (osu_bw, osu_mbw_mr and NetPIPE post a window on one buffer) */
    int messages;        /* multipingpong: messages of one size each way (default 8) */
    int pieces;          /* pieces: the message is sent as this many pieces (default 4) */
    const char *sync;    /* rma: fence | lock | flush */
    const char *halo;    /* halo: blocking | nonblocking */
    int nodes;           /* placement: ranks are block-mapped, nprocs / nodes per node */
    int proc_grid[2];    /* halo: process grid (0: MPI_Dims_create) */
    const char *method;  /* collectives: accurate | lower | upper | root (NULL: the kernel's default) */
    const char *scratch; /* io: directory for the files (removed afterwards) */
    int io_sync;         /* io: fdatasync after every write */
    int drop_cache;      /* io: ask the kernel to drop the file's pages before every read */
};

/* What a kernel sees. */
struct cb_context {
    MPI_Comm comm;
    int rank;
    int nprocs;
    MPI_Datatype datatype; /* MPI_BYTE, MPI_INT or MPI_DOUBLE: sizes stay in bytes */
    size_t type_size;
    struct cb_buffer send, recv;
    struct cb_params params;
    int slots_per_iteration; /* message buffers one iteration uses (the kernel's slots) */
    int cache_rotate;        /* --cache rotate: buffers cycle through more slots than a kernel uses */
    int integrity;         /* fill and check every message, counting errors */
    int inject_fault;      /* corrupt one byte per batch: proves the check works */
    long errors;
    void *state;           /* a kernel's own, from setup to teardown */
    int timer;             /* the enum cb_timer in use, for kernels that time themselves */
    /* A kernel that times itself returns 0 from run() and leaves here, on rank 0, the
     * metric for the batch and, where it has one, an overhead measured the same way
     * that the analysis may subtract (recorded per point as subtracted_s). */
    double measured, subtracted;
    char info[1024];       /* a JSON object a kernel may fill in setup: recorded as kernel_info */
};

struct cb_kernel {
    const char *name;   /* campaign key, e.g. "pingpong.send" */
    const char *metric; /* one line: what one sample's time means */
    int min_ranks;
    /* Runs `iterations` repetitions of the pattern with messages of `size` bytes and
     * returns how many units of its metric one iteration holds: 2 for a ping-pong
     * (a round trip reported as its half), the window for a stream (per message). */
    double (*run)(struct cb_context *ctx, size_t size, long iterations);
    /* Optional, outside any timing: prepare for messages up to max_size, and undo it.
     * A nonzero return from setup is an error message for rank 0 to print. */
    const char *(*setup)(struct cb_context *ctx, size_t max_size);
    void (*teardown)(struct cb_context *ctx);
    /* Distinct message buffers one iteration uses (a window of Irecvs may not share one). */
    int (*slots)(const struct cb_params *params, int nprocs);
};

/* Each kernel family exports its kernels through one of these tables,
 * terminated by an entry whose name is NULL.  Weak: a family whose source does
 * not compile against some MPI library is left out of that library's build
 * (kernels/Makefile), its table is then NULL, and its kernels are reported as
 * unsupported there instead of breaking every other kernel's build. */
#define CB_FAMILY(table) extern const struct cb_kernel table[] __attribute__((weak))
CB_FAMILY(cb_pingpong_kernels);
CB_FAMILY(cb_twoway_kernels);
CB_FAMILY(cb_stream_kernels);
CB_FAMILY(cb_rma_kernels);
CB_FAMILY(cb_multipair_kernels);
CB_FAMILY(cb_multipingpong_kernels);
CB_FAMILY(cb_ring_kernels);
CB_FAMILY(cb_halo_kernels);
CB_FAMILY(cb_baseline_kernels);
CB_FAMILY(cb_collective_kernels);
CB_FAMILY(cb_io_kernels);
CB_FAMILY(cb_thread_kernels);

/* Buffers a windowed kernel's iteration uses: one for the whole window (--window-buffers shared),
 * or one per message in flight (distinct). */
int cb_window_slots(const struct cb_params *params, int nprocs);

const struct cb_kernel *cb_find_kernel(const char *name);
void cb_list_kernels(void);

/* Message buffer number k (iteration i, message j of `slots` per iteration: k = i * slots + j). */
static inline unsigned char *cb_message(const struct cb_buffer *b, long k)
{
    unsigned char *first = b->base + b->align;
    return b->slots > 1 ? first + (size_t)((b->cursor + k) % b->slots) * b->stride : first;
}

/* Node of a rank when `nodes` nodes hold the ranks in blocks (how mpiexec and Slurm place them). */
static inline int cb_node_of(const struct cb_context *ctx, int rank)
{
    int nodes = ctx->params.nodes > 0 ? ctx->params.nodes : 1;
    int per_node = (ctx->nprocs + nodes - 1) / nodes;
    return rank / per_node;
}

static inline int cb_count(const struct cb_context *ctx, size_t size)
{
    return (int)(size / ctx->type_size);
}

/* Integrity mode: the pattern of byte j depends on the iteration and the leg of
 * the pattern, so a stale or misplaced message is caught too. */
static inline unsigned char cb_pattern(size_t j, long iteration, int leg)
{
    return (unsigned char)(j * 131u + (size_t)iteration * 7u + (size_t)leg * 101u + 1u);
}

void cb_fill_checked(struct cb_context *ctx, unsigned char *msg, size_t size, long iteration, int leg);
void cb_check_received(struct cb_context *ctx, const unsigned char *msg, size_t size, long iteration, int leg);

/* No-ops unless integrity mode is on. */
static inline void cb_fill(struct cb_context *ctx, unsigned char *msg, size_t size, long iteration, int leg)
{
    if (ctx->integrity) cb_fill_checked(ctx, msg, size, iteration, leg);
}

static inline void cb_check(struct cb_context *ctx, const unsigned char *msg, size_t size, long iteration, int leg)
{
    if (ctx->integrity) cb_check_received(ctx, msg, size, iteration, leg);
}

/* Timers selectable with --timer. */
enum cb_timer { CB_TIMER_MPI_WTIME, CB_TIMER_CLOCK_MONOTONIC };
double cb_now(enum cb_timer timer);
const char *cb_timer_name(enum cb_timer timer);

/* Size schedules (see sizes.c).  Returns the count and a malloc'ed array, or 0. */
struct cb_schedule {
    const char *name; /* powers | netpipe | small | large | list */
    size_t min, max;
    int per_octave;   /* netpipe */
    size_t perturbation; /* netpipe */
    size_t step;      /* small */
    const char *list; /* list: "A,B,..." */
};
size_t cb_size_schedule(const struct cb_schedule *schedule, size_t **sizes);

/* JSON Lines writer. */
void cb_json_string(FILE *out, const char *text);

#endif
