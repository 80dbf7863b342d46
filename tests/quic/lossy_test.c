/*
 * lossy_test.c - traffic whose every byte is checked, for jobs run through tests/quic/relay
 * (lossy.sh starts the relay and the job). Under loss, reordering, duplication and corruption:
 * every message arrives once and intact, every one-sided write lands once and intact, every
 * ImmCounter reaches exactly its count and no more, and the collectives give the bytes of the
 * canonical left fold computed here.
 *
 *   litetx-run -n N lossy_test traffic [ROUNDS]   (LOSSY_UNTIL_FILE: see traffic())
 *   litetx-run -n N lossy_test lost     rank 0 turns the relay into a blackhole (SIGUSR1 to
 *                                       LOSSY_RELAY_PID); every rank's pending receive from a
 *                                       peer must end in -LITE_ERR_PEER_LOST within
 *                                       LOSSY_LOST_BOUND_MS, and finalize must return.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "mp_common.h"

static int n, me;
static uint64_t next_tag = 1;

static const size_t sizes[] = {0, 1, 7, 1200, 4093, 65536, 65537, 300000, 1u << 20, (4u << 20) + 3};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Every rank sends every size to every other rank at once; each message checked byte by byte. */
static void p2p(lite_ctx_t *ctx, uint32_t round)
{
    int nreq = 2 * n * (int)NSIZES, k = 0;
    lite_request_t **reqs = calloc((size_t)nreq, sizeof(*reqs));
    uint8_t **sb = calloc((size_t)nreq, sizeof(*sb)), **rb = calloc((size_t)nreq, sizeof(*rb));
    size_t *len = calloc((size_t)nreq, sizeof(*len));
    CHECK(reqs && sb && rb && len, "oom");
    for (int p = 0; p < n; p++) {
        if (p == me)
            continue;
        for (size_t s = 0; s < NSIZES; s++) {
            size_t i = (size_t)p * NSIZES + s;
            uint32_t id = round * 1000 + (uint32_t)s;
            len[i] = sizes[s];
            sb[i] = malloc(sizes[s] + 1);
            rb[i] = malloc(sizes[s] + 16);
            CHECK(sb[i] && rb[i], "oom");
            mp_fill(sb[i], sizes[s], me, p, id);
            memset(rb[i], 0xA5, sizes[s] + 16);
            /* room for 16 more bytes: a message that grew would show */
            CHECK_RC(ctx, lite_irecv(ctx, p, next_tag + s, rb[i], sizes[s] + 16, &reqs[k++]));
            CHECK_RC(ctx, lite_isend(ctx, p, next_tag + s, sb[i], sizes[s], &reqs[k++]));
        }
    }
    for (int i = 0; i < k; i++) {
        lite_status_t st;
        CHECK_RC(ctx, lite_wait(ctx, reqs[i], 120000, &st));
    }
    for (int p = 0; p < n; p++) {
        if (p == me)
            continue;
        for (size_t s = 0; s < NSIZES; s++) {
            size_t i = (size_t)p * NSIZES + s;
            long bad = mp_verify(rb[i], len[i], p, me, round * 1000 + (uint32_t)s);
            CHECK(bad < 0, "round %u: %zu B from rank %d wrong at byte %ld", round, len[i], p, bad);
            for (size_t j = len[i]; j < len[i] + 16; j++)
                CHECK(rb[i][j] == 0xA5, "round %u: %zu B message from rank %d grew", round, len[i],
                      p);
            free(sb[i]);
            free(rb[i]);
        }
    }
    next_tag += NSIZES;
    free(reqs);
    free(sb);
    free(rb);
    free(len);
}

/*
 * One-sided writes with immediates (emulated by the core over the backend's messages): every
 * rank writes WRITES pieces of varied sizes into its slot of every other rank's window, plus a
 * paged batch; each target waits for exactly its count, checks every byte, then, after a
 * barrier and more progress, finds the counters at 0 (a duplicate would have counted again).
 */
#define SLOT   (4u << 20)
#define WRITES 48
#define PAGES  64
#define PAGE   16384

