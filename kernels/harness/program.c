/* commlens-kernels: MPI around the one entry point; libcommlens-kernels.so leaves MPI to its caller. */
#include <stdlib.h>
#include <string.h>

#include "commlens.h"
#include "harness.h"
#include "mpit.h"

/* This process's rank as its launcher set it, before MPI is up (0 when not launched by one). */
static long launched_rank(void)
{
    static const char *const variables[] = {"PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof variables / sizeof variables[0]; i++) {
        const char *value = getenv(variables[i]);
        if (value && *value) return strtol(value, NULL, 10);
    }
    return 0;
}

int main(int argc, char **argv)
{
    /* Help and the kernel listings need no MPI: a build records the catalogue even where a library
     * cannot start a singleton (Open MPI 4.1's relocated wheel looks for orted under its build prefix).
     * Under mpiexec, rank 0 alone answers. */
    struct cl_options o;
    enum cl_action action;
    if (argc == 2 && strcmp(argv[1], "--describe-cvars") == 0) {
        /* The build's record of the library's control variables (commlens.launch.build, under mpiexec -n 1):
         * what every launch's mpi_t record leaves out, said once per library. Not an option of the kernels. */
        MPI_Init(&argc, &argv);
        int rank;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        if (rank == 0) cl_describe_cvars(stdout);
        MPI_Finalize();
        return 0;
    }
    if (!cl_parse_options(argc, argv, &o, &action) && action != CL_MEASURE) {
        if (launched_rank() == 0) cl_answer(action);
        return 0;
    }
    const struct cl_kernel *kernel = o.kernel ? cl_find_kernel(o.kernel) : NULL;
    if (kernel && kernel->computes) cl_compute_unit_s_before_mpi = cl_compute_unit_s(CL_TIMER_CLOCK_MONOTONIC);
    if (kernel && kernel->thread_multiple) {
        int provided;   /* the kernel's set-up refuses a level below what it needs, with the level it got */
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    } else {
        MPI_Init(&argc, &argv);
    }
    int status = commlens_run(MPI_COMM_WORLD, argc, argv);
    MPI_Finalize();
    return status;
}
