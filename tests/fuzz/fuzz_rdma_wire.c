/*
 * fuzz_rdma_wire.c - what the RDMA backend reads from a peer, without a device: the SEND frame
 * header (lite_rdma_frame_decode), the receive-window grants a peer writes into the mailbox
 * (lite_rdma_window_grant, the mailbox word), the GID choice over a port's table and the
 * LITETX_RDMA_GID_INDEX override, IP-to-GID conversion, the striping plan, and the link
 * resumption messages of the side channel (lite_rdma_resume_decode + the applied-frames check,
 * lite_rdma_resumed_decode + lite_rdma_resumed_check).
 *
 * Input: u8 selector, then that function's bytes.
 */
#include <arpa/inet.h>

#include "fuzz_check.h"
#include "lite_int.h"
#include "transports/rdma/rdma_logic.h"

static void check_frame(struct fuzz_in *in)
{
    uint32_t slot = 32 + fuzz_u32(in) % (1u << 20); /* a receive buffer holds a FIRST header */
    const uint8_t *b = in->p;
    size_t n = in->n;
    struct lite_rdma_frame f;
    memset(&f, 0xa5, sizeof(f));
    const char *why = NULL;
    int rc = lite_rdma_frame_decode(b, n, &f, &why);
    if (rc < 0) {
        FUZZ_CHECK(rc == -EPROTO);
        FUZZ_CHECK(why != NULL && why[0] != '\0');
        return;
    }
    FUZZ_CHECK(rc == LITE_RDMA_CONT_HDR || rc == LITE_RDMA_FIRST_HDR);
    FUZZ_CHECK((size_t)rc <= n);
    if (rc == LITE_RDMA_FIRST_HDR) {
        FUZZ_CHECK(f.type == LITE_RDMA_FRAME_FIRST);
        /* The fragment never carries more than the message it starts. */
        FUZZ_CHECK(n - LITE_RDMA_FIRST_HDR <= f.len);
        uint64_t frags = lite_rdma_frag_count(f.len, slot);
        uint64_t first = slot - LITE_RDMA_FIRST_HDR, cont = slot - LITE_RDMA_CONT_HDR;
        FUZZ_CHECK(frags >= 1);
        /* Enough fragments for the message, and not one more. */
        uint64_t rest = f.len > first ? f.len - first : 0;
        FUZZ_CHECK(frags - 1 == rest / cont + (rest % cont != 0));
    } else {
        FUZZ_CHECK(f.type == LITE_RDMA_FRAME_CONT);
    }
    uint8_t out[LITE_RDMA_FIRST_HDR];
    FUZZ_CHECK(lite_rdma_frame_encode(&f, out) == (size_t)rc);
    FUZZ_CHECK(memcmp(out, b, (size_t)rc) == 0);
}

/* A sender's window driven by its own posts and a peer's (possibly lying) grants. */
static void check_window(struct fuzz_in *in)
{
    uint32_t depth = lite_rdma_recv_depth(fuzz_u8(in));
    struct lite_rdma_window w;
    struct lite_rdma_rxacct a;
    lite_rdma_window_init(&w, depth);
    lite_rdma_rxacct_init(&a, depth);
    uint16_t epoch = (uint16_t)fuzz_uint(in, 2);
    while (in->n > 0) {
        uint8_t op = fuzz_u8(in);
        uint64_t before = w.granted;
        switch (op % 5) {
        case 0: {
            uint32_t k = fuzz_u8(in);
            uint64_t avail = lite_rdma_window_avail(&w);
            bool ok = lite_rdma_window_take(&w, k);
            FUZZ_CHECK(ok == (avail >= k));
            break;
        }
        case 1: {
            /* A grant as it arrives: a mailbox word, epoch then count. */
            uint64_t word = fuzz_u64(in);
            if (lite_rdma_mbox_epoch(word) != epoch)
                break; /* a stale word is ignored by the backend */
            uint64_t total = lite_rdma_mbox_count(word);
            int rc = lite_rdma_window_grant(&w, total);
            FUZZ_CHECK(rc == (total > w.used ? -EPROTO : (depth + total > before ? 1 : 0)));
            break;
        }
        case 2:
            lite_rdma_rxacct_consume(&a);
            break;
        case 3:
            lite_rdma_rxacct_repost(&a);
            break;
        default:
            if (lite_rdma_rxacct_due(&a)) {
                uint64_t r = lite_rdma_rxacct_report(&a);
                uint64_t word = lite_rdma_mbox_pack(epoch, r);
                FUZZ_CHECK(lite_rdma_mbox_epoch(word) == epoch && lite_rdma_mbox_count(word) == r);
            }
            break;
        }
        /* Never more posted than the peer has receives for; grants only grow. */
        FUZZ_CHECK(w.used <= w.granted);
        FUZZ_CHECK(w.granted >= before);
        FUZZ_CHECK(a.reported <= a.reposted && a.reposted <= a.consumed);
    }
}

