#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* powers: min, 2*min, 4*min ... up to max (OSU/IMB style; a min of 0 gives 0, 1, 2, 4 ...).
 * list:   the comma-separated sizes given, in that order. */
size_t cb_size_schedule(const char *schedule, size_t min, size_t max,
                        const char *list, size_t **sizes)
{
    size_t count = 0, capacity = 64;
    size_t *out = malloc(capacity * sizeof *out);
    if (!out) return 0;

    if (strcmp(schedule, "list") == 0) {
        const char *p = list;
        while (p && *p) {
            char *end;
            unsigned long long v = strtoull(p, &end, 10);
            if (end == p) { free(out); return 0; }
            if (count == capacity) {
                capacity *= 2;
                size_t *grown = realloc(out, capacity * sizeof *out);
                if (!grown) { free(out); return 0; }
                out = grown;
            }
            out[count++] = (size_t)v;
            p = (*end == ',') ? end + 1 : end;
            if (*end && *end != ',') { free(out); return 0; }
        }
    } else if (strcmp(schedule, "powers") == 0) {
        if (min == 0) out[count++] = 0;
        for (size_t s = min ? min : 1; s <= max && count < capacity; s *= 2)
            out[count++] = s;
    } else {
        free(out);
        return 0;
    }
    *sizes = out;
    return count;
}
