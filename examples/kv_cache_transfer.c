/*
 * kv_cache_transfer - disaggregated inference: a prefill rank pushes each request's KV cache,
 * layer by layer, into the paged KV pool of a decode rank with one-sided paged writes, while it
 * "computes" the next layer. The decode rank learns that a layer is complete by counting
 * immediates (one per page), so it could start on layer 0 while later layers are in flight.
 *
 *   litetx-run -n 2 [--transport tcp|efa] build/examples/kv_cache_transfer
 *       [-l LAYERS] [-p PAGES_PER_LAYER] [-P PAGE_SIZE] [-i REQUESTS] [-d DEPTH]
 *
 * Defaults: 32 layers x 64 pages of 16 KiB (1 MiB per layer, 32 MiB per request), 10 requests
 * per decode rank after one untimed warm-up request, DEPTH 2 (double-buffered source pages).
 * Rank 0 is prefill; every other rank is a decode worker, served one request after another.
 *
 * What the prefill rank does per layer l, as an engine does:
 *   - the "forward pass" of layer l+1 (filling its KV pages, a stand-in for compute) runs while
 *     the write of layer l is in flight; the library progresses only inside its calls, so the
 *     fill polls the in-flight writes between pages (an engine's progress thread or its polls
 *     between kernels);
 *   - layer l+1 goes into source slot (l+1) % DEPTH, so before filling it the write that last
 *     used that slot (layer l+1-DEPTH) must have completed.
 *
 * What is timed, per request: from posting layer 0's lite_write_paged (its fill is done before
 * and is outside the clock) to the completion of the last layer's write. A write completes when
 * its data is in place at the decode rank and its immediates are counted there, so this is the
 * window "first write posted -> last immediate counted at decode", as observed by the prefill
 * rank (one clock, so it holds across hosts too; it is later than the decode rank's view by at
 * most the completion's return trip). GB/s = request bytes / that window, in 1e9 bytes/s.
 * Time-to-first-layer is the same window for layer 0 alone. The fill of layers 1.. overlaps the
 * window; "wire idle" says how long no write was in flight (fill slower than the network): when
 * it is not ~0, the figure is fill-bound and not a network figure.
 *
 * The figure is comparable with the library's bandwidth bench on the same backend:
 *   litetx-run -n 2 [--transport ...] build/bench/bench_rma -s <layer bytes> -P <page size>
 * (printed below with the sizes filled in; bench_rma keeps 64 layers in flight, this program
 * DEPTH, so expect it at or below bench_rma.)
 *
 * The decode side chooses where each page lands (its block table, a fresh shuffle of its pool
 * per request) and sends it to prefill. After the last layer it checks every byte of every page
 * (the pattern depends on request, layer and page, so stale or misplaced pages are caught), and
 * the program exits non-zero on any mismatch.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <litetx/litetx.h>

#define WAIT_MS 60000

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

/* "16K", "4096", "1M" */
static size_t parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end == 'K' || *end == 'k')
        v <<= 10, end++;
    else if (*end == 'M' || *end == 'm')
        v <<= 20, end++;
    return *end ? 0 : (size_t)v;
}

/* Word w of a KV page: depends on (request, layer, page) so a page from another request, layer
 * or position never passes the check. Words, not bytes, so the fill runs at memory speed. */
static uint64_t page_seed(int req, int layer, int page)
{
    uint64_t x = (uint64_t)req * 0x9E3779B97F4A7C15ull ^ (uint64_t)layer * 0xC2B2AE3D27D4EB4Full ^
                 (uint64_t)page * 0x165667B19E3779F9ull;
    return x ^ x >> 31;
}

static void fill_page(uint64_t *pg, size_t words, uint64_t seed)
{
    for (size_t w = 0; w < words; w++)
        pg[w] = seed + w * 0xD6E8FEB86659FD93ull;
}

/* Index of the first wrong byte of the page, or -1. */
static long check_page(const uint64_t *pg, size_t words, uint64_t seed)
{
    for (size_t w = 0; w < words; w++)
        if (pg[w] != seed + w * 0xD6E8FEB86659FD93ull) {
            uint64_t want = seed + w * 0xD6E8FEB86659FD93ull;
            const uint8_t *a = (const uint8_t *)&pg[w], *b = (const uint8_t *)&want;
            for (int i = 0; i < 8; i++)
                if (a[i] != b[i])
                    return (long)(w * 8 + (size_t)i);
        }
    return -1;
}

