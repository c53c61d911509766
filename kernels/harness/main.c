/* commbench_run: the one entry point of every kernel, behind both the
 * commbench-kernels binary (program.c) and libcommbench-kernels.so.
 *
 *   mpiexec -n 2 commbench-kernels pingpong.send -m 1:4194304 -o run.jsonl
 *
 * Rank 0 times each sample (a batch of iterations between a barrier and the
 * end of the batch), decides when a size has enough samples and writes the
 * JSON Lines records: one "run", one "point" per size, one "end". */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "commbench.h"
#include "harness.h"
#include "stopping.h"

#define MAX_ITERATIONS_PER_SAMPLE 100000000L
#define NAME_LEN 256

struct cb_options {
    const char *kernel;
    const char *output;
    struct cb_schedule schedule;
    int sizes_given;          /* -m or --sizes on the command line */
    long warmup;
    long fixed_iterations;    /* 0: calibrate per size */
    double rse_target;
    int min_samples, max_samples;
    double max_point_time_s;
    double min_sample_time_s; /* a sample lasts at least this long (and 100 timer ticks) */
    enum cb_timer timer;
    long shuffle_seed;        /* < 0: sizes in schedule order */
    const char *cache_mode;   /* reuse | rotate */
    size_t cache_bytes;       /* rotate: bytes cycled through per buffer (0: 2x last-level cache) */
    size_t align;
    int integrity, inject_fault, print_sizes;
    const char *datatype;     /* byte | int | double */
    long hang_after;          /* test only: hang once this many points are written (< 0: never) */
    struct cb_params params;
};

static void usage(FILE *out)
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

/* Returns 0 on success; on error, a message for rank 0 to print. */
static const char *parse_options(int argc, char **argv, struct cb_options *o, int *list_only)
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
    *list_only = 0;
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
        case OPT_LIST: *list_only = 1; return NULL;
        case 'h': usage(stdout); *list_only = -1; return NULL;
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

/* Smallest nonzero step the timer shows. */
static double measure_resolution(enum cb_timer timer)
{
    double best = INFINITY;
    for (int i = 0; i < 1000; i++) {
        double t0 = cb_now(timer), t1;
        while ((t1 = cb_now(timer)) == t0) {}
        if (t1 - t0 < best) best = t1 - t0;
    }
    return best;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* What the timed region costs with nothing in it: the median of up to 1001 empty samples.
 * Fewer when barriers are slow (ranks oversubscribed on cores take milliseconds each): past
 * a time budget rank 0 stops, between batches and for every rank, so all call the same
 * number of barriers. */
static double measure_overhead(const struct cb_kernel *kernel, struct cb_context *ctx,
                               enum cb_timer timer)
{
    enum { N = 1001, BATCH = 25 };
    const double budget_s = 0.2;
    static double t[N];
    double since = cb_now(timer);
    int n = 0, more = 1;
    while (more) {
        for (int j = 0; j < BATCH && n < N; j++, n++) {
            MPI_Barrier(ctx->comm);
            double t0 = cb_now(timer);
            (void)kernel->run(ctx, 0, 0);
            t[n] = cb_now(timer) - t0;
        }
        more = n < N && cb_now(timer) - since < budget_s;
        MPI_Bcast(&more, 1, MPI_INT, 0, ctx->comm);
    }
    qsort(t, (size_t)n, sizeof t[0], compare_doubles);
    return t[n / 2];
}

static void cpu_binding(char *out, size_t len)
{
    cpu_set_t set;
    out[0] = '\0';
    if (sched_getaffinity(0, sizeof set, &set) != 0) { snprintf(out, len, "unknown"); return; }
    size_t used = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE && used + 8 < len; cpu++)
        if (CPU_ISSET(cpu, &set))
            used += (size_t)snprintf(out + used, len - used, "%s%d", used ? "," : "", cpu);
}

static void iso_now(char *out, size_t len)
{
    time_t now = time(NULL);
    strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
}

/* One timed batch; every rank takes part, rank 0's elapsed time is returned and
 * *units set to how many units of the kernel's metric one iteration holds. */
