/*
 * test_core_scripted.c - the core's protocol, step by step, with the delivery order decided by
 * the test: ranks are threads over the loop backend, whose test gate (loop_gate.h) holds every
 * message until the controller (the test's own thread) releases it. No sleeps decide an order;
 * every wait is bounded.
 *
 * Cases: credits (a sender never has more eager messages in flight than the receiver granted,
 * and the rest follow as credit returns); rendezvous order (no data before the CTS, an RTS
 * that arrives before its receive is posted); cancel (before a match: the buffer is never
 * touched and the message goes to the next receive; after a match: -EBUSY); a peer lost at
 * every step of a rendezvous (both sides end with an error, no hang, finalize returns); an
 * immediate counted only once its write's data is all in place, and exactly once.
 */
#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "credits.h"
#include "ctx.h"
#include "litetx/litetx.h"
#include "loop_job.h"
#include "transports/loop/loop_gate.h"

/* Wire values of the core's control messages (docs/PROTOCOL.md): channel CTRL, type in flags. */
#define CTRL_CTS    1
#define CTRL_FIN    2
#define CTRL_CREDIT 3
#define EMU_WRITE   16

#define DEADLINE_NS (10LL * 1000000000LL)

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- the script: the controller sets steps, ranks wait for them while progressing ---- */

static atomic_int g_step, g_ready;
static atomic_int g_mark[8]; /* what each rank reports (meaning per case) */

/* Progress until the controller reaches step k (bounded). */
static int wait_step(lite_ctx_t *ctx, int k)
{
    int64_t end = now_ns() + DEADLINE_NS;
    while (atomic_load(&g_step) < k) {
        lite_progress(ctx);
        if (now_ns() > end) {
            fprintf(stderr, "rank %d: step %d never came\n", lite_rank(ctx), k);
            return -1;
        }
    }
    return 0;
}

static void step(int k)
{
    atomic_store(&g_step, k);
}

/* Held messages, oldest first. */
static struct lite_loop_held g_held[256];
static size_t held(void)
{
    size_t n = lite_loop_gate_list(g_held, 256);
    return n < 256 ? n : 256;
}

static void print_held(const char *when)
{
    size_t n = held();
    fprintf(stderr, "-- %s: %zu held\n", when, n);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "   #%llu %d->%d ch=%u flags=%u tag=%llu len=%llu%s\n",
                (unsigned long long)g_held[i].id, g_held[i].src, g_held[i].dst,
                g_held[i].hdr.channel, g_held[i].hdr.flags, (unsigned long long)g_held[i].hdr.tag,
                (unsigned long long)g_held[i].hdr.len, g_held[i].bye ? " BYE" : "");
}

static bool is_ctrl(const struct lite_loop_held *h, int type)
{
    return !h->bye && h->hdr.channel == LITE_CHAN_CTRL && h->hdr.flags == type;
}

static bool is_rts(const struct lite_loop_held *h)
{
    return !h->bye && h->hdr.channel == LITE_CHAN_USER && (h->hdr.flags & LITE_MSGF_RTS);
}

/* Wait (bounded) until a held message src -> dst satisfies pred; its index in g_held, or -1. */
static int wait_held(int src, int dst, bool (*pred)(const struct lite_loop_held *))
{
    int64_t end = now_ns() + DEADLINE_NS;
    while (now_ns() < end) {
        size_t n = held();
        for (size_t i = 0; i < n; i++)
            if (g_held[i].src == src && g_held[i].dst == dst && pred(&g_held[i]))
                return (int)i;
        sched_yield();
    }
    print_held("timed out waiting for a message");
    return -1;
}

static bool is_cts(const struct lite_loop_held *h)
{
    return is_ctrl(h, CTRL_CTS);
}

static bool is_write(const struct lite_loop_held *h)
{
    return is_ctrl(h, EMU_WRITE);
}

static bool is_fin(const struct lite_loop_held *h)
{
    return is_ctrl(h, CTRL_FIN);
}

static bool any(const struct lite_loop_held *h)
{
    return true;
}

/* Count held messages src -> dst that satisfy pred (NULL: all). */
static int count_held(int src, int dst, bool (*pred)(const struct lite_loop_held *))
{
    size_t n = held();
    int c = 0;
    for (size_t i = 0; i < n; i++)
        c += g_held[i].src == src && g_held[i].dst == dst && (!pred || pred(&g_held[i]));
    return c;
}

static bool is_user(const struct lite_loop_held *h)
{
    return !h->bye && h->hdr.channel == LITE_CHAN_USER;
}

