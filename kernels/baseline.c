/* Baselines that bound what MPI can do: a single-core memory copy (the on-node
 * limit) and a ping-pong over plain TCP sockets (NetPIPE's TCP module). */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "patterns.h"

double copy_memory(struct cl_context *ctx, size_t size, long iterations)
{
    if (ctx->rank != 0) return 1;
    for (long i = 0; i < iterations; i++) {
        memcpy(cl_message(&ctx->recv, i), cl_message(&ctx->send, i), size);
        /* Keep the copy: the compiler may not drop it however the result is used. */
        __asm__ __volatile__("" : : "r"(ctx->recv.base) : "memory");
    }
    return 1;
}

const char *no_integrity(struct cl_context *ctx, size_t max_size)
{
    (void)max_size;
    return ctx->integrity ? "this baseline has no integrity mode" : NULL;
}

static int tcp_socket = -1;

static int write_all(int fd, const unsigned char *p, size_t n)
{
    while (n) {
        ssize_t done = write(fd, p, n);
        if (done <= 0) return -1;
        p += done;
        n -= (size_t)done;
    }
    return 0;
}

static int read_all(int fd, unsigned char *p, size_t n)
{
    while (n) {
        ssize_t done = read(fd, p, n);
        if (done <= 0) return -1;
        p += done;
        n -= (size_t)done;
    }
    return 0;
}

/* Rank 1 listens on an ephemeral port and tells rank 0 its host and port; rank 0
 * connects (over loopback when both share a host). */
const char *tcp_connect(struct cl_context *ctx, size_t max_size)
{
    (void)max_size;
    const char *problem = no_integrity(ctx, max_size);
    if (problem) return problem;
    char host[256] = {0}, peer_host[256] = {0};
    int port = 0, failed = 0;
    gethostname(host, sizeof host - 1);
    if (ctx->rank == 1) {
        int listener = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
        socklen_t len = sizeof addr;
        failed = listener < 0 || bind(listener, (struct sockaddr *)&addr, sizeof addr) || listen(listener, 1)
                 || getsockname(listener, (struct sockaddr *)&addr, &len);
        port = failed ? -1 : ntohs(addr.sin_port);
        MPI_Send(&port, 1, MPI_INT, 0, 7, ctx->comm);
        MPI_Send(host, sizeof host, MPI_CHAR, 0, 8, ctx->comm);
        if (!failed) tcp_socket = accept(listener, NULL, NULL);
        if (listener >= 0) close(listener);
    } else if (ctx->rank == 0) {
        MPI_Recv(&port, 1, MPI_INT, 1, 7, ctx->comm, MPI_STATUS_IGNORE);
        MPI_Recv(peer_host, sizeof peer_host, MPI_CHAR, 1, 8, ctx->comm, MPI_STATUS_IGNORE);
        struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *found = NULL;
        char service[16];
        snprintf(service, sizeof service, "%d", port);
        const char *target = strcmp(host, peer_host) == 0 ? "127.0.0.1" : peer_host;
        failed = port < 0 || getaddrinfo(target, service, &hints, &found) != 0;
        if (!failed) {
            tcp_socket = socket(AF_INET, SOCK_STREAM, 0);
            failed = tcp_socket < 0 || connect(tcp_socket, found->ai_addr, found->ai_addrlen);
            freeaddrinfo(found);
        }
    }
    if (ctx->rank < 2) {
        int one = 1;
        failed |= tcp_socket < 0 || setsockopt(tcp_socket, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    int any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_LOR, ctx->comm);
    return any_failed ? "tcp.pingpong: could not connect a TCP socket between ranks 0 and 1" : NULL;
}

void tcp_close(struct cl_context *ctx)
{
    (void)ctx;
    if (tcp_socket >= 0) close(tcp_socket);
    tcp_socket = -1;
}

double tcp_pingpong(struct cl_context *ctx, size_t size, long iterations)
{
    if (ctx->rank > 1) return 2;
    /* A byte stream has no empty message: writing 0 bytes sends nothing and reading 0 returns at
     * once, so size 0 is carried as the smallest message TCP has, one byte. */
    size_t wire = size ? size : 1;
    int failed = 0;
    for (long i = 0; i < iterations && !failed; i++) {
        unsigned char *out = cl_message(&ctx->send, i), *in = cl_message(&ctx->recv, i);
        if (ctx->rank == 0) failed = write_all(tcp_socket, out, wire) || read_all(tcp_socket, in, wire);
        else failed = read_all(tcp_socket, in, wire) || write_all(tcp_socket, out, wire);
    }
    if (failed) {
        fprintf(stderr, "tcp.pingpong: the connection broke\n");
        MPI_Abort(ctx->comm, 4);
    }
    return 2;
}
