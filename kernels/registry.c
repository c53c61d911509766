/* The kernels this binary knows, one table per family (NULL: the family was not built). */
#include <stdio.h>
#include <string.h>

#include "harness/harness.h"

static const struct cb_kernel *const families[] = {
    cb_pingpong_kernels, cb_twoway_kernels,   cb_stream_kernels, cb_rma_kernels,     cb_multipair_kernels,
    cb_multipingpong_kernels, cb_ring_kernels, cb_halo_kernels,   cb_baseline_kernels, cb_collective_kernels,
    cb_io_kernels,            cb_thread_kernels,
};

const struct cb_kernel *cb_find_kernel(const char *name)
{
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
        for (const struct cb_kernel *k = families[f]; k && k->name; k++)
            if (strcmp(k->name, name) == 0) return k;
    return NULL;
}

void cb_list_kernels(void)
{
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
        for (const struct cb_kernel *k = families[f]; k && k->name; k++) {
            printf("{\"kernel\":");
            cb_json_string(stdout, k->name);
            printf(",\"min_ranks\":%d,\"metric\":", k->min_ranks);
            cb_json_string(stdout, k->metric);
            printf("}\n");
        }
}
