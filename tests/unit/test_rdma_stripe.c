/* test_rdma_stripe.c - how the RDMA backend cuts one-sided ops over rails. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "transports/rdma/rdma_logic.h"

#define MAXP 4096

/* The pieces tile [0, len) in order, each within max_piece and on a valid rail. */
static void check_tiling(const struct lite_rdma_piece *p, size_t n, uint64_t len, uint32_t nrails,
                         uint64_t max_piece)
{
    uint64_t off = 0;
    assert_true(n >= 1);
    for (size_t i = 0; i < n; i++) {
        assert_true(p[i].off == off);
        assert_true(p[i].len <= max_piece);
        assert_true(p[i].rail < (nrails ? nrails : 1));
        assert_true(p[i].len > 0 || len == 0);
        off += p[i].len;
    }
    assert_true(off == len);
}

static void test_one_rail(void **state)
{
    struct lite_rdma_piece p[MAXP];
    size_t n = lite_rdma_stripe_plan(16u << 20, 1, 0, 256 << 10, 4096, UINT64_MAX, p, MAXP);
    assert_int_equal(n, 1);
    assert_true(p[0].len == 16u << 20 && p[0].rail == 0);
    /* the device's largest message still cuts it */
    n = lite_rdma_stripe_plan(10, 1, 0, 256 << 10, 1, 3, p, MAXP);
    assert_int_equal(n, 4);
    check_tiling(p, n, 10, 1, 3);
}

static void test_small_op_whole(void **state)
{
    struct lite_rdma_piece p[MAXP];
    /* below 2 x stripe_min: one piece, on the rail whose turn it is */
    size_t n = lite_rdma_stripe_plan(300 << 10, 4, 2, 256 << 10, 4096, UINT64_MAX, p, MAXP);
    assert_int_equal(n, 1);
    assert_int_equal(p[0].rail, 2);
    n = lite_rdma_stripe_plan(0, 4, 3, 256 << 10, 4096, UINT64_MAX, p, MAXP);
    assert_int_equal(n, 1);
    assert_true(p[0].len == 0 && p[0].rail == 3);
}

static void test_striped(void **state)
{
    struct lite_rdma_piece p[MAXP];
    size_t n = lite_rdma_stripe_plan(1u << 20, 2, 0, 256 << 10, 4096, UINT64_MAX, p, MAXP);
    assert_int_equal(n, 2);
    assert_true(p[0].len == 512 << 10 && p[1].len == 512 << 10);
    assert_true(p[0].rail == 0 && p[1].rail == 1);
    /* an odd length: aligned stripes, the last takes the rest */
    n = lite_rdma_stripe_plan((1u << 20) + 1, 2, 1, 256 << 10, 4096, UINT64_MAX, p, MAXP);
    assert_int_equal(n, 2);
    assert_true(p[0].len % 4096 == 0);
    assert_true(p[0].rail == 1 && p[1].rail == 0);
    check_tiling(p, n, (1u << 20) + 1, 2, UINT64_MAX);
    /* only as many rails as give each stripe_min */
    n = lite_rdma_stripe_plan(600 << 10, 8, 0, 256 << 10, 4096, UINT64_MAX, p, MAXP);
    assert_int_equal(n, 2);
    /* 8 rails, 16 MiB: 8 equal stripes, one per rail */
    n = lite_rdma_stripe_plan(16u << 20, 8, 5, 256 << 10, 4096, UINT64_MAX, p, MAXP);
    assert_int_equal(n, 8);
    for (size_t i = 0; i < n; i++)
        assert_true(p[i].len == 2u << 20 && p[i].rail == (5 + i) % 8);
}

/* Asking for the count (max_out 0) gives the same count as the full call. */
static void test_sizing(void **state)
{
    struct lite_rdma_piece p[MAXP];
    size_t a = lite_rdma_stripe_plan(5u << 20, 3, 0, 64 << 10, 4096, 1u << 20, NULL, 0);
    size_t b = lite_rdma_stripe_plan(5u << 20, 3, 0, 64 << 10, 4096, 1u << 20, p, MAXP);
    assert_int_equal(a, b);
    check_tiling(p, b, 5u << 20, 3, 1u << 20);
}

/* Many random shapes: always an exact, ordered tiling. */
static void test_random(void **state)
{
    struct lite_rdma_piece p[MAXP];
    srand(7);
    for (int i = 0; i < 20000; i++) {
        uint64_t len = (uint64_t)rand() % (64u << 20);
        if (i % 5 == 0)
            len = (uint64_t)rand() % 10000;
        uint32_t rails = 1 + (uint32_t)rand() % 8;
        uint64_t smin = 1 + (uint64_t)rand() % (1u << 20);
        uint64_t align = (uint64_t)1 << (rand() % 13);
        uint64_t maxp = i % 3 ? UINT64_MAX : (64u << 10) + (uint64_t)rand() % (8u << 20);
        size_t n = lite_rdma_stripe_plan(len, rails, (uint32_t)rand(), smin, align, maxp, NULL, 0);
        assert_true(n <= MAXP);
        size_t m = lite_rdma_stripe_plan(len, rails, (uint32_t)rand(), smin, align, maxp, p, MAXP);
        assert_int_equal(n, m);
        check_tiling(p, m, len, rails, maxp);
        /* never more stripes than rails when pieces are not cut by max_piece */
        if (maxp == UINT64_MAX)
            assert_true(m <= rails);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_rail), cmocka_unit_test(test_small_op_whole),
        cmocka_unit_test(test_striped),  cmocka_unit_test(test_sizing),
        cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