static void check_gid(struct fuzz_in *in)
{
    char host[80];
    uint8_t gid[16], again[16];
    fuzz_str(in, host, sizeof(host));
    if (lite_rdma_gid_from_ip(host, gid) != 0)
        return;
    char s[64];
    lite_rdma_gid_str(gid, s, sizeof(s));
    FUZZ_CHECK(lite_rdma_gid_from_ip(s, again) == 0 && memcmp(gid, again, 16) == 0);
    struct in_addr a4;
    if (inet_pton(AF_INET, host, &a4) == 1)
        FUZZ_CHECK(lite_rdma_gid_is_v4(gid) && memcmp(gid + 12, &a4, 4) == 0);
}

static void check_choose(struct fuzz_in *in)
{
    struct lite_rdma_gid_cand c[12];
    size_t n = fuzz_u8(in) % 13;
    int override = (int8_t)fuzz_u8(in);
    uint8_t bind[16];
    for (int i = 0; i < 16; i++)
        bind[i] = fuzz_u8(in);
    char netdev[32];
    fuzz_str(in, netdev, sizeof(netdev));
    for (size_t i = 0; i < n; i++) {
        c[i].index = fuzz_u8(in);
        for (int k = 0; k < 16; k++)
            c[i].gid[k] = fuzz_u8(in);
        c[i].type = fuzz_u8(in) % 4;
        fuzz_str(in, c[i].netdev, sizeof(c[i].netdev));
    }
    uint32_t out = UINT32_MAX;
    char why[256];
    memset(why, 0x7f, sizeof(why));
    int rc = lite_rdma_gid_choose(c, n, bind, netdev, override, &out, why, sizeof(why));
    if (rc != 0) {
        FUZZ_CHECK(rc == -LITE_ERR_CONFIG);
        FUZZ_CHECK(memchr(why, 0, sizeof(why)) != NULL);
        return;
    }
    bool found = false;
    for (size_t i = 0; i < n; i++)
        found |= c[i].index == out;
    FUZZ_CHECK(found);
    if (override >= 0)
        FUZZ_CHECK(out == (uint32_t) override);
}

/* Every byte in exactly one piece, in order, none over the device's largest message. */
static void check_plan(struct fuzz_in *in)
{
    uint64_t len = fuzz_u64(in) & ((1ull << 48) - 1);
    uint32_t nrails = fuzz_u8(in) % (LITE_MAX_RAILS + 1);
    uint32_t first = fuzz_u32(in);
    uint64_t stripe_min = fuzz_u64(in) & ((1ull << 40) - 1);
    uint64_t align = fuzz_u32(in) % (1u << 22);
    uint64_t max_piece = fuzz_u64(in) & ((1ull << 32) - 1);
    if (max_piece && len / max_piece > 4096)
        max_piece = len / 4096 + 1; /* keep the plan small enough to check */
    size_t count = lite_rdma_stripe_plan(len, nrails, first, stripe_min, align, max_piece, NULL, 0);
    FUZZ_CHECK(count >= 1 && count <= 8 * 4097);
    struct lite_rdma_piece *p = malloc(count * sizeof(*p));
    FUZZ_CHECK(p != NULL);
    FUZZ_CHECK(lite_rdma_stripe_plan(len, nrails, first, stripe_min, align, max_piece, p, count) ==
               count);
    uint32_t rails = nrails ? nrails : 1;
    uint64_t off = 0;
    for (size_t i = 0; i < count; i++) {
        FUZZ_CHECK(p[i].off == off);
        FUZZ_CHECK(p[i].rail < rails);
        FUZZ_CHECK(max_piece == 0 || p[i].len <= max_piece);
        FUZZ_CHECK(len == 0 || p[i].len > 0);
        off += p[i].len;
    }
    FUZZ_CHECK(off == len);
    free(p);
}

