/*
 * test_rdma_credit.c - the RDMA backend's receive windows (no SEND ever meets a receive queue
 * without a posted receive), its mailbox word, and its SEND frame header.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "transports/rdma/rdma_logic.h"

static void test_window(void **state)
{
    struct lite_rdma_window w;
    lite_rdma_window_init(&w, 4);
    assert_true(lite_rdma_window_avail(&w) == 4);
    assert_true(lite_rdma_window_take(&w, 3));
    assert_false(lite_rdma_window_take(&w, 2)); /* nothing taken on failure */
    assert_true(lite_rdma_window_avail(&w) == 1);
    assert_true(lite_rdma_window_take(&w, 1));
    assert_true(lite_rdma_window_avail(&w) == 0);
    /* the peer reposted 2 of the 4 it consumed */
    assert_int_equal(lite_rdma_window_grant(&w, 2), 1);
    assert_true(lite_rdma_window_avail(&w) == 2);
    /* a late or repeated report changes nothing */
    assert_int_equal(lite_rdma_window_grant(&w, 1), 0);
    assert_int_equal(lite_rdma_window_grant(&w, 2), 0);
    assert_true(lite_rdma_window_avail(&w) == 2);
    /* a peer cannot repost more than was consumed */
    assert_int_equal(lite_rdma_window_grant(&w, 5), -EPROTO);
}

static void test_rxacct(void **state)
{
    struct lite_rdma_rxacct a;
    lite_rdma_rxacct_init(&a, 80);
    for (int i = 0; i < 19; i++) {
        lite_rdma_rxacct_consume(&a);
        lite_rdma_rxacct_repost(&a);
        assert_false(lite_rdma_rxacct_due(&a));
    }
    lite_rdma_rxacct_consume(&a);
    lite_rdma_rxacct_repost(&a);
    assert_true(lite_rdma_rxacct_due(&a)); /* a quarter of the window */
    assert_true(lite_rdma_rxacct_report(&a) == 20);
    assert_false(lite_rdma_rxacct_due(&a));
    /* reposts never run ahead of consumption */
    lite_rdma_rxacct_repost(&a);
    assert_true(a.reposted == 20);
    /* a tiny window reports every repost */
    lite_rdma_rxacct_init(&a, 2);
    lite_rdma_rxacct_consume(&a);
    lite_rdma_rxacct_repost(&a);
    assert_true(lite_rdma_rxacct_due(&a));
    assert_int_equal(lite_rdma_recv_depth(64), 64 + LITE_RDMA_CTRL_RESERVE);
}

/*
 * A sender and a receiver with reports that arrive late, in random order, or not at all for a
 * while: the sender never posts into a queue without a posted receive, never deadlocks, and the
 * receiver ends with every receive posted again.
 */
static void test_simulation(void **state)
{
    srand(11);
    for (int round = 0; round < 200; round++) {
        uint32_t depth = 2 + (uint32_t)rand() % 100;
        struct lite_rdma_window w;
        struct lite_rdma_rxacct a;
        lite_rdma_window_init(&w, depth);
        lite_rdma_rxacct_init(&a, depth);
        int64_t posted = depth; /* receives posted at the receiver right now */
        uint64_t in_flight = 0; /* SENDs on the wire, not yet consumed */
        uint64_t reports[64];   /* reports on the wire */
        int nrep = 0;
        uint64_t sent = 0, want = 5000, got = 0;
        uint64_t owed_to_repost = 0;
        for (int step = 0; step < 200000 && got < want; step++) {
            switch (rand() % 4) {
            case 0: /* sender */
                if (sent < want && lite_rdma_window_take(&w, 1)) {
                    sent++;
                    in_flight++;
                }
                break;
            case 1: /* a SEND lands: there must be a receive for it (no RNR) */
                if (in_flight) {
                    assert_true(posted > 0);
                    posted--;
                    in_flight--;
                    lite_rdma_rxacct_consume(&a);
                    owed_to_repost++;
                    got++;
                }
                break;
            case 2: /* the receiver processes a completion: repost, report when due */
                if (owed_to_repost) {
                    owed_to_repost--;
                    posted++;
                    lite_rdma_rxacct_repost(&a);
                    if (lite_rdma_rxacct_due(&a) && nrep < 64)
                        reports[nrep++] = lite_rdma_rxacct_report(&a);
                }
                break;
            case 3: /* a report lands, maybe not the oldest */
                if (nrep) {
                    int k = rand() % nrep;
                    assert_true(lite_rdma_window_grant(&w, reports[k]) >= 0);
                    reports[k] = reports[--nrep];
                }
                break;
            }
            assert_true(posted >= 0 && posted <= (int64_t)depth);
        }
        assert_true(got == want);
    }
}

