/* The kernels this binary knows: kernels/catalogue.def made into a table, and the ways to read it.
 *
 * A kernel's functions are weak references: a family whose source was not built (the catalogue tool,
 * a library whose mpi.h lacks the calls, a family that did not compile against it) leaves them NULL,
 * and the kernel is described but not available. No MPI here (see harness/catalogue.h). */
#include <stdlib.h>
#include <string.h>

#include "harness/catalogue.h"
#include "harness/options.h"
#include "harness/suggest.h"

/* Every function the catalogue names, declared weak; no_setup and no_teardown are never defined. */
#define KERNEL(run_fn, setup_fn, teardown_fn, ...)                   \
    extern cl_run_fn run_fn __attribute__((weak));                   \
    extern cl_setup_fn setup_fn __attribute__((weak));               \
    extern cl_teardown_fn teardown_fn __attribute__((weak));
#include "catalogue.def"
#undef KERNEL

#define KERNEL(run_fn, setup_fn, teardown_fn, ...) {.run = run_fn, .setup = setup_fn, .teardown = teardown_fn, __VA_ARGS__},
const struct cl_kernel cl_kernels[] = {
#include "catalogue.def"
    {0},
};
#undef KERNEL

const struct cl_kernel *cl_find_kernel(const char *name)
{
    for (const struct cl_kernel *k = cl_kernels; k->name; k++)
        if (strcmp(k->name, name) == 0) return k;
    return NULL;
}

const struct cl_kernel *cl_closest_kernel(const char *name)
{
    const char *names[sizeof cl_kernels / sizeof cl_kernels[0]];
    size_t count = 0;
    for (const struct cl_kernel *k = cl_kernels; k->name; k++) names[count++] = k->name;
    const char *nearest = cl_nearest(name, names, count);
    return nearest ? cl_find_kernel(nearest) : NULL;
}

const struct cl_kernel *cl_runnable_kernel(const char *name, int nprocs, int built, char *error, size_t len)
{
    const struct cl_kernel *kernel = cl_find_kernel(name), *nearest;
    if (!kernel && (nearest = cl_closest_kernel(name)))
        snprintf(error, len, "unknown kernel %s (did you mean %s? --list lists them)", name, nearest->name);
    else if (!kernel)
        snprintf(error, len, "unknown kernel %s (--list lists them)", name);
    else if (built && !kernel->run)
        snprintf(error, len, "%s is not built into this binary (--describe says why)", name);
    else if (nprocs < kernel->min_ranks)
        snprintf(error, len, "too few ranks for %s: it needs at least %d, this run has %d", name, kernel->min_ranks,
                 nprocs);
    else
        return kernel;
    return NULL;
}

double cl_per_count(enum cl_per per, int nprocs)
{
    return per == CL_PER_RANK ? (double)nprocs : per == CL_PER_PAIR ? (double)(nprocs / 2) : 1.0;
}

double cl_bytes_moved(const struct cl_kernel *k, size_t size, int nprocs)
{
    double factor = k->bytes_moved.factor > 0 ? k->bytes_moved.factor : 1.0;
    return factor * (double)size * cl_per_count(k->bytes_moved.per, nprocs);
}

/* Whether a space-separated list (NULL: none) holds `word`. */
static int has_word(const char *words, const char *word)
{
    size_t len = strlen(word);
    for (const char *p = words ? strstr(words, word) : NULL; p; p = strstr(p + 1, word))
        if ((p == words || p[-1] == ' ') && (p[len] == ' ' || p[len] == '\0')) return 1;
    return 0;
}

int cl_kernel_tagged(const struct cl_kernel *k, const char *tag) { return has_word(k->tags, tag); }

const char *cl_check_kernel_sizes(const struct cl_kernel *k, const struct cl_params *params, const size_t *sizes,
                                  size_t n, size_t type_size, char *error, size_t len)
{
    if (!has_word(k->options, "partitions")) return NULL;
    size_t unit = type_size * (size_t)params->partitions;
    for (size_t i = 0; i < n; i++)
        if (sizes[i] % unit) {
            snprintf(error, len, "size %zu: %s sends %d equal partitions (--partitions) of whole %zu-byte elements: "
                     "every size must be a multiple of %zu bytes", sizes[i], k->name, params->partitions, type_size,
                     unit);
            return error;
        }
    return NULL;
}

