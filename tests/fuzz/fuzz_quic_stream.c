/*
 * fuzz_quic_stream.c - what the quic backend decodes from a peer itself, without ngtcp2
 * (src/transports/quic/quic_frame.h): a connection's receive stream cut into the core's frames
 * (quic_rx_feed), fed once whole and once in pieces of fuzzer-chosen sizes, which must give the
 * same messages, bytes and verdict; and the HELLO's identity check (quic_hello_check), whose
 * every acceptance must name a rank that may dial this one with the right nonces; and a
 * connection's preamble (quic_preamble_decode, quic_preamble_link_check: HELLO then ACK, checked
 * against a link state the input chooses), whose acceptance must fit that link.
 *
 * Input: u8 selector (% 3: 0 stream, 1 HELLO alone, 2 preamble), then the case's bytes.
 */
#include "fuzz_check.h"
#include "transports/quic/quic_frame.h"

#define MAX_WORLD 16
#define BIG_MAX   (1u << 20) /* the harness's "core" refuses longer messages */

struct ctx {
    struct quic_hello_ctx hx;
    uint64_t peer_nonce[MAX_WORLD];
    uint64_t refuse_tag; /* a message with this tag is refused, as the core may */
};

static void read_ctx(struct fuzz_in *in, struct ctx *x)
{
    memset(x, 0, sizeof(*x));
    x->hx.rank = fuzz_u8(in) % MAX_WORLD;
    x->hx.world = x->hx.rank + 1 + fuzz_u8(in) % (MAX_WORLD - x->hx.rank);
    x->hx.nonce = fuzz_uint(in, 8);
    uint64_t base = fuzz_uint(in, 8);
    for (int r = 0; r < MAX_WORLD; r++)
        x->peer_nonce[r] = base + (uint64_t)r; /* a seed can match them */
    x->hx.peer_nonce = x->peer_nonce;
    x->hx.dialled = (int)(fuzz_u8(in) % (x->hx.world + 1)) - 1;
    uint8_t c = fuzz_u8(in);
    x->hx.cert_checked = c & 1;
    x->hx.cert_rank = (int)((c >> 1) % (x->hx.world + 1)) - 1;
    x->refuse_tag = fuzz_uint(in, 8);
}

/* What an accepted HELLO must satisfy. */
static void check_accepted(const struct quic_hello_ctx *x, const struct lite_wire_hdr *h, int r)
{
    FUZZ_CHECK(r >= 0 && r < x->world && r != x->rank);
    FUZZ_CHECK(h->tag == (uint64_t)r);
    FUZZ_CHECK(h->key == x->nonce && h->offset == x->peer_nonce[r]);
    FUZZ_CHECK(x->dialled >= 0 ? r == x->dialled : r < x->rank);
    FUZZ_CHECK(!x->cert_checked || x->cert_rank == r);
}

/* One run over the stream: what came up, folded into a hash. */
struct run {
    struct ctx *x;
    uint64_t hash, events;
    int hellos;
    uint8_t *big; /* the payload buffer of a long message being received */
    uint64_t big_len;
    bool big_open;
};

static void mix(struct run *r, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        r->hash = (r->hash ^ b[i]) * 0x100000001B3ull;
}

static void mix_hdr(struct run *r, int kind, const struct lite_msg_hdr *h)
{
    r->events++;
    mix(r, &kind, sizeof(kind));
    mix(r, &h->tag, sizeof(h->tag));
    mix(r, &h->len, sizeof(h->len));
    mix(r, &h->channel, 1);
    mix(r, &h->flags, 1);
    mix(r, &h->credits, 2);
}

static int on_hello(void *u, const struct lite_wire_hdr *h, char *why, size_t why_len)
{
    struct run *r = u;
    FUZZ_CHECK(r->hellos++ == 0); /* one HELLO, and only as the first frame */
    FUZZ_CHECK(r->events == 0);
    int rank = quic_hello_check(&r->x->hx, h, why, why_len);
    if (rank < 0) {
        FUZZ_CHECK(why[0] != '\0');
        return rank;
    }
    check_accepted(&r->x->hx, h, rank);
    r->events++;
    mix(r, &rank, sizeof(rank));
    return 0;
}

