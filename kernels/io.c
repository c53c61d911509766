/* File I/O, EPCC's four strategies.  `size` is bytes per task; files live in
 * --scratch (the launcher gives each launch its own directory and removes it,
 * also when the launch fails); the kernel removes its files at the end.
 * Reads may be served from the page cache unless --drop-cache asks the kernel
 * to drop the file's pages first; --io-sync adds fdatasync after writes. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "patterns.h"

struct io_state {
    char own[4096], shared[4096];
    int own_fd, shared_fd;
    MPI_File mpi_file;
    MPI_Datatype file_view, memory_view;
    int block;           /* io.mpiio_all: edge of the local block, in doubles */
};

static struct io_state io = {.own_fd = -1, .shared_fd = -1, .mpi_file = MPI_FILE_NULL};

static const char *scratch_dir(const struct cl_context *ctx)
{
    if (ctx->params.scratch) return ctx->params.scratch;
    const char *tmp = getenv("TMPDIR");
    return tmp && *tmp ? tmp : "/tmp";
}

static int write_at(int fd, const unsigned char *p, size_t n, off_t offset)
{
    while (n) {
        ssize_t done = pwrite(fd, p, n, offset);
        if (done <= 0) return -1;
        p += done; n -= (size_t)done; offset += done;
    }
    return 0;
}

static int read_at(int fd, unsigned char *p, size_t n, off_t offset)
{
    while (n) {
        ssize_t done = pread(fd, p, n, offset);
        if (done <= 0) return -1;
        p += done; n -= (size_t)done; offset += done;
    }
    return 0;
}

static void fail(struct cl_context *ctx, const char *what)
{
    fprintf(stderr, "io: %s failed in %s\n", what, scratch_dir(ctx));
    MPI_Abort(ctx->comm, 5);
}