static bool is_credit(const struct lite_loop_held *h)
{
    return is_ctrl(h, CTRL_CREDIT);
}

/* Release held messages (all but those `keep` says to keep) until done() or the deadline;
 * check(), if given, runs on every look at the held list and may fail the test. */
static bool pump(bool (*done)(void), bool (*keep)(const struct lite_loop_held *),
                 void (*check)(void))
{
    int64_t end = now_ns() + DEADLINE_NS;
    while (!done()) {
        if (now_ns() > end) {
            print_held("pump timed out");
            return false;
        }
        size_t n = held();
        if (check)
            check();
        for (size_t i = 0; i < n; i++)
            if (!keep || !keep(&g_held[i]))
                lite_loop_gate_release(g_held[i].id); /* -EAGAIN behind a kept one: later */
        sched_yield();
    }
    return true;
}

/* Let the ranks run a while (100 ms) with the gate as it is: they progress in their wait loops.
 * Only for checks that nothing happens (a credit not returned, a CTS not sent): the order of
 * what does happen never depends on it. */
static void let_run(void)
{
    int64_t end = now_ns() + 100000000LL;
    while (now_ns() < end)
        sched_yield();
}

/* Start a job with the gate armed once every rank is up. */
static void start(struct job *j, int n, rank_fn fn)
{
    atomic_store(&g_step, 0);
    atomic_store(&g_ready, 0);
    for (int i = 0; i < 8; i++)
        atomic_store(&g_mark[i], 0);
    job_start(j, n, fn);
    int64_t end = now_ns() + 30 * 1000000000LL;
    while (atomic_load(&g_ready) < n && now_ns() < end)
        sched_yield();
    assert_int_equal(atomic_load(&g_ready), n);
    lite_loop_gate(true);
    step(1);
}

/* Ranks call this first: counted ready, then wait for the gate. */
static int ready(lite_ctx_t *ctx)
{
    atomic_fetch_add(&g_ready, 1);
    return wait_step(ctx, 1);
}

/* End: the controller opens the gate (step 100) and the ranks finish. */
static void finish(struct job *j)
{
    lite_loop_gate(false);
    step(100);
    assert_int_equal(job_join(j), 0);
}

/* ---- credits: never more eager messages in flight than granted ---- */

#define CREDITS 4
#define NMSG    12
#define MSGLEN  100

static int credits_rank(lite_ctx_t *ctx, int me, int n)
{
    static uint8_t sb[NMSG][MSGLEN], rb[NMSG][MSGLEN];
    lite_request_t *r[NMSG];
    if (ready(ctx))
        return 1;
    if (me == 1) {
        for (int i = 0; i < NMSG; i++) {
            fill(sb[i], MSGLEN, 1, 0, (uint32_t)i);
            T_RC(lite_isend(ctx, 0, (uint64_t)i + 1, sb[i], MSGLEN, &r[i]));
        }
        atomic_store(&g_mark[1], 1);
    } else {
        if (wait_step(ctx, 2))
            return 1;
        for (int i = 0; i < NMSG; i++)
            T_RC(lite_irecv(ctx, 1, (uint64_t)i + 1, rb[i], MSGLEN, &r[i]));
    }
    for (int i = 0; i < NMSG; i++)
        T_RC(lite_wait(ctx, r[i], 20000, NULL));
    if (me == 0)
        for (int i = 0; i < NMSG; i++)
            T_CHECK(verify(rb[i], MSGLEN, 1, 0, (uint32_t)i) < 0, "message %d wrong", i);
    atomic_store(&g_mark[me], 2);
    return wait_step(ctx, 100);
}

static int g_max_inflight;
static void credits_check(void)
{
    int c = count_held(1, 0, is_user);
    if (c > g_max_inflight)
        g_max_inflight = c;
}

static bool credits_done(void)
{
    return atomic_load(&g_mark[0]) == 2 && atomic_load(&g_mark[1]) == 2;
}

static bool none_held_1to0(void)
{
    return count_held(1, 0, NULL) == 0;
}