static int on_msg(void *u, const struct lite_msg_hdr *h, const uint8_t *p, char *why,
                  size_t why_len)
{
    struct run *r = u;
    FUZZ_CHECK(r->hellos == 1 && !r->big_open);
    FUZZ_CHECK(h->len <= QUIC_SMALL_MAX);
    mix_hdr(r, 1, h);
    mix(r, p, (size_t)h->len); /* every byte read: ASan sees a short buffer */
    if (h->tag == r->x->refuse_tag) {
        lite_fmt(why, why_len, "refused by the harness");
        return -LITE_ERR_PROTOCOL;
    }
    return 0;
}

static int on_begin(void *u, const struct lite_msg_hdr *h, void **dst, void **token)
{
    struct run *r = u;
    FUZZ_CHECK(r->hellos == 1 && !r->big_open);
    FUZZ_CHECK(h->len > QUIC_SMALL_MAX);
    mix_hdr(r, 2, h);
    if (h->len > BIG_MAX || h->tag == r->x->refuse_tag)
        return -EMSGSIZE;
    *token = r;
    r->big_open = true;
    r->big_len = h->len;
    if (h->tag & 1) { /* nowhere to go: the bytes are skipped */
        *dst = NULL;
        return 0;
    }
    r->big = malloc((size_t)h->len); /* exactly its length: ASan sees a write past it */
    FUZZ_CHECK(r->big != NULL);
    memset(r->big, 0xEE, (size_t)h->len);
    *dst = r->big;
    return 0;
}

static void on_end(void *u, void *token)
{
    struct run *r = u;
    FUZZ_CHECK(token == r && r->big_open);
    r->events++;
    if (r->big)
        mix(r, r->big, (size_t)r->big_len);
    free(r->big);
    r->big = NULL;
    r->big_open = false;
}

static const struct quic_rx_ops ops = {
    .hello = on_hello, .msg = on_msg, .begin = on_begin, .end = on_end};

/* Feed the stream in pieces: sizes from a generator seeded by the input (0: all at once). */
static int run_stream(struct ctx *x, const uint8_t *p, size_t n, uint32_t seed, struct run *r,
                      char *why, size_t why_len)
{
    memset(r, 0, sizeof(*r));
    r->x = x;
    r->hash = 0xCBF29CE484222325ull;
    struct quic_rx rx;
    memset(&rx, 0, sizeof(rx));
    int rc = 0;
    size_t off = 0;
    uint32_t s = seed;
    while (off < n && rc == 0) {
        size_t k = n - off;
        if (seed) {
            s = s * 1103515245u + 12345u;
            size_t cap = (s >> 16) % 4 == 0 ? 1 : (s >> 16) % 97 + 1; /* often tiny */
            if ((s >> 8) % 16 == 0)
                cap = 4096;
            k = k < cap ? k : cap;
        }
        rc = quic_rx_feed(&rx, &ops, r, p + off, k, why, why_len);
        off += k;
    }
    if (rc)
        FUZZ_CHECK(rc < 0 && why[0] != '\0');
    else
        FUZZ_CHECK(rx.hello_rx == (r->hellos == 1));
    free(r->big); /* a long message the stream ended inside */
    quic_rx_free(&rx);
    return rc;
}

static void check_stream(struct fuzz_in *in)
{
    struct ctx x;
    read_ctx(in, &x);
    uint32_t seed = (uint32_t)fuzz_uint(in, 4) | 1;
    char why_a[160] = "", why_b[160] = "";
    struct run a, b;
    int rc_a = run_stream(&x, in->p, in->n, 0, &a, why_a, sizeof(why_a));
    int rc_b = run_stream(&x, in->p, in->n, seed, &b, why_b, sizeof(why_b));
    /* However the packets cut the stream, the same frames come up with the same bytes, and
     * the same verdict. */
    FUZZ_CHECK(rc_a == rc_b);
    FUZZ_CHECK(a.events == b.events && a.hash == b.hash);
    FUZZ_CHECK(strcmp(why_a, why_b) == 0);
}

