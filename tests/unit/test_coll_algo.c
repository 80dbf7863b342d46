/*
 * test_coll_algo.c - the pure parts of the collectives (src/core/coll_algo.c, coll.h): the
 * configuration parser, the algorithm selection function, the argument header and the block
 * partition. The collectives themselves run in tests/mp/coll_test.c.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"

static void test_cfg_parse(void **state)
{
    struct lite_coll_cfg c;
    char err[256];
    assert_int_equal(lite_coll_cfg_parse(NULL, NULL, NULL, &c, err, sizeof(err)), 0);
    assert_int_equal(c.algo, LITE_COLL_ALGO_AUTO);
    assert_int_equal(c.chunk, 0);
    assert_true(c.check);
    assert_int_equal(lite_coll_cfg_parse("", "", "", &c, err, sizeof(err)), 0);
    assert_int_equal(c.algo, LITE_COLL_ALGO_AUTO);

    assert_int_equal(lite_coll_cfg_parse("RSAG", "64k", "0", &c, err, sizeof(err)), 0);
    assert_int_equal(c.algo, LITE_COLL_ALGO_RSAG);
    assert_int_equal(c.chunk, 65536);
    assert_false(c.check);
    assert_int_equal(lite_coll_cfg_parse("direct", "3m", "on", &c, err, sizeof(err)), 0);
    assert_int_equal(c.algo, LITE_COLL_ALGO_DIRECT);
    assert_int_equal(c.chunk, 3u << 20);
    assert_true(c.check);
    assert_int_equal(lite_coll_cfg_parse("pipe", "12345", "off", &c, err, sizeof(err)), 0);
    assert_int_equal(c.algo, LITE_COLL_ALGO_PIPE);
    assert_int_equal(c.chunk, 12345);
    assert_int_equal(lite_coll_cfg_parse("auto", "auto", "true", &c, err, sizeof(err)), 0);
    assert_int_equal(c.chunk, 0);

    /* refused, with the variable named */
    assert_int_equal(lite_coll_cfg_parse("ring", NULL, NULL, &c, err, sizeof(err)),
                     -LITE_ERR_CONFIG);
    assert_non_null(strstr(err, "LITETX_COLL_ALGO"));
    const char *bad_chunks[] = {"0", "-5", "12x", "k", "2000g", "1.5m", "99999999999999999999"};
    for (size_t i = 0; i < sizeof(bad_chunks) / sizeof(bad_chunks[0]); i++) {
        assert_int_equal(lite_coll_cfg_parse(NULL, bad_chunks[i], NULL, &c, err, sizeof(err)),
                         -LITE_ERR_CONFIG);
        assert_non_null(strstr(err, "LITETX_COLL_CHUNK"));
    }
    assert_int_equal(lite_coll_cfg_parse(NULL, NULL, "maybe", &c, err, sizeof(err)),
                     -LITE_ERR_CONFIG);
    assert_non_null(strstr(err, "LITETX_COLL_CHECK"));
}

