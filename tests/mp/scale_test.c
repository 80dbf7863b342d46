/*
 * scale_test - a job of many ranks: initialise, barrier, allreduce (4 KiB and 1 MiB per rank),
 * alltoall (4 KiB per peer) and a point-to-point ring (eager and rendezvous sizes), every byte
 * checked, then finalise. Rank 0 prints one line with the init time and resident memory per rank
 * (maximum and mean over the ranks):
 *
 *   scale: ranks 32 transport tcp init_ms max 310 mean 250 rss_kib max 9120 mean 8800 ...
 *
 * Run with litetx-run -n N (tests/mp/CMakeLists.txt runs 16 and 32; docs/PERFORMANCE.md gives
 * the figures up to 256). Optional argument: "quick" leaves out the 1 MiB allreduce.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mp_common.h"

#define SMALL_ELEMS (4096 / 8)
#define BIG_ELEMS   ((1u << 20) / 8)
#define A2A_BYTES   4096
#define RING_SMALL  1024
#define RING_BIG    (256 * 1024) /* above every backend's rendezvous threshold */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A field of /proc/self/status in KiB (VmRSS, VmHWM), or -1. */
static long status_kib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, field, n) && line[n] == ':')
            v = strtol(line + n + 1, NULL, 10);
    fclose(f);
    return v;
}

/* Rank r's contribution to element i: the sum over ranks is exact in int64. */
static int64_t contrib(int r, size_t i)
{
    return (int64_t)r * 1000003 + (int64_t)i * 7 + 1;
}

static void allreduce_check(lite_ctx_t *ctx, size_t count)
{
    int me = lite_rank(ctx), n = lite_world_size(ctx);
    int64_t *in = malloc(count * sizeof(*in)), *out = malloc(count * sizeof(*out));
    CHECK(in && out, "out of memory");
    for (size_t i = 0; i < count; i++)
        in[i] = contrib(me, i);
    CHECK_RC(ctx, lite_allreduce(ctx, in, out, count, LITE_I64, LITE_SUM, LITE_TIMEOUT_DEFAULT));
    int64_t ranks = (int64_t)n * (n - 1) / 2;
    for (size_t i = 0; i < count; i++) {
        int64_t want = ranks * 1000003 + (int64_t)n * ((int64_t)i * 7 + 1);
        CHECK(out[i] == want, "allreduce of %zu: element %zu is %lld, not %lld", count, i,
              (long long)out[i], (long long)want);
    }
    free(in);
    free(out);
}

static void alltoall_check(lite_ctx_t *ctx)
{
    int me = lite_rank(ctx), n = lite_world_size(ctx);
    uint8_t *s = malloc((size_t)n * A2A_BYTES), *r = malloc((size_t)n * A2A_BYTES);
    CHECK(s && r, "out of memory");
    for (int p = 0; p < n; p++)
        mp_fill(s + (size_t)p * A2A_BYTES, A2A_BYTES, me, p, 7);
    CHECK_RC(ctx, lite_alltoall(ctx, s, r, A2A_BYTES, LITE_U8, LITE_TIMEOUT_DEFAULT));
    for (int p = 0; p < n; p++) {
        long bad = mp_verify(r + (size_t)p * A2A_BYTES, A2A_BYTES, p, me, 7);
        CHECK(bad < 0, "alltoall: block from rank %d wrong at byte %ld", p, bad);
    }
    free(s);
    free(r);
}

static void ring_check(lite_ctx_t *ctx, uint64_t tag, size_t len)
{
    int me = lite_rank(ctx), n = lite_world_size(ctx);
    int next = (me + 1) % n, prev = (me + n - 1) % n;
    uint8_t *s = malloc(len), *r = malloc(len);
    CHECK(s && r, "out of memory");
    mp_fill(s, len, me, next, (uint32_t)tag);
    lite_request_t *rq, *sq;
    lite_status_t st;
    CHECK_RC(ctx, lite_irecv(ctx, prev, tag, r, len, &rq));
    CHECK_RC(ctx, lite_isend(ctx, next, tag, s, len, &sq));
    CHECK_RC(ctx, lite_wait(ctx, rq, LITE_TIMEOUT_DEFAULT, &st));
    CHECK_RC(ctx, lite_wait(ctx, sq, LITE_TIMEOUT_DEFAULT, NULL));
    CHECK(st.bytes == len, "ring: %zu bytes from rank %d, not %zu", (size_t)st.bytes, prev, len);
    long bad = mp_verify(r, len, prev, me, (uint32_t)tag);
    CHECK(bad < 0, "ring: message from rank %d wrong at byte %ld", prev, bad);
    free(s);
    free(r);
}

int main(int argc, char **argv)
{
    bool quick = argc > 1 && !strcmp(argv[1], "quick");
    double t0 = now_ms();
    lite_ctx_t *ctx = mp_init();
    double init_ms = now_ms() - t0;
    long rss_init = status_kib("VmRSS");
    int n = lite_world_size(ctx);

    double t1 = now_ms();
    CHECK_RC(ctx, lite_barrier(ctx, LITE_TIMEOUT_DEFAULT));
    allreduce_check(ctx, SMALL_ELEMS);
    if (!quick)
        allreduce_check(ctx, BIG_ELEMS);
    alltoall_check(ctx);
    ring_check(ctx, 1, RING_SMALL);
    ring_check(ctx, 2, RING_BIG);
    double work_ms = now_ms() - t1;

    /* max and sum over the ranks of: init ms, RSS after init, RSS now, peak RSS, work ms */
    int64_t mine[5] = {(int64_t)init_ms, rss_init, status_kib("VmRSS"), status_kib("VmHWM"),
                       (int64_t)work_ms};
    int64_t mx[5], sum[5];
    CHECK_RC(ctx, lite_allreduce(ctx, mine, mx, 5, LITE_I64, LITE_MAX, LITE_TIMEOUT_DEFAULT));
    CHECK_RC(ctx, lite_allreduce(ctx, mine, sum, 5, LITE_I64, LITE_SUM, LITE_TIMEOUT_DEFAULT));
    if (mp_rank == 0)
        printf("scale: ranks %d transport %s init_ms max %lld mean %lld rss_kib after init max "
               "%lld mean %lld, at end max %lld mean %lld, peak max %lld; collectives+ring ms "
               "max %lld\n",
               n, mp_transport(), (long long)mx[0], (long long)(sum[0] / n), (long long)mx[1],
               (long long)(sum[1] / n), (long long)mx[2], (long long)(sum[2] / n), (long long)mx[3],
               (long long)mx[4]);
    CHECK_RC(ctx, lite_finalize(ctx));
    return 0;
}
