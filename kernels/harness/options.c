/* Parsing commlens-kernels' command line (see options.h); no MPI. */
#define _GNU_SOURCE
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalogue.h"
#include "numbers.h"
#include "options.h"
#include "suggest.h"

enum {
    OPT_SCHEDULE = 256, OPT_SIZES, OPT_RSE, OPT_MIN_SAMPLES, OPT_MAX_SAMPLES, OPT_MAX_POINT_TIME,
    OPT_MIN_SAMPLE_TIME, OPT_TIMER, OPT_LIST, OPT_JSON, OPT_OSU, OPT_TIMING, OPT_PER_OCTAVE, OPT_PERTURBATION,
    OPT_STEP, OPT_SHUFFLE, OPT_PRINT_SIZES, OPT_CACHE, OPT_CACHE_SIZE, OPT_ALIGN, OPT_DATATYPE, OPT_INTEGRITY,
    OPT_INJECT_FAULT, OPT_HANG_AFTER, OPT_WINDOW, OPT_WINDOW_BUFFERS, OPT_MESSAGES, OPT_PIECES, OPT_PARTITIONS, OPT_RMA_SYNC,
    OPT_HALO, OPT_NODES, OPT_PROC_GRID, OPT_METHOD, OPT_SCRATCH, OPT_IO_SYNC, OPT_DROP_CACHE, OPT_DESCRIBE,
    OPT_CLOCK_OFFSET, OPT_CLOCK_DRIFT, OPT_LATE_ENTRY, OPT_SLOW_BATCHES,
};

static const struct option LONG_OPTIONS[] = {
    {"schedule", required_argument, 0, OPT_SCHEDULE},
    {"sizes", required_argument, 0, OPT_SIZES},
    {"per-octave", required_argument, 0, OPT_PER_OCTAVE},
    {"perturbation", required_argument, 0, OPT_PERTURBATION},
    {"step", required_argument, 0, OPT_STEP},
    {"shuffle", required_argument, 0, OPT_SHUFFLE},
    {"print-sizes", no_argument, 0, OPT_PRINT_SIZES},
    {"osu", no_argument, 0, OPT_OSU},
    {"timing", required_argument, 0, OPT_TIMING},
    {"rse", required_argument, 0, OPT_RSE},
    {"min-samples", required_argument, 0, OPT_MIN_SAMPLES},
    {"max-samples", required_argument, 0, OPT_MAX_SAMPLES},
    {"max-point-time", required_argument, 0, OPT_MAX_POINT_TIME},
    {"min-sample-time", required_argument, 0, OPT_MIN_SAMPLE_TIME},
    {"timer", required_argument, 0, OPT_TIMER},
    {"cache", required_argument, 0, OPT_CACHE},
    {"cache-size", required_argument, 0, OPT_CACHE_SIZE},
    {"align", required_argument, 0, OPT_ALIGN},
    {"datatype", required_argument, 0, OPT_DATATYPE},
    {"integrity", no_argument, 0, OPT_INTEGRITY},
    {"inject-fault", no_argument, 0, OPT_INJECT_FAULT},
    {"test-hang-after", required_argument, 0, OPT_HANG_AFTER},
    {"test-clock-offset", required_argument, 0, OPT_CLOCK_OFFSET},
    {"test-clock-drift", required_argument, 0, OPT_CLOCK_DRIFT},
    {"test-late-entry", required_argument, 0, OPT_LATE_ENTRY},
    {"test-slow-batches", required_argument, 0, OPT_SLOW_BATCHES},
    {"window", required_argument, 0, OPT_WINDOW},
    {"window-buffers", required_argument, 0, OPT_WINDOW_BUFFERS},
    {"messages", required_argument, 0, OPT_MESSAGES},
    {"pieces", required_argument, 0, OPT_PIECES},
    {"partitions", required_argument, 0, OPT_PARTITIONS},
    {"rma-sync", required_argument, 0, OPT_RMA_SYNC},
    {"halo", required_argument, 0, OPT_HALO},
    {"nodes", required_argument, 0, OPT_NODES},
    {"proc-grid", required_argument, 0, OPT_PROC_GRID},
    {"method", required_argument, 0, OPT_METHOD},
    {"scratch", required_argument, 0, OPT_SCRATCH},
    {"io-sync", no_argument, 0, OPT_IO_SYNC},
    {"drop-cache", no_argument, 0, OPT_DROP_CACHE},
    {"json", no_argument, 0, OPT_JSON},
    {"list", no_argument, 0, OPT_LIST},
    {"describe", no_argument, 0, OPT_DESCRIBE},
    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};
