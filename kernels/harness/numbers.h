/* Numbers as a command line writes them, parsed strictly: the whole text must be the number, and a
 * number the target type cannot hold is refused rather than wrapped or clipped. No MPI. */
#ifndef COMMLENS_NUMBERS_H
#define COMMLENS_NUMBERS_H

#include <stddef.h>

/* What went wrong with a number (CL_NUMBER_OK: nothing). */
enum cl_number_problem { CL_NUMBER_OK, CL_NUMBER_MALFORMED, CL_NUMBER_OUT_OF_RANGE };

/* Sizes are written as a campaign file writes them (commlens.units.parse_size): digits, optionally
 * followed by k (or K), M, G or Ki, Mi, Gi, all powers of 1024, with optional blanks around. */
#define CL_SIZE_SYNTAX "bytes: digits, optionally followed by k, M, G or Ki, Mi, Gi (x1024 each)"
enum cl_number_problem cl_parse_size(const char *text, size_t *value);

/* A whole number in [min, max]: optional sign, decimal digits, nothing else. */
enum cl_number_problem cl_parse_long(const char *text, long min, long max, long *value);

/* A finite decimal number (strtod's syntax; nan and inf refused). */
enum cl_number_problem cl_parse_double(const char *text, double *value);

#endif