static void rma(lite_ctx_t *ctx, uint32_t round)
{
    size_t win_len = (size_t)n * SLOT;
    uint8_t *win = calloc(1, win_len), *src = malloc(SLOT);
    lite_rdesc_t *descs = calloc((size_t)n, sizeof(*descs));
    CHECK(win && src && descs, "oom");
    lite_mr_t *win_mr, *src_mr;
    CHECK_RC(ctx, lite_mr_reg(ctx, win, win_len, LITE_MEM_HOST, LITE_ACCESS_REMOTE_WRITE, &win_mr));
    CHECK_RC(ctx, lite_mr_reg(ctx, src, SLOT, LITE_MEM_HOST, 0, &src_mr));
    CHECK_RC(ctx, lite_mr_exchange(ctx, win_mr, descs, 60000));
    const uint32_t imm_w = 0x5000 + round * 2, imm_p = imm_w + 1;
    /* piece w: length plen(w) at offset poff(w) of the slot */
    size_t off[WRITES + 1];
    off[0] = 0;
    for (int w = 0; w < WRITES; w++)
        off[w + 1] =
            off[w] + 1 + ((size_t)w * 7919u * (w % 5 + 1)) % 40000 + (w == 7 ? 1u << 20 : 0);
    CHECK(off[WRITES] + (size_t)PAGES * PAGE <= SLOT, "pieces do not fit the slot");
    size_t page_base = (off[WRITES] + PAGE - 1) / PAGE * PAGE;
    CHECK(page_base + (size_t)PAGES * PAGE <= SLOT, "pages do not fit the slot");

    int nreq = n * (WRITES + 1), k = 0;
    lite_request_t **reqs = calloc((size_t)nreq, sizeof(*reqs));
    CHECK(reqs, "oom");
    for (int p = 0; p < n; p++) {
        if (p == me)
            continue;
        mp_fill(src, SLOT, me, p, 777 + round);
        for (int w = 0; w < WRITES; w++)
            CHECK_RC(ctx,
                     lite_write_imm(ctx, p, src_mr, off[w], &descs[p], (size_t)me * SLOT + off[w],
                                    off[w + 1] - off[w], imm_w, &reqs[k++]));
        uint32_t sp[PAGES], dp[PAGES];
        for (uint32_t i = 0; i < PAGES; i++) {
            sp[i] = (uint32_t)(page_base / PAGE) + i;
            dp[i] = (uint32_t)(((size_t)me * SLOT + page_base) / PAGE) + (i * 37u) % PAGES;
        }
        CHECK_RC(ctx, lite_write_paged(ctx, p, src_mr, sp, &descs[p], dp, PAGES, PAGE, imm_p,
                                       LITE_WRITE_WITH_IMM, &reqs[k++]));
        /* the source must stay untouched until the writes complete */
        for (int i = k - WRITES - 1; i < k; i++)
            CHECK_RC(ctx, lite_wait(ctx, reqs[i], 120000, NULL));
    }
    CHECK_RC(ctx, lite_imm_wait(ctx, imm_w, (uint64_t)(n - 1) * WRITES, 120000));
    CHECK_RC(ctx, lite_imm_wait(ctx, imm_p, (uint64_t)(n - 1) * PAGES, 120000));
    for (int p = 0; p < n; p++) {
        if (p == me)
            continue;
        const uint8_t *slot = win + (size_t)p * SLOT;
        long bad = mp_verify(slot, off[WRITES], p, me, 777 + round);
        CHECK(bad < 0, "writes from rank %d wrong at byte %ld", p, bad);
        for (uint32_t i = 0; i < PAGES; i++) {
            /* source page i landed at page (i*37)%PAGES of the slot's page area */
            const uint8_t *dst = slot + page_base + (size_t)((i * 37u) % PAGES) * PAGE;
            for (size_t b = 0; b < PAGE; b++)
                CHECK(dst[b] == mp_pattern(p, me, 777 + round, page_base + (size_t)i * PAGE + b),
                      "page %u from rank %d wrong at byte %zu", i, p, b);
        }
        for (size_t b = off[WRITES]; b < page_base; b++)
            CHECK(slot[b] == 0, "a write from rank %d landed past its pieces", p);
    }
    CHECK_RC(ctx, lite_barrier(ctx, 60000));
    for (int i = 0; i < 200; i++) { /* ~0.2 s of progress: late duplicates would count now */
        lite_progress(ctx);
        usleep(1000);
    }
    uint64_t c1 = 1, c2 = 1;
    CHECK_RC(ctx, lite_imm_peek(ctx, imm_w, &c1));
    CHECK_RC(ctx, lite_imm_peek(ctx, imm_p, &c2));
    CHECK(c1 == 0 && c2 == 0, "ImmCounters went past their counts: %llu and %llu more",
          (unsigned long long)c1, (unsigned long long)c2);
    CHECK_RC(ctx, lite_barrier(ctx, 60000));
    CHECK_RC(ctx, lite_mr_dereg(ctx, win_mr));
    CHECK_RC(ctx, lite_mr_dereg(ctx, src_mr));
    free(reqs);
    free(win);
    free(src);
    free(descs);
}