#define LONG_OPTION_COUNT (sizeof LONG_OPTIONS / sizeof LONG_OPTIONS[0] - 1)

/* The option as the user wrote it: "-m" or "--max-samples" (its canonical name). */
static void option_name(int c, char *name, size_t len)
{
    if (c < 256) {
        snprintf(name, len, "-%c", c);
        return;
    }
    for (const struct option *l = LONG_OPTIONS; l->name; l++)
        if (l->val == c) {
            snprintf(name, len, "--%s", l->name);
            return;
        }
    snprintf(name, len, "option %d", c);
}

__attribute__((format(printf, 2, 3)))
static const char *refuse(struct cl_options *o, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(o->error, sizeof o->error, format, args);
    va_end(args);
    return o->error;
}

/* A whole number of option `c` within [min, max]; NULL, or the refusal. */
static const char *whole(struct cl_options *o, int c, const char *text, long min, long max, long *value)
{
    char name[64];
    switch (cl_parse_long(text, min, max, value)) {
    case CL_NUMBER_OK: return NULL;
    case CL_NUMBER_MALFORMED: option_name(c, name, sizeof name); return refuse(o, "%s %s: not a whole number", name, text);
    case CL_NUMBER_OUT_OF_RANGE: break;
    }
    option_name(c, name, sizeof name);
    if (max == LONG_MAX) return refuse(o, "%s %s: must be at least %ld", name, text, min);
    return refuse(o, "%s %s: must be from %ld to %ld", name, text, min, max);
}

static const char *whole_int(struct cl_options *o, int c, const char *text, int min, int max, int *value)
{
    long v = 0;
    const char *problem = whole(o, c, text, min, max, &v);
    if (!problem) *value = (int)v;
    return problem;
}

static const char *size_value(struct cl_options *o, int c, const char *text, size_t min, size_t max, size_t *value)
{
    char name[64];
    option_name(c, name, sizeof name);
    switch (cl_parse_size(text, value)) {
    case CL_NUMBER_OK: break;
    case CL_NUMBER_MALFORMED: return refuse(o, "%s %s: not a size (%s)", name, text, CL_SIZE_SYNTAX);
    case CL_NUMBER_OUT_OF_RANGE: return refuse(o, "%s %s: more bytes than this machine can count", name, text);
    }
    if (max == SIZE_MAX && *value < min) return refuse(o, "%s %s: must be at least %zu B", name, text, min);
    if (*value < min || *value > max) return refuse(o, "%s %s: must be from %zu to %zu B", name, text, min, max);
    return NULL;
}

/* A number of option `c` that must be above `floor` (or at least it, with `inclusive`). */
static const char *decimal(struct cl_options *o, int c, const char *text, double floor, int inclusive, double *value)
{
    char name[64];
    option_name(c, name, sizeof name);
    if (cl_parse_double(text, value) != CL_NUMBER_OK) return refuse(o, "%s %s: not a finite number", name, text);
    if (*value < floor || (!inclusive && *value == floor))
        return refuse(o, "%s %s: must be %s %g", name, text, inclusive ? "at least" : "more than", floor);
    return NULL;
}

/* One of the `choices` (a NULL-ended list). */
static const char *choice(struct cl_options *o, int c, const char *text, const char *const *choices, const char **value)
{
    char name[64], allowed[256] = "";
    for (const char *const *p = choices; *p; p++) {
        if (strcmp(text, *p) == 0) {
            *value = *p;
            return NULL;
        }
        snprintf(allowed + strlen(allowed), sizeof allowed - strlen(allowed), "%s%s", p == choices ? "" : " | ", *p);
    }
    option_name(c, name, sizeof name);
    return refuse(o, "%s %s: expects %s", name, text, allowed);
}

