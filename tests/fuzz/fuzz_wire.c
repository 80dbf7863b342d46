/*
 * fuzz_wire.c - the stream transports' frame header (lite_wire_decode), whose 48 bytes come
 * straight off a peer's socket, and the socket address a peer publishes in its address blob
 * (lite_sock_unpack).
 *
 * Input: 48 header bytes, then optionally the receiver's payload limit (u64), then a packed
 * socket address (u8 family, 18 bytes).
 */
#include "fuzz_check.h"
#include "lite_int.h"

#include <netinet/in.h>

static bool is_control(uint8_t type)
{
    return type == LITE_WIRE_HELLO || type == LITE_WIRE_BYE || type == LITE_WIRE_RMA_ACK ||
           type == LITE_WIRE_FENCE;
}

static void check_frame(const uint8_t in[LITE_WIRE_HDR_LEN], uint64_t max_len)
{
    struct lite_wire_hdr h;
    memset(&h, 0xa5, sizeof(h));
    const char *why = NULL;
    int rc = lite_wire_decode(in, max_len, &h, &why);
    if (rc != 0) {
        FUZZ_CHECK(rc == -LITE_ERR_PROTOCOL);
        FUZZ_CHECK(why != NULL && why[0] != '\0');
        return;
    }
    /* What the receivers rely on without checking again. */
    FUZZ_CHECK(h.type >= LITE_WIRE_HELLO && h.type <= LITE_WIRE_FENCE);
    FUZZ_CHECK(h.channel < LITE_CHAN_COUNT);
    FUZZ_CHECK(h.len <= max_len);
    FUZZ_CHECK(lite_wire_payload(&h) <= max_len);
    FUZZ_CHECK(!is_control(h.type) || h.len == 0);
    FUZZ_CHECK(h.status <= 0);
    FUZZ_CHECK(h.offset <= UINT64_MAX - h.len);
    if (h.type == LITE_WIRE_WRITE)
        FUZZ_CHECK((h.flags & ~(LITE_WIRE_F_IMM | LITE_WIRE_F_NOACK | LITE_WIRE_F_STICKY)) == 0);
    else if (h.type == LITE_WIRE_HELLO)
        FUZZ_CHECK((h.flags & ~LITE_WIRE_F_BULK) == 0);
    else if (h.type != LITE_WIRE_MSG)
        FUZZ_CHECK(h.flags == 0);
    /* Every byte of a valid header is a field: encoding what was decoded gives it back. */
    uint8_t out[LITE_WIRE_HDR_LEN];
    lite_wire_encode(&h, out);
    FUZZ_CHECK(memcmp(out, in, LITE_WIRE_HDR_LEN) == 0);
}

/* A header the sender encodes from arbitrary fields is either refused or read back unchanged. */
static void check_encode(struct fuzz_in *in)
{
    struct lite_wire_hdr h = {.type = fuzz_u8(in),
                              .channel = fuzz_u8(in),
                              .flags = fuzz_u8(in),
                              .credits = (uint16_t)fuzz_uint(in, 2),
                              .tag = fuzz_u64(in),
                              .len = fuzz_u64(in),
                              .key = fuzz_u64(in),
                              .offset = fuzz_u64(in),
                              .imm = fuzz_u32(in),
                              .status = (int32_t)fuzz_u32(in)};
    uint8_t b[LITE_WIRE_HDR_LEN];
    lite_wire_encode(&h, b);
    struct lite_wire_hdr d;
    const char *why = NULL;
    if (lite_wire_decode(b, UINT64_MAX, &d, &why) != 0)
        return;
    FUZZ_CHECK(d.type == h.type && d.channel == h.channel && d.flags == h.flags &&
               d.credits == h.credits && d.tag == h.tag && d.len == h.len && d.key == h.key &&
               d.offset == h.offset && d.imm == h.imm && d.status == h.status);
}

static void check_sockaddr(struct fuzz_in *in)
{
    uint8_t family = fuzz_u8(in), packed[LITE_SOCK_PACKED];
    for (size_t i = 0; i < sizeof(packed); i++)
        packed[i] = fuzz_u8(in);
    struct sockaddr_storage ss, ss2;
    socklen_t sl = 0, sl2 = 0;
    int rc = lite_sock_unpack(family, packed, &ss, &sl);
    if (rc != 0) {
        FUZZ_CHECK(rc == -LITE_ERR_PROTOCOL);
        FUZZ_CHECK(family != AF_INET && family != AF_INET6);
        return;
    }
    FUZZ_CHECK(ss.ss_family == family);
    FUZZ_CHECK(sl ==
               (family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6)));
    uint8_t f2, again[LITE_SOCK_PACKED];
    lite_sock_pack(&ss, &f2, again);
    FUZZ_CHECK(f2 == family);
    FUZZ_CHECK(memcmp(again, packed, family == AF_INET ? 6 : LITE_SOCK_PACKED) == 0);
    FUZZ_CHECK(lite_sock_unpack(f2, again, &ss2, &sl2) == 0);
    FUZZ_CHECK(sl2 == sl && memcmp(&ss, &ss2, sl) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < LITE_WIRE_HDR_LEN)
        return 0;
    struct fuzz_in in = {data + LITE_WIRE_HDR_LEN, size - LITE_WIRE_HDR_LEN};
    /* The TCP transport's limit by default; the input may pick another. */
    uint64_t max_len = in.n >= 8 ? fuzz_u64(&in) : (uint64_t)1 << 30;
    check_frame(data, max_len);
    check_frame(data, UINT64_MAX);
    check_frame(data, 0);
    check_sockaddr(&in);
    struct fuzz_in whole = {data, size};
    check_encode(&whole);
    return 0;
}
