/*
 * test_efa_plan.c - the EFA backend's pure logic (src/transports/efa/efa_plan.h): the striping
 * plan, the address blob, the message header, the flush targets of the second HELLO and
 * provider-name spelling. Header-only, so this runs whether or not the backend (and libfabric)
 * is built.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "transports/efa/efa_plan.h"

/* Stripes cover [0, len) exactly, in order, without overlap, and respect the rules. */
static void check_plan(uint64_t len, uint32_t nrails, uint64_t smin, uint64_t align, uint32_t first)
{
    struct lite_efa_stripe s[LITE_MAX_RAILS];
    uint32_t n = lite_efa_plan(len, nrails, smin, align, first, s);
    if (align & (align - 1))
        align = 1; /* not a power of two: the plan ignores it */
    assert_true(n >= 1);
    assert_true(n <= (nrails ? nrails : 1));
    uint64_t off = 0;
    for (uint32_t i = 0; i < n; i++) {
        assert_int_equal(s[i].off, off);
        assert_true(s[i].rail < (nrails ? nrails : 1));
        if (i + 1 < n) {
            assert_true(s[i].len > 0);
            assert_int_equal(s[i].len % align, 0); /* boundaries on the alignment */
            assert_true(s[i].len >= smin);
        }
        for (uint32_t k = 0; k < i; k++)
            assert_int_not_equal(s[k].rail, s[i].rail); /* one stripe per rail */
        off += s[i].len;
    }
    assert_int_equal(off, len);
}

static void test_plan_single(void **state)
{
    struct lite_efa_stripe s[LITE_MAX_RAILS];
    /* below 2 x stripe_min: one stripe, on the round-robin rail */
    assert_int_equal(lite_efa_plan(1000, 4, 4096, 4096, 2, s), 1);
    assert_int_equal(s[0].off, 0);
    assert_int_equal(s[0].len, 1000);
    assert_int_equal(s[0].rail, 2);
    /* zero bytes: still one (empty) stripe, so a write with an immediate is posted once */
    assert_int_equal(lite_efa_plan(0, 2, 4096, 4096, 0, s), 1);
    assert_int_equal(s[0].len, 0);
    /* one rail: never striped */
    assert_int_equal(lite_efa_plan(1u << 30, 1, 4096, 4096, 0, s), 1);
    assert_int_equal(s[0].len, 1u << 30);
}

static void test_plan_striped(void **state)
{
    struct lite_efa_stripe s[LITE_MAX_RAILS];
    assert_int_equal(lite_efa_plan(16u << 20, 2, 256 << 10, 4096, 1, s), 2);
    assert_int_equal(s[0].len, 8u << 20);
    assert_int_equal(s[1].len, 8u << 20);
    assert_int_equal(s[0].rail, 1);
    assert_int_equal(s[1].rail, 0);
    /* an odd length: the last stripe takes the remainder */
    assert_int_equal(lite_efa_plan((1u << 20) + 1, 2, 4096, 4096, 0, s), 2);
    assert_int_equal(s[0].len, (512u << 10) + 4096);
    assert_int_equal(s[1].len, (512u << 10) - 4095);
    /* only as many stripes as stripe_min allows */
    assert_int_equal(lite_efa_plan(3 * 4096, 8, 4096, 4096, 0, s), 3);
}

static void test_plan_exhaustive(void **state)
{
    static const uint64_t lens[] = {
        0,    1,     4095,  4096,           4097,     8191,
        8192, 65536, 65537, (1u << 20) - 1, 1u << 20, (16u << 20) + 12345};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
        for (uint32_t r = 0; r <= LITE_MAX_RAILS; r++)
            for (uint32_t f = 0; f < 3; f++) {
                check_plan(lens[i], r, 4096, 4096, f);
                check_plan(lens[i], r, 256 << 10, 4096, f);
                check_plan(lens[i], r, 1, 1, f);
                check_plan(lens[i], r, 100, 3 /* not a power of two: treated as 1 */, f);
            }
}

