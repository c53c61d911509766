/* Sizing and laying out message buffers (see buffers.h); no MPI. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buffers.h"

static size_t page_round(size_t bytes)
{
    return bytes ? (bytes + CL_PAGE - 1) / CL_PAGE * CL_PAGE : CL_PAGE;
}

int cl_kernel_slots(const struct cl_kernel *kernel, const struct cl_params *params, int nprocs)
{
    switch (kernel->slots) {
    case CL_SLOTS_WINDOW: return params->distinct_window ? params->window : 1;
    case CL_SLOTS_MESSAGES: return params->messages;
    case CL_SLOTS_PIECES: return params->pieces;
    case CL_SLOTS_RANKS: return nprocs;
    case CL_SLOTS_NEIGHBOURS: return 2;
    case CL_SLOTS_HALO_BLOCKS: return 27;
    case CL_SLOTS_ONE: break;
    }
    return 1;
}

size_t cl_last_level_cache_bytes(void)
{
    long bytes = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
    bytes = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (bytes <= 0) bytes = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    return bytes > 0 ? (size_t)bytes : (size_t)32 << 20;
}

size_t cl_buffer_bytes(const struct cl_kernel *kernel, const struct cl_options *o, size_t largest, int nprocs)
{
    size_t bytes = page_round(largest) * (size_t)cl_kernel_slots(kernel, &o->params, nprocs);
    if (strcmp(o->cache_mode, "rotate") == 0) {
        size_t wanted = o->cache_bytes ? o->cache_bytes : 2 * cl_last_level_cache_bytes();
        bytes = wanted > 2 * bytes ? wanted : 2 * bytes;
    }
    return bytes;
}

size_t cl_setup_bytes(const struct cl_kernel *kernel, size_t largest)
{
    /* halo.jacobi2d's set-up: the grid and the next one */
    return kernel->setup_memory == CL_SETUP_MEMORY_JACOBI_GRIDS ? 2 * cl_jacobi_grid_cells(largest) * sizeof(double) : 0;
}

size_t cl_memory_per_rank(const struct cl_kernel *kernel, const struct cl_options *o, size_t largest, int nprocs)
{
    return 2 * (cl_buffer_bytes(kernel, o, largest, nprocs) + o->align + CL_PAGE) + cl_setup_bytes(kernel, largest);
}

size_t cl_scratch_bytes(const struct cl_kernel *kernel, size_t largest, int nprocs)
{
    return (size_t)(kernel->scratch.factor * cl_per_count(kernel->scratch.per, nprocs) * (double)largest);
}

int cl_allocate(struct cl_buffer *b, size_t bytes, size_t align)
{
    b->align = align;
    b->slots = 1;
    b->stride = 0;
    b->bytes = bytes + align + CL_PAGE;
    if (posix_memalign((void **)&b->base, CL_PAGE, b->bytes)) return -1;
    memset(b->base, 0, b->bytes);
    return 0;
}

void cl_lay_out(struct cl_buffer *b, const struct cl_options *o, size_t size, int kernel_slots)
{
    size_t usable = b->bytes - b->align - CL_PAGE;
    b->stride = page_round(size);
    b->slots = kernel_slots;
    b->cursor = 0;
    if (strcmp(o->cache_mode, "rotate") == 0 && (long)(usable / b->stride) > b->slots)
        b->slots = (long)(usable / b->stride);
}
