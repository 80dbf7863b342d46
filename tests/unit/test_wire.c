/* test_wire.c - frame header encoding and decoding, including every malformed form. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "lite_int.h"

static void encode(uint8_t type, uint8_t chan, uint64_t tag, uint64_t len,
                   uint8_t out[LITE_WIRE_HDR_LEN])
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
    struct lite_wire_hdr h = {.type = LITE_WIRE_WRITE,
                              .channel = 1,
                              .flags = LITE_WIRE_F_IMM,
                              .credits = 0x0304,
                              .tag = 0x1122334455667788ull,
                              .len = 0x0102,
                              .key = 0xa1a2,
                              .offset = 0xb1b2,
                              .imm = 0xc1c2c3c4,
                              .status = -5};
    lite_wire_encode(&h, b);
    const uint8_t want[LITE_WIRE_HDR_LEN] = {
        0x54, 0x4c, 2, 4, 1, 1, 0x04, 0x03, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
        0x02, 0x01, 0, 0, 0, 0, 0,    0,    0xa2, 0xa1, 0,    0,    0,    0,    0,    0,
        0xb2, 0xb1, 0, 0, 0, 0, 0,    0,    0xc4, 0xc3, 0xc2, 0xc1, 0xfb, 0xff, 0xff, 0xff};
    assert_memory_equal(b, want, sizeof(want));
    struct lite_wire_hdr d;
    const char *why;
    assert_int_equal(lite_wire_decode(b, 1 << 20, &d, &why), 0);
    assert_int_equal(d.credits, 0x0304);
    assert_true(d.key == 0xa1a2 && d.offset == 0xb1b2 && d.imm == 0xc1c2c3c4 && d.status == -5);
}

static void expect_bad(const uint8_t b[LITE_WIRE_HDR_LEN], uint64_t max_len, const char *reason)
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
    struct lite_wire_hdr h0;
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
    b[3] = LITE_WIRE_FENCE + 1;
    expect_bad(b, 1000, "type");
    memcpy(b, good, sizeof(b));
    b[4] = LITE_CHAN_COUNT;
    expect_bad(b, 1000, "channel");
    encode(LITE_WIRE_READ_REQ, 0, 1, 8, b);
    b[5] = LITE_WIRE_F_IMM;
    expect_bad(b, 1000, "flags on a frame");
    encode(LITE_WIRE_WRITE, 0, 1, 8, b);
    b[5] = 0x08;
    expect_bad(b, 1000, "unknown flags on a write");
    expect_bad(good, 99, "length");
    encode(LITE_WIRE_HELLO, 0, 3, 1, b);
    expect_bad(b, 1000, "control frame");
    encode(LITE_WIRE_BYE, 0, 0, 8, b);
    expect_bad(b, 1000, "control frame");
    encode(LITE_WIRE_RMA_ACK, 0, 0, 8, b);
    expect_bad(b, 1000, "control frame");
    encode(LITE_WIRE_FENCE, 0, 5, 8, b);
    expect_bad(b, 1000, "control frame");
    encode(LITE_WIRE_FENCE + 1, 0, 0, 0, b);
    expect_bad(b, 1000, "type");
    /* a hello may say "bulk" and nothing else; other control frames take no flags */
    h0 = (struct lite_wire_hdr){.type = LITE_WIRE_HELLO, .tag = 2, .flags = LITE_WIRE_F_BULK};
    lite_wire_encode(&h0, b);
    struct lite_wire_hdr d;
    assert_int_equal(lite_wire_decode(b, 1000, &d, NULL), 0);
    assert_int_equal(d.flags, LITE_WIRE_F_BULK);
    h0.flags = LITE_WIRE_F_BULK | LITE_WIRE_F_IMM;
    lite_wire_encode(&h0, b);
    expect_bad(b, 1000, "unknown flags on a hello");
    h0 = (struct lite_wire_hdr){.type = LITE_WIRE_FENCE, .tag = 9, .flags = LITE_WIRE_F_BULK};
    lite_wire_encode(&h0, b);
    expect_bad(b, 1000, "flags on a frame");
    /* a write whose offset + length wraps around */
    struct lite_wire_hdr h = {.type = LITE_WIRE_WRITE, .len = 16, .offset = UINT64_MAX - 8};
    lite_wire_encode(&h, b);
    expect_bad(b, 1000, "overflows");
    h = (struct lite_wire_hdr){.type = LITE_WIRE_RMA_ACK, .status = 3};
    lite_wire_encode(&h, b);
    expect_bad(b, 1000, "positive status");
    h = (struct lite_wire_hdr){.type = LITE_WIRE_RMA_ACK, .flags = 0x80};
    lite_wire_encode(&h, b);
    expect_bad(b, 1000, "flags");
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