static double timed_batch(const struct cb_kernel *kernel, struct cb_context *ctx,
                          size_t size, long iterations, enum cb_timer timer, double *units)
{
    MPI_Barrier(ctx->comm);
    double t0 = cb_now(timer);
    double per_iteration = kernel->run(ctx, size, iterations);
    double elapsed = cb_now(timer) - t0;
    if (units) *units = per_iteration;
    /* Every rank ran the same iterations, so every rank's cursors stay in step. */
    ctx->send.cursor = (ctx->send.cursor + iterations * ctx->slots_per_iteration) % ctx->send.slots;
    ctx->recv.cursor = (ctx->recv.cursor + iterations * ctx->slots_per_iteration) % ctx->recv.slots;
    return elapsed;
}

/* Iterations per sample so that one sample lasts at least `target` seconds.
 * Two batches in a row must reach it: a first batch that is slow only because
 * it ran cold would otherwise leave every later sample too short. */
static long calibrate(const struct cb_kernel *kernel, struct cb_context *ctx,
                      size_t size, double target, enum cb_timer timer)
{
    long decision[2] = {1, 0}; /* iterations, done */
    int reached_once = 0;
    while (!decision[1]) {
        long n = decision[0];
        double units, elapsed = timed_batch(kernel, ctx, size, n, timer, &units);
        /* A kernel that times itself may spend more around its timed part (starting
         * threads, measuring acknowledgements): calibrate on what it timed. */
        if (units == 0) elapsed = ctx->measured * (double)n;
        if (ctx->rank == 0) {
            if (elapsed >= target || n >= MAX_ITERATIONS_PER_SAMPLE) {
                decision[1] = reached_once;
                reached_once = 1;
            } else {
                reached_once = 0;
                /* Aim 20% past the target, growing at most 16x per round. */
                double want = elapsed > 0 ? ceil(1.2 * (double)n * target / elapsed) : 16.0 * (double)n;
                long next = want > 16.0 * (double)n ? n * 16 : (long)want;
                decision[0] = next > n ? next : n + 1;
                if (decision[0] > MAX_ITERATIONS_PER_SAMPLE) decision[0] = MAX_ITERATIONS_PER_SAMPLE;
            }
        }
        MPI_Bcast(decision, 2, MPI_LONG, 0, ctx->comm);
    }
    return decision[0];
}

/* Last-level cache size, for the no-cache buffer; 32 MiB where the system does not say. */
static size_t last_level_cache_bytes(void)
{
    long bytes = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
    bytes = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (bytes <= 0) bytes = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    return bytes > 0 ? (size_t)bytes : (size_t)32 << 20;
}

static size_t page_round(size_t bytes)
{
    return bytes ? (bytes + 4095) / 4096 * 4096 : 4096;
}

static int allocate(struct cb_buffer *b, size_t bytes, size_t align)
{
    b->align = align;
    b->slots = 1;
    b->stride = 0;
    b->bytes = bytes + align + 4096;
    if (posix_memalign((void **)&b->base, 4096, b->bytes)) return -1;
    memset(b->base, 0, b->bytes);
    return 0;
}

/* Slots a page-rounded stride apart: the kernel's own count (a window of Irecvs
 * needs distinct buffers), or in rotate mode as many as the buffer holds. */
int cb_window_slots(const struct cb_params *params, int nprocs)
{
    (void)nprocs;
    return params->distinct_window ? params->window : 1;
}

static void lay_out(struct cb_buffer *b, const struct cb_options *o, size_t bytes, size_t size, int kernel_slots)
{
    b->stride = page_round(size);
    b->slots = kernel_slots;
    b->cursor = 0;
    if (strcmp(o->cache_mode, "rotate") == 0 && (long)(bytes / b->stride) > b->slots)
        b->slots = (long)(bytes / b->stride);
}

/* xorshift64*: a portable generator so a seed means the same order everywhere. */
static void shuffle_sizes(size_t *sizes, size_t n, long seed)
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