static void test_blob_roundtrip(void **state)
{
    uint8_t a[16], b[28], out[LITE_TRANSPORT_ADDR_MAX];
    memset(a, 0xA5, sizeof(a));
    memset(b, 0x5A, sizeof(b));
    const void *names[2] = {a, b};
    size_t lens[2] = {sizeof(a), sizeof(b)}, len = 0;
    assert_int_equal(lite_efa_blob_pack(out, sizeof(out), &len, 4242, 2, names, lens), 0);
    assert_int_equal(len, LITE_EFA_BLOB_HDR + 1 + 16 + 1 + 28);
    struct lite_efa_blob bl;
    assert_int_equal(lite_efa_blob_unpack(out, len, &bl), 0);
    assert_int_equal(bl.nrails, 2);
    assert_int_equal(bl.pid, 4242);
    assert_int_equal(bl.name_len[0], 16);
    assert_int_equal(bl.name_len[1], 28);
    assert_memory_equal(bl.name[0], a, 16);
    assert_memory_equal(bl.name[1], b, 28);
    /* every truncation and a trailing byte are refused */
    for (size_t l = 0; l < len; l++)
        assert_int_equal(lite_efa_blob_unpack(out, l, &bl), -EPROTO);
    assert_int_equal(lite_efa_blob_unpack(out, len + 1, &bl), -EPROTO);
    out[2] = 1; /* reserved byte */
    assert_int_equal(lite_efa_blob_unpack(out, len, &bl), -EPROTO);
    out[2] = 0;
    out[3] = 0x80;
    assert_int_equal(lite_efa_blob_unpack(out, len, &bl), -EPROTO);
    out[3] = 0;
    assert_int_equal(lite_efa_blob_unpack(out, len, &bl), 0);
    out[0] = 9; /* version */
    assert_int_equal(lite_efa_blob_unpack(out, len, &bl), -EPROTO);
}

static void test_blob_limits(void **state)
{
    /* EFA names are 32 bytes: 7 rails fit 256 bytes, 8 do not */
    assert_int_equal(lite_efa_blob_max_rails(32), 7);
    assert_int_equal(lite_efa_blob_max_rails(16), LITE_MAX_RAILS);
    assert_int_equal(lite_efa_blob_max_rails(0), 0);
    uint8_t n[32] = {0}, out[LITE_TRANSPORT_ADDR_MAX];
    const void *names[8] = {n, n, n, n, n, n, n, n};
    size_t lens[8] = {32, 32, 32, 32, 32, 32, 32, 32}, len;
    assert_int_equal(lite_efa_blob_pack(out, sizeof(out), &len, 1, 8, names, lens), -ENOSPC);
    assert_int_equal(lite_efa_blob_pack(out, sizeof(out), &len, 1, 7, names, lens), 0);
    assert_int_equal(lite_efa_blob_pack(out, sizeof(out), &len, 1, 0, names, lens), -EINVAL);
    lens[0] = 0;
    assert_int_equal(lite_efa_blob_pack(out, sizeof(out), &len, 1, 1, names, lens), -EINVAL);
}