/* u8 the link's rails, u8 kind (bit 0: RESUMED), u32 link epoch, u8 state (bit 0 ready, bit 1
 * retry, bit 2 frames kept), u64 frames sent, u64 first kept; then the message's bytes. */
static void check_resume(struct fuzz_in *in)
{
    uint32_t nrails = fuzz_u8(in) % (LITE_MAX_RAILS + 1);
    uint8_t kind = fuzz_u8(in);
    uint32_t link_epoch = fuzz_u32(in);
    uint8_t st = fuzz_u8(in);
    uint64_t tx_seq = fuzz_u64(in), kept_seq = fuzz_u64(in);
    size_t len = in->n < 65535 ? in->n : 65535; /* a side-channel frame's payload is u16 */
    uint8_t *p = malloc(len ? len : 1);         /* exactly its length: ASan sees a read past it */
    FUZZ_CHECK(p != NULL);
    memcpy(p, in->p, len);
    if (kind & 1) {
        uint32_t e = 0xdeadbeef;
        int rc = lite_rdma_resumed_decode(p, len, &e);
        if (rc < 0) {
            FUZZ_CHECK(rc == -LITE_ERR_PROTOCOL && len != 4);
        } else {
            FUZZ_CHECK(len == 4 && e == lite_get32(p));
            bool ready = st & 1, retry = st & 2;
            int v = lite_rdma_resumed_check(ready, retry, link_epoch, e);
            /* Up only for this epoch with the QPs connected; an error only for a RESUMED this
             * side cannot have asked for yet; a late one is ignored. */
            FUZZ_CHECK(v == 1 || v == 0 || v == -LITE_ERR_PROTOCOL);
            if (v == 1)
                FUZZ_CHECK(ready && !retry && e == link_epoch);
            if (v == -LITE_ERR_PROTOCOL)
                FUZZ_CHECK(e >= link_epoch && !(ready && retry));
            if (v == 0)
                FUZZ_CHECK((ready && retry) || e < link_epoch);
        }
        free(p);
        return;
    }
    struct lite_rdma_resume m;
    memset(&m, 0xa5, sizeof(m));
    const char *why = NULL;
    int rc = lite_rdma_resume_decode(p, len, nrails, &m, &why);
    if (rc < 0) {
        FUZZ_CHECK(rc == -LITE_ERR_PROTOCOL && why != NULL && why[0] != '\0');
        free(p);
        return;
    }
    /* Exactly the layout for this link's rails, every field where the sender put it. */
    FUZZ_CHECK(m.nrails == nrails && nrails <= LITE_RDMA_RESUME_MAX_RAIL);
    size_t eps = LITE_RDMA_RESUME_EP_LEN * (1 + 2 * (size_t)nrails);
    FUZZ_CHECK(len == LITE_RDMA_RESUME_FIXED + 8 * (size_t)nrails + eps);
    FUZZ_CHECK(m.epoch == lite_get32(p) && lite_get32(p + 4) == nrails);
    FUZZ_CHECK(m.applied == lite_get64(p + 8));
    for (uint32_t r = 0; r < nrails; r++)
        FUZZ_CHECK(m.imm_applied[r] == lite_get64(p + LITE_RDMA_RESUME_FIXED + 8 * r));
    FUZZ_CHECK(m.eps >= p && m.eps + eps == p + len);
    volatile uint32_t sum = 0;
    for (size_t i = 0; i < eps; i++)
        sum += m.eps[i]; /* every byte read: ASan sees one past the message */
    (void)sum;
    /* The applied count (taken as after the drop): only where this side's frames resume. */
    bool kept = st & 4;
    if (lite_rdma_resume_frames_ok(m.applied, tx_seq, kept, kept_seq)) {
        FUZZ_CHECK(m.applied <= tx_seq);
        FUZZ_CHECK(m.applied == (kept ? kept_seq : tx_seq));
    } else {
        FUZZ_CHECK(m.applied > tx_seq || m.applied != (kept ? kept_seq : tx_seq));
    }
    free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    struct fuzz_in in = {data + 1, size - 1};
    switch (data[0] % 6) {
    case 0:
        check_frame(&in);
        break;
    case 1:
        check_window(&in);
        break;
    case 2:
        check_gid(&in);
        break;
    case 3:
        check_choose(&in);
        break;
    case 4:
        check_plan(&in);
        break;
    default:
        check_resume(&in);
        break;
    }
    return 0;
}
