/* commbench harness: the one place that owns timing, sizes, repetitions and
 * output records.  A kernel owns only its communication pattern. */
#ifndef COMMBENCH_HARNESS_H
#define COMMBENCH_HARNESS_H

#include <mpi.h>
#include <stddef.h>

#define CB_RECORD_SCHEMA 1

/* What a kernel sees: its communicator and two buffers at least as large as
 * the largest message of the run. */
struct cb_context {
    MPI_Comm comm;
    int rank;
    int nprocs;
    unsigned char *send_buf;
    unsigned char *recv_buf;
};

struct cb_kernel {
    const char *name;   /* campaign key, e.g. "pingpong.send" */
    const char *metric; /* one line: what one sample's time means */
    int min_ranks;
    /* One sample is reported per this many legs of an iteration:
     * a ping-pong iteration is a round trip, reported as half of it. */
    int legs_per_iteration;
    /* Run `iterations` repetitions of the pattern with messages of `size` bytes. */
    void (*run)(const struct cb_context *ctx, size_t size, long iterations);
};

/* Each kernel family exports its kernels through one of these tables,
 * terminated by an entry whose name is NULL. */
extern const struct cb_kernel cb_pingpong_kernels[];

const struct cb_kernel *cb_find_kernel(const char *name);
void cb_list_kernels(void);

/* Timers selectable with --timer. */
enum cb_timer { CB_TIMER_MPI_WTIME, CB_TIMER_CLOCK_MONOTONIC };
double cb_now(enum cb_timer timer);
const char *cb_timer_name(enum cb_timer timer);

/* Size schedules: fills *sizes (malloc'ed) and returns the count. */
size_t cb_size_schedule(const char *schedule, size_t min, size_t max,
                        const char *list, size_t **sizes);

/* JSON Lines writer. */
#include <stdio.h>
void cb_json_string(FILE *out, const char *text);

#endif
