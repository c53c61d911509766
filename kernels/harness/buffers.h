/* Message buffers: how large they are for a kernel and its options, and how messages sit in them.
 * No MPI here: the catalogue tool estimates a launch's memory with the same code the harness
 * allocates with. */
#ifndef COMMLENS_BUFFERS_H
#define COMMLENS_BUFFERS_H

#include <stddef.h>

#include "catalogue.h"
#include "options.h"

#define CL_PAGE 4096

/* Message buffers as the cache mode lays them out.  With `slots` > 1 ("rotate",
 * NetPIPE's no-cache mode) iteration i uses slot i % slots of a buffer larger
 * than the last-level cache, so no message starts out cached. */
struct cl_buffer {
    unsigned char *base; /* page aligned allocation */
    size_t bytes;        /* of the allocation */
    size_t align;        /* offset of every message from a page boundary */
    size_t stride;       /* bytes between slots */
    long slots;
    long cursor;         /* slot the next batch starts at: rotation carries on across batches */
};

/* Message buffers one iteration of `kernel` uses with these parameters on `nprocs` ranks. */
int cl_kernel_slots(const struct cl_kernel *kernel, const struct cl_params *params, int nprocs);
/* Bytes of each of the send and receive buffers for messages up to `largest`. */
size_t cl_buffer_bytes(const struct cl_kernel *kernel, const struct cl_options *o, size_t largest, int nprocs);
/* Memory a kernel's set-up allocates besides the buffers, for messages up to `largest`. */
size_t cl_setup_bytes(const struct cl_kernel *kernel, size_t largest);
/* Memory one rank allocates: both buffers (with alignment and a guard page) and what set-up adds. */
size_t cl_memory_per_rank(const struct cl_kernel *kernel, const struct cl_options *o, size_t largest, int nprocs);
/* Scratch disk one launch fills at its largest size (io kernels; 0 for the others). */
size_t cl_scratch_bytes(const struct cl_kernel *kernel, size_t largest, int nprocs);
/* The last-level cache, as rotate mode sizes its buffer (32 MiB where the system does not say). */
size_t cl_last_level_cache_bytes(void);

int cl_allocate(struct cl_buffer *b, size_t bytes, size_t align);
/* Slots a page-rounded stride apart for messages of `size`: the kernel's own count, or in rotate
 * mode as many as the buffer holds. */
void cl_lay_out(struct cl_buffer *b, const struct cl_options *o, size_t size, int kernel_slots);

#endif
