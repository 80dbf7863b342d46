/*
 * rl_weight_update - RL post-training: after each optimizer step the trainer (rank 0) pushes the
 * new policy weights to every rollout worker (ranks 1..n-1), two ways, timed apart from the
 * trainer's update and the workers' check:
 *
 *   litetx-run -n 3 [--transport tcp|efa] build/examples/rl_weight_update
 *       [-m MIB] [-T TENSORS] [-r ROUNDS] [-c CHUNK_KIB]
 *
 * Defaults: 64 MiB of weights in 16 tensors of different sizes, laid out back to back in one
 * flat buffer (as engines flatten parameters into buckets), 5 timed rounds after one warm-up
 * round, writes of at most 4096 KiB.
 *
 *   bcast:         one lite_bcast of the flat buffer from rank 0 (the library pipelines it).
 *   write_scatter: one lite_write_scatter from the trainer with an entry per (worker, tensor
 *                  chunk), each carrying the round's immediate; a worker knows the round has
 *                  fully arrived when lite_imm_wait has counted all its entries: no message, no
 *                  copy, no receive posted.
 *
 * Timed: from a barrier to the moment the weights are in place, on each rank (the trainer: its
 * bcast returned / its scatter request completed, which means in place at every worker; a
 * worker: its bcast returned / its count reached); a round takes as long as its slowest rank.
 * The trainer's fill ("training") and hash, and the workers' hash check, are outside the clock.
 * GB/s = model bytes / time (1e9 bytes/s): the rate at which each worker gets the whole model;
 * the trainer sends workers x that. Medians over the rounds.
 *
 * Every worker hashes every byte it received and compares with the trainer's hash (sent after
 * the timed part); the weights differ every round and method, so a stale or partial copy fails.
 * A mismatch exits non-zero.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <litetx/litetx.h>

#define WAIT_MS 120000

#define TRY(call)                                                                                  \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_) {                                                                                 \
            fprintf(stderr, "rank %d: %s: %s (%s)\n", lite_rank(ctx), #call, lite_strerror(rc_),   \
                    lite_last_error(ctx));                                                         \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* New weights for (round, method): words, so that the fill runs at memory speed. */
static void fill(uint64_t *w, size_t words, int round, int method)
{
    uint64_t seed = (uint64_t)(round * 2 + method + 1) * 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < words; i++)
        w[i] = seed + i * 0xD6E8FEB86659FD93ull;
}