static void test_hdr(void **state)
{
    (void)state;
    struct lite_efa_hdr h = {.type = LITE_EFA_T_MSG,
                             .channel = 1,
                             .flags = 0x81,
                             .credits = 0xBEEF,
                             .src = 70000,
                             .seq = 0xFFFFFFFFu,
                             .tag = 0x0123456789ABCDEFull,
                             .len = 8};
    /* A message: header then payload; the payload's length is what arrived after the header
     * (24 + 8 bytes: one cache line of shm's inline command, see efa_plan.h). */
    uint8_t b[LITE_EFA_BIG_HDR_LEN + 8];
    size_t n = lite_efa_hdr_encode(&h, b);
    assert_int_equal(n, LITE_EFA_HDR_LEN);
    assert_true(n + 8 <= 32);
    memset(b + n, 0x5A, 8);
    struct lite_efa_hdr g;
    assert_int_equal(lite_efa_hdr_decode(b, n + 8, &g), 0);
    assert_int_equal(g.type, h.type);
    assert_int_equal(g.channel, h.channel);
    assert_int_equal(g.flags, h.flags);
    assert_int_equal(g.credits, h.credits);
    assert_int_equal(g.src, h.src);
    assert_int_equal(g.seq, h.seq);
    assert_int_equal(g.tag, h.tag);
    assert_int_equal(g.len, 8);
    assert_int_equal(lite_efa_hdr_decode(b, n, &g), 0);
    assert_int_equal(g.len, 0);
    assert_int_equal(lite_efa_hdr_decode(b, n - 1, &g), -EPROTO);
    b[0] ^= 1;
    assert_int_equal(lite_efa_hdr_decode(b, n, &g), -EPROTO);
    b[0] ^= 1;
    b[6] = 1; /* reserved bytes must be zero */
    assert_int_equal(lite_efa_hdr_decode(b, n, &g), -EPROTO);
    b[6] = 0;
    b[1] = LITE_EFA_T_MAX + 1;
    assert_int_equal(lite_efa_hdr_decode(b, n, &g), -EPROTO);
    b[1] = 0;
    assert_int_equal(lite_efa_hdr_decode(b, n, &g), -EPROTO);

    /* A large message's header carries the announced length, and nothing else may follow. */
    h.type = LITE_EFA_T_BIG;
    h.len = 0x0000012345678901ull;
    n = lite_efa_hdr_encode(&h, b);
    assert_int_equal(n, LITE_EFA_BIG_HDR_LEN);
    assert_int_equal(lite_efa_hdr_decode(b, n, &g), 0);
    assert_int_equal(g.type, LITE_EFA_T_BIG);
    assert_int_equal(g.len, h.len);
    assert_int_equal(g.tag, h.tag);
    assert_int_equal(lite_efa_hdr_decode(b, n - 1, &g), -EPROTO);
    assert_int_equal(lite_efa_hdr_decode(b, LITE_EFA_HDR_LEN, &g), -EPROTO);
    assert_int_equal(lite_efa_hdr_decode(b, n + 1, &g), -EPROTO);
}

/* The second HELLO's flush targets: bytes off the network, so every malformed form is refused. */
static void test_flush_targets(void **state)
{
    struct lite_efa_flush f = {.nrails = 3}, g;
    for (uint32_t i = 0; i < 3; i++) {
        f.addr[i] = 0x7f0000001000ull + i;
        f.key[i] = (uint64_t)(i + 1) << 32;
    }
    uint8_t b[512];
    memset(b, 0xCC, sizeof(b));
    assert_int_equal(lite_efa_flush_pack(&f, b, sizeof(b)), LITE_EFA_FLUSH_LEN(3));
    assert_int_equal(LITE_EFA_FLUSH_LEN(3), 56);
    assert_int_equal(lite_efa_flush_unpack(b, LITE_EFA_FLUSH_LEN(3), &g), 0);
    assert_int_equal(g.nrails, 3);
    for (uint32_t i = 0; i < 3; i++) {
        assert_int_equal(g.addr[i], f.addr[i]);
        assert_int_equal(g.key[i], f.key[i]);
    }
    /* padding after the targets (the warm-up HELLO is eager-sized) is ignored */
    assert_int_equal(lite_efa_flush_unpack(b, sizeof(b), &g), 0);
    /* every truncation is refused */
    for (size_t l = 0; l < LITE_EFA_FLUSH_LEN(3); l++)
        assert_int_equal(lite_efa_flush_unpack(b, l, &g), -EPROTO);
    /* version, reserved bytes, rail count */
    b[0] = 2;
    assert_int_equal(lite_efa_flush_unpack(b, sizeof(b), &g), -EPROTO);
    b[0] = 0;
    assert_int_equal(lite_efa_flush_unpack(b, sizeof(b), &g), -EPROTO);
    b[0] = LITE_EFA_FLUSH_VERSION;
    for (int i = 2; i < 8; i++) {
        b[i] = 1;
        assert_int_equal(lite_efa_flush_unpack(b, sizeof(b), &g), -EPROTO);
        b[i] = 0;
    }
    b[1] = LITE_MAX_RAILS + 1;
    assert_int_equal(lite_efa_flush_unpack(b, sizeof(b), &g), -EPROTO);
    b[1] = LITE_MAX_RAILS;
    assert_int_equal(lite_efa_flush_unpack(b, LITE_EFA_FLUSH_LEN(LITE_MAX_RAILS) - 1, &g), -EPROTO);
    assert_int_equal(lite_efa_flush_unpack(b, LITE_EFA_FLUSH_LEN(LITE_MAX_RAILS), &g), 0);
    /* no targets: a peer that offers none */
    struct lite_efa_flush none = {.nrails = 0};
    assert_int_equal(lite_efa_flush_pack(&none, b, sizeof(b)), 8);
    assert_int_equal(lite_efa_flush_unpack(b, 8, &g), 0);
    assert_int_equal(g.nrails, 0);
    /* packing refuses what does not fit */
    assert_int_equal(lite_efa_flush_pack(&f, b, LITE_EFA_FLUSH_LEN(3) - 1), 0);
    f.nrails = LITE_MAX_RAILS + 1;
    assert_int_equal(lite_efa_flush_pack(&f, b, sizeof(b)), 0);
}