static void test_credits(void **state)
{
    struct job j;
    g_job_credits = CREDITS;
    g_max_inflight = 0;
    start(&j, 2, credits_rank);
    int64_t end = now_ns() + DEADLINE_NS;
    while (atomic_load(&g_mark[1]) < 1 && now_ns() < end)
        sched_yield();
    let_run();
    /* The sender posted NMSG sends; exactly CREDITS went out, the rest wait for credit. */
    assert_int_equal(count_held(1, 0, is_user), CREDITS);
    /* Delivered but not received: the receiver keeps them, and returns no credit yet. */
    assert_true(pump(none_held_1to0, NULL, NULL));
    let_run();
    assert_int_equal(count_held(1, 0, is_user), 0);
    assert_int_equal(count_held(0, 1, is_credit), 0);
    /* The receives take them: credit returns and the rest follow, never more than granted. */
    step(2);
    assert_true(pump(credits_done, NULL, credits_check));
    assert_true(g_max_inflight <= CREDITS);
    finish(&j);
    g_job_credits = 0;
}

/* ---- rendezvous order: RTS before its receive, no data before the CTS ---- */

#define BIG (256 * 1024)

static int rndv_rank(lite_ctx_t *ctx, int me, int n)
{
    static uint8_t sb[BIG], rb[BIG];
    lite_request_t *r;
    if (ready(ctx))
        return 1;
    if (me == 1) {
        fill(sb, BIG, 1, 0, 7);
        T_RC(lite_isend(ctx, 0, 7, sb, BIG, &r));
    } else {
        if (wait_step(ctx, 2))
            return 1;
        memset(rb, 0, BIG);
        T_RC(lite_irecv(ctx, 1, 7, rb, BIG, &r));
    }
    T_RC(lite_wait(ctx, r, 20000, NULL));
    if (me == 0)
        T_CHECK(verify(rb, BIG, 1, 0, 7) < 0, "rendezvous bytes wrong");
    atomic_store(&g_mark[me], 2);
    return wait_step(ctx, 100);
}

static bool both_done(void)
{
    return atomic_load(&g_mark[0]) == 2 && atomic_load(&g_mark[1]) == 2;
}

static void test_rendezvous_order(void **state)
{
    struct job j;
    start(&j, 2, rndv_rank);
    int i = wait_held(1, 0, is_rts);
    assert_true(i >= 0);
    /* Only the announcement: the data waits for the receiver's answer. */
    assert_int_equal(count_held(1, 0, NULL), 1);
    assert_int_equal(lite_loop_gate_release(g_held[i].id), 0);
    /* Arrived before its receive: kept, not answered. */
    let_run();
    assert_int_equal(count_held(0, 1, is_cts), 0);
    assert_int_equal(count_held(1, 0, NULL), 0);
    step(2);
    i = wait_held(0, 1, is_cts);
    assert_true(i >= 0);
    assert_int_equal(count_held(1, 0, NULL), 0); /* still no data before the CTS arrives */
    assert_int_equal(lite_loop_gate_release(g_held[i].id), 0);
    assert_true(wait_held(1, 0, is_write) >= 0);
    assert_true(pump(both_done, NULL, NULL));
    finish(&j);
}

/* ---- cancel: before a match the buffer is never touched; after one, -EBUSY ---- */

static int cancel_rank(lite_ctx_t *ctx, int me, int n)
{
    static uint8_t sb[2][BIG], a[BIG], b[BIG], c[BIG];
    lite_request_t *r[2], *ra, *rb, *rq;
    if (ready(ctx))
        return 1;
    if (me == 1) {
        /* One after the other, so tag 10's announcement follows all of tag 9's traffic. */
        for (int k = 0; k < 2; k++) {
            fill(sb[k], BIG, 1, 0, 9 + (uint32_t)k);
            T_RC(lite_isend(ctx, 0, 9 + (uint64_t)k, sb[k], BIG, &r[k]));
            T_RC(lite_wait(ctx, r[k], 20000, NULL));
        }
        atomic_store(&g_mark[1], 2);
        return wait_step(ctx, 100);
    }
    memset(a, 0xAB, BIG);
    T_RC(lite_irecv(ctx, 1, 9, a, BIG, &ra));
    atomic_store(&g_mark[0], 1);
    if (wait_step(ctx, 2))
        return 1;
    T_RC(lite_cancel(ctx, ra)); /* nothing matched it yet */
    atomic_store(&g_mark[0], 2);
    if (wait_step(ctx, 3)) /* the announcement for tag 9 has been delivered */
        return 1;
    for (size_t i = 0; i < BIG; i++)
        T_CHECK(a[i] == 0xAB, "byte %zu of a cancelled receive's buffer was written", i);
    T_RC(lite_irecv(ctx, 1, 9, b, BIG, &rb));
    T_RC(lite_wait(ctx, rb, 20000, NULL));
    T_CHECK(verify(b, BIG, 1, 0, 9) < 0, "the message after a cancel is wrong");
    T_RC(lite_irecv(ctx, 1, 10, c, BIG, &rq));
    atomic_store(&g_mark[0], 3);
    if (wait_step(ctx, 4)) /* matched, and its CTS is on the way */
        return 1;
    int rc = lite_cancel(ctx, rq);
    T_CHECK(rc == -EBUSY, "cancel of a matched rendezvous receive gave %d", rc);
    atomic_store(&g_mark[0], 4);
    T_RC(lite_wait(ctx, rq, 20000, NULL));
    T_CHECK(verify(c, BIG, 1, 0, 10) < 0, "the receive that refused its cancel is wrong");
    atomic_store(&g_mark[0], 5);
    return wait_step(ctx, 100);
}

