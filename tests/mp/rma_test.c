/*
 * rma_test.c - one-sided writes, reads, paged and scatter writes, ImmCounter, and the target's
 * refusal of bad ops, between every pair of ranks (itself included), bytes checked one by one.
 *
 * Run: litetx-run -n N rma_test             (N = 2..4)
 *      litetx-run -n 2 rma_test sustained   (a long stream of 1 MiB writes, rank 0 -> 1)
 *      litetx-run -n 2 rma_test flush_dereg (the target drops a region once its writes are in)
 *      litetx-run -n 2 rma_test paged_flood (tens of thousands of small page writes in flight)
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "mp_common.h"

#define WIN     (16u << 20) /* each rank's exposed window: 16 MiB + slack for offsets */
#define WIN_LEN (WIN + 4096)

static const size_t sizes[] = {0, 1, 3, 4093, 65536, 65537, 1u << 20, 16u << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static int n, me;
static uint8_t *win, *src;
static lite_mr_t *win_mr, *src_mr;
static lite_rdesc_t *descs; /* every rank's window descriptor */

static void setup(lite_ctx_t *ctx)
{
    n = lite_world_size(ctx);
    me = lite_rank(ctx);
    win = malloc(WIN_LEN);
    src = malloc(WIN_LEN);
    descs = calloc((size_t)n, sizeof(*descs));
    CHECK(win && src && descs, "oom");
    memset(win, 0, WIN_LEN);
    CHECK_RC(ctx, lite_mr_reg(ctx, win, WIN_LEN, LITE_MEM_HOST,
                              LITE_ACCESS_REMOTE_WRITE | LITE_ACCESS_REMOTE_READ, &win_mr));
    CHECK_RC(ctx, lite_mr_reg(ctx, src, WIN_LEN, LITE_MEM_HOST, 0, &src_mr));
    CHECK_RC(ctx, lite_mr_exchange(ctx, win_mr, descs, 30000));
}

/*
 * Every rank writes each size to every rank (itself too) at an unaligned offset, with an
 * immediate; each target waits for n arrivals of that size's immediate and checks the bytes.
 * Rank r writes into the target's window at slot r, so writers never overlap.
 */
static void writes_all_sizes(lite_ctx_t *ctx)
{
    for (size_t s = 0; s < NSIZES; s++) {
        size_t len = sizes[s];
        size_t slot = len ? (WIN - 64) / (size_t)n : 0;
        if (len > slot && len)
            continue; /* does not fit n slots at this world size: 16 MiB runs below */
        size_t off = 7 + (size_t)me * slot, soff = 3;
        uint32_t imm = 0x1000 + (uint32_t)s;
        lite_request_t **reqs = calloc((size_t)n, sizeof(*reqs));
        for (int p = 0; p < n; p++) {
            mp_fill(src + soff, len, me, p, (uint32_t)s);
            CHECK_RC(ctx, lite_write_imm(ctx, p, src_mr, soff, &descs[p], off, len, imm, &reqs[p]));
            CHECK_RC(ctx, lite_wait(ctx, reqs[p], 60000, NULL));
        }
        free(reqs);
        CHECK_RC(ctx, lite_imm_wait(ctx, imm, (uint64_t)n, 60000));
        for (int p = 0; p < n; p++) {
            long bad = mp_verify(win + 7 + (size_t)p * slot, len, p, me, (uint32_t)s);
            CHECK(bad < 0, "write of %zu B from rank %d wrong at byte %ld", len, p, bad);
        }
        CHECK_RC(ctx, lite_barrier(ctx, 30000)); /* before the window is reused */
    }
    /* 16 MiB from one writer at a time (rank (me+1)%n writes to me) */
    int to = (me + 1) % n, from = (me - 1 + n) % n;
    mp_fill(src + 1, 16u << 20, me, to, 99);
    lite_request_t *r;
    CHECK_RC(ctx, lite_write_imm(ctx, to, src_mr, 1, &descs[to], 5, 16u << 20, 0x2000, &r));
    CHECK_RC(ctx, lite_wait(ctx, r, 60000, NULL));
    CHECK_RC(ctx, lite_imm_wait(ctx, 0x2000, 1, 60000));
    CHECK(mp_verify(win + 5, 16u << 20, from, me, 99) < 0, "16 MiB write corrupted");
    CHECK_RC(ctx, lite_barrier(ctx, 30000));
}

/* Reads of every size from the next rank's window, at odd offsets. */
static void reads(lite_ctx_t *ctx)
{
    int to = (me + 1) % n;
    /* each rank fills its own window with a known pattern, then everyone reads */
    mp_fill(win, WIN_LEN, me, me, 7);
    CHECK_RC(ctx, lite_barrier(ctx, 30000));
    for (size_t s = 0; s < NSIZES; s++) {
        size_t len = sizes[s];
        memset(src, 0xEE, len + 16);
        lite_request_t *r;
        CHECK_RC(ctx, lite_read(ctx, to, src_mr, 1, &descs[to], 9, len, &r));
        CHECK_RC(ctx, lite_wait(ctx, r, 60000, NULL));
        for (size_t i = 0; i < len; i++)
            CHECK(src[1 + i] == mp_pattern(to, to, 7, 9 + i), "read %zu B wrong at %zu", len, i);
        CHECK(src[0] == 0xEE && src[1 + len] == 0xEE, "read wrote outside its range");
    }
    CHECK_RC(ctx, lite_barrier(ctx, 30000));
}

/* KV-cache shape: shuffled page lists, one immediate per page. */
static void paged(lite_ctx_t *ctx)
{
    enum { PAGES = 64, PAGE = 16384 };
    int to = (me + 1) % n, from = (me - 1 + n) % n;
    uint32_t sp[PAGES], dp[PAGES];
    srand(1234 + (unsigned)me);
    for (uint32_t i = 0; i < PAGES; i++)
        sp[i] = dp[i] = i;
    for (uint32_t i = PAGES - 1; i > 0; i--) { /* Fisher-Yates, both lists independently */
        uint32_t j = (uint32_t)rand() % (i + 1), k = (uint32_t)rand() % (i + 1), t;
        t = sp[i], sp[i] = sp[j], sp[j] = t;
        t = dp[i], dp[i] = dp[k], dp[k] = t;
    }
    memset(win, 0, (size_t)PAGES * PAGE);
    CHECK_RC(ctx, lite_barrier(ctx, 30000));
    for (uint32_t i = 0; i < PAGES; i++)
        mp_fill(src + (size_t)i * PAGE, PAGE, me, to, 500 + i); /* source page i */
    lite_request_t *r;
    CHECK_RC(ctx, lite_write_paged(ctx, to, src_mr, sp, &descs[to], dp, PAGES, PAGE, 0x3000,
                                   LITE_WRITE_WITH_IMM, &r));
    CHECK_RC(ctx, lite_wait(ctx, r, 60000, NULL));
    CHECK_RC(ctx, lite_imm_wait(ctx, 0x3000, PAGES, 60000));
    /* the sender's permutation is needed to check: rebuild it the same way */
    srand(1234 + (unsigned)from);
    uint32_t fsp[PAGES], fdp[PAGES];
    for (uint32_t i = 0; i < PAGES; i++)
        fsp[i] = fdp[i] = i;
    for (uint32_t i = PAGES - 1; i > 0; i--) {
        uint32_t j = (uint32_t)rand() % (i + 1), k = (uint32_t)rand() % (i + 1), t;
        t = fsp[i], fsp[i] = fsp[j], fsp[j] = t;
        t = fdp[i], fdp[i] = fdp[k], fdp[k] = t;
    }
    for (uint32_t i = 0; i < PAGES; i++)
        CHECK(mp_verify(win + (size_t)fdp[i] * PAGE, PAGE, from, me, 500 + fsp[i]) < 0,
              "paged write: destination page %u wrong", fdp[i]);
    CHECK_RC(ctx, lite_barrier(ctx, 30000));
}

/* MoE-dispatch shape: one scatter to every rank, each with its own immediate. */
static void scatter(lite_ctx_t *ctx)
{
    size_t seg = 10007;
    lite_scatter_entry_t *e = calloc((size_t)n, sizeof(*e));
    for (int p = 0; p < n; p++) {
        mp_fill(src + (size_t)p * seg, seg, me, p, 800);
        e[p] = (lite_scatter_entry_t){.peer = p,
                                      .local_off = (size_t)p * seg,
                                      .remote = &descs[p],
                                      .remote_off = (size_t)me * seg,
                                      .len = seg,
                                      .imm = 0x4000 + (uint32_t)me,
                                      .flags = LITE_WRITE_WITH_IMM};
    }
    lite_request_t *r;
    CHECK_RC(ctx, lite_write_scatter(ctx, src_mr, e, (size_t)n, &r));
    CHECK_RC(ctx, lite_wait(ctx, r, 60000, NULL));
    for (int p = 0; p < n; p++) {
        CHECK_RC(ctx, lite_imm_wait(ctx, 0x4000 + (uint32_t)p, 1, 60000));
        CHECK(mp_verify(win + (size_t)p * seg, seg, p, me, 800) < 0, "scatter from rank %d", p);
    }
    free(e);
    CHECK_RC(ctx, lite_barrier(ctx, 30000));
}

/*
 * ImmCounter semantics: a 1 MiB transfer cut into 256 writes posted in random order completes
 * exactly at its count (not one write earlier); arrivals before the wait are banked; a wait
 * for more than will come times out; several immediates from several peers at once.
 */
static void immcounter(lite_ctx_t *ctx)
{
    enum { PIECES = 256, PIECE = 4096 };
    int to = (me + 1) % n, from = (me - 1 + n) % n;
    uint32_t order[PIECES];
    for (uint32_t i = 0; i < PIECES; i++)
        order[i] = i;
    srand(99 + (unsigned)me);
    for (uint32_t i = PIECES - 1; i > 0; i--) {
        uint32_t j = (uint32_t)rand() % (i + 1), t = order[i];
        order[i] = order[j], order[j] = t;
    }
    memset(win, 0, (size_t)PIECES * PIECE);
    mp_fill(src, (size_t)PIECES * PIECE, me, to, 900);
    CHECK_RC(ctx, lite_barrier(ctx, 30000));
    lite_request_t *reqs[PIECES];
    for (uint32_t i = 0; i < PIECES; i++) {
        size_t off = (size_t)order[i] * PIECE;
        CHECK_RC(ctx,
                 lite_write_imm(ctx, to, src_mr, off, &descs[to], off, PIECE, 0x5000, &reqs[i]));
    }
    for (uint32_t i = 0; i < PIECES; i++)
        CHECK_RC(ctx, lite_wait(ctx, reqs[i], 60000, NULL));
    /* Every write to this rank has completed at the writer; after the barrier all are banked. */
    CHECK_RC(ctx, lite_barrier(ctx, 30000));
    uint64_t c = 0;
    CHECK_RC(ctx, lite_imm_peek(ctx, 0x5000, &c));
    CHECK(c == PIECES, "banked count %llu, want %d", (unsigned long long)c, PIECES);
    int rc = lite_imm_wait(ctx, 0x5000, PIECES + 1, 100);
    CHECK(rc == -ETIMEDOUT, "wait for one more than arrived gave %d", rc);
    CHECK_RC(ctx, lite_imm_peek(ctx, 0x5000, &c));
    CHECK(c == PIECES, "a timed-out wait consumed the count (%llu)", (unsigned long long)c);
    CHECK_RC(ctx, lite_imm_wait(ctx, 0x5000, PIECES, 1000));
    CHECK_RC(ctx, lite_imm_peek(ctx, 0x5000, &c));
    CHECK(c == 0, "count after consuming: %llu", (unsigned long long)c);
    CHECK(mp_verify(win, (size_t)PIECES * PIECE, from, me, 900) < 0, "pieces corrupted");
    CHECK_RC(ctx, lite_barrier(ctx, 30000)); /* the window is written again below */

    /* Many immediates from every peer at once, waited in reverse order. */
    enum { IMMS = 40 };
    lite_request_t *rr[IMMS * 8];
    int k = 0;
    for (uint32_t i = 0; i < IMMS; i++)
        for (int p = 0; p < n && k < IMMS * 8; p++)
            CHECK_RC(ctx, lite_write_imm(ctx, p, src_mr, 0, &descs[p], (size_t)me * 64, 8,
                                         0x6000 + i, &rr[k++]));
    for (int i = IMMS - 1; i >= 0; i--)
        CHECK_RC(ctx, lite_imm_wait(ctx, 0x6000 + (uint32_t)i, (uint64_t)n, 60000));
    for (int i = 0; i < k; i++)
        CHECK_RC(ctx, lite_wait(ctx, rr[i], 60000, NULL));
    CHECK_RC(ctx, lite_imm_reset(ctx, 0x7777));
    CHECK_RC(ctx, lite_barrier(ctx, 30000));
}

/* Recompute a descriptor's checksum (FNV-1a of bytes 0..103 at 108), as a hostile peer could. */
static void reseal(lite_rdesc_t *d)
{
    uint32_t h = 2166136261u;
    for (int i = 0; i < 104; i++)
        h = (h ^ d->bytes[i]) * 16777619u;
    for (int i = 0; i < 4; i++)
        d->bytes[108 + i] = (uint8_t)(h >> (8 * i));
}

/*
 * The target refuses bad ops and its memory stays byte-identical: a write past the end, a
 * forged key, a stale (deregistered) descriptor, a read of a region without read access.
 */
static void security(lite_ctx_t *ctx)
{
    int to = (me + 1) % n;
    enum { R = 4096 };
    uint8_t *guarded = malloc(R + 2 * 64);
    CHECK(guarded, "oom");
    mp_fill(guarded, R + 128, me, me, 31337);
    lite_mr_t *wo, *stale;
    /* region in the middle of `guarded`: 64 bytes of canary either side */
    CHECK_RC(ctx, lite_mr_reg(ctx, guarded + 64, R, LITE_MEM_HOST, LITE_ACCESS_REMOTE_WRITE, &wo));
    CHECK_RC(ctx,
             lite_mr_reg(ctx, guarded + 64, R, LITE_MEM_HOST, LITE_ACCESS_REMOTE_WRITE, &stale));
    lite_rdesc_t *wod = calloc((size_t)n, sizeof(*wod)), *std = calloc((size_t)n, sizeof(*std));
    CHECK_RC(ctx, lite_mr_exchange(ctx, wo, wod, 30000));
    CHECK_RC(ctx, lite_mr_exchange(ctx, stale, std, 30000));
    CHECK_RC(ctx, lite_mr_dereg(ctx, stale));
    CHECK_RC(ctx, lite_barrier(ctx, 30000)); /* every stale region is gone before the attacks */

    lite_request_t *r;
    int rc;
    /* local checks catch an honest mistake before it leaves */
    rc = lite_write(ctx, to, src_mr, 0, &wod[to], R - 10, 11, &r);
    CHECK(rc == -ERANGE, "local bounds check gave %d", rc);
    rc = lite_read(ctx, to, src_mr, 0, &wod[to], 0, 8, &r);
    CHECK(rc == -EACCES, "local access check gave %d", rc);
    {
        /* a paged write with one destination page past the end posts no page at all (the
         * target would count the immediates of those that went) */
        uint32_t sp[3] = {0, 1, 2}, dp[3] = {0, 1, (uint32_t)(R / 64)};
        rc = lite_write_paged(ctx, to, src_mr, sp, &wod[to], dp, 3, 64, 0x7777, LITE_WRITE_WITH_IMM,
                              &r);
        CHECK(rc == -ERANGE, "paged write past the end gave %d", rc);
        CHECK_RC(ctx, lite_barrier(ctx, 30000));
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do { /* a page that went would land meanwhile */
            CHECK(lite_progress(ctx) == 0, "progress: %s", lite_last_error(ctx));
            clock_gettime(CLOCK_MONOTONIC, &t1);
        } while ((t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec) < 200000000L);
        uint64_t count = 1;
        CHECK_RC(ctx, lite_imm_peek(ctx, 0x7777, &count));
        CHECK(count == 0, "%llu pages of a refused paged write arrived", (unsigned long long)count);
    }
    /* (wod[to] was parsed just above, so this also checks the owner on the parse memo's path) */
    rc = lite_write(ctx, (to + 1) % n == to ? to : (to + 1) % n, src_mr, 0, &wod[to], 0, 8, &r);
    CHECK(n == 2 ? rc == 0 || rc == -EINVAL : rc == -EINVAL, "descriptor of another rank: %d", rc);
    if (n == 2 && rc == 0)
        CHECK_RC(ctx, lite_wait(ctx, r, 30000, NULL)); /* with 2 ranks (to+1)%n == me: fine */

    /* An edited descriptor fails its checksum locally... */
    lite_rdesc_t forged = wod[to];
    forged.bytes[16] ^= 0x40; /* length field */
    rc = lite_write(ctx, to, src_mr, 0, &forged, R, 64, &r);
    CHECK(rc == -EINVAL, "tampered descriptor accepted locally: %d", rc);
    CHECK(strstr(lite_last_error(ctx), "checksum"), "detail: %s", lite_last_error(ctx));

    /* ...but the checksum is no secret: a hostile or buggy peer can re-seal it. The target's
     * own checks must then refuse each op, and the initiator hears why. */
    /* 1. stale: the target no longer has the key */
    rc = lite_write(ctx, to, src_mr, 0, &std[to], 0, 64, &r);
    CHECK_RC(ctx, rc);
    rc = lite_wait(ctx, r, 30000, NULL);
    CHECK(rc == -LITE_ERR_REMOTE_KEY, "stale descriptor: %d (%s)", rc, lite_strerror(rc));
    /* 2. a forged key */
    forged = wod[to];
    forged.bytes[32] ^= 0x5A;
    reseal(&forged);
    CHECK_RC(ctx, lite_write(ctx, to, src_mr, 0, &forged, 0, 64, &r));
    rc = lite_wait(ctx, r, 30000, NULL);
    CHECK(rc == -LITE_ERR_REMOTE_KEY, "forged key: %d (%s)", rc, lite_strerror(rc));
    /* 3. past the end: the descriptor claims a longer region */
    forged = wod[to];
    forged.bytes[17] = 0x40; /* length += 16 KiB */
    reseal(&forged);
    CHECK_RC(ctx, lite_write(ctx, to, src_mr, 0, &forged, R - 10, 74, &r));
    rc = lite_wait(ctx, r, 30000, NULL);
    CHECK(rc == -LITE_ERR_REMOTE_BOUNDS, "write past the end: %d (%s)", rc, lite_strerror(rc));
    /* 3b. the same in a paged batch whose first page is past the end and whose last page is
     * inside: only the last page is acknowledged on ordered transports, so the refusal of the
     * first must still reach the initiator */
    {
        uint32_t src_pages[3] = {0, 1, 2}, dst_pages[3] = {R / 512 + 4, 1, 0};
        CHECK_RC(ctx, lite_write_paged(ctx, to, src_mr, src_pages, &forged, dst_pages, 3, 512,
                                       0x5ec, LITE_WRITE_WITH_IMM, &r));
        rc = lite_wait(ctx, r, 30000, NULL);
        CHECK(rc == -LITE_ERR_REMOTE_BOUNDS, "paged write with a page past the end: %d (%s)", rc,
              lite_strerror(rc));
        /* the in-bounds pages landed: restore the region for the memory check below */
        CHECK_RC(ctx, lite_barrier(ctx, 30000));
        mp_fill(guarded, R + 128, me, me, 31337);
        CHECK_RC(ctx, lite_imm_reset(ctx, 0x5ec));
        CHECK_RC(ctx, lite_barrier(ctx, 30000));
    }
    /* 4. a read of a write-only region: the descriptor claims read access */
    forged = wod[to];
    forged.bytes[24] |= LITE_ACCESS_REMOTE_READ;
    reseal(&forged);
    CHECK_RC(ctx, lite_read(ctx, to, src_mr, 0, &forged, 0, 64, &r));
    rc = lite_wait(ctx, r, 30000, NULL);
    CHECK(rc == -LITE_ERR_REMOTE_ACCESS, "read without access: %d (%s)", rc, lite_strerror(rc));
    /* 5. the connection is still good: an honest write succeeds */
    CHECK_RC(ctx, lite_write(ctx, to, src_mr, 0, &descs[to], 0, 64, &r));
    CHECK_RC(ctx, lite_wait(ctx, r, 30000, NULL));
    lite_rdesc_t junk;
    memset(&junk, 0xAB, sizeof(junk));
    rc = lite_write(ctx, to, src_mr, 0, &junk, 0, 8, &r);
    CHECK(rc == -EINVAL, "garbage descriptor: %d", rc);

    CHECK_RC(ctx, lite_barrier(ctx, 30000));
    /* target memory untouched: canaries and the region itself */
    uint8_t *ref = malloc(R + 128);
    mp_fill(ref, R + 128, me, me, 31337);
    CHECK(memcmp(ref, guarded, R + 128) == 0, "target memory changed by refused ops");
    free(ref);
    CHECK_RC(ctx, lite_mr_dereg(ctx, wo));
    free(guarded);
    free(wod);
    free(std);
    CHECK_RC(ctx, lite_barrier(ctx, 30000));
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * Rank 0 streams writes with an immediate to rank 1 (64 in flight) for SUSTAIN_S seconds or
 * SUSTAIN_MAX writes, then sends the count; rank 1 waits for exactly that many immediates and
 * checks the last write's bytes. Then the same with 16 KiB writes for half as long. Long runs meet
 * what short ones do not: libfabric 1.17's shm put junk in the op_context of remote-write
 * completions after ~20 000 such writes, which crashed the target until the backend stopped reading
 * it.
 */
#define SUSTAIN_S   3.0
#define SUSTAIN_MAX 200000L
#define SUSTAIN_WIN 64

static void sustained_phase(lite_ctx_t *ctx, size_t len, uint32_t imm, double secs)
{
    if (me == 0) {
        lite_request_t *w[SUSTAIN_WIN] = {0};
        long count = 0;
        double end = now_s() + secs;
        mp_fill(src, len, 0, 1, imm);
        while (count < SUSTAIN_MAX && now_s() < end) {
            int k = (int)(count % SUSTAIN_WIN);
            if (w[k])
                CHECK_RC(ctx, lite_wait(ctx, w[k], 60000, NULL));
            CHECK_RC(ctx, lite_write_imm(ctx, 1, src_mr, 0, &descs[1], 0, len, imm, &w[k]));
            count++;
        }
        for (int k = 0; k < SUSTAIN_WIN; k++)
            if (w[k])
                CHECK_RC(ctx, lite_wait(ctx, w[k], 60000, NULL));
        CHECK_RC(ctx, lite_send(ctx, 1, imm, &count, sizeof(count), 60000));
        printf("rank 0: %ld writes of %zu bytes in a stream\n", count, len);
    } else if (me == 1) {
        long count = 0;
        CHECK_RC(ctx, lite_recv(ctx, 0, imm, &count, sizeof(count), NULL, 60000));
        CHECK(count > 0, "no writes counted");
        CHECK_RC(ctx, lite_imm_wait(ctx, imm, (uint64_t)count, 60000));
        uint64_t left = 1;
        CHECK_RC(ctx, lite_imm_peek(ctx, imm, &left));
        CHECK(left == 0, "%llu immediates more than the %ld writes", (unsigned long long)left,
              count);
        CHECK(mp_verify(win, len, 0, 1, imm) < 0, "the streamed bytes are wrong (%zu-byte writes)",
              len);
    }
    CHECK_RC(ctx, lite_barrier(ctx, 60000));
}

/* 1 MiB writes (each asks for its own acknowledgement on tcp;ofi_rxm), then 16 KiB writes
 * (acknowledgements batched there: efa_rma.c). */
static void sustained(lite_ctx_t *ctx)
{
    sustained_phase(ctx, 1u << 20, 0x5000, SUSTAIN_S);
    sustained_phase(ctx, 16u << 10, 0x5001, SUSTAIN_S / 2);
}

/*
 * The ImmCounter contract lets a target deregister a region as soon as it has counted the
 * immediates of the writes into it, while the writer goes on writing elsewhere. Rank 0 posts a
 * burst of small writes with an immediate into region A of rank 1 and then naps without
 * progress; rank 1 counts them and deregisters A at once; then rank 0 progresses and writes on
 * into rank 1's window. With batched acknowledgements (tcp;ofi_rxm) the burst's first write
 * asks for an acknowledgement and the rest wait for a later one, which a 0-byte "flush" write
 * asks for once the first one's arrives: that write must not aim at A (tcp checks its key even
 * for 0 bytes and drops the connection, and every write waiting would end with a lost peer).
 */
static void flush_dereg(lite_ctx_t *ctx)
{
    enum { ROUNDS = 4, BURST = 8, WLEN = 64, A_LEN = BURST * WLEN };
    for (int round = 0; round < ROUNDS; round++) {
        uint32_t imm = 0x7100 + (uint32_t)round;
        uint8_t *a = calloc(1, A_LEN);
        CHECK(a, "oom");
        lite_mr_t *a_mr;
        lite_rdesc_t ad[2];
        CHECK_RC(ctx, lite_mr_reg(ctx, a, A_LEN, LITE_MEM_HOST, LITE_ACCESS_REMOTE_WRITE, &a_mr));
        CHECK_RC(ctx, lite_mr_exchange(ctx, a_mr, ad, 30000));
        lite_request_t *r, *w[BURST];
        if (me == 0) {
            /* the key is confirmed first, so the burst goes out while it is posted */
            CHECK_RC(ctx, lite_write(ctx, 1, src_mr, 0, &ad[1], 0, WLEN, &r));
            CHECK_RC(ctx, lite_wait(ctx, r, 30000, NULL));
            mp_fill(src, A_LEN, 0, 1, imm);
            for (int i = 0; i < BURST; i++)
                CHECK_RC(ctx, lite_write_imm(ctx, 1, src_mr, (size_t)i * WLEN, &ad[1],
                                             (size_t)i * WLEN, WLEN, imm, &w[i]));
            usleep(300000); /* rank 1 counts the burst and drops A meanwhile */
            for (int i = 0; i < BURST; i++)
                CHECK_RC(ctx, lite_wait(ctx, w[i], 30000, NULL));
            for (int i = 0; i < BURST; i++)
                CHECK_RC(ctx,
                         lite_write(ctx, 1, src_mr, 0, &descs[1], (size_t)i * WLEN, WLEN, &w[i]));
            for (int i = 0; i < BURST; i++)
                CHECK_RC(ctx, lite_wait(ctx, w[i], 30000, NULL));
        } else if (me == 1) {
            CHECK_RC(ctx, lite_imm_wait(ctx, imm, BURST, 30000));
            CHECK_RC(ctx, lite_mr_dereg(ctx, a_mr)); /* legal: every write counted is in place */
            a_mr = NULL;
            CHECK(mp_verify(a, A_LEN, 0, 1, imm) < 0, "round %d: the burst's bytes are wrong",
                  round);
        }
        CHECK_RC(ctx, lite_barrier(ctx, 30000));
        if (a_mr)
            CHECK_RC(ctx, lite_mr_dereg(ctx, a_mr));
        free(a);
    }
}

/*
 * KV-cache paged writes with tens of thousands of small pages in flight at once: far more than
 * any provider queue holds, so the backend must queue and post with back-pressure, and its cost
 * per page must not grow with the number queued (a quadratic retry pass ran for minutes here).
 * Rank 0 posts every op of three page sizes (4 KiB, 512 B, 64 B) before it waits for any; each op
 * has its own immediate, whose counter must reach exactly its page count at rank 1, and every
 * byte is checked. Half the ops read contiguous source pages and write runs of 4 adjacent target
 * pages (a backend may coalesce those), the others are shuffled page by page.
 */
#define FLOOD_OPS   8
#define FLOOD_WAIT  30000
#define FLOOD_ROUND 2

struct flood_class {
    size_t page, base, npages; /* page size, offset of its area in both buffers, pages in all */
};

static const struct flood_class flood[] = {
    {4096, 0, 2048},        /* 8 MiB */
    {512, 8u << 20, 8192},  /* 4 MiB */
    {64, 12u << 20, 65536}, /* 4 MiB */
};
#define NFLOOD (sizeof(flood) / sizeof(flood[0]))

static uint32_t flood_rand(uint64_t *x)
{
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return (uint32_t)(*x >> 11);
}

/* Op k of class c: its page lists (indices into the class's area), the same on both ranks. */
static void flood_lists(size_t c, int k, int round, uint32_t *sp, uint32_t *dp)
{
    size_t per = flood[c].npages / FLOOD_OPS;
    uint32_t first = (uint32_t)((size_t)k * per);
    uint64_t x = 0x9E3779B97F4A7C15ull ^ (c << 8) ^ ((uint64_t)k << 16) ^ ((uint64_t)round << 24);
    if (k % 2 == 0) {
        /* runs of 4 adjacent pages, source and target, the runs shuffled */
        size_t nb = per / 4;
        uint32_t *blk = malloc(nb * sizeof(*blk));
        CHECK(blk, "oom");
        for (size_t b = 0; b < nb; b++)
            blk[b] = (uint32_t)b;
        for (size_t b = nb; b > 1; b--) {
            size_t j = flood_rand(&x) % b;
            uint32_t t = blk[b - 1];
            blk[b - 1] = blk[j], blk[j] = t;
        }
        for (size_t i = 0; i < per; i++) {
            sp[i] = first + (uint32_t)i;
            dp[i] = first + blk[i / 4] * 4 + (uint32_t)(i % 4);
        }
        free(blk);
    } else {
        for (size_t i = 0; i < per; i++)
            sp[i] = dp[i] = first + (uint32_t)i;
        for (size_t i = per; i > 1; i--) {
            size_t j = flood_rand(&x) % i, l = flood_rand(&x) % i;
            uint32_t t = sp[i - 1];
            sp[i - 1] = sp[j], sp[j] = t;
            t = dp[i - 1], dp[i - 1] = dp[l], dp[l] = t;
        }
    }
}

/* Milliseconds left until `end` (now_s() seconds), at least 1: one deadline for a whole flood. */
static int flood_left(double end)
{
    double ms = (end - now_s()) * 1e3;
    return ms < 1 ? 1 : (int)ms;
}

static void paged_flood(lite_ctx_t *ctx)
{
    size_t maxper = 0, total = 0;
    for (size_t c = 0; c < NFLOOD; c++) {
        size_t per = flood[c].npages / FLOOD_OPS;
        maxper = per > maxper ? per : maxper;
        total += flood[c].npages;
    }
    uint32_t *sp = malloc(maxper * sizeof(*sp)), *dp = malloc(maxper * sizeof(*dp));
    lite_request_t **reqs = calloc(NFLOOD * FLOOD_OPS, sizeof(*reqs));
    CHECK(sp && dp && reqs, "oom");
    if (me == 0) {
        /* The target's key confirmed first (efa), so the flood is not held as parked ops (a
         * record each: hundreds of MB for this many pages). */
        lite_request_t *r;
        CHECK_RC(ctx, lite_write(ctx, 1, src_mr, 0, &descs[1], 0, 64, &r));
        CHECK_RC(ctx, lite_wait(ctx, r, 30000, NULL));
    }
    for (int round = 0; round < FLOOD_ROUND; round++) {
        uint32_t imm0 = 0x8000 + (uint32_t)round * 0x100;
        if (me == 1)
            memset(win, 0, 16u << 20);
        for (size_t c = 0; me == 0 && c < NFLOOD; c++)
            for (size_t i = 0; i < flood[c].npages; i++)
                mp_fill(src + flood[c].base + i * flood[c].page, flood[c].page, 0, 1,
                        (uint32_t)(c << 20 | i) + (uint32_t)round);
        CHECK_RC(ctx, lite_barrier(ctx, 30000));
        double t0 = now_s(), end = t0 + FLOOD_WAIT / 1e3;
        if (me == 0) {
            for (size_t c = 0; c < NFLOOD; c++)
                for (int k = 0; k < FLOOD_OPS; k++) {
                    const struct flood_class *f = &flood[c];
                    size_t per = f->npages / FLOOD_OPS, pb = f->base / f->page;
                    flood_lists(c, k, round, sp, dp);
                    for (size_t i = 0; i < per; i++)
                        sp[i] += (uint32_t)pb, dp[i] += (uint32_t)pb;
                    CHECK_RC(ctx, lite_write_paged(ctx, 1, src_mr, sp, &descs[1], dp, per, f->page,
                                                   imm0 + (uint32_t)(c * FLOOD_OPS) + (uint32_t)k,
                                                   LITE_WRITE_WITH_IMM,
                                                   &reqs[c * FLOOD_OPS + (size_t)k]));
                }
            for (size_t i = 0; i < NFLOOD * FLOOD_OPS; i++)
                CHECK_RC(ctx, lite_wait(ctx, reqs[i], flood_left(end), NULL));
            printf("rank 0: %zu page writes in flight at once: %.3f s\n", total, now_s() - t0);
        } else if (me == 1) {
            for (size_t c = 0; c < NFLOOD; c++)
                for (int k = 0; k < FLOOD_OPS; k++) {
                    uint32_t imm = imm0 + (uint32_t)(c * FLOOD_OPS) + (uint32_t)k;
                    size_t per = flood[c].npages / FLOOD_OPS;
                    CHECK_RC(ctx, lite_imm_wait(ctx, imm, per, flood_left(end)));
                }
            /* every counter consumed exactly: none got an arrival too many */
            for (size_t c = 0; c < NFLOOD; c++)
                for (int k = 0; k < FLOOD_OPS; k++) {
                    uint64_t left = 1;
                    uint32_t imm = imm0 + (uint32_t)(c * FLOOD_OPS) + (uint32_t)k;
                    CHECK_RC(ctx, lite_imm_peek(ctx, imm, &left));
                    CHECK(left == 0, "immediate %#x: %llu arrivals more than pages", imm,
                          (unsigned long long)left);
                }
            for (size_t c = 0; c < NFLOOD; c++)
                for (int k = 0; k < FLOOD_OPS; k++) {
                    const struct flood_class *f = &flood[c];
                    size_t per = f->npages / FLOOD_OPS;
                    flood_lists(c, k, round, sp, dp);
                    for (size_t i = 0; i < per; i++) {
                        long bad = mp_verify(win + f->base + dp[i] * f->page, f->page, 0, 1,
                                             (uint32_t)(c << 20 | sp[i]) + (uint32_t)round);
                        CHECK(bad < 0, "round %d, %zu-byte page %u (op %d): byte %ld wrong", round,
                              f->page, dp[i], k, bad);
                    }
                }
        }
        CHECK_RC(ctx, lite_barrier(ctx, 60000));
    }
    free(sp);
    free(dp);
    free(reqs);
}

int main(int argc, char **argv)
{
    lite_ctx_t *ctx = mp_init();
    setup(ctx);
    bool stream = argc > 1 && !strcmp(argv[1], "sustained");
    if (argc > 1 && !strcmp(argv[1], "paged_flood")) {
        CHECK(n == 2, "paged_flood runs with 2 ranks");
        paged_flood(ctx);
    } else if (argc > 1 && !strcmp(argv[1], "flush_dereg")) {
        CHECK(n == 2, "flush_dereg runs with 2 ranks");
        flush_dereg(ctx);
    } else if (stream) {
        CHECK(n == 2, "sustained runs with 2 ranks");
        sustained(ctx);
    } else {
        writes_all_sizes(ctx);
        reads(ctx);
        paged(ctx);
        scatter(ctx);
        immcounter(ctx);
        security(ctx);
    }
    CHECK_RC(ctx, lite_mr_dereg(ctx, win_mr));
    CHECK_RC(ctx, lite_mr_dereg(ctx, src_mr));
    int rc = lite_finalize(ctx);
    CHECK(rc == 0, "finalize: %s", lite_strerror(rc));
    printf("rank %d: rma%s%s ok (%d ranks)\n", me, argc > 1 ? " " : "", argc > 1 ? argv[1] : "", n);
    free(win);
    free(src);
    free(descs);
    return 0;
}