static void test_provider_names(void **state)
{
    char out[64];
    assert_int_equal(lite_efa_provider_name("tcp", out, sizeof(out)), 0);
    assert_string_equal(out, "tcp;ofi_rxm");
    assert_int_equal(lite_efa_provider_name("tcp+ofi_rxm", out, sizeof(out)), 0);
    assert_string_equal(out, "tcp;ofi_rxm");
    assert_int_equal(lite_efa_provider_name("tcp;ofi_rxm", out, sizeof(out)), 0);
    assert_string_equal(out, "tcp;ofi_rxm");
    assert_int_equal(lite_efa_provider_name("shm", out, sizeof(out)), 0);
    assert_string_equal(out, "shm");
    assert_int_equal(lite_efa_provider_name("efa", out, sizeof(out)), 0);
    assert_string_equal(out, "efa");
    assert_int_equal(lite_efa_provider_name("", out, sizeof(out)), -EINVAL);
    assert_int_equal(lite_efa_provider_name(NULL, out, sizeof(out)), -EINVAL);
    assert_int_equal(lite_efa_provider_name("tcp", out, 4), -EINVAL);
}

/* A PULL's page list: well-formed lists round-trip, malformed ones are refused, and the bounds
 * check refuses a segment that leaves the region (or wraps around its end). */