static uint32_t imm_of(int req, int layer)
{
    return (uint32_t)(req & 0xffff) << 16 | (uint32_t)layer;
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

/* The prefill rank's view of one request's writes. */
struct layer_state {
    lite_request_t *req; /* NULL once completed */
    double posted, done;
};

/* Progress: test every write still in flight, and note when each completed. */
static void poll_writes(lite_ctx_t *ctx, struct layer_state *ls, int lo, int hi)
{
    for (int j = lo; j < hi; j++) {
        if (!ls[j].req)
            continue;
        int rc = lite_test(ctx, ls[j].req, NULL);
        if (rc < 0) {
            fprintf(stderr, "rank 0: write of layer %d: %s (%s)\n", j, lite_strerror(rc),
                    lite_last_error(ctx));
            exit(1);
        }
        if (rc == 1)
            ls[j].req = NULL, ls[j].done = now_s();
    }
}

int main(int argc, char **argv)
{
    int layers = 32, pages = 64, iters = 10, depth = 2;
    size_t page_size = 16 << 10;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "-l") && v)
            layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-p") && v)
            pages = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-P") && v)
            page_size = parse_size(argv[++i]);
        else if (!strcmp(argv[i], "-i") && v)
            iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-d") && v)
            depth = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: kv_cache_transfer [-l LAYERS] [-p PAGES_PER_LAYER] "
                            "[-P PAGE_SIZE] [-i REQUESTS] [-d DEPTH]\n");
            return 2;
        }
    }
    if (layers < 1 || layers > 65535 || pages < 1 || iters < 1 || depth < 1 || depth > layers ||
        page_size < 64 || page_size % 8 || (size_t)layers * (size_t)pages > (1u << 30)) {
        fprintf(stderr, "kv_cache_transfer: bad sizes (page size a multiple of 8, >= 64)\n");
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
        fprintf(stderr, "run with at least 2 ranks (litetx-run -n 2 ...)\n");
        return 2;
    }
    size_t total = (size_t)layers * (size_t)pages, words = page_size / 8;
    size_t layer_bytes = (size_t)pages * page_size;
    /* Prefill: DEPTH slots of one layer each. Decode: a pool twice the request, so each request's
     * pages land scattered over it, as in a paged-attention cache shared by many requests. */
    size_t pool_pages = me == 0 ? (size_t)depth * (size_t)pages : 2 * total;
    uint64_t *pool = aligned_alloc(4096, (pool_pages * page_size + 4095) / 4096 * 4096);
    uint32_t *table = malloc(sizeof(uint32_t) * (me == 0 ? total : pool_pages));
    lite_rdesc_t *descs = calloc((size_t)n, sizeof(*descs));
    if (!pool || !table || !descs) {
        fprintf(stderr, "rank %d: out of memory\n", me);
        return 1;
    }
    memset(pool, 0, pool_pages * page_size);
    lite_mr_t *mr;
    TRY(lite_mr_reg(ctx, pool, pool_pages * page_size, LITE_MEM_HOST,
                    me ? LITE_ACCESS_REMOTE_WRITE : 0, &mr));
    TRY(lite_mr_exchange(ctx, mr, descs, WAIT_MS));

    int nreq = iters * (n - 1); /* timed requests, all decode ranks */
    double *gbs = calloc((size_t)nreq, sizeof(double)),
           *ttfl = calloc((size_t)nreq, sizeof(double));
    int failures = 0;
    if (me == 0)
        printf("# kv_cache_transfer: transport %s, %d decode rank(s), %d layers x %d pages of %zu "
               "B = %.1f MiB per request, depth %d\n# compare: litetx-run -n 2 --transport %s "
               "build/bench/bench_rma -s %zu -P %zu\n",
               lite_transport_name(ctx), n - 1, layers, pages, page_size,
               (double)(total * page_size) / (1 << 20), depth, lite_transport_name(ctx),
               layer_bytes, page_size);

    for (int it = -1; it < iters; it++) { /* it = -1: warm-up, checked but not counted */
        if (me != 0) {
            int req = (it + 1) * (n - 1) + me - 1;
            /* Decode: a fresh block table, logical page -> physical page of the pool. */
            uint64_t x = 0x2545F4914F6CDD1Dull ^ (uint64_t)req;
            for (size_t i = 0; i < pool_pages; i++)
                table[i] = (uint32_t)i;
            for (size_t i = 0; i < total; i++) { /* partial Fisher-Yates, xorshift */
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                size_t j = i + (size_t)(x % (pool_pages - i));
                uint32_t t = table[i];
                table[i] = table[j], table[j] = t;
            }
            TRY(lite_send(ctx, 0, (uint64_t)(it + 2), table, sizeof(uint32_t) * total, WAIT_MS));
            /* One immediate per (request, layer), counted once per page. Layer 0 could be used
             * as soon as its wait returns; the check below waits for the whole request so that
             * it does not hold back the transfer (this rank progresses it inside the waits). */
            for (int l = 0; l < layers; l++)
                TRY(lite_imm_wait(ctx, imm_of(req, l), (uint64_t)pages, WAIT_MS));
            long bad_pages = 0;
            for (int l = 0; l < layers; l++)
                for (int p = 0; p < pages; p++) {
                    const uint64_t *pg = pool + (size_t)table[(size_t)l * pages + p] * words;
                    long at = check_page(pg, words, page_seed(req, l, p));
                    if (at >= 0 && bad_pages++ == 0)
                        fprintf(stderr, "rank %d: request %d layer %d page %d: byte %ld wrong\n",
                                me, req, l, p, at);
                }
            if (bad_pages)
                fprintf(stderr, "rank %d: request %d: %ld of %zu pages CORRUPT\n", me, req,
                        bad_pages, total);
            failures += bad_pages != 0;
            continue;
        }
        /* Prefill: serve each decode rank's request in turn. */
        struct layer_state *ls = calloc((size_t)layers, sizeof(*ls));
        uint32_t *src = malloc(sizeof(uint32_t) * (size_t)pages);
        for (int d = 1; d < n; d++) {
            int req = (it + 1) * (n - 1) + d - 1;
            TRY(lite_recv(ctx, d, (uint64_t)(it + 2), table, sizeof(uint32_t) * total, NULL,
                          WAIT_MS));
            memset(ls, 0, sizeof(*ls) * (size_t)layers);
            double fill_s = 0, t = now_s();
            for (int p = 0; p < pages; p++) /* layer 0's "forward pass": before the clock */
                fill_page(pool + (size_t)p * words, words, page_seed(req, 0, p));
            fill_s += now_s() - t;
            for (int l = 0; l < layers; l++) {
                int slot = l % depth;
                for (int p = 0; p < pages; p++)
                    src[p] = (uint32_t)(slot * pages + p);
                ls[l].posted = now_s();
                TRY(lite_write_paged(ctx, d, mr, src, &descs[d], table + (size_t)l * pages,
                                     (size_t)pages, page_size, imm_of(req, l), LITE_WRITE_WITH_IMM,
                                     &ls[l].req));
                if (l + 1 == layers)
                    break;
                /* The next layer's slot is free once the write that last read it completed. */
                int prev = l + 1 - depth;
                if (prev >= 0 && ls[prev].req) {
                    TRY(lite_wait(ctx, ls[prev].req, WAIT_MS, NULL));
                    ls[prev].req = NULL, ls[prev].done = now_s();
                }
                t = now_s();
                uint64_t *next = pool + (size_t)((l + 1) % depth) * pages * words;
                for (int p = 0; p < pages; p++) {
                    fill_page(next + (size_t)p * words, words, page_seed(req, l + 1, p));
                    poll_writes(ctx, ls, prev < 0 ? 0 : prev, l + 1);
                }
                fill_s += now_s() - t;
            }
            for (int l = 0; l < layers; l++)
                if (ls[l].req) {
                    TRY(lite_wait(ctx, ls[l].req, WAIT_MS, NULL));
                    ls[l].req = NULL, ls[l].done = now_s();
                }
            /* Window, and the part of it when at least one write was in flight. */
            double t0 = ls[0].posted, t1 = 0, busy = 0, s = ls[0].posted, e = ls[0].done;
            for (int l = 0; l < layers; l++) {
                t1 = ls[l].done > t1 ? ls[l].done : t1;
                if (ls[l].posted > e)
                    busy += e - s, s = ls[l].posted, e = ls[l].done;
                else if (ls[l].done > e)
                    e = ls[l].done;
            }
            busy += e - s;
            double bytes = (double)total * (double)page_size, win = t1 - t0;
            if (it >= 0) {
                gbs[it * (n - 1) + d - 1] = bytes / win / 1e9;
                ttfl[it * (n - 1) + d - 1] = ls[0].done - ls[0].posted;
            }
            printf("%s %3d -> rank %d: %.2f ms first write posted -> last in place, %6.2f GB/s, "
                   "first layer in place after %.3f ms; fill %.2f ms (layer 0 outside the "
                   "clock), wire idle %.2f ms\n",
                   it < 0 ? "warm-up" : "request", req, d, win * 1e3, bytes / win / 1e9,
                   (ls[0].done - ls[0].posted) * 1e3, fill_s * 1e3, (win - busy) * 1e3);
            fflush(stdout);
        }
        free(src);
        free(ls);
    }
    /* Every rank learns whether any decode rank saw a bad byte, so all exit alike. */
    TRY(lite_allreduce(ctx, LITE_IN_PLACE, &failures, 1, LITE_I32, LITE_SUM, WAIT_MS));
    if (me == 0) {
        double ttfl_med = median(ttfl, nreq), med = median(gbs, nreq);
        printf("# median time-to-first-layer %.3f ms; every byte checked on the decode side: %s\n",
               ttfl_med * 1e3, failures ? "MISMATCH" : "ok");
        printf("kv_cache_transfer: %s %.2f GB/s over %d requests (pages %zu)\n",
               lite_transport_name(ctx), med, nreq, page_size);
    }
    TRY(lite_mr_dereg(ctx, mr));
    free(gbs);
    free(ttfl);
    free(table);
    free(descs);
    free(pool);
    lite_finalize(ctx);
    return failures ? 1 : 0;
}
