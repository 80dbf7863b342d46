/*
 * test_loop.c - whole jobs in one process: ranks as threads over the loop backend, which has
 * messages only, so every one-sided op and every rendezvous goes through the core's emulation
 * (src/core/rma_emu.c). Each case starts a job (one context per thread, the TCP bootstrap over
 * loopback), runs a rank function on every thread and checks every byte it receives.
 *
 * Cases: p2p eager and rendezvous sizes (1 B .. 4 MiB, posted before and after arrival); write,
 * write with immediate and ImmCounter, read, paged and scatter writes; target refusals (stale
 * key, out of bounds, no access, forged descriptors) with canaries around the region; hostile
 * control messages; flow control under a flood of unexpected messages; a failure reported from
 * inside msg_send; collectives byte-identical to the canonical fold; two jobs at once.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "credits.h"
#include "ctx.h"
#include "litetx/litetx.h"
#include "loop_job.h"
#include "reduce.h"

/* ---- p2p ---- */

static const size_t p2p_sizes[] = {1,     7,     255,    257,         4095,           65535,
                                   65536, 65537, 300001, 1024 * 1024, 4 * 1024 * 1024};
#define NSIZES (sizeof(p2p_sizes) / sizeof(p2p_sizes[0]))

static int p2p_rank(lite_ctx_t *ctx, int me, int n)
{
    /* Every rank sends every size to every peer; half the receives are posted before the
     * messages come (expected), half after a barrier (unexpected, RTS kept for rendezvous). */
    size_t total = 0;
    for (size_t s = 0; s < NSIZES; s++)
        total += p2p_sizes[s];
    uint8_t *sbuf = malloc(total * (size_t)n), *rbuf = malloc(total * (size_t)n);
    T_CHECK(sbuf && rbuf, "oom");
    lite_request_t **reqs = calloc(2 * NSIZES * (size_t)n, sizeof(*reqs));
    int k = 0;
    for (int round = 0; round < 2; round++) {
        memset(rbuf, 0, total * (size_t)n);
        size_t off = 0;
        for (size_t s = 0; s < NSIZES; s++) {
            for (int p = 0; p < n; p++) {
                uint8_t *sb = sbuf + off * (size_t)n + (size_t)p * p2p_sizes[s];
                fill(sb, p2p_sizes[s], me, p, (uint32_t)(s + 100 * round));
                if (round == 0)
                    T_RC(lite_irecv(ctx, p, 1000 * round + s,
                                    rbuf + off * (size_t)n + (size_t)p * p2p_sizes[s], p2p_sizes[s],
                                    &reqs[k++]));
            }
            off += p2p_sizes[s];
        }
        off = 0;
        for (size_t s = 0; s < NSIZES; s++) {
            for (int p = 0; p < n; p++)
                T_RC(lite_isend(ctx, p, 1000 * round + s,
                                sbuf + off * (size_t)n + (size_t)p * p2p_sizes[s], p2p_sizes[s],
                                &reqs[k++]));
            off += p2p_sizes[s];
        }
        if (round == 1) {
            /* let the messages (and announcements) arrive unexpected first */
            for (int i = 0; i < 50; i++)
                lite_progress(ctx);
            off = 0;
            for (size_t s = 0; s < NSIZES; s++) {
                for (int p = 0; p < n; p++)
                    T_RC(lite_irecv(ctx, p, 1000 * round + s,
                                    rbuf + off * (size_t)n + (size_t)p * p2p_sizes[s], p2p_sizes[s],
                                    &reqs[k++]));
                off += p2p_sizes[s];
            }
        }
        for (int i = 0; i < k; i++)
            T_RC(lite_wait(ctx, reqs[i], 20000, NULL));
        k = 0;
        off = 0;
        for (size_t s = 0; s < NSIZES; s++) {
            for (int p = 0; p < n; p++) {
                long bad = verify(rbuf + off * (size_t)n + (size_t)p * p2p_sizes[s], p2p_sizes[s],
                                  p, me, (uint32_t)(s + 100 * round));
                T_CHECK(bad < 0, "round %d: %zu bytes from rank %d: byte %ld wrong", round,
                        p2p_sizes[s], p, bad);
            }
            off += p2p_sizes[s];
        }
    }
    /* Blocking calls at rendezvous size, and a receive too short for the message. */
    int to = (me + 1) % n, from = (me + n - 1) % n;
    if (n > 1) {
        size_t len = 100000, got = 0;
        fill(sbuf, len, me, to, 7);
        lite_request_t *r;
        T_RC(lite_isend(ctx, to, 5000, sbuf, len, &r));
        T_RC(lite_recv(ctx, from, 5000, rbuf, len, &got, 20000));
        T_RC(lite_wait(ctx, r, 20000, NULL));
        T_CHECK(got == len && verify(rbuf, len, from, me, 7) < 0, "blocking rendezvous");
        T_RC(lite_isend(ctx, to, 5001, sbuf, len, &r));
        int rc = lite_recv(ctx, from, 5001, rbuf, len - 1, &got, 20000);
        T_CHECK(rc == -LITE_ERR_TRUNCATED, "short receive gave %d", rc);
        T_RC(lite_wait(ctx, r, 20000, NULL));
    }
    const struct lite_ctx *c = (const struct lite_ctx *)ctx;
    T_CHECK(c->emu == (LITE_EMU_WRITE | LITE_EMU_IMM | LITE_EMU_READ),
            "the loop backend's one-sided ops are not emulated by the core");
    free(reqs);
    free(sbuf);
    free(rbuf);
    return 0;
}