static void test_pull_list(void **state)
{
    (void)state;
    static uint8_t b[LITE_EFA_PULL_LEN(LITE_EFA_PULL_SEG_MAX + 1)];
    struct lite_efa_pull p;
    struct lite_efa_pull_seg g = {.src = 0x7f0000001000, .roff = 4096, .len = 8192, .pages = 2};
    lite_efa_pull_put_hdr(b, 0xC0C0, LITE_EFA_PULL_F_IMM, 3, 2, 77);
    lite_efa_pull_put_seg(b, 0, &g);
    g.roff = 0;
    g.len = 4096;
    g.pages = 1;
    lite_efa_pull_put_seg(b, 1, &g);
    assert_int_equal(lite_efa_pull_unpack(b, LITE_EFA_PULL_LEN(2), &p), 0);
    assert_int_equal(p.imm, 0xC0C0);
    assert_int_equal(p.pages, 6);
    assert_int_equal(p.key, 77);
    lite_efa_pull_seg(&p, 0, &g);
    assert_int_equal(g.roff, 4096);
    assert_int_equal(g.len, 8192);
    assert_int_equal(lite_efa_pull_check(&p, 12288), 0);
    assert_int_equal(lite_efa_pull_check(&p, 12287), -LITE_ERR_REMOTE_BOUNDS);
    assert_int_equal(lite_efa_pull_check(&p, 0), -LITE_ERR_REMOTE_BOUNDS);
    /* lengths other than header + nseg segments */
    for (size_t l = 0; l < LITE_EFA_PULL_LEN(3); l++)
        if (l != LITE_EFA_PULL_LEN(2))
            assert_int_equal(lite_efa_pull_unpack(b, l, &p), -EPROTO);
    /* a segment that wraps around the address space, or the region's end */
    g = (struct lite_efa_pull_seg){.src = 1, .roff = UINT64_MAX - 10, .len = 4096, .pages = 1};
    lite_efa_pull_put_seg(b, 1, &g);
    assert_int_equal(lite_efa_pull_unpack(b, LITE_EFA_PULL_LEN(2), &p), -EPROTO);
    g = (struct lite_efa_pull_seg){.src = UINT64_MAX - 10, .roff = 0, .len = 4096, .pages = 1};
    lite_efa_pull_put_seg(b, 1, &g);
    assert_int_equal(lite_efa_pull_unpack(b, LITE_EFA_PULL_LEN(2), &p), -EPROTO);
    /* empty segments, no pages, more pages than bytes */
    g = (struct lite_efa_pull_seg){.src = 1, .roff = 0, .len = 0, .pages = 1};
    lite_efa_pull_put_seg(b, 1, &g);
    assert_int_equal(lite_efa_pull_unpack(b, LITE_EFA_PULL_LEN(2), &p), -EPROTO);
    g = (struct lite_efa_pull_seg){.src = 1, .roff = 0, .len = 4, .pages = 0};
    lite_efa_pull_put_seg(b, 1, &g);
    assert_int_equal(lite_efa_pull_unpack(b, LITE_EFA_PULL_LEN(2), &p), -EPROTO);
    g.pages = 5;
    lite_efa_pull_put_seg(b, 1, &g);
    assert_int_equal(lite_efa_pull_unpack(b, LITE_EFA_PULL_LEN(2), &p), -EPROTO);
    g.pages = 4;
    lite_efa_pull_put_seg(b, 1, &g);
    assert_int_equal(lite_efa_pull_unpack(b, LITE_EFA_PULL_LEN(2), &p), 0);
    /* unknown flags, too many immediates, no segment, too many segments */
    lite_efa_pull_put_hdr(b, 0, 2, 0, 2, 77);
    assert_int_equal(lite_efa_pull_unpack(b, LITE_EFA_PULL_LEN(2), &p), -EPROTO);
    lite_efa_pull_put_hdr(b, 0, 0, LITE_EFA_PULL_PAGES - 5, 2, 77);
    assert_int_equal(lite_efa_pull_unpack(b, LITE_EFA_PULL_LEN(2), &p), -EPROTO);
    lite_efa_pull_put_hdr(b, 0, 0, LITE_EFA_PULL_PAGES - 6, 2, 77);
    assert_int_equal(lite_efa_pull_unpack(b, LITE_EFA_PULL_LEN(2), &p), 0);
    lite_efa_pull_put_hdr(b, 0, 0, 0, 0, 77);
    assert_int_equal(lite_efa_pull_unpack(b, LITE_EFA_PULL_LEN(0), &p), -EPROTO);
    g = (struct lite_efa_pull_seg){.src = 1, .roff = 0, .len = 1, .pages = 1};
    for (uint32_t i = 0; i <= LITE_EFA_PULL_SEG_MAX; i++)
        lite_efa_pull_put_seg(b, i, &g);
    lite_efa_pull_put_hdr(b, 0, 0, 0, LITE_EFA_PULL_SEG_MAX, 77);
    assert_int_equal(lite_efa_pull_unpack(b, LITE_EFA_PULL_LEN(LITE_EFA_PULL_SEG_MAX), &p), 0);
    lite_efa_pull_put_hdr(b, 0, 0, 0, LITE_EFA_PULL_SEG_MAX + 1, 77);
    assert_int_equal(lite_efa_pull_unpack(b, LITE_EFA_PULL_LEN(LITE_EFA_PULL_SEG_MAX + 1), &p),
                     -EPROTO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_single),     cmocka_unit_test(test_plan_striped),
        cmocka_unit_test(test_plan_exhaustive), cmocka_unit_test(test_blob_roundtrip),
        cmocka_unit_test(test_blob_limits),     cmocka_unit_test(test_hdr),
        cmocka_unit_test(test_provider_names),  cmocka_unit_test(test_flush_targets),
        cmocka_unit_test(test_pull_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