static bool is_rts10(const struct lite_loop_held *h)
{
    return is_rts(h) && h->hdr.tag == 10;
}

static bool mark0_is3(void)
{
    return atomic_load(&g_mark[0]) >= 3;
}

static bool cancel_done(void)
{
    return atomic_load(&g_mark[0]) == 5 && atomic_load(&g_mark[1]) == 2;
}

static void wait_mark(int rank, int v)
{
    int64_t end = now_ns() + DEADLINE_NS;
    while (atomic_load(&g_mark[rank]) < v && now_ns() < end)
        sched_yield();
    assert_true(atomic_load(&g_mark[rank]) >= v);
}

static void test_cancel(void **state)
{
    struct job j;
    start(&j, 2, cancel_rank);
    wait_mark(0, 1);
    int i = wait_held(1, 0, is_rts);
    assert_true(i >= 0);
    assert_int_equal(g_held[i].hdr.tag, 9);
    step(2); /* the receiver cancels before the announcement arrives */
    wait_mark(0, 2);
    assert_int_equal(lite_loop_gate_release(g_held[i].id), 0);
    let_run();
    assert_int_equal(count_held(0, 1, is_cts), 0); /* nothing to answer it now */
    step(3);
    /* Tag 9 goes through to the second receive; tag 10's announcement waits for its receive. */
    assert_true(pump(mark0_is3, is_rts10, NULL));
    i = wait_held(1, 0, is_rts10);
    assert_true(i >= 0);
    assert_int_equal(lite_loop_gate_release(g_held[i].id), 0);
    assert_true(wait_held(0, 1, is_cts) >= 0);
    step(4);
    wait_mark(0, 4);
    assert_true(pump(cancel_done, NULL, NULL));
    finish(&j);
}

/* ---- a peer lost at every step of a rendezvous ---- */

static atomic_int g_rc[2];

static int lost_rank(lite_ctx_t *ctx, int me, int n)
{
    static uint8_t sb[BIG], rb[BIG];
    lite_request_t *r;
    if (ready(ctx))
        return 1;
    if (me == 1) {
        fill(sb, BIG, 1, 0, 7);
        T_RC(lite_isend(ctx, 0, 7, sb, BIG, &r));
    } else {
        T_RC(lite_irecv(ctx, 1, 7, rb, BIG, &r));
    }
    atomic_store(&g_mark[me], 1); /* posted: the driver may cut the link from now on */
    atomic_store(&g_rc[me], lite_wait(ctx, r, 20000, NULL));
    atomic_store(&g_mark[me], 2);
    return wait_step(ctx, 100);
}

static void lost_at(int k)
{
    /* The rendezvous over a message-only backend: RTS, CTS, the emulated write's header, its
     * data, FIN. Deliver the first k, then cut the link. */
    bool (*const seq[])(const struct lite_loop_held *) = {is_rts, is_cts, is_write, any, is_fin};
    const int from[] = {1, 0, 1, 1, 1};
    struct job j;
    g_job_finalize_may_fail = true;
    start(&j, 2, lost_rank);
    /* Both operations are posted before anything is cut: a receive posted after the cut fails
     * at once, which is not the step under test. */
    wait_mark(0, 1);
    wait_mark(1, 1);
    for (int s = 0; s < k; s++) {
        int i = wait_held(from[s], 1 - from[s], seq[s]);
        assert_true(i >= 0);
        assert_int_equal(lite_loop_gate_release(g_held[i].id), 0);
    }
    assert_true(wait_held(from[k], 1 - from[k], seq[k]) >= 0);
    assert_true(lite_loop_gate_cut(0, 1) >= 1);
    wait_mark(0, 2);
    wait_mark(1, 2);
    int r0 = atomic_load(&g_rc[0]), r1 = atomic_load(&g_rc[1]);
    /* The receiver never has the whole message: lost, not a timeout. */
    assert_int_equal(r0, -LITE_ERR_PEER_LOST);
    /* The sender may have handed everything to the network (then it is done), but before the
     * CTS it cannot be. */
    if (k < 2)
        assert_int_equal(r1, -LITE_ERR_PEER_LOST);
    else
        assert_true(r1 == 0 || r1 == -LITE_ERR_PEER_LOST);
    finish(&j);
    g_job_finalize_may_fail = false;
}

