/*
 * efa_plan.h - the EFA backend's pure logic, with no libfabric in sight, so unit tests
 * (tests/unit/test_efa_plan.c) reach it whether or not the backend is built:
 *   - the striping plan that cuts a large write into one stripe per rail,
 *   - the address blob that packs every rail's fi_getname() into one bootstrap blob,
 *   - the 32-byte message header that travels in front of every eager payload,
 *   - the flush targets a peer announces in its second HELLO (batched acknowledgements),
 *   - the page list of a paged write the target copies itself (PULL),
 *   - the spelling of provider names ("tcp" means libfabric's "tcp;ofi_rxm").
 */
#ifndef LITE_EFA_PLAN_H
#define LITE_EFA_PLAN_H

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "tp_support.h" /* lite_put32/64, lite_get32/64: little-endian fields */
#include "litetx/transport.h"

/* ---- striping ---- */

struct lite_efa_stripe {
    uint64_t off; /* offset of the stripe in the transfer */
    uint64_t len;
    uint32_t rail;
};

/*
 * Cut a `len`-byte write into stripes, one per rail at most, none shorter than `stripe_min`
 * (except the last, which takes the remainder). Stripe boundaries fall on multiples of `align`
 * (a power of two) so each rail moves whole pages. Rails are assigned round-robin from
 * `first_rail`, so successive writes spread over all rails even when each gets one stripe.
 * Returns the number of stripes written to out[] (1 .. nrails; 1 when len == 0).
 */
static inline uint32_t lite_efa_plan(uint64_t len, uint32_t nrails, uint64_t stripe_min,
                                     uint64_t align, uint32_t first_rail,
                                     struct lite_efa_stripe *out)
{
    if (nrails == 0)
        nrails = 1;
    if (align == 0 || (align & (align - 1)) != 0)
        align = 1;
    if (stripe_min < align)
        stripe_min = align;
    uint64_t n = len / stripe_min;
    if (n > nrails)
        n = nrails;
    if (n < 1)
        n = 1;
    /* ceil(len / n), rounded up to the alignment */
    uint64_t each = len / n + (len % n != 0);
    each = (each + align - 1) & ~(align - 1);
    uint32_t k = 0;
    for (uint64_t off = 0; k < n && (off < len || k == 0); k++) {
        uint64_t l = len - off < each ? len - off : each;
        out[k].off = off;
        out[k].len = l;
        out[k].rail = (first_rail + k) % nrails;
        off += l;
    }
    return k;
}

/* ---- address blob ---- */

/*
 * Layout (LITE_TRANSPORT_ADDR_MAX bytes at most):
 *   u8 version | u8 nrails | u16 0 | u32 pid (shared-memory peers watch it for liveness)
 *   then per rail: u8 name length | name bytes (fi_getname() of that rail's endpoint)
 */
#define LITE_EFA_BLOB_VERSION 2 /* 2: the 24-byte message header; ranks of mixed builds refuse */
#define LITE_EFA_BLOB_HDR     8

struct lite_efa_blob {
    uint32_t nrails;
    uint32_t pid;
    const uint8_t *name[LITE_MAX_RAILS];
    size_t name_len[LITE_MAX_RAILS];
};

/* Most rails whose names of `name_len` bytes fit in one blob. */
static inline uint32_t lite_efa_blob_max_rails(size_t name_len)
{
    if (name_len == 0 || name_len > 255)
        return 0;
    size_t n = (LITE_TRANSPORT_ADDR_MAX - LITE_EFA_BLOB_HDR) / (1 + name_len);
    return n > LITE_MAX_RAILS ? LITE_MAX_RAILS : (uint32_t)n;
}

