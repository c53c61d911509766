/* Integrity mode: every message carries a pattern its receiver checks byte by byte. */
#include "harness.h"

void cl_fill_checked(struct cl_context *ctx, unsigned char *msg, size_t size, long iteration, int leg)
{
    for (size_t j = 0; j < size; j++) msg[j] = cl_pattern(j, ctx->iteration_base + iteration, leg);
    /* The injected fault: one wrong byte in rank 0's first message of every batch. */
    if (ctx->inject_fault && ctx->rank == 0 && iteration == 0 && size > 0) msg[size / 2] ^= 0x5a;
}

void cl_check_received(struct cl_context *ctx, const unsigned char *msg, size_t size, long iteration, int leg)
{
    for (size_t j = 0; j < size; j++)
        if (msg[j] != cl_pattern(j, ctx->iteration_base + iteration, leg)) ctx->errors++;
}