/* 64-bit FNV-1a over words: every byte counts, position matters. */
static uint64_t hash(const uint64_t *w, size_t words)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < words; i++)
        h = (h ^ w[i]) * 1099511628211ull;
    return h;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    int mib = 64, ntensors = 16, rounds = 5, chunk_kib = 4096;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "-m") && v)
            mib = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-T") && v)
            ntensors = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && v)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-c") && v)
            chunk_kib = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: rl_weight_update [-m MIB] [-T TENSORS] [-r ROUNDS] "
                            "[-c CHUNK_KIB]\n");
            return 2;
        }
    }
    size_t bytes = (size_t)mib << 20, chunk = (size_t)chunk_kib << 10;
    if (mib < 1 || ntensors < 1 || (size_t)ntensors * 4096 > bytes || rounds < 1 || chunk_kib < 4) {
        fprintf(stderr, "rl_weight_update: need MIB >= 1, 1 <= TENSORS <= MIB x 256, ROUNDS >= 1, "
                        "CHUNK_KIB >= 4\n");
        return 2;
    }
    lite_config_t cfg = lite_config_default();
    lite_ctx_t *ctx;
    int rc = lite_init(&cfg, &ctx);
    if (rc) {
        fprintf(stderr, "lite_init: %s: %s\n", lite_strerror(rc), lite_init_error());
        return 1;
    }
    int me = lite_rank(ctx), n = lite_world_size(ctx);
    if (n < 2) {
        fprintf(stderr, "run with at least 2 ranks (litetx-run -n 3 ...)\n");
        return 2;
    }
    /* Tensors of different sizes (shares 1..5 of the total, in 4 KiB units), back to back. */
    size_t *toff = calloc((size_t)ntensors + 1, sizeof(size_t)), shares = 0;
    for (int t = 0; t < ntensors; t++)
        shares += 1 + (size_t)(t * 7 % 5);
    for (int t = 0; t < ntensors; t++)
        toff[t + 1] = t + 1 == ntensors
                          ? bytes
                          : toff[t] + (bytes / 4096 * (1 + (size_t)(t * 7 % 5)) / shares) * 4096;
    uint64_t *weights = aligned_alloc(4096, bytes);
    lite_rdesc_t *descs = calloc((size_t)n, sizeof(*descs));
    double *lat = calloc(2 * (size_t)rounds, sizeof(double)); /* bcast, write_scatter */
    if (!toff || !weights || !descs || !lat) {
        fprintf(stderr, "rank %d: out of memory\n", me);
        return 1;
    }
    memset(weights, 0, bytes);
    lite_mr_t *mr;
    TRY(lite_mr_reg(ctx, weights, bytes, LITE_MEM_HOST, me ? LITE_ACCESS_REMOTE_WRITE : 0, &mr));
    TRY(lite_mr_exchange(ctx, mr, descs, WAIT_MS));

    /* The trainer's scatter: every tensor to every worker, in chunks of at most `chunk`. */
    size_t per_worker = 0;
    for (int t = 0; t < ntensors; t++)
        per_worker += (toff[t + 1] - toff[t] + chunk - 1) / chunk;
    lite_scatter_entry_t *ent = calloc(per_worker * (size_t)(n - 1), sizeof(*ent));
    if (!ent)
        return 1;
    size_t tmin = bytes, tmax = 0;
    for (int t = 0; t < ntensors; t++) {
        size_t len = toff[t + 1] - toff[t];
        tmin = len < tmin ? len : tmin, tmax = len > tmax ? len : tmax;
    }
    if (me == 0)
        printf("# rl_weight_update: transport %s, %d MiB in %d tensors (%zu .. %zu KiB) to %d "
               "workers; scatter: %zu writes per worker of <= %d KiB\n",
               lite_transport_name(ctx), mib, ntensors, tmin >> 10, tmax >> 10, n - 1, per_worker,
               chunk_kib);

    int64_t failures = 0;
    const char *name[2] = {"bcast", "write_scatter"};
    for (int r = -1; r < rounds; r++) { /* r = -1: warm-up, checked but not counted */
        for (int m = 0; m < 2; m++) {
            uint64_t want = 0;
            double t_fill = now_s();
            if (me == 0) { /* "training": new weights, and their hash for the workers */
                fill(weights, bytes / 8, r + 1, m);
                want = hash(weights, bytes / 8);
            }
            t_fill = now_s() - t_fill;
            uint32_t imm = 0x10000u + (uint32_t)(r + 1) * 2 + (uint32_t)m;
            TRY(lite_barrier(ctx, WAIT_MS)); /* workers are done with the previous round */
            double t0 = now_s();
            if (m == 0) {
                TRY(lite_bcast(ctx, weights, bytes, LITE_U8, 0, WAIT_MS));
            } else if (me == 0) {
                size_t k = 0;
                for (int w = 1; w < n; w++)
                    for (int t = 0; t < ntensors; t++)
                        for (size_t off = toff[t]; off < toff[t + 1]; off += chunk) {
                            size_t len = toff[t + 1] - off < chunk ? toff[t + 1] - off : chunk;
                            ent[k++] = (lite_scatter_entry_t){.peer = w,
                                                              .local_off = off,
                                                              .remote = &descs[w],
                                                              .remote_off = off,
                                                              .len = len,
                                                              .imm = imm,
                                                              .flags = LITE_WRITE_WITH_IMM};
                        }
                lite_request_t *req;
                TRY(lite_write_scatter(ctx, mr, ent, k, &req));
                TRY(lite_wait(ctx, req, WAIT_MS, NULL));
            } else {
                TRY(lite_imm_wait(ctx, imm, per_worker, WAIT_MS));
            }
            double took = now_s() - t0;
            if (r >= 0)
                lat[m * rounds + r] = took;
            /* Outside the clock: the trainer's hash to every worker, which checks every byte. */
            TRY(lite_bcast(ctx, &want, 1, LITE_U64, 0, WAIT_MS));
            if (me != 0 && hash(weights, bytes / 8) != want) {
                fprintf(stderr, "rank %d: round %d %s: weights MISMATCH\n", me, r, name[m]);
                failures++;
            }
            if (me == 0)
                printf("%s %d %-13s: trainer fill+hash %.1f ms (not timed), transfer %.2f ms "
                       "(trainer), %.2f GB/s per worker\n",
                       r < 0 ? "warm-up" : "round  ", r, name[m], t_fill * 1e3, took * 1e3,
                       (double)bytes / took / 1e9);
        }
    }
    /* A round is as slow as its slowest rank; every rank learns about any mismatch. */
    TRY(lite_allreduce(ctx, LITE_IN_PLACE, lat, 2 * (size_t)rounds, LITE_F64, LITE_MAX, WAIT_MS));
    TRY(lite_allreduce(ctx, LITE_IN_PLACE, &failures, 1, LITE_I64, LITE_SUM, WAIT_MS));
    if (me == 0) {
        double med[2] = {median(lat, rounds), median(lat + rounds, rounds)};
        printf("# every worker's hash of every byte: %s\n", failures ? "MISMATCH" : "ok");
        printf("rl_weight_update: %s %d MiB to %d workers, median over %d rounds (slowest rank): "
               "bcast %.2f ms %.2f GB/s, write_scatter %.2f ms %.2f GB/s per worker; faster: %s\n",
               lite_transport_name(ctx), mib, n - 1, rounds, med[0] * 1e3,
               (double)bytes / med[0] / 1e9, med[1] * 1e3, (double)bytes / med[1] / 1e9,
               name[med[1] < med[0]]);
    }
    TRY(lite_mr_dereg(ctx, mr));
    free(ent);
    free(lat);
    free(descs);
    free(toff);
    free(weights);
    lite_finalize(ctx);
    return failures ? 1 : 0;
}