/* Pack; 0, -EINVAL (bad rail count or name) or -ENOSPC (does not fit in cap). */
static inline int lite_efa_blob_pack(uint8_t *out, size_t cap, size_t *len, uint32_t pid,
                                     uint32_t nrails, const void *const *names, const size_t *lens)
{
    if (nrails == 0 || nrails > LITE_MAX_RAILS)
        return -EINVAL;
    size_t need = LITE_EFA_BLOB_HDR;
    for (uint32_t i = 0; i < nrails; i++) {
        if (lens[i] == 0 || lens[i] > 255)
            return -EINVAL;
        need += 1 + lens[i];
    }
    if (need > cap || need > LITE_TRANSPORT_ADDR_MAX)
        return -ENOSPC;
    out[0] = LITE_EFA_BLOB_VERSION;
    out[1] = (uint8_t)nrails;
    out[2] = out[3] = 0;
    lite_put32(out + 4, pid);
    size_t p = LITE_EFA_BLOB_HDR;
    for (uint32_t i = 0; i < nrails; i++) {
        out[p++] = (uint8_t)lens[i];
        memcpy(out + p, names[i], lens[i]);
        p += lens[i];
    }
    *len = p;
    return 0;
}

/* Unpack (pointers into `in`); -EPROTO for anything malformed. */
static inline int lite_efa_blob_unpack(const uint8_t *in, size_t len, struct lite_efa_blob *b)
{
    /* Bytes 2-3 are reserved as zero: a peer that sets them speaks a format we do not. */
    if (len < LITE_EFA_BLOB_HDR || in[0] != LITE_EFA_BLOB_VERSION || in[1] == 0 ||
        in[1] > LITE_MAX_RAILS || in[2] || in[3])
        return -EPROTO;
    b->nrails = in[1];
    b->pid = lite_get32(in + 4);
    size_t p = LITE_EFA_BLOB_HDR;
    for (uint32_t i = 0; i < b->nrails; i++) {
        if (p >= len || in[p] == 0 || len - p - 1 < in[p])
            return -EPROTO;
        b->name_len[i] = in[p];
        b->name[i] = in + p + 1;
        p += 1 + (size_t)in[p];
    }
    return p == len ? 0 : -EPROTO;
}

/* ---- message header ---- */

/*
 * 24 bytes, little-endian, in front of every message on rail 0:
 *   u8 magic 0xEF | u8 type | u8 channel | u8 flags | u16 credits | u16 0
 *   u32 sender rank | u32 sequence number (per sender and receiver; messages are delivered to
 *   the core in this order) | u64 tag
 * channel/flags/credits/tag are the core's lite_msg_hdr, carried unchanged. The payload is what
 * follows, so its length is what arrived minus the header; a BIG message's payload is the u64
 * length of the tagged payload it announces (LITE_EFA_BIG_HDR_LEN bytes in all).
 *
 * Why 24 and not 32: shm queues a message of up to 192 bytes inline in a 256-byte command whose
 * inline data starts 32 bytes before a cache line ends (libfabric 1.17), so header + an 8-byte
 * payload in 32 bytes is one cache line to move between the cores and 40 bytes are two: fabtests'
 * own ping-pong is ~0.1 us slower one-way at 40 bytes than at 8 or 24 on this host.
 */
#define LITE_EFA_HDR_LEN     24
#define LITE_EFA_BIG_HDR_LEN (LITE_EFA_HDR_LEN + 8)
#define LITE_EFA_MAGIC       0xEF

enum lite_efa_type {
    LITE_EFA_T_MSG = 1,        /* a core message, payload inline after the header */
    LITE_EFA_T_BIG = 2,        /* a core message whose payload follows as a tagged message */
    LITE_EFA_T_HELLO = 3,      /* first message to every peer (connect_all) */
    LITE_EFA_T_KEEPALIVE = 4,  /* liveness probe; not sequenced */
    LITE_EFA_T_BYE = 5,        /* the sender is closing in order; nothing follows */
    LITE_EFA_T_QUERY = 6,      /* initiator asks about a region key before its first native op */
    LITE_EFA_T_QREPLY = 7,     /* target's answer: status, base, length, access, per-rail keys */
    LITE_EFA_T_INVAL = 8,      /* target withdraws a region the peer had asked about */
    LITE_EFA_T_IMM = 9,        /* an immediate sent as a message (after the data is in place) */
    LITE_EFA_T_IMM_ACK = 10,   /* ... counted at the target */
    LITE_EFA_T_INVAL_ACK = 11, /* peer dropped the keys; its ops into the region are over */
    LITE_EFA_T_PULL = 12,      /* paged writes the target copies itself (shm; answered IMM_ACK) */
    LITE_EFA_T_MAX = 12
};