int cl_reads_as_bandwidth(const struct cl_kernel *k, int window)
{
    return (k->slots == CL_SLOTS_WINDOW && window > 1) || cl_kernel_tagged(k, "io") || cl_kernel_tagged(k, "peak");
}

const char *cl_slots_name(enum cl_slots slots)
{
    static const char *const names[] = {"one", "window", "messages", "pieces", "ranks", "neighbours", "halo_blocks"};
    return names[slots];
}

const char *cl_per_name(enum cl_per per)
{
    static const char *const names[] = {"once", "rank", "pair"};
    return names[per];
}

void cl_list_kernels(FILE *out)
{
    size_t width = 0;
    for (const struct cl_kernel *k = cl_kernels; k->name; k++)
        if (strlen(k->name) > width) width = strlen(k->name);
    for (const struct cl_kernel *k = cl_kernels; k->name; k++)
        fprintf(out, "%-*s  %s\n", (int)width, k->name, k->metric);
}

/* A space-separated list (NULL: none) as a JSON array of strings. */
static void json_words(FILE *out, const char *words)
{
    fputc('[', out);
    const char *p = words ? words : "";
    int first = 1;
    while (*p) {
        while (*p == ' ') p++;
        size_t len = strcspn(p, " ");
        if (len) {
            char word[64];
            snprintf(word, sizeof word, "%.*s", (int)len, p);
            if (!first) fputc(',', out);
            cl_json_string(out, word);
            first = 0;
        }
        p += len;
    }
    fputc(']', out);
}

void cl_describe_kernel(FILE *out, const struct cl_kernel *k, int built_mpi_major, int built_mpi_minor)
{
    fputs("{\"kernel\":", out);
    cl_json_string(out, k->name);
    fputs(",\"family\":", out);
    cl_json_string(out, k->family);
    fputs(",\"source\":", out);
    char source[128];
    snprintf(source, sizeof source, "kernels/%s.c", k->family);
    cl_json_string(out, source);
    fputs(",\"metric\":", out);
    cl_json_string(out, k->metric);
    fprintf(out, ",\"min_ranks\":%d,\"bytes_moved\":{\"factor\":%g,\"per\":\"%s\"},\"slots\":\"%s\","
                 "\"windowed\":%s,\"setup_memory\":\"%s\",\"scratch\":{\"factor\":%g,\"per\":\"%s\",\"files\":",
            k->min_ranks, k->bytes_moved.factor > 0 ? k->bytes_moved.factor : 1.0,
            cl_per_name(k->bytes_moved.per), cl_slots_name(k->slots),
            k->slots == CL_SLOTS_WINDOW ? "true" : "false",
            k->setup_memory == CL_SETUP_MEMORY_JACOBI_GRIDS ? "jacobi_grids" : "none",
            k->scratch.factor, cl_per_name(k->scratch.per));
    cl_json_string(out, k->scratch.files ? k->scratch.files : "");
    fputs("},\"options\":", out);
    json_words(out, k->options);
    fputs(",\"tags\":", out);
    json_words(out, k->tags);
    fprintf(out, ",\"mpi_version\":\"%d.%d\",\"pair_times\":%s", k->mpi_major, k->mpi_minor,
            k->pair_times ? "true" : "false");
    if (built_mpi_major > 0) {
        int new_enough = built_mpi_major > k->mpi_major
                         || (built_mpi_major == k->mpi_major && built_mpi_minor >= k->mpi_minor);
        fprintf(out, ",\"available\":%s", k->run ? "true" : "false");
        if (!k->run) {
            char why[256];
            if (!new_enough)
                snprintf(why, sizeof why, "needs MPI %d.%d; this library's mpi.h is MPI %d.%d", k->mpi_major,
                         k->mpi_minor, built_mpi_major, built_mpi_minor);
            else
                snprintf(why, sizeof why, "kernels/%s.c was not built into this binary", k->family);
            fputs(",\"unavailable\":", out);
            cl_json_string(out, why);
        }
    }
    fputc('}', out);
}

void cl_describe_kernels(FILE *out, int built_mpi_major, int built_mpi_minor)
{
    for (const struct cl_kernel *k = cl_kernels; k->name; k++) {
        cl_describe_kernel(out, k, built_mpi_major, built_mpi_minor);
        fputc('\n', out);
    }
}