static void test_p2p(void **state)
{
    run_job(2, p2p_rank);
    run_job(3, p2p_rank);
}

/* ---- one-sided ---- */

#define WIN (256 * 1024)

static int rma_rank(lite_ctx_t *ctx, int me, int n)
{
    int to = (me + 1) % n, from = (me + n - 1) % n;
    uint8_t *win = calloc(1, WIN), *src = malloc(WIN), *dst = calloc(1, WIN);
    T_CHECK(win && src && dst, "oom");
    lite_mr_t *wmr, *smr, *dmr;
    T_RC(lite_mr_reg(ctx, win, WIN, LITE_MEM_HOST,
                     LITE_ACCESS_REMOTE_WRITE | LITE_ACCESS_REMOTE_READ, &wmr));
    T_RC(lite_mr_reg(ctx, src, WIN, LITE_MEM_HOST, 0, &smr));
    T_RC(lite_mr_reg(ctx, dst, WIN, LITE_MEM_HOST, 0, &dmr));
    lite_rdesc_t *d = calloc((size_t)n, sizeof(*d));
    T_RC(lite_mr_exchange(ctx, wmr, d, 20000));
    lite_request_t *r;

    /* write + write_imm: [0, 100000) plain, [100000, 100001) one byte, then an immediate */
    fill(src, WIN, me, to, 1);
    T_RC(lite_write(ctx, to, smr, 0, &d[to], 0, 100000, &r));
    T_RC(lite_wait(ctx, r, 20000, NULL));
    T_RC(lite_write_imm(ctx, to, smr, 100000, &d[to], 100000, 1, 0xabc0 + (uint32_t)me, &r));
    T_RC(lite_wait(ctx, r, 20000, NULL));
    T_RC(lite_write_imm(ctx, to, smr, 0, &d[to], 0, 0, 0xabc0 + (uint32_t)me, &r)); /* empty */
    T_RC(lite_wait(ctx, r, 20000, NULL));
    T_RC(lite_imm_wait(ctx, 0xabc0 + (uint32_t)from, 2, 20000));
    long bad = verify(win, 100001, from, me, 1);
    T_CHECK(bad < 0, "write from rank %d: byte %ld wrong", from, bad);
    T_RC(lite_barrier(ctx, 20000));

    /* read back what this rank wrote to `to` */
    T_RC(lite_read(ctx, to, dmr, 5, &d[to], 0, 100001, &r));
    T_RC(lite_wait(ctx, r, 20000, NULL));
    bad = verify(dst + 5, 100001, me, to, 1);
    T_CHECK(bad < 0, "read from rank %d: byte %ld wrong", to, bad);
    T_RC(lite_read(ctx, to, dmr, 0, &d[to], 7, 0, &r)); /* empty */
    T_RC(lite_wait(ctx, r, 20000, NULL));
    T_RC(lite_barrier(ctx, 20000));

    /* paged: 48 pages of 4 KiB, reversed, each counted */
    enum { PAGES = 48, PAGE = 4096 };
    uint32_t sp[PAGES], dp[PAGES];
    for (uint32_t i = 0; i < PAGES; i++)
        sp[i] = i, dp[i] = PAGES - 1 - i;
    fill(src, WIN, me, to, 2);
    T_RC(lite_write_paged(ctx, to, smr, sp, &d[to], dp, PAGES, PAGE, 0x5000 + (uint32_t)me,
                          LITE_WRITE_WITH_IMM, &r));
    T_RC(lite_wait(ctx, r, 20000, NULL));
    T_RC(lite_imm_wait(ctx, 0x5000 + (uint32_t)from, PAGES, 20000));
    uint8_t *want = malloc(WIN);
    fill(want, WIN, from, me, 2);
    for (uint32_t i = 0; i < PAGES; i++)
        T_CHECK(!memcmp(win + (size_t)dp[i] * PAGE, want + (size_t)sp[i] * PAGE, PAGE),
                "paged write: page %u wrong", i);
    T_RC(lite_barrier(ctx, 20000));

    /* scatter: a slice to every rank (self included) at this rank's slot, each counted */
    enum { SLICE = 3000 };
    lite_scatter_entry_t *e = calloc((size_t)n, sizeof(*e));
    fill(src, WIN, me, 0, 3);
    for (int p = 0; p < n; p++)
        e[p] = (lite_scatter_entry_t){.peer = p,
                                      .local_off = (size_t)p * SLICE,
                                      .remote = &d[p],
                                      .remote_off = (size_t)me * SLICE,
                                      .len = SLICE,
                                      .flags = LITE_WRITE_WITH_IMM,
                                      .imm = 0x6000};
    T_RC(lite_write_scatter(ctx, smr, e, (size_t)n, &r));
    T_RC(lite_wait(ctx, r, 20000, NULL));
    T_RC(lite_imm_wait(ctx, 0x6000, (uint64_t)n, 20000));
    for (int p = 0; p < n; p++) {
        fill(want, (size_t)n * SLICE, p, 0, 3);
        T_CHECK(!memcmp(win + (size_t)p * SLICE, want + (size_t)me * SLICE, SLICE),
                "scatter slice of rank %d wrong", p);
    }
    T_RC(lite_barrier(ctx, 20000));
    free(e);
    free(want);
    free(d);
    T_RC(lite_mr_dereg(ctx, wmr));
    T_RC(lite_mr_dereg(ctx, smr));
    T_RC(lite_mr_dereg(ctx, dmr));
    free(win);
    free(src);
    free(dst);
    return 0;
}

