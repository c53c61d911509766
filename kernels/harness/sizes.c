/* Message size schedules.  All sizes are bytes.
 *
 *   powers   min, 2 min, 4 min ... max (OSU/IMB; a min of 0 gives 0, 1, 2, 4 ...)
 *   netpipe  per_octave geometric points per octave from max(min,1), each also at
 *            -perturbation and +perturbation bytes (NetPIPE: 2 per octave, 3 bytes)
 *   small    min, then every multiple of step up to max (the reports' small range,
 *            4 B to 8000 B in steps of 32 B by default)
 *   large    two points per octave, 2^k and 3 * 2^(k-1), from min to max
 *   list     the sizes given, in that order, each once
 */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numbers.h"
#include "options.h"

struct size_list {
    size_t *items;
    size_t count, capacity;
};

static int push(struct size_list *l, size_t value)
{
    if (l->count == l->capacity) {
        size_t capacity = l->capacity ? 2 * l->capacity : 64;
        size_t *grown = realloc(l->items, capacity * sizeof *grown);
        if (!grown) return -1;
        l->items = grown;
        l->capacity = capacity;
    }
    l->items[l->count++] = value;
    return 0;
}

static int compare_sizes(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

static void sort_unique(struct size_list *l)
{
    qsort(l->items, l->count, sizeof *l->items, compare_sizes);
    size_t kept = 0;
    for (size_t i = 0; i < l->count; i++)
        if (kept == 0 || l->items[i] != l->items[kept - 1]) l->items[kept++] = l->items[i];
    l->count = kept;
}

static int push_in_range(struct size_list *l, const struct cl_schedule *s, size_t value)
{
    return (value >= s->min && value <= s->max) ? push(l, value) : 0;
}

/* The options parser has checked the list (each a size, none twice); read it again the same way. */
static int parse_list(struct size_list *l, const char *text)
{
    char item[128];
    for (const char *p = text;; p++) {
        size_t len = strcspn(p, ","), value;
        if (len >= sizeof item) return -1;
        snprintf(item, sizeof item, "%.*s", (int)len, p);
        if (cl_parse_size(item, &value) != CL_NUMBER_OK || push(l, value)) return -1;
        p += len;
        if (!*p) break;
    }
    for (size_t i = 0; i < l->count; i++)   /* a size measured twice would be ambiguous */
        for (size_t j = i + 1; j < l->count; j++)
            if (l->items[i] == l->items[j]) return -1;
    return l->count ? 0 : -1;
}

size_t cl_size_schedule(const struct cl_schedule *s, size_t **sizes)
{
    struct size_list l = {0};
    int bad = 0;
    const char *name = s->name;

    if (strcmp(name, "list") == 0) {
        bad = !s->list || parse_list(&l, s->list);
    } else if (s->min > s->max) {
        bad = 1;
    } else if (strcmp(name, "powers") == 0) {
        if (s->min == 0) bad |= push(&l, 0);
        for (size_t v = s->min ? s->min : 1; v <= s->max && v != 0; v *= 2) bad |= push(&l, v);
    } else if (strcmp(name, "netpipe") == 0) {
        bad = s->per_octave < 1;
        size_t start = s->min ? s->min : 1;
        if (s->min == 0) bad |= push(&l, 0);
        for (int i = 0; !bad; i++) {
            double base = round((double)start * pow(2.0, (double)i / s->per_octave));
            if (base > (double)s->max) break;
            size_t b = (size_t)base;
            if (b > s->perturbation) bad |= push_in_range(&l, s, b - s->perturbation);
            bad |= push_in_range(&l, s, b);
            bad |= push_in_range(&l, s, b + s->perturbation);
        }
        sort_unique(&l);
    } else if (strcmp(name, "small") == 0) {
        bad = s->step == 0;
        if (!bad) bad |= push(&l, s->min);
        for (size_t v = (s->min / (s->step ? s->step : 1) + 1) * s->step; !bad && v <= s->max; v += s->step)
            bad |= push(&l, v);
    } else if (strcmp(name, "large") == 0) {
        if (s->min == 0) bad |= push(&l, 0);
        for (size_t v = 1; v <= s->max && v != 0 && !bad; v *= 2) {
            bad |= push_in_range(&l, s, v);
            if (v >= 2) bad |= push_in_range(&l, s, v + v / 2);
        }
        sort_unique(&l);
    } else {
        bad = 1;
    }
    if (bad || l.count == 0) {
        free(l.items);
        return 0;
    }
    *sizes = l.items;
    return l.count;
}

const char *cl_check_sizes(const size_t *sizes, size_t n, size_t type_size, char *error, size_t len)
{
    for (size_t i = 0; i < n; i++) {
        if (sizes[i] % type_size) {
            snprintf(error, len, "size %zu: with --datatype int or double, every size must be a multiple of %zu bytes",
                     sizes[i], type_size);
            return error;
        }
        /* MPI counts are ints: a larger message would be sent as a wrapped, wrong count. */
        if (sizes[i] / type_size > (size_t)INT_MAX) {
            snprintf(error, len, "size %zu: %zu elements of %zu B, more than an MPI count (an int: at most %d) can say",
                     sizes[i], sizes[i] / type_size, type_size, INT_MAX);
            return error;
        }
    }
    return NULL;
}

/* xorshift64*: a portable generator so a seed means the same order everywhere. */
void cl_shuffle_sizes(size_t *sizes, size_t n, long seed)
{
    uint64_t state = (uint64_t)seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = n; i > 1; i--) {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        size_t j = (size_t)((state * 0x2545F4914F6CDD1Dull) % i);
        size_t tmp = sizes[i - 1];
        sizes[i - 1] = sizes[j];
        sizes[j] = tmp;
    }
}
