/* The console (console.c): a table on stdout, or a line per size on stderr. Rank 0 only. */
#ifndef COMMBENCH_CONSOLE_H
#define COMMBENCH_CONSOLE_H

#include "harness.h"

struct cb_console {
    FILE *table;        /* stdout without -o or --json, else NULL */
    FILE *progress;     /* a line per size when there is no table */
    const struct cb_kernel *kernel;
    int bandwidth;      /* rows in MB/s (cb_reads_as_bandwidth), else us */
    int nprocs;
    enum cb_timing timing;
    int integrity;
};

/* Sets up `c`; on rank 0 with a table, prints its header. */
void cb_console_begin(struct cb_console *c, const struct cb_options *o, const struct cb_kernel *kernel,
                      const struct cb_context *ctx);
/* One measured size (rank 0). */
void cb_console_point(const struct cb_console *c, const struct cb_point *p);

#endif
