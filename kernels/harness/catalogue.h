/* What a kernel is: its description (kernels/catalogue.def) and its code.
 *
 * The description is the one place that says what a kernel measures and needs; everything else
 * reads it: the harness (buffers, ranks), `commlens-kernels --describe` and the catalogue tool
 * (kernels/harness/catalogue_tool.c), from whose JSON the Python package learns the kernels.
 * No MPI here: the catalogue tool compiles with any C compiler, before any MPI library is built. */
#ifndef COMMLENS_CATALOGUE_H
#define COMMLENS_CATALOGUE_H

#include <stddef.h>
#include <stdio.h>

struct cl_context;   /* the harness's (harness.h): kernels see it, the catalogue only points at it */

/* Runs `iterations` repetitions of the pattern with messages of `size` bytes and returns how many
 * units of its metric one iteration holds: 2 for a ping-pong (a round trip reported as its half),
 * the window for a stream (per message). */
typedef double cl_run_fn(struct cl_context *ctx, size_t size, long iterations);
/* Outside any timing: prepare for messages up to max_size; a non-NULL return is an error message. */
typedef const char *cl_setup_fn(struct cl_context *ctx, size_t max_size);
typedef void cl_teardown_fn(struct cl_context *ctx);

/* What a count is multiplied by: once, by the ranks, or by the pairs of ranks. */
enum cl_per { CL_ONCE, CL_PER_RANK, CL_PER_PAIR };

/* Message buffers one iteration uses, each of the largest size (page rounded). */
enum cl_slots {
    CL_SLOTS_ONE,         /* one message at a time */
    CL_SLOTS_WINDOW,      /* a window of messages in flight (--window, on one buffer or one each) */
    CL_SLOTS_MESSAGES,    /* --messages messages each way */
    CL_SLOTS_PIECES,      /* --pieces pieces of one message */
    CL_SLOTS_RANKS,       /* a block per rank (collectives) */
    CL_SLOTS_NEIGHBOURS,  /* one per ring neighbour (2) */
    CL_SLOTS_HALO_BLOCKS  /* a 3x3x3 block with its halo (MPI-IO's file types: 27) */
};

/* Memory a kernel's set-up allocates besides the message buffers. */
enum cl_setup_memory { CL_SETUP_MEMORY_NONE, CL_SETUP_MEMORY_JACOBI_GRIDS };

struct cl_kernel {
    const char *name;     /* campaign key, e.g. "pingpong.send" */
    const char *family;   /* the kernels/<family>.c that holds its code */
    const char *metric;   /* one line: what one sample's time means */
    int min_ranks;
    /* Bytes the kernel moves per unit of its metric, in message sizes: bandwidth = factor x size x
     * (1, ranks or pairs) / time. A factor of 0 (not given) is 1: one message of the size. */
    struct { double factor; enum cl_per per; } bytes_moved;
    enum cl_slots slots;
    enum cl_setup_memory setup_memory;
    /* Scratch disk of the largest size a launch fills (io kernels): factor x size x (1 or ranks), and
     * what those files are, with {ranks} and {size} in place of the numbers. */
    struct { double factor; enum cl_per per; const char *files; } scratch;
    const char *options;  /* the kernel options (--help) it reads, separated by spaces (NULL: none) */
    const char *tags;     /* what the report groups it with, separated by spaces (NULL: none) */
    int mpi_major, mpi_minor;   /* the MPI version its calls need (0: any) */
    /* Its MPI calls come from several threads at once: commlens-kernels asks MPI_Init_thread for
     * MPI_THREAD_MULTIPLE for it alone (the others keep MPI_Init's level, which costs no locks). */
    int thread_multiple;
    /* It computes between its calls and compares that computation with the same one before MPI started:
     * commlens-kernels times cl_compute before MPI_Init for it alone (70 ms at least). */
    int computes;
    /* It times every ordered pair of ranks on its own, into ctx->pair_times: the point record then holds,
     * per sample, the matrix of pair times (source x destination) beside the sample's own time. */
    int pair_times;
    /* Its code, in kernels/<family>.c; NULL where the family was not built (the catalogue tool, or a
     * library whose mpi.h is older than mpi_major.mpi_minor or that the family did not compile with). */
    cl_run_fn *run;
    cl_setup_fn *setup;
    cl_teardown_fn *teardown;
};

/* Every kernel, in catalogue order, ended by an entry whose name is NULL. */
extern const struct cl_kernel cl_kernels[];

const struct cl_kernel *cl_find_kernel(const char *name);
/* The known kernel whose name is closest to `name` (a did-you-mean), or NULL when none is close. */
const struct cl_kernel *cl_closest_kernel(const char *name);
/* The kernel `name` if it can run on `nprocs` ranks (and, with `built`, is in this binary); else NULL and
 * why not in `error`, with the nearest name for one that is not a kernel. */
const struct cl_kernel *cl_runnable_kernel(const char *name, int nprocs, int built, char *error, size_t len);
/* One line per kernel, its name and metric (--list; --list --json and --describe give JSON Lines). */
void cl_list_kernels(FILE *out);
/* The catalogue as JSON Lines, one object per kernel. `built_mpi_major` > 0 adds, for a build against
 * an MPI of that version, whether each kernel is available in it and why not. */
void cl_describe_kernels(FILE *out, int built_mpi_major, int built_mpi_minor);
/* One kernel's description as a JSON object (no newline), as in --describe. */
void cl_describe_kernel(FILE *out, const struct cl_kernel *kernel, int built_mpi_major, int built_mpi_minor);

/* NULL, or why one of the sizes cannot be measured by this kernel with these options (`error` holds it): a
 * kernel that reads --partitions cuts each message into that many equal partitions of whole elements. */
struct cl_params;
const char *cl_check_kernel_sizes(const struct cl_kernel *kernel, const struct cl_params *params, const size_t *sizes,
                                  size_t n, size_t type_size, char *error, size_t len);
/* Whether the kernel's tags include `tag`. */
int cl_kernel_tagged(const struct cl_kernel *kernel, const char *tag);
/* 1, the ranks or the pairs of ranks on `nprocs` ranks. */
double cl_per_count(enum cl_per per, int nprocs);
/* Bytes one unit of the kernel's metric moves with messages of `size` on `nprocs` ranks (bandwidth =
 * this / time). */
double cl_bytes_moved(const struct cl_kernel *kernel, size_t size, int nprocs);
/* Whether people read the kernel as a bandwidth (MB/s) rather than a time (us): the streams with a window
 * of more than one message, the I/O kernels and a copy's peak. */
int cl_reads_as_bandwidth(const struct cl_kernel *kernel, int window);

const char *cl_slots_name(enum cl_slots slots);
const char *cl_per_name(enum cl_per per);

/* halo.jacobi2d's grid: (n + 2)^2 doubles with a one-cell halo, n = max_size / 8. */
static inline size_t cl_jacobi_grid_cells(size_t max_size)
{
    size_t n = max_size / sizeof(double);
    return (n + 2) * (n + 2);
}

/* JSON string literal of `text` (json.c). */
void cl_json_string(FILE *out, const char *text);

#endif