/* -m as OSU takes it: MAX, MIN:MAX, MIN: or :MAX (checked against the other end once it is known:
 * default_range). */
static const char *size_range(struct cl_options *o, const char *text)
{
    const char *colon = strchr(text, ':');
    char low[128] = "", high[128];
    if (strlen(text) >= sizeof high) return refuse(o, "-m %.40s...: too long for MIN:MAX", text);
    if (colon) {
        snprintf(low, sizeof low, "%.*s", (int)(colon - text), text);
        snprintf(high, sizeof high, "%s", colon + 1);
    } else {
        snprintf(high, sizeof high, "%s", text);
    }
    if (strchr(high, ':')) return refuse(o, "-m %s: expects MIN:MAX (one colon)", text);
    if (!*low && !*high) return refuse(o, "-m %s: expects MIN:MAX, MIN: or :MAX", text);
    if (*low) {
        enum cl_number_problem problem = cl_parse_size(low, &o->schedule.min);
        if (problem) return refuse(o, "-m %s: MIN %s is %s", text, low,
                                   problem == CL_NUMBER_MALFORMED ? "not a size (" CL_SIZE_SYNTAX ")" : "too large");
    }
    if (*high) {
        enum cl_number_problem problem = cl_parse_size(high, &o->schedule.max);
        if (problem) return refuse(o, "-m %s: MAX %s is %s", text, high,
                                   problem == CL_NUMBER_MALFORMED ? "not a size (" CL_SIZE_SYNTAX ")" : "too large");
    }
    o->min_given = *low != '\0';
    o->max_given = *high != '\0';
    return NULL;
}

/* The ends of the range -m leaves out. The powers schedule is OSU's and IMB's: from 0 B for a kernel read as a
 * time, as IMB's PingPong and osu_latency before OSU 7 (7.4 starts at 1 B; -m 1: gives its range): the cost of
 * a message that carries no data. From 1 B for one read as a bandwidth, which 0 B in some time is not, and for a
 * collective, which MPI lets return at once with no data: the methods' corrections would then outweigh it (a
 * negative coll.scan). The small schedule is the reports' 4 to 8000 B (1 to 2000 four-byte integers); the others
 * start at 1 B. */
static void default_range(struct cl_options *o)
{
    const struct cl_kernel *kernel = cl_find_kernel(o->kernel);
    int small = strcmp(o->schedule.name, "small") == 0, powers = strcmp(o->schedule.name, "powers") == 0;
    int from_zero = powers && kernel && !cl_reads_as_bandwidth(kernel, o->params.window)
                    && !cl_kernel_tagged(kernel, "collective");
    if (!o->min_given) o->schedule.min = small ? 4 : from_zero ? 0 : 1;
    if (!o->max_given) o->schedule.max = small ? 8000 : 4194304;
}

/* --sizes A,B,...: each a size, none twice (sizes.c reads the list again the same way). */
static const char *size_list(struct cl_options *o, const char *text)
{
    size_t seen[4096], count = 0;
    char item[128];
    for (const char *p = text;; p++) {
        size_t len = strcspn(p, ","), value;
        snprintf(item, sizeof item, "%.*s", (int)(len < sizeof item ? len : sizeof item - 1), p);
        if (len >= sizeof item || cl_parse_size(item, &value) != CL_NUMBER_OK)
            return refuse(o, "--sizes %s: %s is not a size (%s)", text, item, CL_SIZE_SYNTAX);
        for (size_t i = 0; i < count; i++)
            if (seen[i] == value) return refuse(o, "--sizes %s: %zu is in the list twice", text, value);
        if (count == sizeof seen / sizeof seen[0]) return refuse(o, "--sizes: more than %zu sizes", count);
        seen[count++] = value;
        p += len;
        if (!*p) return NULL;
    }
}

