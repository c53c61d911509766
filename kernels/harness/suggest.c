/* Did-you-mean (see suggest.h). */
#include <string.h>

#include "suggest.h"

/* Levenshtein distance between two short strings (names are under 64 characters). */
static size_t distance(const char *a, const char *b)
{
    size_t n = strlen(b), row[65], i, j;
    if (strlen(a) > 64 || n > 64) return (size_t)-1;
    for (j = 0; j <= n; j++) row[j] = j;
    for (i = 1; a[i - 1]; i++) {
        size_t diagonal = row[0];
        row[0] = i;
        for (j = 1; j <= n; j++) {
            size_t above = row[j];
            size_t best = diagonal + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diagonal = above;
        }
    }
    return row[n];
}

const char *cl_nearest(const char *typed, const char *const *candidates, size_t count)
{
    const char *best = NULL;
    size_t best_distance = (size_t)-1;
    for (size_t i = 0; i < count; i++) {
        size_t d = distance(typed, candidates[i]);
        if (d < best_distance) best_distance = d, best = candidates[i];
    }
    return best && best_distance <= 3 && 3 * best_distance <= strlen(typed) ? best : NULL;
}
