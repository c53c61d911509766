/* The library's control variables, read through the MPI tool information interface (MPI_T, MPI-3). */
#ifndef COMMLENS_MPIT_H
#define COMMLENS_MPIT_H

#include <stdio.h>

/* The launch's "mpi_t" record: every control variable's value as this process reads it after MPI_Init
 * (those bound to no MPI object), the ones it cannot read and why, or why there are none (a library
 * without MPI_T). Rank 0 writes it after the run record; local, no communication. */
void cl_write_mpi_t_record(FILE *out);

/* What the build records once per library (commlens-kernels --describe-cvars, under mpiexec -n 1):
 * one JSON object with every control variable's name, datatype, count, verbosity, scope, binding,
 * description, enumeration and the value read in that run. MPI must be up. */
void cl_describe_cvars(FILE *out);

#endif
