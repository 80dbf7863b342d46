/*
 * kv_cache_transfer - disaggregated inference: a prefill rank pushes a request's KV cache, layer by
 * layer, into the paged KV pool of a decode rank with one-sided paged writes; the decode rank
 * learns that a layer is complete by counting immediates (one per page), so it can start on
 * layer 0 while later layers are still in flight.
 *
 *   litetx-run -n 2 build/examples/kv_cache_transfer [layers] [pages_per_layer]
 *
 * Rank 0 is prefill; every other rank is a decode worker that receives its own request. The
 * decode side chooses where each page lands (its block table) and sends it to prefill; pages
 * are therefore scattered across its pool, as in a real paged-attention cache.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <litetx/litetx.h>

#define PAGE_BYTES (16 * 1024) /* one KV block: e.g. 16 tokens x 8 heads x 64 dims x f16 x K,V */
#define POOL_PAGES 1024

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The value of byte i of (layer, logical page) for request `req`: lets the receiver check. */
static uint8_t kv_byte(int req, int layer, int page, size_t i)
{
    return (uint8_t)(req * 31 + layer * 7 + page * 3 + (int)(i % 251));
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
    int layers = argc > 1 ? atoi(argv[1]) : 8, pages = argc > 2 ? atoi(argv[2]) : 32;
    if (layers < 1 || pages < 1 || layers * pages > POOL_PAGES) {
        fprintf(stderr, "need 1 <= layers * pages_per_layer <= %d\n", POOL_PAGES);
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
    size_t pool_bytes = (size_t)POOL_PAGES * PAGE_BYTES;
    uint8_t *pool = calloc(1, pool_bytes);
    if (!pool)
        return 1;
    lite_mr_t *mr;
    lite_rdesc_t *descs = calloc((size_t)n, sizeof(*descs));
    /* Prefill's pool holds the computed KV; decode pools receive it. */
    TRY(lite_mr_reg(ctx, pool, pool_bytes, LITE_MEM_HOST, me ? LITE_ACCESS_REMOTE_WRITE : 0, &mr));
    TRY(lite_mr_exchange(ctx, mr, descs, 10000));

    int total = layers * pages;
    uint32_t *table = malloc(sizeof(uint32_t) * (size_t)total); /* logical -> physical page */
    int failures = 0;
    if (me != 0) {
        /* Decode: choose scattered physical pages (a stride that is coprime to the pool size). */
        for (int i = 0; i < total; i++)
            table[i] = (uint32_t)((i * 389 + me * 17) % POOL_PAGES);
        TRY(lite_send(ctx, 0, 1, table, sizeof(uint32_t) * (size_t)total, 10000));
        double t0 = now_s();
        for (int l = 0; l < layers; l++) {
            /* One immediate per (request, layer); one count per page. */
            TRY(lite_imm_wait(ctx, (uint32_t)(me << 16 | l), (uint64_t)pages, 10000));
            int bad = 0;
            for (int p = 0; p < pages; p++) {
                const uint8_t *pg = pool + (size_t)table[l * pages + p] * PAGE_BYTES;
                for (size_t i = 0; i < PAGE_BYTES && !bad; i += 97)
                    bad = pg[i] != kv_byte(me, l, p, i);
            }
            failures += bad;
            if (l == 0 || l == layers - 1 || bad)
                printf("rank %d: request %d layer %d: %d pages arrived at %.2f ms, %s\n", me, me, l,
                       pages, (now_s() - t0) * 1e3, bad ? "CORRUPT" : "contents ok");
        }
        double mb = (double)total * PAGE_BYTES / 1e6;
        printf("rank %d: KV cache of %d layers x %d pages (%.1f MB) in %.2f ms\n", me, layers,
               pages, mb, (now_s() - t0) * 1e3);
    } else {
        /* Prefill: fill the KV for each decode rank's request, then push it layer by layer. */
        uint32_t *src = malloc(sizeof(uint32_t) * (size_t)pages);
        for (int d = 1; d < n; d++) {
            TRY(lite_recv(ctx, d, 1, table, sizeof(uint32_t) * (size_t)total, NULL, 10000));
            for (int l = 0; l < layers; l++) {
                for (int p = 0; p < pages; p++) {
                    int slot = l * pages + p; /* prefill's own layout is contiguous */
                    uint8_t *pg = pool + (size_t)slot * PAGE_BYTES;
                    for (size_t i = 0; i < PAGE_BYTES; i++)
                        pg[i] = kv_byte(d, l, p, i);
                    src[p] = (uint32_t)slot;
                }
                lite_request_t *req;
                TRY(lite_write_paged(ctx, d, mr, src, &descs[d], table + l * pages, (size_t)pages,
                                     PAGE_BYTES, (uint32_t)(d << 16 | l), LITE_WRITE_WITH_IMM,
                                     &req));
                TRY(lite_wait(ctx, req, 10000, NULL));
            }
        }
        free(src);
        printf("rank 0: pushed %d requests x %d layers x %d pages of %d KiB\n", n - 1, layers,
               pages, PAGE_BYTES / 1024);
    }
    lite_mr_dereg(ctx, mr);
    free(table);
    free(descs);
    free(pool);
    lite_finalize(ctx);
    return failures ? 1 : 0;
}