static void test_rma(void **state)
{
    run_job(2, rma_rank);
    run_job(4, rma_rank);
}

/* ---- refusals ---- */

/* Rewrite a descriptor field as a hostile or buggy peer could, with a valid checksum (the
 * layout of src/core/mr.c). */
static uint32_t fnv1a(const uint8_t *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

static void forge(lite_rdesc_t *d, size_t off, uint64_t v, size_t width)
{
    if (width == 8)
        lite_put64(d->bytes + off, v);
    else
        lite_put32(d->bytes + off, (uint32_t)v);
    lite_put32(d->bytes + 108, fnv1a(d->bytes, 104));
}

static int refuse_rank(lite_ctx_t *ctx, int me, int n)
{
    enum { R = 4096, G = 64 };
    int to = (me + 1) % n;
    uint8_t *guarded = malloc(R + 2 * G), *src = malloc(2 * R);
    T_CHECK(guarded && src, "oom");
    fill(guarded, R + 2 * G, me, me, 9);
    fill(src, 2 * R, me, to, 10);
    lite_mr_t *wo, *stale, *smr;
    T_RC(lite_mr_reg(ctx, guarded + G, R, LITE_MEM_HOST, LITE_ACCESS_REMOTE_WRITE, &wo));
    T_RC(lite_mr_reg(ctx, guarded + G, R, LITE_MEM_HOST, LITE_ACCESS_REMOTE_WRITE, &stale));
    T_RC(lite_mr_reg(ctx, src, 2 * R, LITE_MEM_HOST, 0, &smr));
    lite_rdesc_t *wd = calloc((size_t)n, sizeof(*wd)), *sd = calloc((size_t)n, sizeof(*sd));
    T_RC(lite_mr_exchange(ctx, wo, wd, 20000));
    T_RC(lite_mr_exchange(ctx, stale, sd, 20000));
    T_RC(lite_mr_dereg(ctx, stale));
    T_RC(lite_barrier(ctx, 20000)); /* every stale region is gone before the attempts */

    lite_request_t *r;
    int rc;
    /* a stale key */
    T_RC(lite_write_imm(ctx, to, smr, 0, &sd[to], 0, 64, 0x7100, &r));
    rc = lite_wait(ctx, r, 20000, NULL);
    T_CHECK(rc == -LITE_ERR_REMOTE_KEY, "stale key gave %d", rc);
    /* out of bounds: a descriptor claiming twice the length */
    lite_rdesc_t big = wd[to];
    forge(&big, 16, 2 * R, 8);
    T_RC(lite_write(ctx, to, smr, 0, &big, R - 8, 16, &r));
    rc = lite_wait(ctx, r, 20000, NULL);
    T_CHECK(rc == -LITE_ERR_REMOTE_BOUNDS, "out of bounds gave %d", rc);
    T_RC(lite_write(ctx, to, smr, 0, &big, 0, 2 * R, &r));
    rc = lite_wait(ctx, r, 20000, NULL);
    T_CHECK(rc == -LITE_ERR_REMOTE_BOUNDS, "too long gave %d", rc);
    /* no access: a descriptor claiming the right to read */
    lite_rdesc_t rd = wd[to];
    forge(&rd, 24, LITE_ACCESS_REMOTE_WRITE | LITE_ACCESS_REMOTE_READ, 4);
    T_RC(lite_read(ctx, to, smr, 0, &rd, 0, 16, &r));
    rc = lite_wait(ctx, r, 20000, NULL);
    T_CHECK(rc == -LITE_ERR_REMOTE_ACCESS, "read without the right gave %d", rc);
    /* a forged key in a live slot (another generation) */
    lite_rdesc_t fk = wd[to];
    forge(&fk, 32, lite_get64(wd[to].bytes + 32) + (1ull << 32), 8);
    T_RC(lite_write(ctx, to, smr, 0, &fk, 0, 16, &r));
    rc = lite_wait(ctx, r, 20000, NULL);
    T_CHECK(rc == -LITE_ERR_REMOTE_KEY, "forged key gave %d", rc);
    /* a refused page in the middle of a batch (no answer of its own: its refusal rides on the
     * last page's) is reported with the batch; the good pages still land and are counted */
    uint32_t sp[3] = {0, 1, 2}, dp[3] = {0, 2, 1};
    T_RC(lite_write_paged(ctx, to, smr, sp, &big, dp, 3, 2048, 0x7200, LITE_WRITE_WITH_IMM, &r));
    rc = lite_wait(ctx, r, 20000, NULL);
    T_CHECK(rc == -LITE_ERR_REMOTE_BOUNDS, "paged write with a page out of bounds gave %d", rc);
    T_RC(lite_imm_wait(ctx, 0x7200, 2, 20000)); /* this rank's target counted the good two */
    T_RC(lite_barrier(ctx, 20000));
    /* nothing landed outside the region, and the refused writes left nothing inside */
    int from = (me + n - 1) % n;
    uint8_t *want = malloc(2 * R + 2 * G);
    fill(want, R + 2 * G, me, me, 9);
    T_CHECK(!memcmp(guarded, want, G) && !memcmp(guarded + G + R, want + G + R, G),
            "a canary around the region changed");
    fill(want, 2 * R, from, me, 10);
    T_CHECK(!memcmp(guarded + G, want, 2048) && !memcmp(guarded + G + 2048, want + 4096, 2048),
            "the paged pages");
    T_RC(lite_barrier(ctx, 20000));
    free(want);
    free(wd);
    free(sd);
    free(guarded);
    free(src);
    return 0;
}

static void test_refusals(void **state)
{
    run_job(2, refuse_rank);
    run_job(3, refuse_rank);
}

/* ---- hostile control messages ---- */

static int hostile_kind;

/* Rank 1 sends rank 0 a one-sided message that breaks the protocol; rank 0 must fail the pair
 * with -LITE_ERR_PROTOCOL, with its registered region untouched. */
static int hostile_rank(lite_ctx_t *ctx, int me, int n)
{
    struct lite_ctx *c = (struct lite_ctx *)ctx;
    static uint8_t region[2][4096]; /* one per rank (one job runs at a time) */
    uint8_t *win = region[me];
    memset(win, 0x5a, 4096);
    lite_mr_t *mr;
    T_RC(lite_mr_reg(ctx, win, 4096, LITE_MEM_HOST, LITE_ACCESS_REMOTE_WRITE, &mr));
    lite_rdesc_t d[2];
    T_RC(lite_mr_exchange(ctx, mr, d, 20000));
    if (me == 1) {
        static uint8_t m[64], junk[100];
        memset(junk, 0xee, sizeof(junk));
        memset(m, 0, sizeof(m));
        uint8_t type = LITE_CTRL_EMU_FIRST;
        size_t len = 40;
        if (hostile_kind == 0) { /* data nothing announced */
            type = LITE_CTRL_EMU_LAST;
            len = sizeof(junk);
        } else if (hostile_kind == 1) { /* a write with unknown flags */
            lite_put64(m + 8, lite_get64(d[0].bytes + 32));
            lite_put64(m + 24, 16);
            lite_put32(m + 36, 0x80);
        } else if (hostile_kind == 2) { /* an answer to nothing */
            type = LITE_CTRL_EMU_FIRST + 2;
            len = 16;
        } else { /* a write header of the wrong length */
            len = 39;
        }
        T_RC(lite_ctrl_send_emu(c, 0, type, hostile_kind == 0 ? junk : m, len, NULL));
        if (hostile_kind == 1) /* the data of the refused write */
            T_RC(lite_ctrl_send_emu(c, 0, LITE_CTRL_EMU_LAST, junk, 16, NULL));
    } else {
        int rc = 0;
        for (int i = 0; i < 2000 && !c->peers[1].lost; i++) {
            rc = lite_progress(ctx);
            T_CHECK(rc == 0, "progress gave %d", rc);
            usleep(1000);
        }
        T_CHECK(c->peers[1].lost && c->peers[1].lost_code == -LITE_ERR_PROTOCOL,
                "case %d: the hostile peer was not refused (%d)", hostile_kind,
                c->peers[1].lost_code);
        for (int i = 0; i < 4096; i++)
            T_CHECK(win[i] == 0x5a, "case %d: byte %d of the region changed", hostile_kind, i);
    }
    lite_mr_dereg(ctx, mr);
    return 0;
}

static void test_hostile(void **state)
{
    for (hostile_kind = 0; hostile_kind < 4; hostile_kind++)
        run_job(2, hostile_rank);
}

/* ---- flow control ---- */

#define FLOOD 1500

static int flood_rank(lite_ctx_t *ctx, int me, int n)
{
    /* Rank 0 floods rank 1 with far more messages than its credits while rank 1 receives
     * nothing, then rank 1 takes them in reverse tag order: every message waits unexpected,
     * and the sender waits for credit many times over. */
    static uint8_t bufs[2][FLOOD][40];
    uint8_t(*b)[40] = bufs[me];
    if (me == 0) {
        lite_request_t **r = calloc(FLOOD, sizeof(*r));
        for (int i = 0; i < FLOOD; i++) {
            fill(b[i], 1 + i % 40, 0, 1, (uint32_t)i);
            T_RC(lite_isend(ctx, 1, (uint64_t)i + 1, b[i], 1 + (size_t)(i % 40), &r[i]));
        }
        for (int i = 0; i < FLOOD; i++)
            T_RC(lite_wait(ctx, r[i], 20000, NULL));
        free(r);
    } else if (me == 1) {
        usleep(50000);
        for (int i = 0; i < 20; i++)
            lite_progress(ctx);
        /* reverse order within blocks smaller than the credit window (an unexpected message
         * holds its credit until it is received, so a whole-flood reversal cannot complete
         * under any credit scheme) */
        for (int k = 0; k < FLOOD; k++) {
            int i = k / 50 * 50 + (49 - k % 50);
            size_t got = 0;
            T_RC(lite_recv(ctx, 0, (uint64_t)i + 1, b[i], 40, &got, 20000));
            T_CHECK(got == 1 + (size_t)(i % 40) && verify(b[i], got, 0, 1, (uint32_t)i) < 0,
                    "flood message %d", i);
        }
        const struct lite_ctx *c = (const struct lite_ctx *)ctx;
        T_CHECK(c->peers[0].rx_outstanding <= c->credits_max, "credits overrun");
    }
    T_RC(lite_barrier(ctx, 20000));
    return 0;
}

static void test_flow(void **state)
{
    run_job(2, flood_rank);
}

/* ---- a failure seen inside msg_send ---- */

static int deferred_rank(lite_ctx_t *ctx, int me, int n)
{
    /* Rank 1 finalizes; rank 0 meets its finalize barrier with a non-blocking one (its token
     * leaves at once) and makes no progress until rank 1 has closed. Its send then finds the
     * closed peer inside msg_send, where the loop backend reports the failure: the core must
     * take it at its next progress, not in the middle of the send. */
    T_RC(lite_barrier(ctx, 20000));
    if (me == 1)
        return 0;
    int before = atomic_load(&g_finalized);
    lite_request_t *q;
    T_RC(lite_ibarrier(ctx, &q));
    struct lite_ctx *c = (struct lite_ctx *)ctx;
    while (atomic_load(&g_finalized) == before)
        usleep(1000);
    uint8_t byte = 1;
    int rc = lite_send(ctx, 1, 1, &byte, 1, 20000);
    T_CHECK(rc == -ESHUTDOWN, "send to a closed peer gave %d", rc);
    T_CHECK(!c->peers[1].lost && c->peers[1].fail_due, "the failure was not deferred");
    T_RC(lite_progress(ctx));
    T_CHECK(c->peers[1].lost && c->peers[1].lost_code == -ESHUTDOWN, "not handled at progress");
    rc = lite_recv(ctx, 1, 1, &byte, 1, NULL, 20000);
    T_CHECK(rc == -ESHUTDOWN, "recv from the lost peer gave %d", rc);
    rc = lite_wait(ctx, q, 20000, NULL); /* its token came before the close, or it is lost */
    T_CHECK(rc == 0 || rc == -ESHUTDOWN, "the barrier gave %d", rc);
    return 0;
}

static void test_deferred(void **state)
{
    run_job(2, deferred_rank);
}

/* ---- collectives ---- */

static uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Rank r's input for a case: finite values of the dtype (floats in [-8, 8)). */
static void gen(void *buf, size_t count, int dt, int r, uint32_t id)
{
    for (size_t i = 0; i < count; i++) {
        uint64_t x = mix64(((uint64_t)id << 40) ^ ((uint64_t)r << 32) ^ i);
        double v = (double)(x >> 11) / (double)(1ull << 53) * 16.0 - 8.0;
        if (dt == LITE_F32)
            ((float *)buf)[i] = (float)v;
        else if (dt == LITE_F64)
            ((double *)buf)[i] = v;
        else if (dt == LITE_I32)
            ((int32_t *)buf)[i] = (int32_t)(x % 2001) - 1000;
    }
}

static int coll_rank(lite_ctx_t *ctx, int me, int n)
{
    static const size_t counts[] = {1, 13, 1031, 40009};
    static const int dts[] = {LITE_F32, LITE_F64, LITE_I32};
    static const int ops[] = {LITE_SUM, LITE_MAX, LITE_PROD};
    uint32_t id = 0;
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        for (size_t t = 0; t < 3; t++) {
            for (size_t o = 0; o < 3; o++, id++) {
                size_t cnt = counts[c], esz = lite_dtype_size(dts[t]);
                uint8_t *in = malloc(cnt * esz), *out = malloc(cnt * esz), *ref = malloc(cnt * esz),
                        *x = malloc(cnt * esz);
                T_CHECK(in && out && ref && x, "oom");
                gen(in, cnt, dts[t], me, id);
                T_RC(lite_allreduce(ctx, in, out, cnt, dts[t], ops[o], 20000));
                gen(ref, cnt, dts[t], 0, id);
                for (int r = 1; r < n; r++) {
                    gen(x, cnt, dts[t], r, id);
                    lite_reduce_inplace_impl(LITE_REDUCE_IMPL_SCALAR, ref, x, cnt, dts[t], ops[o]);
                }
                T_CHECK(!memcmp(out, ref, cnt * esz),
                        "allreduce count %zu dtype %d op %d differs from the canonical fold", cnt,
                        dts[t], ops[o]);
                free(in);
                free(out);
                free(ref);
                free(x);
            }
        }
    }
    /* alltoall: block p of rank r's input is pattern(r, p); 70000 bytes per block goes by
     * (receiver-initiated) rendezvous */
    static const size_t blocks[] = {1, 333, 70000};
    for (size_t b = 0; b < 3; b++) {
        size_t bl = blocks[b];
        uint8_t *in = malloc(bl * (size_t)n), *out = malloc(bl * (size_t)n);
        for (int p = 0; p < n; p++)
            fill(in + (size_t)p * bl, bl, me, p, (uint32_t)(40 + b));
        T_RC(lite_alltoall(ctx, in, out, bl, LITE_U8, 20000));
        for (int p = 0; p < n; p++)
            T_CHECK(verify(out + (size_t)p * bl, bl, p, me, (uint32_t)(40 + b)) < 0,
                    "alltoall block from rank %d (%zu bytes)", p, bl);
        free(in);
        free(out);
    }
    /* bcast from every root, small and rendezvous-sized */
    for (int root = 0; root < n; root++) {
        size_t len = root % 2 ? 200000 : 999;
        uint8_t *buf = malloc(len);
        if (me == root)
            fill(buf, len, root, 0, 50);
        else
            memset(buf, 0, len);
        T_RC(lite_bcast(ctx, buf, len, LITE_U8, root, 20000));
        T_CHECK(verify(buf, len, root, 0, 50) < 0, "bcast from %d", root);
        free(buf);
    }
    /* non-blocking: two at once, waited in a rank-dependent order */
    float a[64], b2[64], ra[64], rb[64];
    for (int i = 0; i < 64; i++)
        a[i] = (float)(me + i), b2[i] = (float)(me * i);
    lite_request_t *q[2];
    T_RC(lite_iallreduce(ctx, a, ra, 64, LITE_F32, LITE_SUM, &q[0]));
    T_RC(lite_iallreduce(ctx, b2, rb, 64, LITE_F32, LITE_SUM, &q[1]));
    T_RC(lite_wait(ctx, q[me % 2], 20000, NULL));
    T_RC(lite_wait(ctx, q[1 - me % 2], 20000, NULL));
    for (int i = 0; i < 64; i++) {
        float sa = 0, sb = 0;
        for (int r = 0; r < n; r++)
            sa += (float)(r + i), sb += (float)(r * i);
        T_CHECK(ra[i] == sa && rb[i] == sb, "iallreduce element %d", i);
    }
    return 0;
}

static void test_coll(void **state)
{
    run_job(3, coll_rank);
    run_job(4, coll_rank);
}

/* Two jobs in one process at once: each context's collectives, registrations and log level are
 * its own. */
static void test_two_jobs(void **state)
{
    struct job a, b;
    job_start(&a, 2, coll_rank);
    job_start(&b, 3, rma_rank);
    assert_int_equal(job_join(&a), 0);
    assert_int_equal(job_join(&b), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_p2p),      cmocka_unit_test(test_rma),
        cmocka_unit_test(test_refusals), cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_flow),     cmocka_unit_test(test_deferred),
        cmocka_unit_test(test_coll),     cmocka_unit_test(test_two_jobs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
