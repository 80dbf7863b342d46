/* test_wire.c - frame header encoding and decoding, including every malformed form. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "lite_int.h"

static void encode(uint8_t type, uint8_t chan, uint64_t tag, uint64_t len, uint8_t out[24])
{
    struct lite_wire_hdr h = {.type = type, .channel = chan, .tag = tag, .len = len};
    lite_wire_encode(&h, out);
}

static void test_roundtrip(void **state)
{
    const uint64_t tags[] = {0, 1, 0x0123456789abcdefull, UINT64_MAX};
    const uint64_t lens[] = {0, 1, 65536, (1ull << 40)};
    for (size_t i = 0; i < 4; i++)
        for (uint8_t ch = 0; ch < LITE_CHAN_COUNT; ch++) {
            uint8_t b[LITE_WIRE_HDR_LEN];
            encode(LITE_WIRE_MSG, ch, tags[i], lens[i], b);
            struct lite_wire_hdr h;
            const char *why = NULL;
            assert_int_equal(lite_wire_decode(b, 1ull << 40, &h, &why), 0);
            assert_int_equal(h.type, LITE_WIRE_MSG);
            assert_int_equal(h.channel, ch);
            assert_true(h.tag == tags[i]);
            assert_true(h.len == lens[i]);
        }
}

/* The layout is little-endian and fixed: peers of different builds must agree. */
static void test_layout(void **state)
{
    uint8_t b[LITE_WIRE_HDR_LEN];
    encode(LITE_WIRE_MSG, 1, 0x1122334455667788ull, 0x0102, b);
    const uint8_t want[LITE_WIRE_HDR_LEN] = {0x54, 0x4c, 1,    2,    1,    0,    0,    0,
                                             0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
                                             0x02, 0x01, 0,    0,    0,    0,    0,    0};
    assert_memory_equal(b, want, sizeof(want));
}

static void expect_bad(const uint8_t b[24], uint64_t max_len, const char *reason)
{
    struct lite_wire_hdr h;
    const char *why = NULL;
    assert_int_equal(lite_wire_decode(b, max_len, &h, &why), -LITE_ERR_PROTOCOL);
    assert_non_null(why);
    assert_non_null(strstr(why, reason));
}

static void test_malformed(void **state)
{
    uint8_t good[LITE_WIRE_HDR_LEN], b[LITE_WIRE_HDR_LEN];
    encode(LITE_WIRE_MSG, 0, 5, 100, good);

    memcpy(b, good, sizeof(b));
    b[0] ^= 0xff;
    expect_bad(b, 1000, "magic");
    memcpy(b, good, sizeof(b));
    b[2] = LITE_WIRE_VERSION + 1;
    expect_bad(b, 1000, "version");
    memcpy(b, good, sizeof(b));
    b[3] = 0;
    expect_bad(b, 1000, "type");
    b[3] = LITE_WIRE_BYE + 1;
    expect_bad(b, 1000, "type");
    memcpy(b, good, sizeof(b));
    b[4] = LITE_CHAN_COUNT;
    expect_bad(b, 1000, "channel");
    memcpy(b, good, sizeof(b));
    b[5] = 1;
    expect_bad(b, 1000, "reserved");
    memcpy(b, good, sizeof(b));
    b[7] = 1;
    expect_bad(b, 1000, "reserved");
    expect_bad(good, 99, "length");
    encode(LITE_WIRE_HELLO, 0, 3, 1, b);
    expect_bad(b, 1000, "control frame");
    encode(LITE_WIRE_BYE, 0, 0, 8, b);
    expect_bad(b, 1000, "control frame");
}

/* Every single-byte corruption of a valid header is either rejected or decodes to a header whose
 * length is within the limit: nothing a peer sends makes decode accept an oversized frame. */
static void test_fuzz_bytes(void **state)
{
    uint8_t good[LITE_WIRE_HDR_LEN];
    encode(LITE_WIRE_MSG, 2, 77, 4096, good);
    for (size_t i = 0; i < LITE_WIRE_HDR_LEN; i++)
        for (int v = 0; v < 256; v++) {
            uint8_t b[LITE_WIRE_HDR_LEN];
            memcpy(b, good, sizeof(b));
            b[i] = (uint8_t)v;
            struct lite_wire_hdr h;
            const char *why = NULL;
            int rc = lite_wire_decode(b, 1u << 20, &h, &why);
            if (rc == 0) {
                assert_true(h.len <= (1u << 20));
                assert_true(h.channel < LITE_CHAN_COUNT);
            } else {
                assert_int_equal(rc, -LITE_ERR_PROTOCOL);
                assert_non_null(why);
            }
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_fuzz_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
