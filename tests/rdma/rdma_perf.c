/*
 * rdma_perf.c - liblitetx's counterparts of perftest's ib_write_bw and ib_write_lat, for the
 * ratios in docs/RDMA.md. Two ranks (litetx-run -n 2); rank 0 measures and prints one line:
 *
 *   rdma_perf bw SIZE ITERS DEPTH   rank 0 writes ITERS x SIZE bytes to rank 1 with
 *                                   lite_write_imm, at most DEPTH in flight (ib_write_bw's
 *                                   tx-depth); rank 1 waits for the ImmCounter to reach ITERS.
 *                                   Prints "RDMA-PERF bw size=.. iters=.. gbps=.."
 *   rdma_perf bw SIZE ITERS DEPTH write   the same with plain lite_write (no immediate, the
 *                                   target does nothing: what ib_write_bw measures).
 *                                   Prints "RDMA-PERF bw_write ..."
 *   rdma_perf lat ITERS [imm]       8-byte write ping-pong. Default: like ib_write_lat, each
 *                                   side polls its memory for the other's write (lite_write);
 *                                   "imm": lite_write_imm + lite_imm_wait instead. Half the
 *                                   round trip; prints typical (median) and average in us.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "litetx/litetx.h"

#define CHECK(c, ...)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "rdma_perf: " __VA_ARGS__);                                            \
            fprintf(stderr, "\n");                                                                 \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define OK(ctx, call)                                                                              \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        CHECK(rc_ == 0, "%s: %s: %s", #call, lite_strerror(rc_), lite_last_error(ctx));            \
    } while (0)

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void bw(lite_ctx_t *ctx, size_t size, int iters, int depth, int imm)
{
    int me = lite_rank(ctx);
    uint8_t *buf = malloc(size);
    CHECK(buf, "oom");
    memset(buf, me + 1, size);
    lite_mr_t *mr;
    lite_rdesc_t d[2];
    OK(ctx, lite_mr_reg(ctx, buf, size, LITE_MEM_HOST, LITE_ACCESS_REMOTE_WRITE, &mr));
    OK(ctx, lite_mr_exchange(ctx, mr, d, 30000));
    OK(ctx, lite_barrier(ctx, 30000));
    if (me == 0) {
        lite_request_t **req = calloc((size_t)depth, sizeof(*req));
        double t0 = now_us();
        for (int i = 0; i < iters; i++) {
            int s = i % depth;
            if (req[s])
                OK(ctx, lite_wait(ctx, req[s], 60000, NULL));
            if (imm)
                OK(ctx, lite_write_imm(ctx, 1, mr, 0, &d[1], 0, size, 7, &req[s]));
            else
                OK(ctx, lite_write(ctx, 1, mr, 0, &d[1], 0, size, &req[s]));
        }
        for (int s = 0; s < depth; s++)
            if (req[s] && (s < iters))
                OK(ctx, lite_wait(ctx, req[s], 60000, NULL));
        double us = now_us() - t0;
        printf("RDMA-PERF bw%s size=%zu iters=%d depth=%d gbps=%.4f\n", imm ? "" : "_write", size,
               iters, depth, (double)size * iters * 8 / (us * 1e3));
        free(req);
    } else if (imm) {
        OK(ctx, lite_imm_wait(ctx, 7, (uint64_t)iters, 120000));
    }
    OK(ctx, lite_barrier(ctx, 30000));
    OK(ctx, lite_mr_dereg(ctx, mr));
    free(buf);
}

static void lat(lite_ctx_t *ctx, int iters, int use_imm)
{
    int me = lite_rank(ctx), peer = 1 - me;
    /* [0..8): what the peer writes here; [64..72): what this side sends */
    uint64_t *buf = aligned_alloc(64, 128);
    CHECK(buf, "oom");
    memset(buf, 0, 128);
    volatile uint64_t *in = buf;
    uint64_t *out = buf + 8;
    lite_mr_t *mr;
    lite_rdesc_t d[2];
    OK(ctx, lite_mr_reg(ctx, buf, 128, LITE_MEM_HOST, LITE_ACCESS_REMOTE_WRITE, &mr));
    OK(ctx, lite_mr_exchange(ctx, mr, d, 30000));
    OK(ctx, lite_barrier(ctx, 30000));
    double *t = calloc((size_t)iters, sizeof(*t));
    CHECK(t, "oom");
    for (int i = 1; i <= iters; i++) {
        double t0 = now_us();
        lite_request_t *r;
        if (me == 1) {
            /* wait for the ping */
            if (use_imm)
                OK(ctx, lite_imm_wait(ctx, (uint32_t)i, 1, 60000));
            else
                while (*in != (uint64_t)i)
                    lite_progress(ctx);
        }
        *out = (uint64_t)i;
        if (use_imm)
            OK(ctx, lite_write_imm(ctx, peer, mr, 64, &d[peer], 0, 8, (uint32_t)i, &r));
        else
            OK(ctx, lite_write(ctx, peer, mr, 64, &d[peer], 0, 8, &r));
        if (me == 0) {
            if (use_imm)
                OK(ctx, lite_imm_wait(ctx, (uint32_t)i, 1, 60000));
            else
                while (*in != (uint64_t)i)
                    lite_progress(ctx);
        }
        OK(ctx, lite_wait(ctx, r, 60000, NULL));
        t[i - 1] = (now_us() - t0) / 2;
    }
    if (me == 0) {
        double sum = 0;
        for (int i = 0; i < iters; i++)
            sum += t[i];
        qsort(t, (size_t)iters, sizeof(*t), cmp_double);
        printf("RDMA-PERF lat%s size=8 iters=%d typical_us=%.2f avg_us=%.2f\n",
               use_imm ? "_imm" : "", iters, t[iters / 2], sum / iters);
    }
    free(t);
    OK(ctx, lite_barrier(ctx, 30000));
    OK(ctx, lite_mr_dereg(ctx, mr));
    free(buf);
}

int main(int argc, char **argv)
{
    CHECK(argc >= 3, "usage: rdma_perf bw SIZE ITERS DEPTH [write] | rdma_perf lat ITERS [imm]");
    lite_config_t cfg = lite_config_default();
    lite_ctx_t *ctx;
    int rc = lite_init(&cfg, &ctx);
    CHECK(rc == 0, "lite_init: %s: %s", lite_strerror(rc), lite_init_error());
    CHECK(lite_world_size(ctx) == 2, "needs 2 ranks");
    if (strcmp(argv[1], "bw") == 0 && (argc == 5 || argc == 6))
        bw(ctx, (size_t)atol(argv[2]), atoi(argv[3]), atoi(argv[4]),
           argc == 5 || strcmp(argv[5], "write") != 0);
    else if (strcmp(argv[1], "lat") == 0)
        lat(ctx, atoi(argv[2]), argc > 3 && strcmp(argv[3], "imm") == 0);
    else
        CHECK(0, "unknown mode %s", argv[1]);
    CHECK(lite_finalize(ctx) == 0, "finalize");
    return 0;
}