struct lite_efa_hdr {
    uint8_t type;
    uint8_t channel;
    uint8_t flags;
    uint16_t credits;
    uint32_t src;
    uint32_t seq;
    uint64_t tag;
    uint64_t len; /* payload bytes; BIG: the announced tagged payload's (not in the header) */
};

/* Write the header, and a BIG message's announced length after it, to out; returns the bytes
 * written (LITE_EFA_HDR_LEN, or LITE_EFA_BIG_HDR_LEN for BIG). The caller's payload goes after. */
static inline size_t lite_efa_hdr_encode(const struct lite_efa_hdr *h, uint8_t *out)
{
    out[0] = LITE_EFA_MAGIC;
    out[1] = h->type;
    out[2] = h->channel;
    out[3] = h->flags;
    lite_put16(out + 4, h->credits);
    out[6] = out[7] = 0;
    lite_put32(out + 8, h->src);
    lite_put32(out + 12, h->seq);
    lite_put64(out + 16, h->tag);
    if (h->type != LITE_EFA_T_BIG)
        return LITE_EFA_HDR_LEN;
    lite_put64(out + LITE_EFA_HDR_LEN, h->len);
    return LITE_EFA_BIG_HDR_LEN;
}

/* Decode a message of `got` received bytes; -EPROTO when they do not start with a well-formed
 * header (a BIG message must be exactly header + length). */
static inline int lite_efa_hdr_decode(const uint8_t *in, size_t got, struct lite_efa_hdr *h)
{
    if (got < LITE_EFA_HDR_LEN || in[0] != LITE_EFA_MAGIC || in[1] == 0 || in[1] > LITE_EFA_T_MAX ||
        in[6] != 0 || in[7] != 0)
        return -EPROTO;
    h->type = in[1];
    h->channel = in[2];
    h->flags = in[3];
    h->credits = lite_get16(in + 4);
    h->src = lite_get32(in + 8);
    h->seq = lite_get32(in + 12);
    h->tag = lite_get64(in + 16);
    if (h->type != LITE_EFA_T_BIG) {
        h->len = got - LITE_EFA_HDR_LEN;
        return 0;
    }
    if (got != LITE_EFA_BIG_HDR_LEN)
        return -EPROTO;
    h->len = lite_get64(in + LITE_EFA_HDR_LEN);
    return 0;
}

/* ---- flush targets (the payload of the second HELLO) ----
 *
 * Where a peer's batched-acknowledgement flush (a 0-byte delivery-complete write, efa_rma.c)
 * may aim on each rail: a small region the sender's transport owns for its whole life, so a
 * flush never names a region the application may have deregistered. Little-endian:
 *   u8 version | u8 nrails (0: no flush target, do not batch) | u16 0 | u32 0
 *   then per rail: u64 address (as the provider wants it: virtual or offset) | u64 key
 * The rest of the payload (the HELLO is padded to the eager size) is ignored.
 */
#define LITE_EFA_FLUSH_VERSION 1
#define LITE_EFA_FLUSH_LEN(n)  (8 + 16 * (size_t)(n))

struct lite_efa_flush {
    uint32_t nrails;
    uint64_t addr[LITE_MAX_RAILS];
    uint64_t key[LITE_MAX_RAILS];
};