static const char *unknown_option(struct cl_options *o, int argc, char **argv)
{
    char typed[128];
    /* OSU's own options, as commlens spells them. */
    static const struct { char osu; const char *here; } osu_options[] = {
        {'W', "OSU's window size is --window N here"},
        {'c', "OSU's validation is --integrity here"},
        {'z', "OSU's tail latencies are the table's P99 here, every sample with -o PATH"},
        {'f', "OSU's full statistics are the table's Min and P99 here, every sample with -o PATH"},
        {'b', "OSU's buffer multiple is --window-buffers distinct here"},
        {'T', "OSU's datatype is --datatype byte|int|double here"},
    };
    for (size_t i = 0; optopt && i < sizeof osu_options / sizeof osu_options[0]; i++)
        if (optopt == osu_options[i].osu) return refuse(o, "unknown option -%c (%s)", optopt, osu_options[i].here);
    if (optopt && optopt < 256) return refuse(o, "unknown option -%c (--help lists them)", optopt);
    if (optopt) {   /* a long option that takes no value, given one */
        option_name(optopt, typed, sizeof typed);
        return refuse(o, "option %s takes no value", typed);
    }
    const char *word = argv[optind - 1 < argc ? optind - 1 : argc - 1];
    snprintf(typed, sizeof typed, "%.*s", (int)strcspn(word, "="), word);
    const char *names[LONG_OPTION_COUNT], *bare = typed + strspn(typed, "-");
    char matches[256] = "";
    int prefixed = 0;
    for (size_t i = 0; i < LONG_OPTION_COUNT; i++) {
        names[i] = LONG_OPTIONS[i].name;
        if (*bare && strncmp(names[i], bare, strlen(bare)) == 0) {
            snprintf(matches + strlen(matches), sizeof matches - strlen(matches), "%s--%s", prefixed ? ", " : "", names[i]);
            prefixed++;
        }
    }
    if (prefixed > 1) return refuse(o, "ambiguous option %s: %s", typed, matches);
    const char *nearest = cl_nearest(bare, names, LONG_OPTION_COUNT);
    if (nearest) return refuse(o, "unknown option %s (did you mean --%s?)", typed, nearest);
    return refuse(o, "unknown option %s (--help lists them)", typed);
}

