/* The OSU-style reference loop that `make bench` holds commbench against: for
 * each size a fixed 10000 iterations (1000 above 8 KiB) after 100 (10) skipped,
 * one MPI_Wtime pair around them all, latency = half the mean round trip.
 *
 *   reference-pingpong [MIN:MAX]                      the loop over MIN..MAX, then its wall time
 *   reference-pingpong MIN:MAX ROUNDS OUTPUT_PREFIX   ROUNDS times: the loop, then commbench's
 *       pingpong.send over the same sizes (libcommbench-kernels.so, records to
 *       OUTPUT_PREFIX<round>.jsonl), alternating in one launch. A launch's own state (where
 *       the ranks landed, how the library polls) moves small-message latency by tens of
 *       per cent from one launch to the next here; inside one launch both see the same. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commbench.h"

static void loop(char *buf, size_t min, size_t max, int rank, int round)
{
    for (size_t size = min; size <= max; size = size ? size * 2 : 1) {
        int iterations = size > 8192 ? 1000 : 10000, skip = size > 8192 ? 10 : 100;
        double t0 = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        for (int i = 0; i < iterations + skip; i++) {
            if (i == skip) t0 = MPI_Wtime();
            if (rank == 0) {
                MPI_Send(buf, (int)size, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)size, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(buf, (int)size, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, (int)size, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
            }
        }
        double latency = (MPI_Wtime() - t0) / (2.0 * iterations);
        if (rank == 0) printf("{\"round\":%d,\"size\":%zu,\"latency_s\":%.9g}\n", round, size, latency);
        if (size == 0 && max == 0) break;
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    size_t min = 1, max = 4194304;
    int rounds = 0;
    if ((argc != 1 && argc != 2 && argc != 4) || (argc > 1 && sscanf(argv[1], "%zu:%zu", &min, &max) != 2)
        || (argc == 4 && (rounds = atoi(argv[2])) < 1)) {
        if (rank == 0) fprintf(stderr, "usage: reference-pingpong [MIN:MAX [ROUNDS OUTPUT_PREFIX]]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char *buf = malloc(max ? max : 1);
    memset(buf, 1, max ? max : 1);
    double wall0 = MPI_Wtime();
    if (rounds == 0) {
        loop(buf, min, max, rank, 0);
        if (rank == 0) printf("{\"wall_s\":%.6f}\n", MPI_Wtime() - wall0);
    }
    for (int round = 0; round < rounds; round++) {
        loop(buf, min, max, rank, round);
        char sizes[64], output[4096];
        snprintf(sizes, sizeof sizes, "%zu:%zu", min, max);
        snprintf(output, sizeof output, "%s%d.jsonl", argv[3], round);
        char *args[] = {"commbench", "pingpong.send", "-m", sizes, "-o", output, NULL};
        if (commbench_run(MPI_COMM_WORLD, 6, args) != 0) MPI_Abort(MPI_COMM_WORLD, 3);
    }
    fflush(stdout);
    free(buf);
    MPI_Finalize();
    return 0;
}
