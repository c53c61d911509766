/* commbench-kernels: MPI around the one entry point; libcommbench-kernels.so leaves MPI to its caller. */
#include "commbench.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int status = commbench_run(MPI_COMM_WORLD, argc, argv);
    MPI_Finalize();
    return status;
}
