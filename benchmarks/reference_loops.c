/* The OSU-style reference loops that `make bench` holds commlens against, written from the
 * published algorithms:
 *   latency    for each size a fixed 10000 iterations (1000 above 8 KiB) after 100 (10)
 *              skipped, one MPI_Wtime pair around them all, latency = half the mean round trip
 *              (osu_latency);
 *   bandwidth  for each size 100 iterations (20 above 8 KiB) after 10 (2) skipped, each a window
 *              of 64 MPI_Isend (rank 0) / MPI_Irecv (rank 1) all on one buffer, MPI_Waitall,
 *              then a one-byte acknowledgement back; bandwidth = size x 64 x iterations / time
 *              (osu_bw).
 *
 *   reference-loops MODE [MIN:MAX]                      the loop over MIN..MAX, then its wall time
 *   reference-loops MODE MIN:MAX ROUNDS OUTPUT_PREFIX   ROUNDS times: the loop, then commlens's
 *       kernel for the same measurement (pingpong.send; stream.uni with a window of 64) over the
 *       same sizes (libcommlens-kernels.so, records to OUTPUT_PREFIX<round>.jsonl), alternating
 *       in one launch. A launch's own state (where the ranks landed, how the library polls)
 *       moves results by tens of per cent from one launch to the next here; inside one launch
 *       both see the same. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commlens.h"

enum { WINDOW = 64 };

static double latency_loop(char *buf, size_t size, int rank)
{
    int iterations = size > 8192 ? 1000 : 10000, skip = size > 8192 ? 10 : 100;
    double t0 = 0;
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
    return (MPI_Wtime() - t0) / (2.0 * iterations);
}

static double bandwidth_loop(char *buf, size_t size, int rank)
{
    int iterations = size > 8192 ? 20 : 100, skip = size > 8192 ? 2 : 10;
    MPI_Request requests[WINDOW];
    char ack = 0;
    double t0 = 0;
    for (int i = 0; i < iterations + skip; i++) {
        if (i == skip) t0 = MPI_Wtime();
        if (rank == 0) {
            for (int j = 0; j < WINDOW; j++)
                MPI_Isend(buf, (int)size, MPI_BYTE, 1, 100, MPI_COMM_WORLD, &requests[j]);
            MPI_Waitall(WINDOW, requests, MPI_STATUSES_IGNORE);
            MPI_Recv(&ack, 1, MPI_CHAR, 1, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            for (int j = 0; j < WINDOW; j++)
                MPI_Irecv(buf, (int)size, MPI_BYTE, 0, 100, MPI_COMM_WORLD, &requests[j]);
            MPI_Waitall(WINDOW, requests, MPI_STATUSES_IGNORE);
            MPI_Send(&ack, 1, MPI_CHAR, 0, 101, MPI_COMM_WORLD);
        }
    }
    return size * (double)WINDOW * iterations / (MPI_Wtime() - t0);
}

static void loop(int bandwidth, char *buf, size_t min, size_t max, int rank, int round)
{
    for (size_t size = min; size <= max; size = size ? size * 2 : 1) {
        MPI_Barrier(MPI_COMM_WORLD);
        double value = bandwidth ? bandwidth_loop(buf, size, rank) : latency_loop(buf, size, rank);
        if (rank == 0) printf("{\"round\":%d,\"size\":%zu,\"%s\":%.9g}\n", round, size,
                              bandwidth ? "bandwidth_Bps" : "latency_s", value);
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
    int bandwidth = argc > 1 && strcmp(argv[1], "bandwidth") == 0;
    if ((argc != 2 && argc != 3 && argc != 5) || (!bandwidth && strcmp(argv[1], "latency"))
        || (argc > 2 && sscanf(argv[2], "%zu:%zu", &min, &max) != 2)
        || (argc == 5 && (rounds = atoi(argv[3])) < 1)) {
        if (rank == 0) fprintf(stderr, "usage: reference-loops latency|bandwidth [MIN:MAX [ROUNDS OUTPUT_PREFIX]]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char *buf = malloc(max ? max : 1);
    memset(buf, 1, max ? max : 1);
    double wall0 = MPI_Wtime();
    if (rounds == 0) {
        loop(bandwidth, buf, min, max, rank, 0);
        if (rank == 0) printf("{\"wall_s\":%.6f}\n", MPI_Wtime() - wall0);
    }
    for (int round = 0; round < rounds; round++) {
        loop(bandwidth, buf, min, max, rank, round);
        char sizes[64], output[4096];
        snprintf(sizes, sizeof sizes, "%zu:%zu", min, max);
        snprintf(output, sizeof output, "%s%d.jsonl", argv[4], round);
        char *latency_args[] = {"commlens", "pingpong.send", "-m", sizes, "-o", output, NULL};
        char *bandwidth_args[] = {"commlens", "stream.uni", "-m", sizes, "--window", "64", "-o", output, NULL};
        if (commlens_run(MPI_COMM_WORLD, bandwidth ? 8 : 6, bandwidth ? bandwidth_args : latency_args) != 0)
            MPI_Abort(MPI_COMM_WORLD, 3);
    }
    fflush(stdout);
    free(buf);
    MPI_Finalize();
    return 0;
}