static void write_run_record(FILE *out, const struct cb_options *o, const struct cb_kernel *kernel,
                             const struct cb_context *ctx, double resolution, double overhead,
                             const size_t *sizes, size_t nsizes, size_t buffer_bytes)
{
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int version_len;
    MPI_Get_library_version(version, &version_len);

    char name[NAME_LEN] = {0}, binding[NAME_LEN] = {0};
    int name_len;
    MPI_Get_processor_name(name, &name_len);
    cpu_binding(binding, sizeof binding);
    char *names = NULL, *bindings = NULL;
    if (ctx->rank == 0) {
        names = calloc((size_t)ctx->nprocs, NAME_LEN);
        bindings = calloc((size_t)ctx->nprocs, NAME_LEN);
    }
    MPI_Gather(name, NAME_LEN, MPI_CHAR, names, NAME_LEN, MPI_CHAR, 0, ctx->comm);
    MPI_Gather(binding, NAME_LEN, MPI_CHAR, bindings, NAME_LEN, MPI_CHAR, 0, ctx->comm);
    if (ctx->rank != 0) return;

    char started[32];
    iso_now(started, sizeof started);
    fprintf(out, "{\"record\":\"run\",\"schema\":%d,\"kernel\":", CB_RECORD_SCHEMA);
    cb_json_string(out, kernel->name);
    fputs(",\"metric\":", out);
    cb_json_string(out, kernel->metric);
    fputs(",\"library_version\":", out);
    cb_json_string(out, version);
    fprintf(out, ",\"nprocs\":%d,\"hosts\":[", ctx->nprocs);
    for (int r = 0; r < ctx->nprocs; r++) {
        if (r) fputc(',', out);
        cb_json_string(out, names + (size_t)r * NAME_LEN);
    }
    fputs("],\"cpu_binding\":[", out);
    for (int r = 0; r < ctx->nprocs; r++) {
        if (r) fputc(',', out);
        cb_json_string(out, bindings + (size_t)r * NAME_LEN);
    }
    fputs("],\"timer\":", out);
    cb_json_string(out, cb_timer_name(o->timer));
    fprintf(out, ",\"timer_resolution_s\":%.6g,\"harness_overhead_s\":%.6g,\"started\":\"%s\","
                 "\"kernel_info\":%s", resolution, overhead, started, ctx->info);
    fputs(",\"args\":{\"schedule\":", out);
    cb_json_string(out, o->schedule.name);
    fputs(",\"order\":[", out);
    for (size_t i = 0; i < nsizes; i++) fprintf(out, "%s%zu", i ? "," : "", sizes[i]);
    fprintf(out, "],\"shuffle_seed\":%ld,\"warmup\":%ld,\"iterations\":%ld,\"rse\":%.6g,"
                 "\"min_samples\":%d,\"max_samples\":%d,\"max_point_time_s\":%.6g,"
                 "\"min_sample_time_s\":%.6g,\"cache\":\"%s\",\"buffer_bytes\":%zu,\"align\":%zu,"
                 "\"datatype\":\"%s\",\"integrity\":%s,\"inject_fault\":%s,\"window\":%d,\"window_buffers\":\"%s\","
                 "\"messages\":%d,\"pieces\":%d,\"rma_sync\":\"%s\",\"halo\":\"%s\",\"nodes\":%d,"
                 "\"proc_grid\":[%d,%d],\"method\":\"%s\",\"io_sync\":%s,\"drop_cache\":%s}}\n",
            o->shuffle_seed, o->warmup, o->fixed_iterations, o->rse_target, o->min_samples,
            o->max_samples, o->max_point_time_s, o->min_sample_time_s, o->cache_mode, buffer_bytes,
            o->align, o->datatype, o->integrity ? "true" : "false", o->inject_fault ? "true" : "false",
            o->params.window, o->params.distinct_window ? "distinct" : "shared", o->params.messages, o->params.pieces, o->params.sync, o->params.halo,
            o->params.nodes, o->params.proc_grid[0], o->params.proc_grid[1],
            o->params.method ? o->params.method : "default", o->params.io_sync ? "true" : "false",
            o->params.drop_cache ? "true" : "false");
    fflush(out);
    free(names);
    free(bindings);
}

/* Samples one size until the mean is known to the target precision, the sample
 * limit is reached, or the time cap for one size is spent. */