static void check_hello(struct fuzz_in *in)
{
    struct ctx x;
    read_ctx(in, &x);
    struct lite_wire_hdr h;
    memset(&h, 0, sizeof(h));
    h.type = LITE_WIRE_HELLO;
    h.tag = fuzz_u8(in) & 0x80 ? fuzz_uint(in, 8) : fuzz_u8(in) % (MAX_WORLD + 2);
    h.key = fuzz_u8(in) & 1 ? x.hx.nonce : fuzz_uint(in, 8);
    h.offset = fuzz_u8(in) & 1 && h.tag < MAX_WORLD ? x.peer_nonce[h.tag] : fuzz_uint(in, 8);
    char why[160] = "";
    int r = quic_hello_check(&x.hx, &h, why, sizeof(why));
    if (r >= 0)
        check_accepted(&x.hx, &h, r);
    else
        FUZZ_CHECK((r == -LITE_ERR_PROTOCOL || r == QUIC_ERR_REFUSE) && why[0] != '\0');
}

/* Context, link state (u8 flags: state, another connection, resumable; u32 link epoch, u32
 * this connection's epoch, u64 taken before, u64 queued), then the QUIC_PRE_LEN bytes. */
static void check_preamble(struct fuzz_in *in)
{
    struct ctx x;
    read_ctx(in, &x);
    uint8_t f = fuzz_u8(in);
    struct quic_link_view v = {.server =
                                   x.hx.dialled < 0, /* as in quic.c: the dialler is the client */
                               .state = f % 4,
                               .other_conn = f & 4,
                               .resumable = f & 8};
    v.link_epoch = fuzz_u32(in);
    v.conn_epoch = fuzz_u32(in);
    v.tx_acked = fuzz_u64(in);
    v.tx_end = fuzz_u64(in);
    if (in->n < QUIC_PRE_LEN)
        return;
    uint8_t *pre = malloc(QUIC_PRE_LEN); /* exactly its length, as quic.c gathers it */
    FUZZ_CHECK(pre != NULL);
    memcpy(pre, in->p, QUIC_PRE_LEN);
    char why[160] = "";
    struct quic_preamble p;
    memset(&p, 0xa5, sizeof(p));
    int r = quic_preamble_decode(&x.hx, pre, &p, why, sizeof(why));
    if (r < 0) {
        FUZZ_CHECK((r == -LITE_ERR_PROTOCOL || r == QUIC_ERR_REFUSE) && why[0] != '\0');
        free(pre);
        return;
    }
    /* What it decoded is what the two frames say, and the HELLO's sender may say it. */
    struct lite_wire_hdr h, a;
    const char *bad = NULL;
    FUZZ_CHECK(lite_wire_decode(pre, QUIC_FRAME_MAX, &h, &bad) == 0);
    FUZZ_CHECK(lite_wire_decode(pre + LITE_WIRE_HDR_LEN, QUIC_FRAME_MAX, &a, &bad) == 0);
    FUZZ_CHECK(h.type == LITE_WIRE_HELLO && h.len == 0);
    FUZZ_CHECK(a.type == LITE_WIRE_FENCE && a.tag == 0 && a.len == 0);
    check_accepted(&x.hx, &h, r);
    FUZZ_CHECK(p.rank == r && p.epoch == h.imm && p.applied == a.key);
    int rc = quic_preamble_link_check(&v, &p, why, sizeof(why));
    if (rc < 0) {
        FUZZ_CHECK((rc == -LITE_ERR_PROTOCOL || rc == QUIC_ERR_REFUSE) && why[0] != '\0');
    } else {
        FUZZ_CHECK(rc == 0);
        /* Resumes from what the peer took before, within what was sent. */
        FUZZ_CHECK(p.applied >= v.tx_acked && p.applied <= v.tx_end);
        if (!v.server) {
            FUZZ_CHECK(p.epoch == v.conn_epoch && !p.takeover);
        } else if (v.state == QUIC_LINK_INIT) {
            FUZZ_CHECK(p.epoch == 0 && !v.other_conn && !p.takeover);
        } else {
            /* A resume: of a link not lost, for a later epoch; an up link breaks first. */
            FUZZ_CHECK(v.state != QUIC_LINK_FAILED && v.resumable);
            FUZZ_CHECK(p.epoch > v.link_epoch);
            FUZZ_CHECK(p.takeover == (v.state == QUIC_LINK_UP));
        }
    }
    free(pre);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_in in = {data, size};
    switch (fuzz_u8(&in) % 3) {
    case 0:
        check_stream(&in);
        break;
    case 1:
        check_hello(&in);
        break;
    default:
        check_preamble(&in);
        break;
    }
    return 0;
}
