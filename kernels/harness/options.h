/* The command line of commlens-kernels: every option, its default and its checks. No MPI here: the
 * catalogue tool checks a campaign's kernel options with the same parser before anything is built. */
#ifndef COMMLENS_OPTIONS_H
#define COMMLENS_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

/* --partitions: at most this many (each partition has its own thread). */
#define CL_MAX_PARTITIONS 256

/* Kernel parameters from the command line (see --help); a kernel reads those it uses. */
/* The largest --window: kernels keep a window's requests on the stack. */
#define CL_MAX_WINDOW 1024

struct cl_params {
    int window;          /* stream, rma, allpairs: messages in flight per iteration (default 64; rma 1), at
                          * most CL_MAX_WINDOW */
    int distinct_window; /* stream, multipair.stream, rma: a buffer per message of a window instead of
                          * one for all (osu_bw, osu_mbw_mr and NetPIPE post a window on one buffer) */
    int messages;        /* multipingpong: messages of one size each way (default 8) */
    int pieces;          /* pieces: the message is sent as this many pieces (default 4) */
    int partitions;      /* pingpong.partitioned: equal partitions of a message, a thread each (default 4) */
    const char *sync;    /* rma: fence | lock | flush */
    const char *halo;    /* halo: blocking | nonblocking */
    int nodes;           /* placement: ranks are block-mapped, nprocs / nodes per node */
    int proc_grid[2];    /* halo: process grid (0: MPI_Dims_create) */
    const char *method;  /* collectives: accurate | lower | upper | root | window (NULL: the kernel's default) */
    const char *scratch; /* io: directory for the files (removed afterwards) */
    int io_sync;         /* io: fdatasync after every write */
    int drop_cache;      /* io: ask the kernel to drop the file's pages before every read */
    double test_clock_offset, test_clock_drift; /* test only: the last rank's clock runs ahead by these */
    double test_late_entry;  /* test only: collectives' last rank enters every call this many seconds late */
    long test_slow_batches;  /* test only: the first N batches of each size read CL_SLOW_BATCH_S longer */
};

/* Timers selectable with --timer. */
enum cl_timer { CL_TIMER_MPI_WTIME, CL_TIMER_CLOCK_MONOTONIC };

/* Size schedules (see sizes.c). */
struct cl_schedule {
    const char *name; /* powers | netpipe | small | large | list */
    size_t min, max;
    int per_octave;   /* netpipe */
    size_t perturbation; /* netpipe */
    size_t step;      /* small */
    const char *list; /* list: "A,B,..." */
};

/* How a size is measured (see --help): samples to a precision target, or OSU's fixed iterations. */
enum cl_timing { CL_TIMING_PRECISION, CL_TIMING_OSU };
/* The OSU Micro-Benchmarks whose timing, defaults and table --osu follows (osu.c, console.c). */
#define CL_OSU_VERSION "7.4"

struct cl_options {
    const char *kernel;
    const char *output;       /* -o: JSON Lines there */
    int json;                 /* --json: JSON Lines on stdout (without -o or --json: a table) */
    struct cl_schedule schedule;
    int min_given, max_given; /* -m gave MIN, MAX (--sizes: both); else the schedule and kernel say (options.c) */
    enum cl_timing timing;
    long warmup;              /* -x: warm-up iterations per size */
    int warmup_given;
    long iterations;          /* -i: timed iterations per size (0: not given; see --help) */
    double rse_target;
    int min_samples, max_samples;
    double max_point_time_s;
    double min_sample_time_s; /* a sample lasts at least this long (and 100 timer ticks) */
    enum cl_timer timer;
    long shuffle_seed;        /* < 0: sizes in schedule order */
    const char *cache_mode;   /* reuse | rotate */
    size_t cache_bytes;       /* rotate: bytes cycled through per buffer (0: 2x the last-level cache) */
    size_t align;
    int integrity, inject_fault, print_sizes;
    const char *datatype;     /* byte | int | double */
    long hang_after;          /* test only: hang once this many points are written (< 0: never) */
    struct cl_params params;
    char error[512];          /* what cl_parse_options refused, when it did */
};

/* What a command line asks for besides measuring. */
enum cl_action { CL_MEASURE, CL_LIST, CL_LIST_JSON, CL_HELP };

/* Fills `o` from the command line; returns NULL, or a one-line message naming the option and value
 * that were refused (without the program's name), for rank 0 to print. */
const char *cl_parse_options(int argc, char **argv, struct cl_options *o, enum cl_action *action);
/* --help (usage.c). */
void cl_usage(FILE *out);
/* Bytes of one element of --datatype NAME. */
size_t cl_datatype_size(const char *name);

/* Size schedules: the count, and a malloc'ed array in *sizes (0: a bad schedule). */
size_t cl_size_schedule(const struct cl_schedule *schedule, size_t **sizes);
/* The sizes in a random order drawn from `seed`, the same on every platform. */
void cl_shuffle_sizes(size_t *sizes, size_t n, long seed);
/* NULL, or why a size cannot be sent with the datatype of `type_size` bytes (`error` holds it). */
const char *cl_check_sizes(const size_t *sizes, size_t n, size_t type_size, char *error, size_t len);

#endif
