/* A 2D Jacobi iteration on a block decomposition: each rank holds an n x n block
 * of doubles (n = size / 8, so `size` is the bytes of one halo edge), swaps its
 * four halo edges with its neighbours and updates its block.  --halo blocking
 * swaps with MPI_Sendrecv before updating; nonblocking posts Irecv/Isend, updates
 * the interior while the edges travel, then the border.  --proc-grid PXxPY fixes
 * the process grid (default: MPI_Dims_create). */
#include <stdlib.h>
#include <string.h>

#include "patterns.h"

struct halo_state {
    MPI_Comm cart;
    int up, down, left, right;
    double *grid, *next;        /* (n + 2) x (n + 2) with a one-cell halo */
    double *edges;              /* left/right columns packed: send L, send R, recv L, recv R */
    size_t capacity;            /* n the arrays were allocated for */
    int nonblocking;
};

static struct halo_state halo;

#define AT(a, n, i, j) (a)[(size_t)(i) * ((n) + 2) + (j)]

const char *halo_setup(struct cl_context *ctx, size_t max_size)
{
    if (ctx->type_size != 1) return "halo.jacobi2d works on doubles; leave --datatype as byte";
    if (ctx->integrity) return "halo.jacobi2d has no integrity mode";
    int dims[2] = {ctx->params.proc_grid[0], ctx->params.proc_grid[1]}, periods[2] = {0, 0};
    if (dims[0] > 0 && dims[0] * dims[1] != ctx->nprocs) return "--proc-grid must multiply to the number of ranks";
    MPI_Dims_create(ctx->nprocs, 2, dims);
    MPI_Cart_create(ctx->comm, 2, dims, periods, 0, &halo.cart);
    MPI_Cart_shift(halo.cart, 0, 1, &halo.up, &halo.down);
    MPI_Cart_shift(halo.cart, 1, 1, &halo.left, &halo.right);
    halo.capacity = max_size / sizeof(double);
    size_t cells = cl_jacobi_grid_cells(max_size);   /* what the catalogue tool estimates, too */
    if (halo.capacity > 8192) return "sizes above 64 KiB (8192 x 8192 doubles per rank) are refused";
    halo.grid = calloc(cells, sizeof(double));
    halo.next = calloc(cells, sizeof(double));
    halo.edges = calloc(4 * (halo.capacity + 2), sizeof(double));
    if (!halo.grid || !halo.next || !halo.edges) return "cannot allocate the grid";
    for (size_t c = 0; c < cells; c++) halo.grid[c] = (double)(c % 97) / 97.0;
    halo.nonblocking = strcmp(ctx->params.halo, "nonblocking") == 0;
    ctx->state = &halo;
    return NULL;
}

void halo_teardown(struct cl_context *ctx)
{
    free(halo.grid);
    free(halo.next);
    free(halo.edges);
    MPI_Comm_free(&halo.cart);
    ctx->state = NULL;
}

static void update(double *next, const double *grid, int n, int first_row, int last_row, int first_col, int last_col)
{
    for (int i = first_row; i <= last_row; i++)
        for (int j = first_col; j <= last_col; j++)
            AT(next, n, i, j) = 0.25 * (AT(grid, n, i - 1, j) + AT(grid, n, i + 1, j)
                                        + AT(grid, n, i, j - 1) + AT(grid, n, i, j + 1));
}

double jacobi2d(struct cl_context *ctx, size_t size, long iterations)
{
    (void)ctx;  /* the decomposition lives in the state set up once */
    int n = (int)(size / sizeof(double));
    if (n < 1) return 1;
    double *sendL = halo.edges, *sendR = sendL + n, *recvL = sendR + n, *recvR = recvL + n;
    MPI_Request r[8];
    for (long it = 0; it < iterations; it++) {
        double *g = halo.grid;
        for (int i = 0; i < n; i++) { sendL[i] = AT(g, n, i + 1, 1); sendR[i] = AT(g, n, i + 1, n); }
        if (halo.nonblocking) {
            MPI_Irecv(&AT(g, n, 0, 1), n, MPI_DOUBLE, halo.up, 0, halo.cart, &r[0]);
            MPI_Irecv(&AT(g, n, n + 1, 1), n, MPI_DOUBLE, halo.down, 1, halo.cart, &r[1]);
            MPI_Irecv(recvL, n, MPI_DOUBLE, halo.left, 2, halo.cart, &r[2]);
            MPI_Irecv(recvR, n, MPI_DOUBLE, halo.right, 3, halo.cart, &r[3]);
            MPI_Isend(&AT(g, n, n, 1), n, MPI_DOUBLE, halo.down, 0, halo.cart, &r[4]);
            MPI_Isend(&AT(g, n, 1, 1), n, MPI_DOUBLE, halo.up, 1, halo.cart, &r[5]);
            MPI_Isend(sendR, n, MPI_DOUBLE, halo.right, 2, halo.cart, &r[6]);
            MPI_Isend(sendL, n, MPI_DOUBLE, halo.left, 3, halo.cart, &r[7]);
            update(halo.next, g, n, 2, n - 1, 2, n - 1);           /* the interior needs no halo */
            MPI_Waitall(8, r, MPI_STATUSES_IGNORE);
        } else {
            MPI_Sendrecv(&AT(g, n, n, 1), n, MPI_DOUBLE, halo.down, 0, &AT(g, n, 0, 1), n, MPI_DOUBLE, halo.up, 0,
                         halo.cart, MPI_STATUS_IGNORE);
            MPI_Sendrecv(&AT(g, n, 1, 1), n, MPI_DOUBLE, halo.up, 1, &AT(g, n, n + 1, 1), n, MPI_DOUBLE, halo.down, 1,
                         halo.cart, MPI_STATUS_IGNORE);
            MPI_Sendrecv(sendR, n, MPI_DOUBLE, halo.right, 2, recvL, n, MPI_DOUBLE, halo.left, 2, halo.cart,
                         MPI_STATUS_IGNORE);
            MPI_Sendrecv(sendL, n, MPI_DOUBLE, halo.left, 3, recvR, n, MPI_DOUBLE, halo.right, 3, halo.cart,
                         MPI_STATUS_IGNORE);
        }
        if (halo.left != MPI_PROC_NULL) for (int i = 0; i < n; i++) AT(g, n, i + 1, 0) = recvL[i];
        if (halo.right != MPI_PROC_NULL) for (int i = 0; i < n; i++) AT(g, n, i + 1, n + 1) = recvR[i];
        if (halo.nonblocking) {
            update(halo.next, g, n, 1, 1, 1, n);
            if (n > 1) update(halo.next, g, n, n, n, 1, n);
            update(halo.next, g, n, 2, n - 1, 1, 1);
            if (n > 1) update(halo.next, g, n, 2, n - 1, n, n);
        } else {
            update(halo.next, g, n, 1, n, 1, n);
        }
        halo.grid = halo.next;
        halo.next = g;
    }
    return 1;
}
