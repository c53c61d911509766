/* commlens-catalogue: the kernel catalogue without MPI, built with the host's C compiler so that a
 * campaign can be checked before any MPI library is installed.
 *
 *   commlens-catalogue --describe                      every kernel, JSON Lines (as --describe of a build)
 *   commlens-catalogue --list [--json]                 every kernel, one line each (--json: as --describe)
 *   commlens-catalogue --needs RANKS KERNEL [options]  the options checked as commlens-kernels checks
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
    struct cl_options o;
    enum cl_action action;
    const char *error = cl_parse_options(argc, argv, &o, &action);
    const struct cl_kernel *kernel = NULL;
    size_t *sizes = NULL, nsizes = 0;
    char problem[512];
    if (!error && action != CL_MEASURE) error = "--needs takes a kernel and its options, not --list or --help";
    if (!error && !(nsizes = cl_size_schedule(&o.schedule, &sizes)))
        error = "no sizes: the schedule between -m's MIN and MAX is empty";
    if (!error && !(kernel = cl_runnable_kernel(o.kernel, ranks, 0, problem, sizeof problem))) error = problem;
    if (!error) error = cl_check_sizes(sizes, nsizes, cl_datatype_size(o.datatype), problem, sizeof problem);
    if (!error) error = cl_check_kernel_sizes(kernel, &o.params, sizes, nsizes, cl_datatype_size(o.datatype), problem,
                                              sizeof problem);
    if (error) {
        fprintf(stderr, "commlens-kernels: %s\n", error);
        free(sizes);
        return 2;
    }
    size_t largest = 1;
    for (size_t i = 0; i < nsizes; i++) if (sizes[i] > largest) largest = sizes[i];
    free(sizes);
    printf("{\"kernel\":");
    cl_json_string(stdout, kernel->name);
    printf(",\"ranks\":%d,\"sizes\":%zu,\"largest\":%zu,\"slots\":%d,\"slots_from\":\"%s\",\"rotate\":%s,"
           "\"buffer_bytes\":%zu,\"setup_bytes\":%zu,\"memory_per_rank\":%zu,\"scratch_bytes\":%zu}\n",
           ranks, nsizes, largest, cl_kernel_slots(kernel, &o.params, ranks), cl_slots_name(kernel->slots),
           strcmp(o.cache_mode, "rotate") == 0 ? "true" : "false", cl_buffer_bytes(kernel, &o, largest, ranks),
           cl_setup_bytes(kernel, largest), cl_memory_per_rank(kernel, &o, largest, ranks), cl_scratch_bytes(kernel, largest, ranks));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--describe") == 0) {
        cl_describe_kernels(stdout, 0, 0);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        cl_list_kernels(stdout);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "--list") == 0 && strcmp(argv[2], "--json") == 0) {
        cl_describe_kernels(stdout, 0, 0);
        return 0;
    }
    if (argc >= 4 && strcmp(argv[1], "--needs") == 0) {
        char *end;
        long ranks = strtol(argv[2], &end, 10);
        if (*end || ranks < 1 || ranks > 1 << 20) {
            fprintf(stderr, "commlens-catalogue: --needs expects a number of ranks, got %s\n", argv[2]);
            return 2;
        }
        argv[2] = argv[0];   /* the parser reads argv[1:] as commlens-kernels' own command line */
        return needs((int)ranks, argc - 2, argv + 2);
    }
    fputs("usage: commlens-catalogue --describe | --list [--json] | --needs RANKS KERNEL [options]\n", stderr);
    return 2;
}
