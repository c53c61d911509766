/* commbench-catalogue: the kernel catalogue without MPI, built with the host's C compiler so that a
 * campaign can be checked before any MPI library is installed.
 *
 *   commbench-catalogue --describe                      every kernel, JSON Lines (as --describe of a build)
 *   commbench-catalogue --list [--json]                 every kernel, one line each (--json: as --describe)
 *   commbench-catalogue --needs RANKS KERNEL [options]  the options checked as commbench-kernels checks
 *                                                       them, and what one launch on RANKS ranks allocates
 *                                                       (JSON); exit 2 and the message where they are bad */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffers.h"
#include "catalogue.h"
#include "options.h"

static int needs(int ranks, int argc, char **argv)
{
    struct cb_options o;
    enum cb_action action;
    const char *error = cb_parse_options(argc, argv, &o, &action);
    const struct cb_kernel *kernel = NULL;
    size_t *sizes = NULL, nsizes = 0;
    char problem[512];
    if (!error && action != CB_MEASURE) error = "--needs takes a kernel and its options, not --list or --help";
    if (!error && !(nsizes = cb_size_schedule(&o.schedule, &sizes)))
        error = "no sizes: the schedule between -m's MIN and MAX is empty";
    if (!error && !(kernel = cb_runnable_kernel(o.kernel, ranks, 0, problem, sizeof problem))) error = problem;
    if (!error) error = cb_check_sizes(sizes, nsizes, cb_datatype_size(o.datatype), problem, sizeof problem);
    if (!error) error = cb_check_kernel_sizes(kernel, &o.params, sizes, nsizes, cb_datatype_size(o.datatype), problem,
                                              sizeof problem);
    if (error) {
        fprintf(stderr, "commbench-kernels: %s\n", error);
        free(sizes);
        return 2;
    }
    size_t largest = 1;
    for (size_t i = 0; i < nsizes; i++) if (sizes[i] > largest) largest = sizes[i];
    free(sizes);
    printf("{\"kernel\":");
    cb_json_string(stdout, kernel->name);
    printf(",\"ranks\":%d,\"sizes\":%zu,\"largest\":%zu,\"slots\":%d,\"slots_from\":\"%s\",\"rotate\":%s,"
           "\"buffer_bytes\":%zu,\"setup_bytes\":%zu,\"memory_per_rank\":%zu,\"scratch_bytes\":%zu}\n",
           ranks, nsizes, largest, cb_kernel_slots(kernel, &o.params, ranks), cb_slots_name(kernel->slots),
           strcmp(o.cache_mode, "rotate") == 0 ? "true" : "false", cb_buffer_bytes(kernel, &o, largest, ranks),
           cb_setup_bytes(kernel, largest), cb_memory_per_rank(kernel, &o, largest, ranks), cb_scratch_bytes(kernel, largest, ranks));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--describe") == 0) {
        cb_describe_kernels(stdout, 0, 0);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        cb_list_kernels(stdout);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "--list") == 0 && strcmp(argv[2], "--json") == 0) {
        cb_describe_kernels(stdout, 0, 0);
        return 0;
    }
    if (argc >= 4 && strcmp(argv[1], "--needs") == 0) {
        char *end;
        long ranks = strtol(argv[2], &end, 10);
        if (*end || ranks < 1 || ranks > 1 << 20) {
            fprintf(stderr, "commbench-catalogue: --needs expects a number of ranks, got %s\n", argv[2]);
            return 2;
        }
        argv[2] = argv[0];   /* the parser reads argv[1:] as commbench-kernels' own command line */
        return needs((int)ranks, argc - 2, argv + 2);
    }
    fputs("usage: commbench-catalogue --describe | --list [--json] | --needs RANKS KERNEL [options]\n", stderr);
    return 2;
}
