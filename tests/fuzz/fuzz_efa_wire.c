/*
 * fuzz_efa_wire.c - what the EFA backend reads off the network, without libfabric: the address
 * blob every rank publishes (lite_efa_blob_unpack), the message header in front of every eager
 * payload (lite_efa_hdr_decode), the flush targets of the second HELLO (lite_efa_flush_unpack),
 * the page list of a PULL and its check against a region (lite_efa_pull_unpack/_check);
 * and the provider name a user sets (lite_efa_provider_name) and the striping plan
 * (lite_efa_plan) that user sizes feed.
 *
 * Input: u8 selector, then that function's bytes.
 */
#include "fuzz_check.h"
#include "transports/efa/efa_plan.h"

static void check_blob(const uint8_t *in, size_t len)
{
    struct lite_efa_blob b;
    memset(&b, 0, sizeof(b));
    int rc = lite_efa_blob_unpack(in, len, &b);
    if (rc != 0) {
        FUZZ_CHECK(rc == -EPROTO);
        return;
    }
    FUZZ_CHECK(b.nrails >= 1 && b.nrails <= LITE_MAX_RAILS);
    FUZZ_CHECK(b.pid == lite_get32(in + 4));
    /* Every name lies inside the blob, one after the other, and they end where it ends. */
    size_t p = LITE_EFA_BLOB_HDR;
    const void *names[LITE_MAX_RAILS];
    for (uint32_t i = 0; i < b.nrails; i++) {
        FUZZ_CHECK(b.name_len[i] >= 1 && b.name_len[i] <= 255);
        FUZZ_CHECK(b.name[i] == in + p + 1);
        p += 1 + b.name_len[i];
        FUZZ_CHECK(p <= len);
        names[i] = b.name[i];
    }
    FUZZ_CHECK(p == len);
    /* Packing it again gives the same bytes, but for the two reserved ones (the unpacker does
     * not look at them; the packer writes zeros). */
    uint8_t out[LITE_TRANSPORT_ADDR_MAX + 300];
    size_t olen = 0;
    rc = lite_efa_blob_pack(out, sizeof(out), &olen, b.pid, b.nrails, names, b.name_len);
    if (len > LITE_TRANSPORT_ADDR_MAX) {
        FUZZ_CHECK(rc == -ENOSPC); /* too long for the bootstrap: never sent */
        return;
    }
    FUZZ_CHECK(rc == 0 && olen == len);
    FUZZ_CHECK(out[0] == in[0] && out[1] == in[1] && out[2] == 0 && out[3] == 0);
    FUZZ_CHECK(memcmp(out + 4, in + 4, len - 4) == 0);
}

static void check_hdr(const uint8_t *in, size_t got)
{
    struct lite_efa_hdr h;
    memset(&h, 0xa5, sizeof(h));
    int rc = lite_efa_hdr_decode(in, got, &h);
    if (rc != 0) {
        FUZZ_CHECK(rc == -EPROTO);
        return;
    }
    FUZZ_CHECK(got >= LITE_EFA_HDR_LEN);
    FUZZ_CHECK(h.type >= 1 && h.type <= LITE_EFA_T_MAX);
    if (h.type == LITE_EFA_T_BIG)
        FUZZ_CHECK(got == LITE_EFA_BIG_HDR_LEN);
    else
        FUZZ_CHECK(h.len == got - LITE_EFA_HDR_LEN); /* the payload is what arrived, no more */
    uint8_t out[LITE_EFA_BIG_HDR_LEN];
    size_t n = lite_efa_hdr_encode(&h, out);
    FUZZ_CHECK(n == (h.type == LITE_EFA_T_BIG ? LITE_EFA_BIG_HDR_LEN : LITE_EFA_HDR_LEN));
    FUZZ_CHECK(memcmp(out, in, n) == 0);
}

static void check_flush(const uint8_t *in, size_t len)
{
    struct lite_efa_flush f;
    memset(&f, 0xa5, sizeof(f));
    int rc = lite_efa_flush_unpack(in, len, &f);
    if (rc != 0) {
        FUZZ_CHECK(rc == -EPROTO);
        return;
    }
    FUZZ_CHECK(f.nrails <= LITE_MAX_RAILS);
    FUZZ_CHECK(len >= LITE_EFA_FLUSH_LEN(f.nrails));
    for (uint32_t i = f.nrails; i < LITE_MAX_RAILS; i++)
        FUZZ_CHECK(f.addr[i] == 0 && f.key[i] == 0);
    uint8_t out[LITE_EFA_FLUSH_LEN(LITE_MAX_RAILS)];
    size_t n = lite_efa_flush_pack(&f, out, sizeof(out));
    FUZZ_CHECK(n == LITE_EFA_FLUSH_LEN(f.nrails));
    FUZZ_CHECK(memcmp(out, in, n) == 0);
}