static void test_select_allreduce(void **state)
{
    struct lite_coll_cfg cfg = {.algo = LITE_COLL_ALGO_AUTO, .chunk = 0, .check = true};
    struct lite_coll_plan p;
    /* small: direct, unchunked */
    lite_coll_select(LITE_COLL_ALLREDUCE, 4, 1024, 4, &cfg, &p);
    assert_int_equal(p.algo, LITE_COLL_ALGO_DIRECT);
    assert_int_equal(p.chunk_elems, 1024);
    lite_coll_select(LITE_COLL_ALLREDUCE, 2, LITE_COLL_SMALL_ALLREDUCE / 4, 4, &cfg, &p);
    assert_int_equal(p.algo, LITE_COLL_ALGO_DIRECT);
    /* large: rsag with the default chunk */
    lite_coll_select(LITE_COLL_ALLREDUCE, 2, LITE_COLL_SMALL_ALLREDUCE / 4 + 1, 4, &cfg, &p);
    assert_int_equal(p.algo, LITE_COLL_ALGO_RSAG);
    lite_coll_select(LITE_COLL_ALLREDUCE, 3, 16u << 20, 4, &cfg, &p);
    assert_int_equal(p.algo, LITE_COLL_ALGO_RSAG);
    assert_int_equal(p.chunk_elems, (2u << 20) / 4); /* 8 MiB of scratch over 2 x 2 slots */
    lite_coll_select(LITE_COLL_ALLREDUCE, 2, 16u << 20, 4, &cfg, &p);
    assert_int_equal(p.chunk_elems, (4u << 20) / 4);
    lite_coll_select(LITE_COLL_ALLREDUCE, 64, 16u << 20, 4, &cfg, &p);
    assert_int_equal(p.chunk_elems, LITE_COLL_CHUNK_MIN / 4);
    assert_int_equal(lite_coll_auto_chunk(1), LITE_COLL_SCRATCH);
    assert_int_equal(lite_coll_auto_chunk(5), (1u << 20));
    /* one rank: always direct */
    lite_coll_select(LITE_COLL_ALLREDUCE, 1, 16u << 20, 4, &cfg, &p);
    assert_int_equal(p.algo, LITE_COLL_ALGO_DIRECT);
    /* zero count: a valid plan */
    lite_coll_select(LITE_COLL_ALLREDUCE, 5, 0, 2, &cfg, &p);
    assert_int_equal(p.algo, LITE_COLL_ALGO_DIRECT);
    assert_int_equal(p.chunk_elems, 1);

    /* forced */
    cfg.algo = LITE_COLL_ALGO_RSAG;
    lite_coll_select(LITE_COLL_ALLREDUCE, 4, 10, 4, &cfg, &p);
    assert_int_equal(p.algo, LITE_COLL_ALGO_RSAG);
    cfg.algo = LITE_COLL_ALGO_DIRECT;
    lite_coll_select(LITE_COLL_ALLREDUCE, 4, 1u << 24, 4, &cfg, &p);
    assert_int_equal(p.algo, LITE_COLL_ALGO_DIRECT);
    assert_int_equal(p.chunk_elems, lite_coll_auto_chunk(4) / 4);
    /* an algorithm allreduce does not have: the automatic choice */
    cfg.algo = LITE_COLL_ALGO_PIPE;
    lite_coll_select(LITE_COLL_ALLREDUCE, 4, 1u << 24, 4, &cfg, &p);
    assert_int_equal(p.algo, LITE_COLL_ALGO_RSAG);

    /* chunk: whole elements, at least one, at most the count */
    cfg.algo = LITE_COLL_ALGO_RSAG;
    cfg.chunk = 4099;
    lite_coll_select(LITE_COLL_ALLREDUCE, 4, 100000, 4, &cfg, &p);
    assert_int_equal(p.chunk_elems, 1024);
    cfg.chunk = 3;
    lite_coll_select(LITE_COLL_ALLREDUCE, 4, 100000, 8, &cfg, &p);
    assert_int_equal(p.chunk_elems, 1);
    cfg.chunk = 1u << 30;
    lite_coll_select(LITE_COLL_ALLREDUCE, 4, 1000, 8, &cfg, &p);
    assert_int_equal(p.chunk_elems, 1000);
    /* never more than 2^20 chunks (tag steps are 24 bits) */
    cfg.chunk = 1;
    lite_coll_select(LITE_COLL_ALLREDUCE, 2, (size_t)1 << 30, 1, &cfg, &p);
    assert_true(((size_t)1 << 30) / p.chunk_elems <= (1u << 20));
}

static void test_select_others(void **state)
{
    struct lite_coll_cfg cfg = {.algo = LITE_COLL_ALGO_AUTO, .chunk = 0, .check = true};
    struct lite_coll_plan p;
    lite_coll_select(LITE_COLL_BCAST, 8, 1u << 20, 1, &cfg, &p);
    assert_int_equal(p.algo, LITE_COLL_ALGO_DIRECT);
    lite_coll_select(LITE_COLL_BCAST, 8, (1u << 20) + 1, 1, &cfg, &p);
    assert_int_equal(p.algo, LITE_COLL_ALGO_PIPE);
    assert_int_equal(p.chunk_elems, LITE_COLL_CHUNK_DEFAULT);
    lite_coll_select(LITE_COLL_BCAST, 3, 64u << 20, 1, &cfg, &p);
    assert_int_equal(p.algo, LITE_COLL_ALGO_DIRECT);
    cfg.algo = LITE_COLL_ALGO_PIPE;
    lite_coll_select(LITE_COLL_BCAST, 2, 100, 4, &cfg, &p);
    assert_int_equal(p.algo, LITE_COLL_ALGO_PIPE);
    cfg.algo = LITE_COLL_ALGO_RSAG; /* bcast has no rsag: automatic */
    lite_coll_select(LITE_COLL_BCAST, 2, 100, 4, &cfg, &p);
    assert_int_equal(p.algo, LITE_COLL_ALGO_DIRECT);
    /* one-step collectives: direct and unchunked whatever is forced */
    int kinds[] = {LITE_COLL_ALLGATHER, LITE_COLL_ALLTOALL, LITE_COLL_ALLTOALLV, LITE_COLL_BARRIER};
    cfg.chunk = 4096;
    for (size_t i = 0; i < 4; i++) {
        lite_coll_select(kinds[i], 4, 1u << 20, 4, &cfg, &p);
        assert_int_equal(p.algo, LITE_COLL_ALGO_DIRECT);
        assert_int_equal(p.chunk_elems, 1u << 20);
    }
    /* reduce_scatter: chunked direct reduce-scatter */
    cfg.algo = LITE_COLL_ALGO_AUTO;
    lite_coll_select(LITE_COLL_REDUCE_SCATTER, 4, 1u << 20, 4, &cfg, &p);
    assert_int_equal(p.algo, LITE_COLL_ALGO_DIRECT);
    assert_int_equal(p.chunk_elems, 1024); /* the configured 4096 bytes */
    cfg.chunk = 0;
    lite_coll_select(LITE_COLL_REDUCE_SCATTER, 4, 1u << 20, 4, &cfg, &p);
    assert_int_equal(p.chunk_elems, lite_coll_auto_chunk(4) / 4);
}

