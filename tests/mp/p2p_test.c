/*
 * p2p_test.c - tagged send/recv between every pair of ranks, bytes checked one by one.
 *
 * Run: litetx-run -n N p2p_test   (any N >= 1; CTest runs 2, 3 and 4 ranks)
 */
#include <errno.h>
#include <stdlib.h>

#include "mp_common.h"

static const size_t sizes[] = {0, 1, 7, 4093, 65536, 65537, 1u << 20, (16u << 20) + 3};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* Tags strictly increase per peer; every case takes a fresh range. */
static uint64_t next_tag = 1;

/* Every rank sends every size to every rank (itself included) at once: all pairs in flight. */
static void all_pairs(lite_ctx_t *ctx)
{
    int n = lite_world_size(ctx), me = lite_rank(ctx);
    int nreq = 2 * n * (int)NSIZES;
    lite_request_t **reqs = calloc((size_t)nreq, sizeof(*reqs));
    uint8_t **sbuf = calloc((size_t)n * NSIZES, sizeof(uint8_t *));
    uint8_t **rbuf = calloc((size_t)n * NSIZES, sizeof(uint8_t *));
    CHECK(reqs && sbuf && rbuf, "oom");
    int k = 0;
    for (int p = 0; p < n; p++) {
        for (size_t s = 0; s < NSIZES; s++) {
            size_t i = (size_t)p * NSIZES + s;
            rbuf[i] = malloc(sizes[s] + 1);
            sbuf[i] = malloc(sizes[s] + 1);
            CHECK(rbuf[i] && sbuf[i], "oom");
            mp_fill(sbuf[i], sizes[s], me, p, (uint32_t)s);
            CHECK_RC(ctx, lite_irecv(ctx, p, next_tag + s, rbuf[i], sizes[s], &reqs[k++]));
            CHECK_RC(ctx, lite_isend(ctx, p, next_tag + s, sbuf[i], sizes[s], &reqs[k++]));
        }
    }
    for (int i = 0; i < k; i++) {
        lite_status_t st;
        CHECK_RC(ctx, lite_wait(ctx, reqs[i], 60000, &st));
        CHECK(st.bytes == sizes[(i / 2) % NSIZES], "request %d moved %zu bytes", i, st.bytes);
    }
    for (int p = 0; p < n; p++)
        for (size_t s = 0; s < NSIZES; s++) {
            size_t i = (size_t)p * NSIZES + s;
            long bad = mp_verify(rbuf[i], sizes[s], p, me, (uint32_t)s);
            CHECK(bad < 0, "all_pairs: %zu bytes from rank %d wrong at byte %ld", sizes[s], p, bad);
            free(rbuf[i]);
            free(sbuf[i]);
        }
    next_tag += NSIZES;
    free(reqs);
    free(sbuf);
    free(rbuf);
}

/*
 * Receive posted before the send, and send before the receive (the unexpected path), made
 * certain by a barrier between the two halves.
 */
static void ordering_cases(lite_ctx_t *ctx)
{
    int n = lite_world_size(ctx), me = lite_rank(ctx);
    int to = (me + 1) % n, from = (me - 1 + n) % n;
    for (size_t s = 0; s < NSIZES; s++) {
        size_t len = sizes[s];
        uint8_t *sb = malloc(len + 1), *rb = malloc(len + 1);
        CHECK(sb && rb, "oom");
        mp_fill(sb, len, me, to, 100 + (uint32_t)s);

        /* 1. receive first */
        lite_request_t *rr, *sr;
        memset(rb, 0xEE, len);
        CHECK_RC(ctx, lite_irecv(ctx, from, next_tag, rb, len, &rr));
        CHECK_RC(ctx, lite_barrier(ctx, 30000));
        CHECK_RC(ctx, lite_isend(ctx, to, next_tag, sb, len, &sr));
        CHECK_RC(ctx, lite_wait(ctx, sr, 30000, NULL));
        lite_status_t st;
        CHECK_RC(ctx, lite_wait(ctx, rr, 30000, &st));
        CHECK(st.bytes == len && st.peer == from && st.tag == next_tag, "status mismatch");
        CHECK(mp_verify(rb, len, from, me, 100 + (uint32_t)s) < 0, "recv-first %zu B", len);
        next_tag++;

        /* 2. send first: the message waits in the unexpected queue */
        memset(rb, 0xEE, len);
        CHECK_RC(ctx, lite_isend(ctx, to, next_tag, sb, len, &sr));
        CHECK_RC(ctx, lite_barrier(ctx, 30000));
        /* let the bytes arrive before the receive exists */
        for (int i = 0; i < 50; i++)
            CHECK_RC(ctx, lite_progress(ctx));
        size_t got = 0;
        CHECK_RC(ctx, lite_recv(ctx, from, next_tag, rb, len, &got, 30000));
        CHECK_RC(ctx, lite_wait(ctx, sr, 30000, NULL));
        CHECK(got == len, "send-first got %zu of %zu", got, len);
        CHECK(mp_verify(rb, len, from, me, 100 + (uint32_t)s) < 0, "send-first %zu B", len);
        next_tag++;
        free(sb);
        free(rb);
    }
}