/* Rank r's f32 input element i: values of mixed magnitudes, so the order of the sum matters. */
static float input(int r, size_t i, uint32_t round)
{
    uint32_t x = (uint32_t)(r + 1) * 2654435761u ^ (uint32_t)i * 40503u ^ round * 97u;
    x ^= x >> 15;
    x *= 0x2C1B3C6Du;
    x ^= x >> 12;
    float m = (float)(x & 0xFFFF) / 65536.0f - 0.5f;
    return m * (float)(1u << (x >> 28)); /* scale 1 .. 2^15 */
}

static void collectives(lite_ctx_t *ctx, uint32_t round)
{
    static const size_t counts[] = {1000, 1u << 20};
    for (size_t c = 0; c < 2; c++) {
        size_t cnt = counts[c];
        float *in = malloc(cnt * sizeof(float)), *out = malloc(cnt * sizeof(float));
        CHECK(in && out, "oom");
        for (size_t i = 0; i < cnt; i++)
            in[i] = input(me, i, round);
        CHECK_RC(ctx, lite_allreduce(ctx, in, out, cnt, LITE_F32, LITE_SUM, 120000));
        for (size_t i = 0; i < cnt; i++) {
            volatile float r = input(0, i, round); /* volatile: one rounding per step */
            for (int q = 1; q < n; q++)
                r = r + input(q, i, round);
            float want = r;
            CHECK(memcmp(&want, &out[i], sizeof want) == 0,
                  "allreduce of %zu: element %zu is %a, the left fold gives %a", cnt, i,
                  (double)out[i], (double)want);
        }
        free(in);
        free(out);
    }
    /* alltoall: block p to rank p, 64 Ki u8 each */
    size_t blk = 65536;
    uint8_t *s = malloc(blk * (size_t)n), *r = malloc(blk * (size_t)n);
    CHECK(s && r, "oom");
    for (int p = 0; p < n; p++)
        mp_fill(s + (size_t)p * blk, blk, me, p, 4000 + round);
    CHECK_RC(ctx, lite_alltoall(ctx, s, r, blk, LITE_U8, 120000));
    for (int p = 0; p < n; p++)
        CHECK(mp_verify(r + (size_t)p * blk, blk, p, me, 4000 + round) < 0,
              "alltoall block from rank %d wrong", p);
    /* bcast of 1 MiB from the last rank */
    size_t bl = 1u << 20;
    uint8_t *b = malloc(bl);
    CHECK(b, "oom");
    if (me == n - 1)
        mp_fill(b, bl, n - 1, 0, 5000 + round);
    else
        memset(b, 0, bl);
    CHECK_RC(ctx, lite_bcast(ctx, b, bl, LITE_U8, n - 1, 120000));
    CHECK(mp_verify(b, bl, n - 1, 0, 5000 + round) < 0, "bcast wrong");
    free(s);
    free(r);
    free(b);
}

/*
 * ROUNDS rounds; with LOSSY_UNTIL_FILE set, more until that file exists (rank 0 looks and tells
 * the others, so all run the same rounds), 200 rounds or 90 s at most. With
 * LOSSY_BLACKHOLE_ROUND=k, rank 0 starts the relay's blackhole (SIGUSR1) as round k begins.
 */