const char *io_setup(struct cl_context *ctx, size_t max_size)
{
    if (ctx->integrity) return "io kernels have no integrity mode";
    snprintf(io.own, sizeof io.own, "%s/commlens-io-own-%d", scratch_dir(ctx), ctx->rank);
    snprintf(io.shared, sizeof io.shared, "%s/commlens-io-shared", scratch_dir(ctx));
    io.own_fd = open(io.own, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (ctx->rank == 0) {
        int fd = open(io.shared, O_RDWR | O_CREAT | O_TRUNC, 0600);
        /* io.read_same reads what is there: give it a whole file to read. */
        if (fd < 0 || write_at(fd, ctx->send.base, max_size, 0)) return "cannot create the shared file";
        close(fd);
    }
    MPI_Barrier(ctx->comm);
    io.shared_fd = open(io.shared, O_RDWR);
    snprintf(ctx->info, sizeof ctx->info, "{\"scratch\":\"%s\",\"io_sync\":%s,\"drop_cache\":%s}",
             scratch_dir(ctx), ctx->params.io_sync ? "true" : "false", ctx->params.drop_cache ? "true" : "false");
    return io.own_fd < 0 || io.shared_fd < 0 ? "cannot open files in the scratch directory" : NULL;
}

void io_teardown(struct cl_context *ctx)
{
    if (io.own_fd >= 0) close(io.own_fd);
    if (io.shared_fd >= 0) close(io.shared_fd);
    io.own_fd = io.shared_fd = -1;
    unlink(io.own);
    MPI_Barrier(ctx->comm);
    if (ctx->rank == 0) unlink(io.shared);
}

static void settle(struct cl_context *ctx, int fd, int wrote)
{
    if (wrote && ctx->params.io_sync && fdatasync(fd)) fail(ctx, "fdatasync");
    if (!wrote && ctx->params.drop_cache) posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
}

enum io_mode { OWN_FILE, SHARED_FILE, READ_SAME };

static double posix_io(struct cl_context *ctx, size_t size, long iterations, enum io_mode mode)
{
    unsigned char *data = ctx->send.base + ctx->send.align, *back = ctx->recv.base + ctx->recv.align;
    for (long i = 0; i < iterations; i++) {
        if (mode == OWN_FILE) {
            if (write_at(io.own_fd, data, size, 0)) fail(ctx, "write");
            settle(ctx, io.own_fd, 1);
            settle(ctx, io.own_fd, 0);
            if (read_at(io.own_fd, back, size, 0)) fail(ctx, "read");
        } else if (mode == SHARED_FILE) {
            if (write_at(io.shared_fd, data, size, (off_t)ctx->rank * (off_t)size)) fail(ctx, "write");
            settle(ctx, io.shared_fd, 1);
        } else {
            settle(ctx, io.shared_fd, 0);
            if (read_at(io.shared_fd, back, size, 0)) fail(ctx, "read");
        }
        MPI_Barrier(ctx->comm);   /* the strategy's time is until the last task is done */
    }
    return 1;
}

double own_file(struct cl_context *c, size_t s, long n) { return posix_io(c, s, n, OWN_FILE); }
double shared_file(struct cl_context *c, size_t s, long n) { return posix_io(c, s, n, SHARED_FILE); }
double read_same(struct cl_context *c, size_t s, long n) { return posix_io(c, s, n, READ_SAME); }

/* io.mpiio_all: each task holds an n^3 block of doubles with a one-cell halo; the
 * memory type strips the halo and the file view places the block in the global
 * 3D array, so one write_all and one read_all move the whole array. */
static int block_edge(size_t size) { int n = 1; while ((size_t)(n + 1) * (n + 1) * (n + 1) * 8 <= size) n++; return n; }

const char *mpiio_setup(struct cl_context *ctx, size_t max_size)
{
    if (ctx->integrity) return "io kernels have no integrity mode";
    if (max_size < 8) return "io.mpiio_all needs sizes of at least 8 bytes (one double)";
    char path[4096];
    snprintf(path, sizeof path, "%s/commlens-io-mpiio", scratch_dir(ctx));
    int rc = MPI_File_open(ctx->comm, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                           MPI_INFO_NULL, &io.mpi_file);
    if (rc != MPI_SUCCESS) return "MPI_File_open failed in the scratch directory";
    /* Record the hints the library chose: they decide much of MPI-IO's performance. */
    MPI_Info info;
    int nkeys, used = snprintf(ctx->info, sizeof ctx->info, "{\"scratch\":\"%s\",\"hints\":{", scratch_dir(ctx));
    MPI_File_get_info(io.mpi_file, &info);
    MPI_Info_get_nkeys(info, &nkeys);
    for (int k = 0; k < nkeys && used < (int)sizeof ctx->info - 200; k++) {
        char key[MPI_MAX_INFO_KEY + 1], value[128];
        int length = sizeof value - 1, flag;
        MPI_Info_get_nthkey(info, k, key);
#if MPI_VERSION >= 4
        MPI_Info_get_string(info, key, &length, value, &flag);
#else   /* MPI-3 libraries (Open MPI 4.1, MPICH 3.4): the call MPI-4 deprecated, same result here */
        MPI_Info_get(info, key, length, value, &flag);
        if (!flag) value[0] = '\0';
#endif
        for (char *c = value; *c; c++) if (*c == '"' || *c == '\\' || *c < 0x20) *c = '_';
        used += snprintf(ctx->info + used, sizeof ctx->info - (size_t)used, "%s\"%s\":\"%s\"", k ? "," : "", key, value);
    }
    snprintf(ctx->info + used, sizeof ctx->info - (size_t)used, "}}");
    MPI_Info_free(&info);
    return NULL;
}

void mpiio_teardown(struct cl_context *ctx)
{
    (void)ctx;
    if (io.mpi_file != MPI_FILE_NULL) MPI_File_close(&io.mpi_file);   /* deletes the file */
}

static void set_views(struct cl_context *ctx, int n)
{
    if (io.block == n) return;
    if (io.block) { MPI_Type_free(&io.file_view); MPI_Type_free(&io.memory_view); }
    int dims[3] = {0, 0, 0}, periods[3] = {0, 0, 0}, coords[3];
    MPI_Comm cart;
    MPI_Dims_create(ctx->nprocs, 3, dims);
    MPI_Cart_create(ctx->comm, 3, dims, periods, 0, &cart);
    MPI_Cart_coords(cart, ctx->rank, 3, coords);
    MPI_Comm_free(&cart);
    int global[3], local[3] = {n, n, n}, start[3], with_halo[3] = {n + 2, n + 2, n + 2}, inner[3] = {1, 1, 1};
    for (int d = 0; d < 3; d++) { global[d] = dims[d] * n; start[d] = coords[d] * n; }
    MPI_Type_create_subarray(3, global, local, start, MPI_ORDER_C, MPI_DOUBLE, &io.file_view);
    MPI_Type_create_subarray(3, with_halo, local, inner, MPI_ORDER_C, MPI_DOUBLE, &io.memory_view);
    MPI_Type_commit(&io.file_view);
    MPI_Type_commit(&io.memory_view);
    MPI_File_set_view(io.mpi_file, 0, MPI_DOUBLE, io.file_view, "native", MPI_INFO_NULL);
    io.block = n;
}

double mpiio_all(struct cl_context *ctx, size_t size, long iterations)
{
    if (iterations == 0) return 1;
    int n = block_edge(size);
    set_views(ctx, n);
    /* The block with its halo must fit the buffers: (n+2)^3 doubles. */
    if ((size_t)(n + 2) * (n + 2) * (n + 2) * 8 > ctx->send.bytes - ctx->send.align) fail(ctx, "buffer size");
    for (long i = 0; i < iterations; i++) {
        MPI_File_write_at_all(io.mpi_file, 0, ctx->send.base + ctx->send.align, 1, io.memory_view, MPI_STATUS_IGNORE);
        if (ctx->params.io_sync) MPI_File_sync(io.mpi_file);
        MPI_File_read_at_all(io.mpi_file, 0, ctx->recv.base + ctx->recv.align, 1, io.memory_view, MPI_STATUS_IGNORE);
    }
    return 1;
}
