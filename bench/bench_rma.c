/*
 * bench_rma - one-sided write-with-immediate bandwidth between ranks 0 and 1, shaped like
 * fabtests' `fi_rma_bw -o writedata` so the two can be compared side by side:
 *
 *   litetx-run -n 2 [--transport efa] bench_rma [-s 64K,1M,16M] [-r REPS] [-W WINDOW] [-I ITERS]
 *                                               [-P PAGE] [-S]
 *
 * Rank 0 posts WINDOW writes with an immediate into the same window of rank 1, waits for all of
 * them to complete (on liblitetx a write completes when its data is in place at the target),
 * and repeats; after WARMUP = ITERS/10 + 1 untimed writes it times ITERS writes. Rank 1 waits
 * for the immediate's count to reach WARMUP + ITERS, then checks that the count is exactly that
 * (a write striped over several rails must count once), and that the bytes are right.
 * Defaults follow the peers' fabtests runs (the fabtests peer runs): ITERS 10000 / 2000 / 200 at
 * 64 KiB / 1 MiB / 16 MiB, WINDOW 64 (16 from 16 MiB). MB/s are decimal (1e6 bytes/s).
 * Every wait is bounded; a failure exits non-zero.
 *
 * -P PAGE: the KV-cache shape instead. Each op of SIZE bytes is one lite_write_paged of SIZE/PAGE
 * pages, page i of the source going to page perm[i] of the target (a fixed shuffle), with an
 * immediate per page; the target waits for (WARMUP + ITERS) x SIZE/PAGE counts and checks every
 * page landed where the shuffle says. Compare with the plain run at the same SIZE.
 *
 * -S: a sliding window instead (keep WINDOW writes in flight, wait for the oldest before the next),
 * the shape of `litetx_bench bw`, for comparing writes with the library's own send/recv.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <litetx/litetx.h>

#define MAX_SIZES 16
#define MAX_REPS  50
#define WAIT_MS   60000

static int g_rank = -1;

#define DIE(ctx, ...)                                                                              \
    do {                                                                                           \
        fprintf(stderr, "bench_rma rank %d: ", g_rank);                                            \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, " (%s)\n", (ctx) ? lite_last_error(ctx) : lite_init_error());              \
        exit(1);                                                                                   \
    } while (0)

#define CHECK_RC(ctx, call)                                                                        \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_)                                                                                   \
            DIE(ctx, "%s: %s", #call, lite_strerror(rc_));                                         \
    } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint8_t pattern(size_t size, size_t i)
{
    uint64_t x = (uint64_t)size * 0x9E3779B97F4A7C15ull ^ (uint64_t)i * 0xC2B2AE3D27D4EB4Full;
    return (uint8_t)(x >> 29 ^ x >> 7);
}

static size_t parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end == 'K' || *end == 'k')
        v <<= 10;
    else if (*end == 'M' || *end == 'm')
        v <<= 20;
    else if (*end == 'G' || *end == 'g')
        v <<= 30;
    else if (*end)
        return 0;
    return (size_t)v;
}

static long default_iters(size_t size)
{
    return size <= 65536 ? 10000 : size <= (1u << 20) ? 2000 : 200;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    size_t sizes[MAX_SIZES] = {65536, 1u << 20, 16u << 20};
    int nsizes = 3, reps = 5;
    long iters_opt = 0, window_opt = 0;
    size_t page = 0;
    bool sliding = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-s") && i + 1 < argc) {
            nsizes = 0;
            char *save = NULL;
            for (char *t = strtok_r(argv[++i], ",", &save); t && nsizes < MAX_SIZES;
                 t = strtok_r(NULL, ",", &save))
                if (!(sizes[nsizes++] = parse_size(t)))
                    DIE(NULL, "bad size %s", t);
        } else if (!strcmp(argv[i], "-r") && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "-I") && i + 1 < argc) {
            iters_opt = atol(argv[++i]);
        } else if (!strcmp(argv[i], "-W") && i + 1 < argc) {
            window_opt = atol(argv[++i]);
        } else if (!strcmp(argv[i], "-S")) {
            sliding = true;
        } else if (!strcmp(argv[i], "-P") && i + 1 < argc) {
            if (!(page = parse_size(argv[++i])))
                DIE(NULL, "bad page size %s", argv[i]);
        } else {
            fprintf(stderr, "usage: litetx-run -n 2 bench_rma [-s 64K,1M,16M] [-r REPS] "
                            "[-W WINDOW] [-I ITERS] [-P PAGE] [-S]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > MAX_REPS || iters_opt < 0 || window_opt < 0 || nsizes < 1)
        DIE(NULL, "bad options");
    for (int i = 0; page && i < nsizes; i++)
        if (sizes[i] % page)
            DIE(NULL, "size %zu is not a multiple of the page size %zu", sizes[i], page);

    lite_config_t cfg = lite_config_default();
    lite_ctx_t *ctx = NULL;
    CHECK_RC(ctx, lite_init(&cfg, &ctx));
    g_rank = lite_rank(ctx);
    if (lite_world_size(ctx) != 2)
        DIE(ctx, "needs exactly 2 ranks");

    size_t max = 0;
    for (int i = 0; i < nsizes; i++)
        max = sizes[i] > max ? sizes[i] : max;
    /* Page-aligned. fabtests' sit 16 bytes into a page (one malloc of 2 x WINDOW x SIZE without
     * its -l), which measured the same here at 64 KiB (docs/EFA.md). */
    uint8_t *buf = aligned_alloc(4096, (max + 4095) / 4096 * 4096);
    if (!buf)
        DIE(ctx, "out of memory");
    memset(buf, 0, max);
    lite_mr_t *mr;
    CHECK_RC(ctx, lite_mr_reg(ctx, buf, max, LITE_MEM_HOST, LITE_ACCESS_REMOTE_WRITE, &mr));
    lite_rdesc_t descs[2];
    CHECK_RC(ctx, lite_mr_exchange(ctx, mr, descs, WAIT_MS));
    lite_request_t **win = calloc(256, sizeof(*win));
    /* Paged mode: source page i goes to page perm[i] (same shuffle on both ranks). */
    size_t maxpages = page ? max / page : 0;
    uint32_t *src_pages = calloc(maxpages + 1, sizeof(uint32_t));
    uint32_t *perm = calloc(maxpages + 1, sizeof(uint32_t));
    if (!win || !src_pages || !perm)
        DIE(ctx, "out of memory");
    if (g_rank == 0)
        printf("# bench_rma: write_imm bandwidth rank 0 -> 1, transport %s%s\n"
               "%10s %8s %6s %12s %23s\n",
               lite_transport_name(ctx), page ? ", paged" : "", "bytes", "iters", "window",
               "MB/s_median", "[min-max] over reps");

    for (int si = 0; si < nsizes; si++) {
        size_t size = sizes[si];
        long iters = iters_opt ? iters_opt : default_iters(size);
        long window = window_opt ? window_opt : size >= (16u << 20) ? 16 : 64;
        if (window > 256)
            window = 256;
        long warm = iters / 10 + 1;
        uint32_t imm = 0x100u + (uint32_t)si;
        size_t npages = page ? size / page : 1;
        if (page) {
            uint64_t x = 0x2545F4914F6CDD1Dull ^ size;
            for (size_t i = 0; i < npages; i++)
                src_pages[i] = perm[i] = (uint32_t)i;
            for (size_t i = npages; i > 1; i--) { /* Fisher-Yates, xorshift */
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                size_t j = (size_t)(x % i);
                uint32_t t = perm[i - 1];
                perm[i - 1] = perm[j];
                perm[j] = t;
            }
        }
        double mbs[MAX_REPS];
        for (int rep = 0; rep < reps; rep++) {
            if (g_rank == 0)
                for (size_t i = 0; i < size; i++)
                    buf[i] = pattern(size + (size_t)rep, i);
            CHECK_RC(ctx, lite_barrier(ctx, WAIT_MS));
            if (g_rank == 0) {
                double t0 = 0;
                long j = 0;
                for (long i = 0; i < warm + iters; i++) {
                    if (i == warm)
                        t0 = now_s();
                    if (sliding) {
                        j = i % window;
                        if (i >= window)
                            CHECK_RC(ctx, lite_wait(ctx, win[j], WAIT_MS, NULL));
                    }
                    if (page)
                        CHECK_RC(ctx,
                                 lite_write_paged(ctx, 1, mr, src_pages, &descs[1], perm, npages,
                                                  page, imm, LITE_WRITE_WITH_IMM, &win[j]));
                    else
                        CHECK_RC(ctx,
                                 lite_write_imm(ctx, 1, mr, 0, &descs[1], 0, size, imm, &win[j]));
                    if (!sliding && (++j == window || i + 1 == warm + iters)) {
                        for (long k = 0; k < j; k++)
                            CHECK_RC(ctx, lite_wait(ctx, win[k], WAIT_MS, NULL));
                        j = 0;
                    }
                }
                /* sliding: the last `window` writes are still in flight */
                for (long k = warm + iters - window; sliding && k < warm + iters; k++)
                    if (k >= 0)
                        CHECK_RC(ctx, lite_wait(ctx, win[k % window], WAIT_MS, NULL));
                mbs[rep] = (double)iters * (double)size / (now_s() - t0) / 1e6;
            } else {
                CHECK_RC(ctx, lite_imm_wait(ctx, imm, (uint64_t)(warm + iters) * npages, WAIT_MS));
                uint64_t left = 99;
                CHECK_RC(ctx, lite_imm_peek(ctx, imm, &left));
                if (left != 0)
                    DIE(ctx, "%zu B: %llu immediates more than writes", size,
                        (unsigned long long)left);
                for (size_t i = 0; i < size; i++) {
                    /* byte i of the source landed at the same offset of page perm[i / page] */
                    size_t at = page ? (size_t)perm[i / page] * page + i % page : i;
                    if (buf[at] != pattern(size + (size_t)rep, i))
                        DIE(ctx, "%zu B: byte %zu wrong", size, at);
                }
            }
            CHECK_RC(ctx, lite_barrier(ctx, WAIT_MS));
        }
        if (g_rank == 0) {
            qsort(mbs, (size_t)reps, sizeof(double), cmp_double);
            double med = reps % 2 ? mbs[reps / 2] : (mbs[reps / 2 - 1] + mbs[reps / 2]) / 2;
            char range[48];
            snprintf(range, sizeof(range), "[%.0f-%.0f]", mbs[0], mbs[reps - 1]);
            printf("%10zu %8ld %6ld %12.0f %23s\n", size, iters, window, med, range);
            fflush(stdout);
        }
    }
    CHECK_RC(ctx, lite_mr_dereg(ctx, mr));
    CHECK_RC(ctx, lite_finalize(ctx));
    free(win);
    free(src_pages);
    free(perm);
    free(buf);
    return 0;
}
