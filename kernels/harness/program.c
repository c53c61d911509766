/* commbench-kernels: MPI around the one entry point; libcommbench-kernels.so leaves MPI to its caller. */
#include <string.h>

#include "commbench.h"
#include "harness.h"

int main(int argc, char **argv)
{
    /* Listing and describing the kernels needs no MPI: a build records them even where a library
     * cannot start a singleton (Open MPI 4.1's relocated wheel looks for orted under its build prefix). */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--list") == 0) {
            cb_list_kernels(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--describe") == 0) {
            cb_describe_kernels(stdout, MPI_VERSION, MPI_SUBVERSION);
            return 0;
        }
    }
    MPI_Init(&argc, &argv);
    int status = commbench_run(MPI_COMM_WORLD, argc, argv);
    MPI_Finalize();
    return status;
}
