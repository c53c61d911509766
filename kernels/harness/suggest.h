/* Did-you-mean: the known name nearest to a mistyped one (kernels, long options). No MPI. */
#ifndef COMMLENS_SUGGEST_H
#define COMMLENS_SUGGEST_H

#include <stddef.h>

/* Of `count` candidates, the one nearest to `typed` by edit distance, or NULL when none is close
 * (a few edits, fewer than a third of what was typed). */
const char *cl_nearest(const char *typed, const char *const *candidates, size_t count);

#endif
