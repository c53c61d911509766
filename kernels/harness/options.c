/* Parsing commbench-kernels' command line (see options.h); no MPI. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

void cb_usage(FILE *out)
{
    fputs("usage: commbench-kernels KERNEL [options]\n"
          "       commbench-kernels --list\n"
          "sizes (bytes):\n"
          "  -m MIN:MAX            range of the schedule (default 1:4194304; small: 4:8000)\n"
          "  --schedule NAME       powers | netpipe | small | large | list (default powers)\n"
          "  --per-octave K        netpipe points per octave (default 2)\n"
          "  --perturbation P      netpipe: also measure each size -P and +P (default 3)\n"
          "  --step S              small: step between sizes (default 32)\n"
          "  --sizes A,B,...       explicit sizes, implies --schedule list\n"
          "  --shuffle SEED        measure the sizes in a random order drawn from SEED\n"
          "  --print-sizes         print the sizes and exit\n"
          "repetitions:\n"
          "  -x N                  warm-up iterations per size (default 10)\n"
          "  -i N                  fixed iterations per sample (default: calibrated)\n"
          "  --rse X               target relative standard error of the mean (default 0.01)\n"
          "  --min-samples N       (default 10)\n"
          "  --max-samples N       (default 500)\n"
          "  --max-point-time S    seconds spent on one size at most (default 5)\n"
          "  --min-sample-time S   seconds one sample lasts at least (default 1e-4)\n"
          "  --timer NAME          mpi_wtime | clock_monotonic (default mpi_wtime)\n"
          "buffers and data:\n"
          "  --cache MODE          reuse (one buffer) | rotate (no-cache: cycle through\n"
          "                        a buffer larger than the last-level cache)\n"
          "  --cache-size BYTES    rotate: buffer size (default 2x the last-level cache)\n"
          "  --align N             offset of every message from a page boundary (default 0)\n"
          "  --datatype NAME       byte | int | double: MPI datatype of the messages\n"
          "  --integrity           fill and check every byte of every message\n"
          "kernel parameters:\n"
          "  --window N            messages in flight per iteration: stream, multipair.stream, rma (64)\n"
          "  --window-buffers HOW  shared (one send and one receive buffer for a whole window, as\n"
          "                        osu_bw and NetPIPE: the default) | distinct (a buffer per message;\n"
          "                        the default with --integrity, which cannot check overwritten data)\n"
          "  --messages N          multipingpong: messages each way (8)\n"
          "  --pieces K            pieces: the message is sent as K pieces (4)\n"
          "  --rma-sync NAME       rma.put/get: fence | lock | flush (fence)\n"
          "  --halo NAME           halo.jacobi2d: blocking | nonblocking (blocking)\n"
          "  --proc-grid PXxPY     halo.jacobi2d: process grid (default MPI_Dims_create)\n"
          "  --nodes N             nodes the ranks span, in blocks (multipair pairs across them) (1)\n"
          "  --method NAME         collectives: accurate | lower | upper | root (see the metric lines)\n"
          "  --scratch DIR         io: where the files go ($TMPDIR or /tmp); they are removed afterwards\n"
          "  --io-sync             io: fdatasync after every write (inside the timing)\n"
          "  --drop-cache          io: drop the file's cached pages before every read\n"
          "  --inject-fault        with --integrity: corrupt one byte per batch\n"
          "  --test-hang-after N   test only: hang after N points (proves timeouts and kills work)\n"
          "  -o PATH               JSON Lines output (default stdout)\n",
          out);
}

static int parse_size(const char *text, size_t *value)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text) return -1;
    *value = (size_t)v;
    return (int)(end - text);
}

const char *cb_parse_options(int argc, char **argv, struct cb_options *o, enum cb_action *action)
{
    const char *window_buffers = NULL;    /* not given: shared, or distinct with --integrity */
    *o = (struct cb_options){
        .schedule = {.name = "powers", .min = 1, .max = 4194304, .per_octave = 2,
                     .perturbation = 3, .step = 32},
        .warmup = 10, .rse_target = 0.01, .min_samples = 10, .max_samples = 500,
        .max_point_time_s = 5.0, .min_sample_time_s = 1e-4, .timer = CB_TIMER_MPI_WTIME,
        .shuffle_seed = -1, .hang_after = -1, .cache_mode = "reuse", .datatype = "byte",
        .params = {.window = 64, .messages = 8, .pieces = 4, .sync = "fence", .halo = "blocking", .nodes = 1,
                   .scratch = NULL},
    };
    enum { OPT_SCHEDULE = 256, OPT_SIZES, OPT_RSE, OPT_MIN_SAMPLES, OPT_MAX_SAMPLES,
           OPT_MAX_POINT_TIME, OPT_MIN_SAMPLE_TIME, OPT_TIMER, OPT_LIST, OPT_PER_OCTAVE,
           OPT_PERTURBATION, OPT_STEP, OPT_SHUFFLE, OPT_PRINT_SIZES, OPT_CACHE, OPT_CACHE_SIZE,
           OPT_ALIGN, OPT_DATATYPE, OPT_INTEGRITY, OPT_INJECT_FAULT, OPT_HANG_AFTER, OPT_WINDOW, OPT_WINDOW_BUFFERS, OPT_MESSAGES,
           OPT_PIECES, OPT_RMA_SYNC, OPT_HALO, OPT_NODES, OPT_PROC_GRID, OPT_METHOD, OPT_SCRATCH,
           OPT_IO_SYNC, OPT_DROP_CACHE };
    static const struct option longopts[] = {
        {"schedule", required_argument, 0, OPT_SCHEDULE},
        {"sizes", required_argument, 0, OPT_SIZES},
        {"per-octave", required_argument, 0, OPT_PER_OCTAVE},
        {"perturbation", required_argument, 0, OPT_PERTURBATION},
        {"step", required_argument, 0, OPT_STEP},
        {"shuffle", required_argument, 0, OPT_SHUFFLE},
        {"print-sizes", no_argument, 0, OPT_PRINT_SIZES},
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
        {"window", required_argument, 0, OPT_WINDOW},
        {"window-buffers", required_argument, 0, OPT_WINDOW_BUFFERS},
        {"messages", required_argument, 0, OPT_MESSAGES},
        {"pieces", required_argument, 0, OPT_PIECES},
        {"rma-sync", required_argument, 0, OPT_RMA_SYNC},
        {"halo", required_argument, 0, OPT_HALO},
        {"nodes", required_argument, 0, OPT_NODES},
        {"proc-grid", required_argument, 0, OPT_PROC_GRID},
        {"method", required_argument, 0, OPT_METHOD},
        {"scratch", required_argument, 0, OPT_SCRATCH},
        {"io-sync", no_argument, 0, OPT_IO_SYNC},
        {"drop-cache", no_argument, 0, OPT_DROP_CACHE},
        {"list", no_argument, 0, OPT_LIST},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    int c;
    *action = CB_MEASURE;
    opterr = 0;
    optind = 0;   /* glibc: start afresh, as a library may parse several command lines */
    while ((c = getopt_long(argc, argv, "m:x:i:o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'm': {
            int n = parse_size(optarg, &o->schedule.min);
            if (n < 0 || optarg[n] != ':' || parse_size(optarg + n + 1, &o->schedule.max) < 0
                || o->schedule.min > o->schedule.max)
                return "-m expects MIN:MAX in bytes with MIN <= MAX";
            o->sizes_given = 1;
            break;
        }
        case 'x': o->warmup = atol(optarg); break;
        case 'i': o->fixed_iterations = atol(optarg); break;
        case 'o': o->output = optarg; break;
        case OPT_SCHEDULE: o->schedule.name = optarg; break;
        case OPT_SIZES: o->schedule.list = optarg; o->schedule.name = "list"; o->sizes_given = 1; break;
        case OPT_PER_OCTAVE: o->schedule.per_octave = atoi(optarg); break;
        case OPT_PERTURBATION: if (parse_size(optarg, &o->schedule.perturbation) < 0) return "--perturbation expects bytes"; break;
        case OPT_STEP: if (parse_size(optarg, &o->schedule.step) < 0) return "--step expects bytes"; break;
        case OPT_SHUFFLE: o->shuffle_seed = atol(optarg); break;
        case OPT_PRINT_SIZES: o->print_sizes = 1; break;
        case OPT_RSE: o->rse_target = atof(optarg); break;
        case OPT_MIN_SAMPLES: o->min_samples = atoi(optarg); break;
        case OPT_MAX_SAMPLES: o->max_samples = atoi(optarg); break;
        case OPT_MAX_POINT_TIME: o->max_point_time_s = atof(optarg); break;
        case OPT_MIN_SAMPLE_TIME: o->min_sample_time_s = atof(optarg); break;
        case OPT_TIMER:
            if (strcmp(optarg, "mpi_wtime") == 0) o->timer = CB_TIMER_MPI_WTIME;
            else if (strcmp(optarg, "clock_monotonic") == 0) o->timer = CB_TIMER_CLOCK_MONOTONIC;
            else return "--timer expects mpi_wtime or clock_monotonic";
            break;
        case OPT_CACHE:
            if (strcmp(optarg, "reuse") && strcmp(optarg, "rotate")) return "--cache expects reuse or rotate";
            o->cache_mode = optarg;
            break;
        case OPT_CACHE_SIZE: if (parse_size(optarg, &o->cache_bytes) < 0) return "--cache-size expects bytes"; break;
        case OPT_ALIGN: if (parse_size(optarg, &o->align) < 0 || o->align >= 4096) return "--align expects 0..4095 bytes"; break;
        case OPT_DATATYPE:
            if (strcmp(optarg, "byte") && strcmp(optarg, "int") && strcmp(optarg, "double"))
                return "--datatype expects byte, int or double";
            o->datatype = optarg;
            break;
        case OPT_INTEGRITY: o->integrity = 1; break;
        case OPT_INJECT_FAULT: o->inject_fault = 1; break;
        case OPT_HANG_AFTER: o->hang_after = atol(optarg); break;
        case OPT_WINDOW: o->params.window = atoi(optarg); break;
        case OPT_WINDOW_BUFFERS:
            if (strcmp(optarg, "shared") && strcmp(optarg, "distinct")) return "--window-buffers expects shared or distinct";
            window_buffers = optarg;
            break;
        case OPT_MESSAGES: o->params.messages = atoi(optarg); break;
        case OPT_PIECES: o->params.pieces = atoi(optarg); break;
        case OPT_RMA_SYNC:
            if (strcmp(optarg, "fence") && strcmp(optarg, "lock") && strcmp(optarg, "flush"))
                return "--rma-sync expects fence, lock or flush";
            o->params.sync = optarg;
            break;
        case OPT_HALO:
            if (strcmp(optarg, "blocking") && strcmp(optarg, "nonblocking")) return "--halo expects blocking or nonblocking";
            o->params.halo = optarg;
            break;
        case OPT_NODES: o->params.nodes = atoi(optarg); break;
        case OPT_PROC_GRID:
            if (sscanf(optarg, "%dx%d", &o->params.proc_grid[0], &o->params.proc_grid[1]) != 2
                || o->params.proc_grid[0] < 1 || o->params.proc_grid[1] < 1)
                return "--proc-grid expects PXxPY, e.g. 2x2";
            break;
        case OPT_METHOD:
            if (strcmp(optarg, "accurate") && strcmp(optarg, "lower") && strcmp(optarg, "upper") && strcmp(optarg, "root"))
                return "--method expects accurate, lower, upper or root";
            o->params.method = optarg;
            break;
        case OPT_SCRATCH: o->params.scratch = optarg; break;
        case OPT_IO_SYNC: o->params.io_sync = 1; break;
        case OPT_DROP_CACHE: o->params.drop_cache = 1; break;
        case OPT_LIST: *action = CB_LIST; return NULL;
        case 'h': *action = CB_HELP; return NULL;
        default: return "unknown option (see --help)";
        }
    }
    if (optind != argc - 1) return "expected exactly one KERNEL name (see --list)";
    o->kernel = argv[optind];
    if (!o->sizes_given && strcmp(o->schedule.name, "small") == 0) {
        o->schedule.min = 4;      /* 1 to 2000 four-byte integers, as the reports measure */
        o->schedule.max = 8000;
    }
    if (o->warmup < 0 || o->fixed_iterations < 0) return "-x and -i must be >= 0";
    if (o->min_samples < 2 || o->max_samples < o->min_samples)
        return "--min-samples must be >= 2 and <= --max-samples";
    if (!(o->rse_target > 0) || !(o->max_point_time_s > 0) || !(o->min_sample_time_s >= 0))
        return "--rse and --max-point-time must be > 0, --min-sample-time >= 0";
    if (strcmp(o->schedule.name, "list") == 0 && !o->schedule.list)
        return "--schedule list needs --sizes";
    if (o->inject_fault && !o->integrity) return "--inject-fault needs --integrity";
    if (o->params.window < 1 || o->params.window > 1024) return "--window must be 1..1024";
    /* A window of receives on one buffer leaves only the last message there: integrity needs one each. */
    if (window_buffers && strcmp(window_buffers, "shared") == 0 && o->integrity)
        return "--integrity needs --window-buffers distinct (messages of a window on one buffer overwrite each other)";
    o->params.distinct_window = window_buffers ? strcmp(window_buffers, "distinct") == 0 : o->integrity;
    if (o->params.nodes < 1) return "--nodes must be >= 1";
    return NULL;
}

size_t cb_datatype_size(const char *name)
{
    if (strcmp(name, "int") == 0) return sizeof(int);
    if (strcmp(name, "double") == 0) return sizeof(double);
    return 1;
}

/* xorshift64*: a portable generator so a seed means the same order everywhere. */
void cb_shuffle_sizes(size_t *sizes, size_t n, long seed)
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