/* Pack into out[cap]; the length written, or 0 when it does not fit or nrails is too large. */
static inline size_t lite_efa_flush_pack(const struct lite_efa_flush *f, uint8_t *out, size_t cap)
{
    if (f->nrails > LITE_MAX_RAILS || cap < LITE_EFA_FLUSH_LEN(f->nrails))
        return 0;
    memset(out, 0, 8);
    out[0] = LITE_EFA_FLUSH_VERSION;
    out[1] = (uint8_t)f->nrails;
    for (uint32_t i = 0; i < f->nrails; i++) {
        lite_put64(out + 8 + 16 * i, f->addr[i]);
        lite_put64(out + 16 + 16 * i, f->key[i]);
    }
    return LITE_EFA_FLUSH_LEN(f->nrails);
}

/* Unpack `len` bytes off the network; -EPROTO for anything malformed. */
static inline int lite_efa_flush_unpack(const uint8_t *in, size_t len, struct lite_efa_flush *f)
{
    if (len < LITE_EFA_FLUSH_LEN(0) || in[0] != LITE_EFA_FLUSH_VERSION || in[1] > LITE_MAX_RAILS)
        return -EPROTO;
    for (int i = 2; i < 8; i++)
        if (in[i] != 0)
            return -EPROTO;
    if (len < LITE_EFA_FLUSH_LEN(in[1]))
        return -EPROTO;
    memset(f, 0, sizeof(*f));
    f->nrails = in[1];
    for (uint32_t i = 0; i < f->nrails; i++) {
        f->addr[i] = lite_get64(in + 8 + 16 * i);
        f->key[i] = lite_get64(in + 16 + 16 * i);
    }
    return 0;
}

/* ---- page lists (the payload of PULL) ----
 *
 * A paged write on shared memory that the target copies itself (efa_rma.c, PULLED PAGES): the
 * writer lists its source ranges and their places in one of the target's regions, and the
 * target reads them out of the writer's memory. Little-endian:
 *   u32 imm | u32 flags (bit 0: count immediates) | u32 extra | u32 nseg | u64 region core key
 *   then nseg x { u64 source address (the writer's) | u64 offset in the region | u32 length |
 *                 u32 pages (immediates this segment counts) }
 * `extra`: pages the writer copied itself before sending this, counted here with the others.
 * Nothing in it is trusted: the target checks each segment against its live registration
 * (lite_efa_pull_check) before it copies a byte.
 */
#define LITE_EFA_PULL_HDR     24
#define LITE_EFA_PULL_SEG     24
#define LITE_EFA_PULL_SEG_MAX 1024 /* process_vm_readv takes IOV_MAX (1024) iovecs a call */
#define LITE_EFA_PULL_PAGES   4096 /* immediates one message may count (a batch's pages) */
#define LITE_EFA_PULL_F_IMM   1u
#define LITE_EFA_PULL_LEN(n)  (LITE_EFA_PULL_HDR + LITE_EFA_PULL_SEG * (size_t)(n))

struct lite_efa_pull {
    uint32_t imm, flags, extra, nseg;
    uint64_t key;
    uint32_t pages; /* extra + every segment's pages */
    const uint8_t *segs;
};

struct lite_efa_pull_seg {
    uint64_t src, roff;
    uint32_t len, pages;
};

static inline void lite_efa_pull_put_hdr(uint8_t *out, uint32_t imm, uint32_t flags, uint32_t extra,
                                         uint32_t nseg, uint64_t key)
{
    lite_put32(out, imm);
    lite_put32(out + 4, flags);
    lite_put32(out + 8, extra);
    lite_put32(out + 12, nseg);
    lite_put64(out + 16, key);
}

static inline void lite_efa_pull_put_seg(uint8_t *out, uint32_t i,
                                         const struct lite_efa_pull_seg *g)
{
    uint8_t *o = out + LITE_EFA_PULL_LEN(i);
    lite_put64(o, g->src);
    lite_put64(o + 8, g->roff);
    lite_put32(o + 16, g->len);
    lite_put32(o + 20, g->pages);
}