/* Many messages in flight to one peer, received in reverse posting order. */
static void many_in_flight(lite_ctx_t *ctx)
{
    enum { M = 500 };
    int n = lite_world_size(ctx), me = lite_rank(ctx);
    int to = (me + 1) % n, from = (me - 1 + n) % n;
    static uint8_t sb[M][97], rb[M][97];
    lite_request_t *sr[M], *rr[M];
    for (int i = 0; i < M; i++) {
        mp_fill(sb[i], (size_t)(i % 97), me, to, 1000 + (uint32_t)i);
        CHECK_RC(ctx, lite_isend(ctx, to, next_tag + (uint64_t)i, sb[i], (size_t)(i % 97), &sr[i]));
    }
    for (int i = M - 1; i >= 0; i--)
        CHECK_RC(ctx, lite_irecv(ctx, from, next_tag + (uint64_t)i, rb[i], 97, &rr[i]));
    for (int i = 0; i < M; i++) {
        lite_status_t st;
        CHECK_RC(ctx, lite_wait(ctx, sr[i], 30000, NULL));
        CHECK_RC(ctx, lite_wait(ctx, rr[i], 30000, &st));
        CHECK(st.bytes == (size_t)(i % 97), "message %d: %zu bytes", i, st.bytes);
        CHECK(mp_verify(rb[i], st.bytes, from, me, 1000 + (uint32_t)i) < 0, "message %d", i);
    }
    next_tag += M;
}

/* Errors a caller can make, each reported without disturbing the traffic after it. */
static void error_cases(lite_ctx_t *ctx)
{
    int n = lite_world_size(ctx), me = lite_rank(ctx);
    int to = (me + 1) % n, from = (me - 1 + n) % n;
    uint8_t buf[64], small[8];
    lite_request_t *r;

    CHECK(lite_isend(ctx, n, next_tag, buf, 1, &r) == -EINVAL, "peer out of range accepted");
    CHECK(lite_isend(ctx, -1, next_tag, buf, 1, &r) == -EINVAL, "negative peer accepted");
    CHECK(lite_irecv(ctx, to, next_tag, NULL, 5, &r) == -EINVAL, "NULL buffer accepted");
    CHECK(strstr(lite_last_error(ctx), "NULL") != NULL, "detail: %s", lite_last_error(ctx));

    /* a message longer than the receive buffer: truncation error, nothing written */
    mp_fill(buf, sizeof(buf), me, to, 7);
    CHECK_RC(ctx, lite_send(ctx, to, next_tag, buf, sizeof(buf), 30000));
    memset(small, 0x5A, sizeof(small));
    int rc = lite_recv(ctx, from, next_tag, small, sizeof(small) - 1, NULL, 30000);
    CHECK(rc == -LITE_ERR_TRUNCATED, "truncation gave %d", rc);
    for (size_t i = 0; i < sizeof(small); i++)
        CHECK(small[i] == 0x5A, "truncated receive wrote byte %zu", i);
    next_tag++;

    /* the connection is still good afterwards */
    CHECK_RC(ctx, lite_send(ctx, to, next_tag, buf, sizeof(buf), 30000));
    CHECK_RC(ctx, lite_recv(ctx, from, next_tag, buf, sizeof(buf), NULL, 30000));
    CHECK(mp_verify(buf, sizeof(buf), from, me, 7) < 0, "after truncation");

    /* tags must increase per peer */
    rc = lite_isend(ctx, to, next_tag, buf, 1, &r);
    CHECK(rc == -LITE_ERR_TAG_ORDER, "repeated tag gave %d", rc);
    next_tag++;

    /* a receive nobody sends to times out, and can then be cancelled */
    CHECK_RC(ctx, lite_irecv(ctx, from, next_tag + 1000000, buf, 1, &r));
    rc = lite_wait(ctx, r, 50, NULL);
    CHECK(rc == -ETIMEDOUT, "wait on an unmatched receive gave %d", rc);
    CHECK_RC(ctx, lite_cancel(ctx, r));
    CHECK_RC(ctx, lite_barrier(ctx, 30000));
}

static void tag_helpers(void)
{
    lite_tag_parts_t p = {.step = 3, .layer = 17, .level = 1, .seq = 9}, q;
    uint64_t a, b;
    CHECK(lite_tag_compose(&p, &a) == 0, "compose");
    p.seq = 10;
    CHECK(lite_tag_compose(&p, &b) == 0 && b > a, "tags order by seq");
    lite_tag_split(b, &q);
    CHECK(q.step == 3 && q.layer == 17 && q.level == 1 && q.seq == 10, "split");
}

int main(void)
{
    lite_ctx_t *ctx = mp_init();
    tag_helpers();
    all_pairs(ctx);
    ordering_cases(ctx);
    many_in_flight(ctx);
    error_cases(ctx);
    int n = lite_world_size(ctx);
    int rc = lite_finalize(ctx);
    CHECK(rc == 0, "finalize: %s", lite_strerror(rc));
    printf("rank %d: p2p ok (%d ranks, transport %s)\n", mp_rank, n,
           getenv("LITETX_TRANSPORT") ? getenv("LITETX_TRANSPORT") : "auto");
    return 0;
}
