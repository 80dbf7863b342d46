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
 *
 * "sparse" (tcp with LITETX_TCP_CONNECT=lazy, an even N): the KV-transfer shape. Decode rank d
 * (upper half) sends its region's descriptor to prefill rank d - N/2, which writes 64 pages into
 * it with immediates and sends a done message; each rank then holds exactly one connection (its
 * socket count is checked). An alltoall afterwards connects every pair and must still work.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* TCP sockets this process holds (entries of /proc/self/fd that are sockets). */
static int sockets_open(void)
{
    DIR *d = opendir("/proc/self/fd");
    CHECK(d, "no /proc/self/fd");
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        char path[300], target[64];
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        ssize_t k = readlink(path, target, sizeof(target) - 1);
        if (k > 0) {
            target[k] = 0;
            n += !strncmp(target, "socket:", 7);
        }
    }
    closedir(d);
    return n;
}

/* A barrier outside the library, so that it makes no connection: each rank creates a file in a
 * folder named after the launcher's pid and waits (bounded) until all n are there. */
static void fs_barrier(int me, int n, const char *name)
{
    char dir[128], path[160];
    snprintf(dir, sizeof(dir), "/tmp/litetx-scale-%d-%s", (int)getppid(), name);
    mkdir(dir, 0700);
    snprintf(path, sizeof(path), "%s/%d", dir, me);
    FILE *f = fopen(path, "w");
    CHECK(f, "cannot create %s", path);
    fclose(f);
    for (int tries = 0;; tries++) {
        int count = 0;
        DIR *d = opendir(dir);
        CHECK(d, "cannot open %s", dir);
        for (struct dirent *e; (e = readdir(d));)
            count += e->d_name[0] != '.';
        closedir(d);
        if (count >= n)
            return;
        CHECK(tries < 60000, "file barrier %s: %d of %d ranks after 60 s", dir, count, n);
        usleep(1000);
    }
}

#define PAGES     64
#define PAGE_SIZE 4096

static void sparse(lite_ctx_t *ctx)
{
    int me = lite_rank(ctx), n = lite_world_size(ctx), half = n / 2;
    const char *mode = getenv("LITETX_TCP_CONNECT");
    if (strcmp(mp_transport(), "tcp") || !mode || strcmp(mode, "lazy"))
        mp_skip("sparse: tcp with LITETX_TCP_CONNECT=lazy only");
    CHECK(n % 2 == 0, "sparse needs an even number of ranks");
    /* After init: the listening socket alone (the bootstrap's are closed). */
    int base = sockets_open();
    CHECK(base == 1, "%d sockets after init, expected the listener alone", base);
    bool decode = me >= half;
    int partner = decode ? me - half : me + half;
    uint8_t *buf = calloc(PAGES, PAGE_SIZE);
    CHECK(buf, "out of memory");
    lite_mr_t *mr;
    CHECK_RC(ctx, lite_mr_reg(ctx, buf, PAGES * PAGE_SIZE, LITE_MEM_HOST, LITE_ACCESS_REMOTE_WRITE,
                              &mr));
    uint8_t done = 0;
    if (decode) {
        lite_rdesc_t desc;
        CHECK_RC(ctx, lite_mr_desc(ctx, mr, &desc));
        CHECK_RC(ctx, lite_send(ctx, partner, 1, &desc, sizeof(desc), LITE_TIMEOUT_DEFAULT));
        CHECK_RC(ctx, lite_imm_wait(ctx, 0x5a, PAGES, LITE_TIMEOUT_DEFAULT));
        CHECK_RC(ctx, lite_recv(ctx, partner, 2, &done, 1, NULL, LITE_TIMEOUT_DEFAULT));
        for (uint32_t p = 0; p < PAGES; p++) {
            long bad =
                mp_verify(buf + (size_t)(PAGES - 1 - p) * PAGE_SIZE, PAGE_SIZE, partner, me, p);
            CHECK(bad < 0, "page %u from rank %d wrong at byte %ld", p, partner, bad);
        }
    } else {
        lite_rdesc_t desc;
        CHECK_RC(ctx, lite_recv(ctx, partner, 1, &desc, sizeof(desc), NULL, LITE_TIMEOUT_DEFAULT));
        uint32_t src[PAGES], dst[PAGES];
        for (uint32_t p = 0; p < PAGES; p++) {
            mp_fill(buf + (size_t)p * PAGE_SIZE, PAGE_SIZE, me, partner, p);
            src[p] = p;
            dst[p] = PAGES - 1 - p;
        }
        lite_request_t *req;
        CHECK_RC(ctx, lite_write_paged(ctx, partner, mr, src, &desc, dst, PAGES, PAGE_SIZE, 0x5a,
                                       LITE_WRITE_WITH_IMM, &req));
        CHECK_RC(ctx, lite_wait(ctx, req, LITE_TIMEOUT_DEFAULT, NULL));
        done = 1;
        CHECK_RC(ctx, lite_send(ctx, partner, 2, &done, 1, LITE_TIMEOUT_DEFAULT));
    }
    fs_barrier(me, n, "pairs");
    int socks = sockets_open();
    CHECK(socks == base + 1, "%d sockets after talking to one peer, expected %d", socks, base + 1);
    fs_barrier(me, n, "counted"); /* nobody dials before every rank has counted */
    /* The collectives connect what they need: every pair, at most two sockets each. */
    alltoall_check(ctx);
    socks = sockets_open();
    CHECK(socks >= base + n - 1 && socks <= base + 2 * (n - 1),
          "%d sockets after an alltoall of %d ranks", socks, n);
    CHECK_RC(ctx, lite_mr_dereg(ctx, mr));
    free(buf);
    CHECK_RC(ctx, lite_barrier(ctx, LITE_TIMEOUT_DEFAULT));
    if (me == 0) {
        char cmd[160];
        snprintf(cmd, sizeof(cmd), "rm -rf /tmp/litetx-scale-%d-pairs /tmp/litetx-scale-%d-counted",
                 (int)getppid(), (int)getppid());
        CHECK(system(cmd) == 0, "%s", cmd);
    }
    if (me == 0)
        printf("sparse: %d ranks, one connection per rank for the pairs' traffic, %d sockets on "
               "rank 0 after an alltoall\n",
               n, socks);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "sparse")) {
        lite_ctx_t *ctx = mp_init();
        sparse(ctx);
        CHECK_RC(ctx, lite_finalize(ctx));
        return 0;
    }
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