static void measure_size(FILE *out, const struct cb_options *o, const struct cb_kernel *kernel,
                         struct cb_context *ctx, size_t size, double min_sample_time,
                         double *samples)
{
    ctx->errors = 0;
    if (o->warmup) timed_batch(kernel, ctx, size, o->warmup, o->timer, NULL);
    long iterations = o->fixed_iterations
                          ? o->fixed_iterations
                          : calibrate(kernel, ctx, size, min_sample_time, o->timer);
    struct cb_stopping_rule rule = {o->rse_target, o->min_samples, o->max_samples, o->max_point_time_s};
    struct cb_running running = {0};
    double started = cb_now(o->timer), subtracted = 0;
    int more = 1;
    while (more) {
        double units, elapsed = timed_batch(kernel, ctx, size, iterations, o->timer, &units);
        if (ctx->rank == 0) {
            samples[running.n] = units > 0 ? elapsed / ((double)iterations * units) : ctx->measured;
            subtracted += units > 0 ? 0 : ctx->subtracted;
            cb_running_add(&running, samples[running.n]);
            more = !cb_sampling_done(&running, &rule, cb_now(o->timer) - started);
        }
        MPI_Bcast(&more, 1, MPI_INT, 0, ctx->comm);
    }
    long errors = 0;
    MPI_Reduce(&ctx->errors, &errors, 1, MPI_LONG, MPI_SUM, 0, ctx->comm);
    if (ctx->rank != 0) return;

    int n = running.n, settled = cb_running_settled(&running, &rule);
    double rse = cb_running_rse(&running);
    fprintf(out, "{\"record\":\"point\",\"size\":%zu,\"iters_per_sample\":%ld,\"settled\":%s,"
                 "\"rse\":%.6g,\"errors\":",
            size, iterations, settled ? "true" : "false", isfinite(rse) ? rse : -1.0);
    if (o->integrity) fprintf(out, "%ld", errors);
    else fputs("null", out);
    if (subtracted > 0) fprintf(out, ",\"subtracted_s\":%.6g", subtracted / n);
    fputs(",\"samples\":[", out);
    for (int i = 0; i < n; i++) fprintf(out, "%s%.9g", i ? "," : "", samples[i]);
    fputs("]}\n", out);
    fflush(out);
    fprintf(stderr, "%s %zu B: %.4g s mean, %d samples of %ld iterations, rse %.2g%s%s\n",
            kernel->name, size, running.mean, n, iterations, rse, settled ? "" : " (not settled)",
            errors ? " INTEGRITY ERRORS" : "");
}

static MPI_Datatype datatype_of(const char *name, size_t *type_size)
{
    if (strcmp(name, "int") == 0) { *type_size = sizeof(int); return MPI_INT; }
    if (strcmp(name, "double") == 0) { *type_size = sizeof(double); return MPI_DOUBLE; }
    *type_size = 1;
    return MPI_BYTE;
}

/* Everything after MPI is up: parse, set up, measure, write the records, undo the set-up.
 * Errors return the binary's exit status (2: usage or set-up, 3: memory or output) on every
 * rank alike, so a caller that keeps MPI running is never left with ranks out of step. */