static void test_mailbox(void **state)
{
    uint64_t w = lite_rdma_mbox_pack(7, 123456789);
    assert_int_equal(lite_rdma_mbox_epoch(w), 7);
    assert_true(lite_rdma_mbox_count(w) == 123456789);
    w = lite_rdma_mbox_pack(0xffff, (1ull << 48) - 1);
    assert_int_equal(lite_rdma_mbox_epoch(w), 0xffff);
    assert_true(lite_rdma_mbox_count(w) == (1ull << 48) - 1);
}

static void test_frames(void **state)
{
    uint8_t b[64];
    struct lite_rdma_frame f = {.type = LITE_RDMA_FRAME_FIRST,
                                .channel = 2,
                                .flags = 1,
                                .credits = 0xbeef,
                                .tag = 0x0123456789abcdefull,
                                .len = 40};
    assert_int_equal(lite_rdma_frame_encode(&f, b), LITE_RDMA_FIRST_HDR);
    /* little-endian, fixed layout */
    assert_int_equal(b[0], LITE_RDMA_FRAME_FIRST);
    assert_int_equal(b[4], 0xef);
    assert_int_equal(b[8], 0xef);
    assert_int_equal(b[16], 40);
    struct lite_rdma_frame g;
    const char *why = NULL;
    assert_int_equal(lite_rdma_frame_decode(b, LITE_RDMA_FIRST_HDR + 40, &g, &why),
                     LITE_RDMA_FIRST_HDR);
    assert_true(g.tag == f.tag && g.len == 40 && g.credits == 0xbeef && g.channel == 2 &&
                g.flags == 1);
    /* more payload in the SEND than the message has */
    assert_int_equal(lite_rdma_frame_decode(b, LITE_RDMA_FIRST_HDR + 41, &g, &why), -EPROTO);
    /* short, unknown type, reserved bytes */
    assert_int_equal(lite_rdma_frame_decode(b, 20, &g, &why), -EPROTO);
    assert_int_equal(lite_rdma_frame_decode(b, 7, &g, &why), -EPROTO);
    b[3] = 1;
    assert_int_equal(lite_rdma_frame_decode(b, 64, &g, &why), -EPROTO);
    b[3] = 0;
    b[0] = 0x99;
    assert_int_equal(lite_rdma_frame_decode(b, 64, &g, &why), -EPROTO);
    assert_non_null(why);
    struct lite_rdma_frame c = {.type = LITE_RDMA_FRAME_CONT};
    assert_int_equal(lite_rdma_frame_encode(&c, b), LITE_RDMA_CONT_HDR);
    assert_int_equal(lite_rdma_frame_decode(b, 100, &g, &why), LITE_RDMA_CONT_HDR);
    b[5] = 1;
    assert_int_equal(lite_rdma_frame_decode(b, 100, &g, &why), -EPROTO);
}

/* Every single-byte corruption of a header is refused or decodes to a consistent frame. */
static void test_frame_fuzz(void **state)
{
    uint8_t good[LITE_RDMA_FIRST_HDR];
    struct lite_rdma_frame f = {.type = LITE_RDMA_FRAME_FIRST, .tag = 5, .len = 100};
    lite_rdma_frame_encode(&f, good);
    for (size_t i = 0; i < sizeof(good); i++)
        for (int v = 0; v < 256; v++) {
            uint8_t b[LITE_RDMA_FIRST_HDR + 8];
            memcpy(b, good, sizeof(good));
            b[i] = (uint8_t)v;
            struct lite_rdma_frame g;
            const char *why = NULL;
            int rc = lite_rdma_frame_decode(b, sizeof(b), &g, &why);
            if (rc == LITE_RDMA_FIRST_HDR)
                assert_true(g.len >= sizeof(b) - LITE_RDMA_FIRST_HDR);
            else if (rc != LITE_RDMA_CONT_HDR)
                assert_true(rc == -EPROTO && why);
        }
}

static void test_frag_count(void **state)
{
    uint32_t slot = 1024;
    assert_true(lite_rdma_frag_count(0, slot) == 1);
    assert_true(lite_rdma_frag_count(slot - LITE_RDMA_FIRST_HDR, slot) == 1);
    assert_true(lite_rdma_frag_count(slot - LITE_RDMA_FIRST_HDR + 1, slot) == 2);
    uint64_t two = slot - LITE_RDMA_FIRST_HDR + slot - LITE_RDMA_CONT_HDR;
    assert_true(lite_rdma_frag_count(two, slot) == 2);
    assert_true(lite_rdma_frag_count(two + 1, slot) == 3);
    /* the default: a slot holds any eager message (below the 64 KiB threshold) */
    assert_true(lite_rdma_frag_count(65535, 65536 + LITE_RDMA_FIRST_HDR) == 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window),     cmocka_unit_test(test_rxacct),
        cmocka_unit_test(test_simulation), cmocka_unit_test(test_mailbox),
        cmocka_unit_test(test_frames),     cmocka_unit_test(test_frame_fuzz),
        cmocka_unit_test(test_frag_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