const char *cl_parse_options(int argc, char **argv, struct cl_options *o, enum cl_action *action)
{
    static const char *const schedules[] = {"powers", "netpipe", "small", "large", "list", NULL};
    static const char *const timers[] = {"mpi_wtime", "clock_monotonic", NULL};
    static const char *const timings[] = {"precision", "osu", NULL};
    static const char *const caches[] = {"reuse", "rotate", NULL};
    static const char *const datatypes[] = {"byte", "int", "double", NULL};
    static const char *const sharing[] = {"shared", "distinct", NULL};
    static const char *const syncs[] = {"fence", "lock", "flush", NULL};
    static const char *const halos[] = {"blocking", "nonblocking", NULL};
    static const char *const methods[] = {"accurate", "lower", "upper", "root", "window", NULL};
    const char *window_buffers = NULL;    /* not given: shared, or distinct with --integrity */
    const char *text, *problem = NULL, *range = NULL;   /* range: -m's value */
    int list = 0;
    *o = (struct cl_options){
        .schedule = {.name = "powers", .per_octave = 2, .perturbation = 3, .step = 32},   /* range: default_range */
        .warmup = 10, .rse_target = 0.01, .min_samples = 10, .max_samples = 500,
        .max_point_time_s = 5.0, .min_sample_time_s = 1e-4, .timer = CL_TIMER_MPI_WTIME,
        .shuffle_seed = -1, .hang_after = -1, .cache_mode = "reuse", .datatype = "byte",
        .params = {.window = 64, .messages = 8, .pieces = 4, .partitions = 4, .sync = "fence", .halo = "blocking", .nodes = 1,
                   .scratch = NULL},
    };
    int c;
    *action = CL_MEASURE;
    opterr = 0;
    optind = 0;   /* glibc: start afresh, as a library may parse several command lines */
    /* The leading ':' tells a missing value (':') from an unknown option ('?'). */
    while (!problem && (c = getopt_long(argc, argv, ":m:x:i:o:h", LONG_OPTIONS, NULL)) != -1) {
        switch (c) {
        case 'm': problem = size_range(o, range = optarg); break;
        case 'x': problem = whole(o, c, optarg, 0, LONG_MAX, &o->warmup); o->warmup_given = 1; break;
        case 'i': problem = whole(o, c, optarg, 1, LONG_MAX, &o->iterations); break;
        case 'o': o->output = optarg; break;
        case OPT_JSON: o->json = 1; break;
        case OPT_OSU: o->timing = CL_TIMING_OSU; break;
        case OPT_TIMING:
            if (!(problem = choice(o, c, optarg, timings, &text)))
                o->timing = strcmp(text, "osu") == 0 ? CL_TIMING_OSU : CL_TIMING_PRECISION;
            break;
        case OPT_SCHEDULE: problem = choice(o, c, optarg, schedules, &o->schedule.name); break;
        case OPT_SIZES:
            problem = size_list(o, optarg);
            o->schedule.list = optarg;
            o->schedule.name = "list";
            o->min_given = o->max_given = 1;
            break;
        case OPT_PER_OCTAVE: problem = whole_int(o, c, optarg, 1, 64, &o->schedule.per_octave); break;
        case OPT_PERTURBATION: problem = size_value(o, c, optarg, 0, SIZE_MAX, &o->schedule.perturbation); break;
        case OPT_STEP: problem = size_value(o, c, optarg, 1, SIZE_MAX, &o->schedule.step); break;
        case OPT_SHUFFLE: problem = whole(o, c, optarg, 0, LONG_MAX, &o->shuffle_seed); break;
        case OPT_PRINT_SIZES: o->print_sizes = 1; break;
        case OPT_RSE: problem = decimal(o, c, optarg, 0, 0, &o->rse_target); break;
        case OPT_MIN_SAMPLES: problem = whole_int(o, c, optarg, 2, INT_MAX, &o->min_samples); break;
        case OPT_MAX_SAMPLES: problem = whole_int(o, c, optarg, 2, INT_MAX, &o->max_samples); break;
        case OPT_MAX_POINT_TIME: problem = decimal(o, c, optarg, 0, 0, &o->max_point_time_s); break;
        case OPT_MIN_SAMPLE_TIME: problem = decimal(o, c, optarg, 0, 1, &o->min_sample_time_s); break;
        case OPT_TIMER:
            if (!(problem = choice(o, c, optarg, timers, &text)))
                o->timer = strcmp(text, "clock_monotonic") == 0 ? CL_TIMER_CLOCK_MONOTONIC : CL_TIMER_MPI_WTIME;
            break;
        case OPT_CACHE: problem = choice(o, c, optarg, caches, &o->cache_mode); break;
        case OPT_CACHE_SIZE: problem = size_value(o, c, optarg, 1, SIZE_MAX, &o->cache_bytes); break;
        case OPT_ALIGN: problem = size_value(o, c, optarg, 0, 4095, &o->align); break;
        case OPT_DATATYPE: problem = choice(o, c, optarg, datatypes, &o->datatype); break;
        case OPT_INTEGRITY: o->integrity = 1; break;
        case OPT_INJECT_FAULT: o->inject_fault = 1; break;
        case OPT_HANG_AFTER: problem = whole(o, c, optarg, 0, LONG_MAX, &o->hang_after); break;
        case OPT_CLOCK_OFFSET: problem = decimal(o, c, optarg, 0, 1, &o->params.test_clock_offset); break;
        case OPT_CLOCK_DRIFT: problem = decimal(o, c, optarg, 0, 1, &o->params.test_clock_drift); break;
        case OPT_LATE_ENTRY: problem = decimal(o, c, optarg, 0, 1, &o->params.test_late_entry); break;
        case OPT_SLOW_BATCHES: problem = whole(o, c, optarg, 0, LONG_MAX, &o->params.test_slow_batches); break;
        case OPT_WINDOW: problem = whole_int(o, c, optarg, 1, CL_MAX_WINDOW, &o->params.window); break;
        case OPT_WINDOW_BUFFERS: problem = choice(o, c, optarg, sharing, &window_buffers); break;
        case OPT_MESSAGES: problem = whole_int(o, c, optarg, 1, 4096, &o->params.messages); break;
        case OPT_PIECES: problem = whole_int(o, c, optarg, 1, 4096, &o->params.pieces); break;
        case OPT_PARTITIONS: problem = whole_int(o, c, optarg, 1, CL_MAX_PARTITIONS, &o->params.partitions); break;
        case OPT_RMA_SYNC: problem = choice(o, c, optarg, syncs, &o->params.sync); break;
        case OPT_HALO: problem = choice(o, c, optarg, halos, &o->params.halo); break;
        case OPT_NODES: problem = whole_int(o, c, optarg, 1, INT_MAX, &o->params.nodes); break;
        case OPT_PROC_GRID: {
            char first[32];
            size_t len = strcspn(optarg, "x");
            snprintf(first, sizeof first, "%.*s", (int)(len < sizeof first ? len : sizeof first - 1), optarg);
            if (!optarg[len] || whole_int(o, c, first, 1, INT_MAX, &o->params.proc_grid[0])
                || whole_int(o, c, optarg + len + 1, 1, INT_MAX, &o->params.proc_grid[1]))
                problem = refuse(o, "--proc-grid %s: expects PXxPY, two whole numbers >= 1, e.g. 2x2", optarg);
            break;
        }
        case OPT_METHOD: problem = choice(o, c, optarg, methods, &o->params.method); break;
        case OPT_SCRATCH: o->params.scratch = optarg; break;
        case OPT_IO_SYNC: o->params.io_sync = 1; break;
        case OPT_DROP_CACHE: o->params.drop_cache = 1; break;
        case OPT_LIST: list = 1; break;
        case OPT_DESCRIBE: list = 1; o->json = 1; break;
        case 'h': *action = CL_HELP; return NULL;
        case ':': {
            char name[64];
            option_name(optopt, name, sizeof name);
            return refuse(o, "option %s needs a value (--help says which)", name);
        }
        default: return unknown_option(o, argc, argv);
        }
    }
    if (problem) return problem;
    if (list) {
        *action = o->json ? CL_LIST_JSON : CL_LIST;
        return NULL;
    }
    if (optind == argc) return refuse(o, "no KERNEL given (commlens-kernels --list lists them)");
    if (optind < argc - 1) return refuse(o, "one KERNEL at a time: got %s and %s", argv[optind], argv[optind + 1]);
    o->kernel = argv[optind];
    default_range(o);
    if (range && o->schedule.min > o->schedule.max) {
        if (!o->min_given)
            return refuse(o, "-m %s: MAX (%zu) is below the default MIN of %s on the %s schedule (%zu B): give MIN too",
                          range, o->schedule.max, o->kernel, o->schedule.name, o->schedule.min);
        if (!o->max_given)
            return refuse(o, "-m %s: MIN (%zu) is above the default MAX of the %s schedule (%zu B): give MAX too", range,
                          o->schedule.min, o->schedule.name, o->schedule.max);
        return refuse(o, "-m %s: MIN (%zu) must be <= MAX (%zu)", range, o->schedule.min, o->schedule.max);
    }
    if (o->max_samples < o->min_samples)
        return refuse(o, "--min-samples %d is more than --max-samples %d", o->min_samples, o->max_samples);
    if (strcmp(o->schedule.name, "list") == 0 && !o->schedule.list) return refuse(o, "--schedule list needs --sizes");
    if (o->output && o->json) return refuse(o, "-o %s and --json: JSON Lines go to one place; give one", o->output);
    if (o->inject_fault && !o->integrity) return refuse(o, "--inject-fault needs --integrity");
    /* A window of receives on one buffer leaves only the last message there: integrity needs one each. */
    if (window_buffers && strcmp(window_buffers, "shared") == 0 && o->integrity)
        return refuse(o, "--integrity needs --window-buffers distinct (messages of a window on one buffer "
                         "overwrite each other)");
    o->params.distinct_window = window_buffers ? strcmp(window_buffers, "distinct") == 0 : o->integrity;
    return NULL;
}

size_t cl_datatype_size(const char *name)
{
    if (strcmp(name, "int") == 0) return sizeof(int);
    if (strcmp(name, "double") == 0) return sizeof(double);
    return 1;
}
