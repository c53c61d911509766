/* The kernels as a library (libcommlens-kernels.so), for programs that own MPI:
 * mpi4py engines, or a code that wants one measurement inside its own run. */
#ifndef COMMLENS_H
#define COMMLENS_H

#include <mpi.h>

/* The library is built with hidden visibility: only these two are its interface. */
#define CL_EXPORT __attribute__((visibility("default")))

/* Runs one kernel exactly as `commlens-kernels` does: argv[0] is a program name, then
 * KERNEL and the binary's options (-o PATH for the JSON Lines records).  Collective over
 * `comm`, which it duplicates; MPI must be initialised and stays so.  Returns the binary's
 * exit status, the same on every rank: 0 ok, 2 bad options or set-up, 3 memory or output. */
CL_EXPORT int commlens_run(MPI_Comm comm, int argc, char **argv);

/* The same with a Fortran handle (MPI_Comm_c2f, mpi4py's Comm.py2f()): an int, whatever the
 * C type of MPI_Comm is in a library, so callers through a foreign-function interface need
 * not know it. */
CL_EXPORT int commlens_run_fortran_comm(MPI_Fint comm, int argc, char **argv);

#endif
