/* Prints commlens-kernels --help (kernels/harness/usage.c) without MPI, for the documentation's options
 * page: the binary's own words are the one description of its options. */
#include <stdio.h>

#include "options.h"

int main(void)
{
    cl_usage(stdout);
    return 0;
}