static void test_lost_before_rts(void **state)
{
    lost_at(0);
}
static void test_lost_before_cts(void **state)
{
    lost_at(1);
}
static void test_lost_before_write(void **state)
{
    lost_at(2);
}
static void test_lost_inside_write(void **state)
{
    lost_at(3);
}
static void test_lost_before_fin(void **state)
{
    lost_at(4);
}

/* ---- an immediate is counted only once its write's data is in place ---- */

#define WLEN (64 * 1024)
#define IMM  0x77u

static atomic_int g_imm_count, g_imm_data_ok;

static int imm_rank(lite_ctx_t *ctx, int me, int n)
{
    static uint8_t win[WLEN], src[WLEN];
    lite_mr_t *mr;
    lite_rdesc_t d[2];
    if (me == 0) {
        memset(win, 0, WLEN);
        T_RC(lite_mr_reg(ctx, win, WLEN, LITE_MEM_HOST, LITE_ACCESS_REMOTE_WRITE, &mr));
    } else {
        fill(src, WLEN, 1, 0, 3);
        T_RC(lite_mr_reg(ctx, src, WLEN, LITE_MEM_HOST, 0, &mr));
    }
    T_RC(lite_mr_exchange(ctx, mr, d, 20000));
    if (ready(ctx))
        return 1;
    if (me == 1) {
        lite_request_t *r;
        T_RC(lite_write_imm(ctx, 0, mr, 0, &d[0], 0, WLEN, IMM, &r));
        T_RC(lite_wait(ctx, r, 20000, NULL));
        atomic_store(&g_mark[1], 2);
        if (wait_step(ctx, 100))
            return 1;
    } else {
        /* Watch the counter; the first time it moves, the bytes must all be there. */
        int64_t end = now_ns() + DEADLINE_NS;
        while (atomic_load(&g_step) < 100 && now_ns() < end) {
            lite_progress(ctx);
            uint64_t c = 0;
            T_RC(lite_imm_peek(ctx, IMM, &c));
            if (c && !atomic_load(&g_imm_count))
                atomic_store(&g_imm_data_ok, verify(win, WLEN, 1, 0, 3) < 0);
            atomic_store(&g_imm_count, (int)c);
        }
    }
    return lite_mr_dereg(ctx, mr);
}

static bool write_done(void)
{
    return atomic_load(&g_mark[1]) == 2 && count_held(1, 0, NULL) == 0;
}

static void test_imm_after_data(void **state)
{
    struct job j;
    atomic_store(&g_imm_count, 0);
    atomic_store(&g_imm_data_ok, 0);
    start(&j, 2, imm_rank);
    assert_true(wait_held(1, 0, is_write) >= 0);
    /* One message at a time: while any of the write's messages is held, nothing is counted. */
    int64_t end = now_ns() + DEADLINE_NS;
    while (!write_done() && now_ns() < end) {
        size_t n = held();
        int first = -1;
        for (size_t i = 0; i < n && first < 0; i++)
            if (g_held[i].src == 1 && g_held[i].dst == 0)
                first = (int)i;
        if (first < 0) {
            sched_yield();
            continue;
        }
        assert_int_equal(atomic_load(&g_imm_count), 0);
        assert_int_equal(lite_loop_gate_release(g_held[first].id), 0);
        let_run();
        n = held();
        for (size_t i = 0; i < n; i++) /* the answers (acknowledgements) go through */
            if (g_held[i].src == 0)
                lite_loop_gate_release(g_held[i].id);
    }
    assert_true(write_done());
    let_run();
    assert_int_equal(atomic_load(&g_imm_count), 1); /* exactly once */
    assert_true(atomic_load(&g_imm_data_ok));
    finish(&j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_credits),
        cmocka_unit_test(test_rendezvous_order),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_lost_before_rts),
        cmocka_unit_test(test_lost_before_cts),
        cmocka_unit_test(test_lost_before_write),
        cmocka_unit_test(test_lost_inside_write),
        cmocka_unit_test(test_lost_before_fin),
        cmocka_unit_test(test_imm_after_data),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