static void check_provider(struct fuzz_in *in)
{
    size_t cap = fuzz_u8(in) % 80;
    char name[300], out[80];
    fuzz_str(in, name, sizeof(name));
    memset(out, 0x7f, sizeof(out));
    int rc = lite_efa_provider_name(name, out, cap);
    if (rc != 0) {
        FUZZ_CHECK(rc == -EINVAL);
        return;
    }
    FUZZ_CHECK(name[0] != '\0');
    FUZZ_CHECK(memchr(out, 0, cap) != NULL);
    FUZZ_CHECK(strcmp(out, "tcp;ofi_rxm") == 0 || strcmp(out, name) == 0);
}

/* The plan covers the write exactly, in order, once, over distinct rails, on aligned cuts. */
static void check_plan(struct fuzz_in *in)
{
    uint64_t len = fuzz_u64(in) & ((1ull << 48) - 1); /* a buffer in a 48-bit address space */
    uint32_t nrails = fuzz_u8(in) % (LITE_MAX_RAILS + 1);
    uint64_t stripe_min = fuzz_u64(in) & ((1ull << 40) - 1); /* LITETX_EFA_STRIPE_MIN's range */
    uint64_t align = 1ull << (fuzz_u8(in) % 24);
    if (fuzz_u8(in) & 1)
        align = fuzz_u32(in); /* not a power of two: taken as 1 */
    uint32_t first = fuzz_u32(in);
    struct lite_efa_stripe s[LITE_MAX_RAILS];
    uint32_t n = lite_efa_plan(len, nrails, stripe_min, align, first, s);
    uint32_t rails = nrails ? nrails : 1;
    FUZZ_CHECK(n >= 1 && n <= rails);
    uint64_t off = 0;
    bool pow2 = align && !(align & (align - 1));
    for (uint32_t k = 0; k < n; k++) {
        FUZZ_CHECK(s[k].off == off);
        FUZZ_CHECK(s[k].rail == (first + k) % rails);
        FUZZ_CHECK(len == 0 || s[k].len > 0);
        if (pow2 && k + 1 < n)
            FUZZ_CHECK((off + s[k].len) % align == 0);
        off += s[k].len;
    }
    FUZZ_CHECK(off == len);
}

/* A page list: accepted only when well-formed, and then every segment it lets through lies in
 * the region and packs back to the same bytes. Input: u64 region length, then the payload. */
static void check_pull(const uint8_t *in, size_t len)
{
    if (len < 8)
        return;
    uint64_t region = lite_get64(in);
    in += 8;
    len -= 8;
    struct lite_efa_pull p;
    memset(&p, 0xa5, sizeof(p));
    int rc = lite_efa_pull_unpack(in, len, &p);
    if (rc != 0) {
        FUZZ_CHECK(rc == -EPROTO);
        return;
    }
    FUZZ_CHECK(p.nseg >= 1 && p.nseg <= LITE_EFA_PULL_SEG_MAX);
    FUZZ_CHECK(len == LITE_EFA_PULL_LEN(p.nseg));
    FUZZ_CHECK(p.pages <= LITE_EFA_PULL_PAGES && p.pages >= p.extra + p.nseg);
    FUZZ_CHECK((p.flags & ~LITE_EFA_PULL_F_IMM) == 0);
    bool inside = true;
    for (uint32_t i = 0; i < p.nseg; i++) {
        struct lite_efa_pull_seg g;
        lite_efa_pull_seg(&p, i, &g);
        FUZZ_CHECK(g.len >= 1 && g.pages >= 1 && g.pages <= g.len);
        if (g.roff + g.len > region || g.roff + g.len < g.roff)
            inside = false;
    }
    rc = lite_efa_pull_check(&p, region);
    FUZZ_CHECK(inside ? rc == 0 : rc == -LITE_ERR_REMOTE_BOUNDS);
    static uint8_t out[LITE_EFA_PULL_LEN(LITE_EFA_PULL_SEG_MAX)];
    lite_efa_pull_put_hdr(out, p.imm, p.flags, p.extra, p.nseg, p.key);
    for (uint32_t i = 0; i < p.nseg; i++) {
        struct lite_efa_pull_seg g;
        lite_efa_pull_seg(&p, i, &g);
        lite_efa_pull_put_seg(out, i, &g);
    }
    FUZZ_CHECK(memcmp(out, in, len) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    struct fuzz_in in = {data + 1, size - 1};
    switch (data[0] % 6) {
    case 0:
        check_blob(data + 1, size - 1);
        break;
    case 1:
        check_hdr(data + 1, size - 1);
        break;
    case 2:
        check_flush(data + 1, size - 1);
        break;
    case 3:
        check_provider(&in);
        break;
    case 4:
        check_plan(&in);
        break;
    default:
        check_pull(data + 1, size - 1);
        break;
    }
    return 0;
}