/* Segment i of an unpacked list (i < nseg). */
static inline void lite_efa_pull_seg(const struct lite_efa_pull *p, uint32_t i,
                                     struct lite_efa_pull_seg *g)
{
    const uint8_t *o = p->segs + LITE_EFA_PULL_SEG * (size_t)i;
    g->src = lite_get64(o);
    g->roff = lite_get64(o + 8);
    g->len = lite_get32(o + 16);
    g->pages = lite_get32(o + 20);
}

/* Unpack `len` bytes off the network; -EPROTO for anything malformed: a length that is not
 * the header and nseg segments exactly, 0 or more than LITE_EFA_PULL_SEG_MAX segments, unknown
 * flags, an empty segment, a segment counting no page or more pages than bytes, a range that
 * wraps around, or more than LITE_EFA_PULL_PAGES immediates in all. */
static inline int lite_efa_pull_unpack(const uint8_t *in, size_t len, struct lite_efa_pull *p)
{
    if (len < LITE_EFA_PULL_HDR)
        return -EPROTO;
    p->imm = lite_get32(in);
    p->flags = lite_get32(in + 4);
    p->extra = lite_get32(in + 8);
    p->nseg = lite_get32(in + 12);
    p->key = lite_get64(in + 16);
    p->segs = in + LITE_EFA_PULL_HDR;
    if (p->nseg == 0 || p->nseg > LITE_EFA_PULL_SEG_MAX || len != LITE_EFA_PULL_LEN(p->nseg) ||
        (p->flags & ~LITE_EFA_PULL_F_IMM) || p->extra > LITE_EFA_PULL_PAGES)
        return -EPROTO;
    uint64_t pages = p->extra;
    for (uint32_t i = 0; i < p->nseg; i++) {
        struct lite_efa_pull_seg g;
        lite_efa_pull_seg(p, i, &g);
        if (g.len == 0 || g.pages == 0 || g.pages > g.len || g.src + g.len < g.src ||
            g.roff + g.len < g.roff)
            return -EPROTO;
        pages += g.pages;
    }
    if (pages > LITE_EFA_PULL_PAGES)
        return -EPROTO;
    p->pages = (uint32_t)pages;
    return 0;
}

/* May the list be placed into a region of `region_len` bytes? 0, or -LITE_ERR_REMOTE_BOUNDS
 * for the first segment that does not lie wholly inside it. */
static inline int lite_efa_pull_check(const struct lite_efa_pull *p, uint64_t region_len)
{
    for (uint32_t i = 0; i < p->nseg; i++) {
        struct lite_efa_pull_seg g;
        lite_efa_pull_seg(p, i, &g);
        if (g.roff > region_len || g.len > region_len - g.roff)
            return -LITE_ERR_REMOTE_BOUNDS;
    }
    return 0;
}

/* ---- provider names ---- */

/*
 * The libfabric provider a user names, spelled the way fi_getinfo() wants it. "tcp" (and
 * "tcp+ofi_rxm", for places where ';' is awkward: CMake lists, shell) mean "tcp;ofi_rxm", the
 * RDM endpoint that ofi_rxm builds over the tcp provider's connections; "sockets" stays
 * "sockets" (it is RDM itself). Anything else is passed as given. -EINVAL for an empty or
 * oversized name.
 */
static inline int lite_efa_provider_name(const char *in, char *out, size_t cap)
{
    if (!in || !*in)
        return -EINVAL;
    const char *name = in;
    if (!strcmp(in, "tcp") || !strcmp(in, "tcp+ofi_rxm") || !strcmp(in, "tcp;ofi_rxm"))
        name = "tcp;ofi_rxm";
    size_t n = strlen(name);
    if (n + 1 > cap)
        return -EINVAL;
    memcpy(out, name, n + 1);
    return 0;
}

#endif /* LITE_EFA_PLAN_H */