/* The selection is a pure function: same inputs, same plan; it never reads the environment. */
static void test_select_pure(void **state)
{
    struct lite_coll_cfg cfg = {.algo = LITE_COLL_ALGO_AUTO, .chunk = 0, .check = true};
    setenv("LITETX_COLL_ALGO", "direct", 1);
    setenv("LITETX_COLL_CHUNK", "4096", 1);
    for (int kind = 1; kind < LITE_COLL_KIND_COUNT; kind++)
        for (int n = 1; n <= 9; n++)
            for (size_t count = 0; count < (1u << 22); count = count * 3 + 1) {
                struct lite_coll_plan a, b;
                memset(&a, 0, sizeof(a)); /* padding */
                memset(&b, 0, sizeof(b));
                lite_coll_select(kind, n, count, 2, &cfg, &a);
                lite_coll_select(kind, n, count, 2, &cfg, &b);
                assert_memory_equal(&a, &b, sizeof(a));
                assert_true(a.chunk_elems >= 1);
                assert_true(a.chunk_elems <= (count ? count : 1));
                if (kind == LITE_COLL_ALLREDUCE && n > 1 && count * 2 > LITE_COLL_SMALL_ALLREDUCE)
                    assert_int_equal(a.algo, LITE_COLL_ALGO_RSAG); /* env ignored */
            }
    unsetenv("LITETX_COLL_ALGO");
    unsetenv("LITETX_COLL_CHUNK");
}

static void test_hdr(void **state)
{
    struct lite_coll_hdr h = {.kind = LITE_COLL_ALLTOALLV,
                              .dtype = LITE_BF16,
                              .redop = 0xff,
                              .algo = LITE_COLL_ALGO_DIRECT,
                              .root = -1,
                              .chunk = 12345,
                              .count = 0x0102030405060708ull,
                              .pair = 77};
    uint8_t b[LITE_COLL_HDR_LEN];
    lite_coll_hdr_encode(&h, b);
    /* little-endian fields at fixed offsets */
    assert_int_equal(b[0], 0x4c);
    assert_int_equal(b[4], LITE_COLL_ALLTOALLV);
    assert_int_equal(b[24], 0x08);
    assert_int_equal(b[31], 0x01);
    struct lite_coll_hdr d;
    assert_int_equal(lite_coll_hdr_decode(b, &d), 0);
    assert_int_equal(d.kind, h.kind);
    assert_int_equal(d.dtype, h.dtype);
    assert_int_equal(d.redop, h.redop);
    assert_int_equal(d.algo, h.algo);
    assert_int_equal(d.root, -1);
    assert_int_equal(d.chunk, h.chunk);
    assert_int_equal(d.count, h.count);
    assert_int_equal(d.pair, h.pair);
    /* anything else is refused */
    b[0] ^= 1;
    assert_int_equal(lite_coll_hdr_decode(b, &d), -LITE_ERR_PROTOCOL);
    b[0] ^= 1;
    b[13] = 1;
    assert_int_equal(lite_coll_hdr_decode(b, &d), -LITE_ERR_PROTOCOL);

    char s[200];
    h.kind = LITE_COLL_ALLREDUCE;
    h.redop = LITE_AVG;
    h.count = 5;
    lite_coll_hdr_describe(&h, s, sizeof(s));
    assert_string_equal(s, "allreduce(count=5, dtype=bf16, op=avg; algo=direct, chunk=12345)");
    h.kind = LITE_COLL_BCAST;
    h.root = 3;
    lite_coll_hdr_describe(&h, s, sizeof(s));
    assert_string_equal(s, "bcast(count=5, dtype=bf16, root=3; algo=direct, chunk=12345)");
}

static void test_blocks(void **state)
{
    /* blocks tile [0, count) in order, sizes differ by at most one, larger ones first */
    for (int n = 1; n <= 7; n++)
        for (size_t count = 0; count < 40; count++) {
            size_t next = 0, first = lite_coll_block_len(count, n, 0);
            for (int b = 0; b < n; b++) {
                assert_int_equal(lite_coll_block_lo(count, n, b), next);
                size_t len = lite_coll_block_len(count, n, b);
                assert_true(len == first || len + 1 == first);
                next += len;
            }
            assert_int_equal(next, count);
        }
    assert_true(lite_coll_overlap((void *)100, 10, (void *)109, 1));
    assert_false(lite_coll_overlap((void *)100, 10, (void *)110, 1));
    assert_false(lite_coll_overlap((void *)100, 0, (void *)100, 5));
    assert_int_equal(lite_coll_tag(3, 5), (3ull << 24) | 5);
    assert_true(lite_coll_tag(3, LITE_COLL_STEP_MAX) < lite_coll_tag(4, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cfg_parse),     cmocka_unit_test(test_select_allreduce),
        cmocka_unit_test(test_select_others), cmocka_unit_test(test_select_pure),
        cmocka_unit_test(test_hdr),           cmocka_unit_test(test_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
