/* The console (console.c): a table on stdout, or a line per size on stderr. Rank 0 only. */
#ifndef COMMLENS_CONSOLE_H
#define COMMLENS_CONSOLE_H

#include "harness.h"

struct cl_console {
    FILE *table;        /* stdout without -o or --json, else NULL */
    FILE *progress;     /* a line per size when there is no table */
    const struct cl_kernel *kernel;
    int bandwidth;      /* rows in MB/s (cl_reads_as_bandwidth), else us */
    int nprocs;
    enum cl_timing timing;
    int integrity;
};

/* Sets up `c`; on rank 0 with a table, prints its header. */
void cl_console_begin(struct cl_console *c, const struct cl_options *o, const struct cl_kernel *kernel,
                      const struct cl_context *ctx);
/* One measured size (rank 0). */
void cl_console_point(const struct cl_console *c, const struct cl_point *p);

#endif
