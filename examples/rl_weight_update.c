/*
 * rl_weight_update - RL post-training: the trainer (rank 0) pushes each new policy version into
 * the weight buffers of every rollout worker (ranks 1..n-1) with one scatter of one-sided
 * writes, sharded so no single write is huge. A worker knows version v has fully arrived when
 * its counter for immediate v reaches the number of shards: no message, no copy, no barrier.
 *
 *   litetx-run -n 3 build/examples/rl_weight_update [MiB] [versions]
 *
 * Each worker checks a checksum of the weights it received against the one the trainer
 * computed, and prints one line per version.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <litetx/litetx.h>

#define SHARD (4u << 20) /* bytes per write */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t fnv(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

#define TRY(call)                                                                                  \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_) {                                                                                 \
            fprintf(stderr, "rank %d: %s: %s (%s)\n", lite_rank(ctx), #call, lite_strerror(rc_),   \
                    lite_last_error(ctx));                                                         \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    size_t bytes = (size_t)(argc > 1 ? atoi(argv[1]) : 64) << 20;
    int versions = argc > 2 ? atoi(argv[2]) : 3;
    lite_config_t cfg = lite_config_default();
    lite_ctx_t *ctx;
    int rc = lite_init(&cfg, &ctx);
    if (rc || bytes == 0 || versions < 1) {
        fprintf(stderr, "lite_init: %s: %s\n", lite_strerror(rc), lite_init_error());
        return 1;
    }
    int me = lite_rank(ctx), n = lite_world_size(ctx);
    uint8_t *weights = malloc(bytes);
    if (!weights)
        return 1;
    memset(weights, 0, bytes);
    lite_mr_t *mr;
    lite_rdesc_t *descs = calloc((size_t)n, sizeof(*descs));
    TRY(lite_mr_reg(ctx, weights, bytes, LITE_MEM_HOST, me ? LITE_ACCESS_REMOTE_WRITE : 0, &mr));
    TRY(lite_mr_exchange(ctx, mr, descs, 10000));
    size_t shards = (bytes + SHARD - 1) / SHARD;
    int failures = 0;

    for (int v = 1; v <= versions; v++) {
        uint64_t sum = 0;
        if (me == 0) {
            /* "Train": a new version of the weights, then push it to every worker. */
            for (size_t i = 0; i < bytes; i += 8)
                weights[i] = (uint8_t)(v * 13 + i / 4096);
            sum = fnv(weights, bytes);
            size_t ne = shards * (size_t)(n - 1), k = 0;
            lite_scatter_entry_t *e = calloc(ne, sizeof(*e));
            for (int w = 1; w < n; w++)
                for (size_t s = 0; s < shards; s++) {
                    size_t off = s * SHARD, len = bytes - off < SHARD ? bytes - off : SHARD;
                    e[k++] = (lite_scatter_entry_t){.peer = w,
                                                    .local_off = off,
                                                    .remote = &descs[w],
                                                    .remote_off = off,
                                                    .len = len,
                                                    .imm = (uint32_t)v,
                                                    .flags = LITE_WRITE_WITH_IMM};
                }
            double t0 = now_s();
            lite_request_t *req;
            TRY(lite_write_scatter(ctx, mr, e, ne, &req));
            TRY(lite_wait(ctx, req, 60000, NULL));
            printf("rank 0: version %d (%zu MiB) pushed to %d workers in %.1f ms\n", v, bytes >> 20,
                   n - 1, (now_s() - t0) * 1e3);
            free(e);
            for (int w = 1; w < n; w++)
                TRY(lite_send(ctx, w, (uint64_t)v, &sum, sizeof(sum), 10000));
        } else {
            double t0 = now_s();
            TRY(lite_imm_wait(ctx, (uint32_t)v, shards, 60000));
            double took = now_s() - t0;
            uint64_t want;
            TRY(lite_recv(ctx, 0, (uint64_t)v, &want, sizeof(want), NULL, 10000));
            sum = fnv(weights, bytes);
            failures += sum != want;
            printf("rank %d: version %d complete after %.1f ms, checksum %016llx %s\n", me, v,
                   took * 1e3, (unsigned long long)sum, sum == want ? "ok" : "MISMATCH");
        }
        /* Workers must be done reading version v before the trainer overwrites it. */
        TRY(lite_barrier(ctx, 60000));
    }
    lite_mr_dereg(ctx, mr);
    free(descs);
    free(weights);
    lite_finalize(ctx);
    return failures ? 1 : 0;
}
