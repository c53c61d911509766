/* Waiting that leaves the core to others (harness.h says why). */
#define _GNU_SOURCE
#include <sched.h>
#include <time.h>

#include "harness.h"

void cl_polite_barrier(MPI_Comm comm)
{
    const struct timespec pause = {0, 20000};
    MPI_Request request;
    int done = 0;
    MPI_Ibarrier(comm, &request);
    for (MPI_Test(&request, &done, MPI_STATUS_IGNORE); !done; MPI_Test(&request, &done, MPI_STATUS_IGNORE))
        nanosleep(&pause, NULL);
}

void cl_yielding_waitall(int count, MPI_Request *requests)
{
    int done = 0;
    for (MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE); !done;
         MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE))
        sched_yield();
}

void cl_yielding_recv(void *buffer, int count, int peer, int tag, MPI_Comm comm)
{
    MPI_Request request;
    MPI_Irecv(buffer, count, MPI_CHAR, peer, tag, comm, &request);
    cl_yielding_waitall(1, &request);
}