static int run_kernel(struct cb_context *ctx, int argc, char **argv)
{
    struct cb_options o;
    int list_only;
    const char *error = parse_options(argc, argv, &o, &list_only);
    const struct cb_kernel *kernel = NULL;
    size_t *sizes = NULL, nsizes = 0;
    double *samples = NULL;
    FILE *out = stdout;
    int status = 0;
    if (!error && list_only) {
        if (list_only > 0 && ctx->rank == 0) cb_list_kernels();
        return 0;
    }
    if (!error && !(nsizes = cb_size_schedule(&o.schedule, &sizes)))
        error = "bad size schedule: --schedule powers|netpipe|small|large|list with MIN <= MAX, "
                "or --sizes A,B,... of distinct byte counts";
    if (!error && o.print_sizes) {
        for (size_t i = 0; ctx->rank == 0 && i < nsizes; i++) printf("%zu\n", sizes[i]);
        fflush(stdout);
        free(sizes);
        return 0;
    }
    if (!error && !(kernel = cb_find_kernel(o.kernel))) error = "unknown kernel (see --list)";
    if (!error && ctx->nprocs < kernel->min_ranks) error = "too few ranks for this kernel";
    ctx->datatype = datatype_of(o.datatype, &ctx->type_size);
    for (size_t i = 0; !error && i < nsizes; i++)
        if (sizes[i] % ctx->type_size) error = "with --datatype int or double, every size must be a multiple of its size in bytes";
    if (error) {
        if (ctx->rank == 0) fprintf(stderr, "commbench-kernels: %s\n", error);
        free(sizes);
        return 2;
    }
    ctx->integrity = o.integrity;
    ctx->inject_fault = o.inject_fault;
    ctx->params = o.params;
    ctx->slots_per_iteration = kernel->slots ? kernel->slots(&o.params, ctx->nprocs) : 1;
    ctx->timer = o.timer;
    ctx->cache_rotate = strcmp(o.cache_mode, "rotate") == 0;
    strcpy(ctx->info, "{}");

    size_t largest = 1;
    for (size_t i = 0; i < nsizes; i++) if (sizes[i] > largest) largest = sizes[i];
    int kernel_slots = ctx->slots_per_iteration;
    size_t buffer_bytes = page_round(largest) * (size_t)kernel_slots;
    if (strcmp(o.cache_mode, "rotate") == 0) {
        size_t wanted = o.cache_bytes ? o.cache_bytes : 2 * last_level_cache_bytes();
        buffer_bytes = wanted > 2 * buffer_bytes ? wanted : 2 * buffer_bytes;
    }
    /* Set-up may be collective (windows, files): no rank starts it unless every rank has its buffers. */
    int failed = allocate(&ctx->send, buffer_bytes, o.align) || allocate(&ctx->recv, buffer_bytes, o.align);
    if (failed) fprintf(stderr, "commbench-kernels: rank %d cannot allocate 2 x %zu bytes\n", ctx->rank, buffer_bytes);
    int any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_LOR, ctx->comm);
    if (any_failed) { status = 3; goto done; }
    const char *problem = kernel->setup ? kernel->setup(ctx, largest) : NULL;
    failed = problem != NULL;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_LOR, ctx->comm);
    if (any_failed) {
        if (ctx->rank == 0) fprintf(stderr, "commbench-kernels: %s: %s\n", kernel->name,
                                    problem ? problem : "set-up failed on another rank");
        status = 2;
        goto done;
    }
    if (o.shuffle_seed >= 0) shuffle_sizes(sizes, nsizes, o.shuffle_seed);

    failed = 0;
    if (ctx->rank == 0 && o.output && !(out = fopen(o.output, "w"))) {
        fprintf(stderr, "commbench-kernels: cannot write %s: %s\n", o.output, strerror(errno));
        failed = 1;
    }
    MPI_Bcast(&failed, 1, MPI_INT, 0, ctx->comm);
    if (failed) { status = 3; goto torn_down; }

    double measuring_since = cb_now(o.timer), resolution = 0, overhead = 0;
    if (ctx->rank == 0) resolution = measure_resolution(o.timer);
    overhead = measure_overhead(kernel, ctx, o.timer);
    MPI_Bcast(&resolution, 1, MPI_DOUBLE, 0, ctx->comm);
    MPI_Bcast(&overhead, 1, MPI_DOUBLE, 0, ctx->comm);
    write_run_record(out, &o, kernel, ctx, resolution, overhead, sizes, nsizes, buffer_bytes);

    /* A sample must dwarf both the timer's tick and the cost of timing it. */
    double min_sample_time = fmax(o.min_sample_time_s, fmax(100 * resolution, 100 * overhead));
    samples = malloc((size_t)o.max_samples * sizeof *samples);
    for (size_t i = 0; i < nsizes; i++) {
        /* Rank 0 stops answering; the others block in the next barrier: a real MPI hang. */
        if (o.hang_after >= 0 && (long)i == o.hang_after)
            for (;;) {
                if (ctx->rank == 0) sleep(3600);
                else MPI_Barrier(ctx->comm);
            }
        lay_out(&ctx->send, &o, buffer_bytes, sizes[i], kernel_slots);
        lay_out(&ctx->recv, &o, buffer_bytes, sizes[i], kernel_slots);
        measure_size(out, &o, kernel, ctx, sizes[i], min_sample_time, samples);
    }

    if (ctx->rank == 0) {
        char finished[32];
        iso_now(finished, sizeof finished);
        fprintf(out, "{\"record\":\"end\",\"status\":\"ok\",\"points\":%zu,\"finished\":\"%s\","
                     "\"elapsed_s\":%.6f}\n", nsizes, finished, cb_now(o.timer) - measuring_since);
        fflush(out);
    }
torn_down:
    if (kernel->teardown) kernel->teardown(ctx);
done:
    if (out && out != stdout) fclose(out);
    free(samples);
    free(sizes);
    free(ctx->send.base);
    free(ctx->recv.base);
    return status;
}

int commbench_run(MPI_Comm comm, int argc, char **argv)
{
    struct cb_context ctx = {0};
    /* A communicator of its own: a caller's messages on `comm` can never match the kernel's. */
    MPI_Comm_dup(comm, &ctx.comm);
    MPI_Comm_rank(ctx.comm, &ctx.rank);
    MPI_Comm_size(ctx.comm, &ctx.nprocs);
    int status = run_kernel(&ctx, argc, argv);
    MPI_Comm_free(&ctx.comm);
    return status;
}

int commbench_run_fortran_comm(MPI_Fint comm, int argc, char **argv)
{
    return commbench_run(MPI_Comm_f2c(comm), argc, argv);
}