static void traffic(lite_ctx_t *ctx, int rounds)
{
    const char *until = getenv("LOSSY_UNTIL_FILE"), *bh = getenv("LOSSY_BLACKHOLE_ROUND");
    int blackhole_round = bh && getenv("LOSSY_RELAY_PID") ? atoi(bh) : -1;
    long t0 = now_ms();
    int round = 0;
    for (;; round++) {
        if (round >= rounds) {
            uint8_t more = 0;
            if (me == 0)
                more = until && *until && access(until, F_OK) != 0 && round < 200 &&
                       now_ms() - t0 < 90000;
            CHECK_RC(ctx, lite_bcast(ctx, &more, 1, LITE_U8, 0, 60000));
            if (!more)
                break;
        }
        if (me == 0 && blackhole_round >= 0 && round == blackhole_round)
            CHECK(kill((pid_t)atol(getenv("LOSSY_RELAY_PID")), SIGUSR1) == 0,
                  "signal the relay: %s", strerror(errno));
        p2p(ctx, (uint32_t)round);
        rma(ctx, (uint32_t)round);
        collectives(ctx, (uint32_t)round);
        CHECK_RC(ctx, lite_barrier(ctx, 60000));
    }
    printf("rank %d: traffic ok (%d rounds)\n", me, round);
}

static void lost(lite_ctx_t *ctx)
{
    const char *pid_s = getenv("LOSSY_RELAY_PID"), *bound_s = getenv("LOSSY_LOST_BOUND_MS");
    CHECK(pid_s && bound_s, "LOSSY_RELAY_PID and LOSSY_LOST_BOUND_MS must be set");
    long bound = atol(bound_s);
    /* Some traffic first, so the connections are up and in use. */
    p2p(ctx, 0);
    CHECK_RC(ctx, lite_barrier(ctx, 60000));
    if (me == 0)
        CHECK(kill((pid_t)atol(pid_s), SIGUSR1) == 0, "signal the relay: %s", strerror(errno));
    long t0 = now_ms();
    /* A receive that no send will ever match, from every peer, and a send to every peer. */
    lite_request_t **rr = calloc((size_t)n, sizeof(*rr)), **sr = calloc((size_t)n, sizeof(*sr));
    static uint8_t sbuf[1u << 20], rbuf[64];
    CHECK(rr && sr, "oom");
    for (int p = 0; p < n; p++) {
        if (p == me)
            continue;
        CHECK_RC(ctx, lite_irecv(ctx, p, next_tag + 1000, rbuf, sizeof rbuf, &rr[p]));
        CHECK_RC(ctx, lite_isend(ctx, p, next_tag, sbuf, sizeof sbuf, &sr[p]));
    }
    for (int p = 0; p < n; p++) {
        if (p == me)
            continue;
        int rc = lite_wait(ctx, rr[p], (int)bound + 10000, NULL);
        long dt = now_ms() - t0;
        printf("rank %d: receive from rank %d ended after %ld ms: %d (%s)\n", me, p, dt, rc,
               lite_strerror(rc));
        CHECK(rc == -LITE_ERR_PEER_LOST, "receive from the silent rank %d: %s, not PEER_LOST", p,
              lite_strerror(rc));
        CHECK(dt <= bound, "PEER_LOST after %ld ms, the bound is %ld ms", dt, bound);
        rc = lite_wait(ctx, sr[p], 10000, NULL);
        CHECK(rc == 0 || rc == -LITE_ERR_PEER_LOST, "send to the silent rank %d: %s", p,
              lite_strerror(rc));
    }
    free(rr);
    free(sr);
    printf("rank %d: lost ok\n", me);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "traffic";
    lite_config_t cfg = lite_config_default();
    lite_ctx_t *ctx = NULL;
    int rc = lite_init(&cfg, &ctx);
    if (rc == -LITE_ERR_NO_TRANSPORT)
        mp_skip("the quic transport is not in this build");
    CHECK(rc == 0, "lite_init: %s: %s", lite_strerror(rc), lite_init_error());
    mp_rank = me = lite_rank(ctx);
    n = lite_world_size(ctx);
    CHECK(n >= 2, "needs 2 ranks or more");
    if (!strcmp(mode, "traffic")) {
        traffic(ctx, argc > 2 ? atoi(argv[2]) : 2);
    } else if (!strcmp(mode, "lost")) {
        lost(ctx);
    } else {
        CHECK(0, "unknown mode %s", mode);
    }
    long t0 = now_ms();
    rc = lite_finalize(ctx);
    printf("rank %d: finalize %d after %ld ms\n", me, rc, now_ms() - t0);
    return 0;
}
