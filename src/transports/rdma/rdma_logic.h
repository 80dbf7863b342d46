/*
 * rdma_logic.h - the RDMA backend's pure logic: RoCE GID choice, the striping plan, the receive
 * window (credit) accounting and the SEND frame header. Nothing here touches a device or
 * includes <infiniband/verbs.h>, so it is built on every host and unit-tested without a NIC
 * (tests/unit/test_rdma_*.c).
 */
#ifndef LITE_RDMA_LOGIC_H
#define LITE_RDMA_LOGIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- GID choice (rdma_gid.c) ---- */

enum lite_rdma_gid_type {
    LITE_RDMA_GID_IB = 0,      /* InfiniBand link layer */
    LITE_RDMA_GID_ROCE_V1 = 1, /* RoCE v1: Ethernet frames, not routable */
    LITE_RDMA_GID_ROCE_V2 = 2, /* RoCE v2: UDP/IP, what every modern RoCE fabric uses */
};

/* One valid entry of a port's GID table. */
struct lite_rdma_gid_cand {
    uint32_t index;
    uint8_t gid[16];
    uint8_t type;    /* enum lite_rdma_gid_type */
    char netdev[32]; /* the network interface the GID belongs to ("" when unknown) */
};

/* True when the GID is an IPv4-mapped address (::ffff:a.b.c.d). */
bool lite_rdma_gid_is_v4(const uint8_t gid[16]);
/* Printable form of a GID ("::ffff:192.0.2.1", "fe80::1"). */
void lite_rdma_gid_str(const uint8_t gid[16], char *buf, size_t len);
/* The GID that stands for an IP address: IPv4 "a.b.c.d" is mapped to ::ffff:a.b.c.d, IPv6 is
 * taken as is. -EINVAL when `host` is not a numeric address. */
int lite_rdma_gid_from_ip(const char *host, uint8_t gid[16]);

/*
 * Choose the GID index of one RoCE port. In order:
 *   1. override >= 0 (LITETX_RDMA_GID_INDEX): that index, which must be a valid candidate;
 *   2. a RoCE v2 GID equal to the bootstrap address (`bind_gid`, the address of the interface
 *      toward the root);
 *   3. the RoCE v2 GIDs of the bootstrap interface (`bind_netdev`): the only IPv4-mapped one,
 *      else the only routable IPv6 one;
 *   4. the port is not on the bootstrap interface (a secondary rail, or a loopback bootstrap):
 *      its only IPv4-mapped RoCE v2 GID, else its only routable IPv6 RoCE v2 GID.
 * Link-local (fe80::) and RoCE v1 GIDs are never chosen by themselves. When nothing decides,
 * returns -LITE_ERR_CONFIG and lists every candidate in why.
 */
int lite_rdma_gid_choose(const struct lite_rdma_gid_cand *c, size_t n, const uint8_t *bind_gid,
                         const char *bind_netdev, int override, uint32_t *out, char *why,
                         size_t why_len);

/* ---- striping plan (rdma_stripe.c) ---- */

/* One piece of a one-sided op: bytes [off, off + len) of it go over rail `rail`. */
struct lite_rdma_piece {
    uint64_t off;
    uint64_t len;
    uint32_t rail;
};

/*
 * Cut an op of `len` bytes into pieces: over `nrails` rails (starting at `first_rail`) when it
 * is at least 2 x stripe_min long, into nearly equal stripes aligned to `align` bytes, and every
 * piece at most max_piece bytes (the device's largest message). A zero-length op is one piece.
 * Returns the number of pieces; writes at most max_out of them (call with max_out 0 to size).
 */
size_t lite_rdma_stripe_plan(uint64_t len, uint32_t nrails, uint32_t first_rail,
                             uint64_t stripe_min, uint64_t align, uint64_t max_piece,
                             struct lite_rdma_piece *out, size_t max_out);

/* ---- receive windows (rdma_credit.c) ---- */

/*
 * Sender side of one receive queue at the peer. The peer pre-posts `depth` receives; every
 * SEND (or RDMA write with immediate) consumes one. The peer reports how many it has posted
 * again since the start (a cumulative count, so a late or repeated report is harmless); the
 * sender posts only while used < depth + reposted. Receiver-not-ready cannot happen.
 */
struct lite_rdma_window {
    uint32_t depth;
    uint64_t used;    /* receives consumed by what this side posted */
    uint64_t granted; /* depth + the peer's latest cumulative repost count */
};

void lite_rdma_window_init(struct lite_rdma_window *w, uint32_t depth);
uint64_t lite_rdma_window_avail(const struct lite_rdma_window *w);
/* Take n receives; false (nothing taken) when fewer are available. */
bool lite_rdma_window_take(struct lite_rdma_window *w, uint32_t n);
/* The peer says it has reposted `total` receives so far. -EPROTO when that is more than it can
 * have consumed (a broken or hostile peer); 1 when the window grew, 0 when not. */
int lite_rdma_window_grant(struct lite_rdma_window *w, uint64_t total);

/* Receiver side: receives consumed, reposted, and the repost count last reported. */
struct lite_rdma_rxacct {
    uint32_t depth;
    uint64_t consumed;
    uint64_t reposted;
    uint64_t reported;
};

void lite_rdma_rxacct_init(struct lite_rdma_rxacct *a, uint32_t depth);
/* One receive completed (its buffer is being read). */
void lite_rdma_rxacct_consume(struct lite_rdma_rxacct *a);
/* Its buffer was posted again. */
void lite_rdma_rxacct_repost(struct lite_rdma_rxacct *a);
/* Is a report due? Once a quarter of the window (at least one) is reposted and unreported: the
 * sender is never left without a window while reposts it has not heard of pile up here. */
bool lite_rdma_rxacct_due(const struct lite_rdma_rxacct *a);
/* The count to report now (and remember as reported). */
uint64_t lite_rdma_rxacct_report(struct lite_rdma_rxacct *a);

/* Mailbox word: a 16-bit epoch (bumped when a queue pair is re-armed) and a 48-bit count. */
static inline uint64_t lite_rdma_mbox_pack(uint16_t epoch, uint64_t count)
{
    return (uint64_t)epoch << 48 | (count & ((1ull << 48) - 1));
}
static inline uint16_t lite_rdma_mbox_epoch(uint64_t w)
{
    return (uint16_t)(w >> 48);
}
static inline uint64_t lite_rdma_mbox_count(uint64_t w)
{
    return w & ((1ull << 48) - 1);
}

/* Receives to pre-post per peer for messages: the core's eager credits plus room for control
 * messages (CTS, FIN, credit returns), which take no credit. */
uint32_t lite_rdma_recv_depth(uint32_t credits);
#define LITE_RDMA_CTRL_RESERVE 16

/* ---- SEND frames (rdma_credit.c) ---- */

/*
 * Every SEND starts with a small header. The first fragment of a message carries the core's
 * struct lite_msg_hdr (24 bytes, little-endian):
 *   u8 type (FIRST) | u8 channel | u8 flags | u8 0 | u16 credits | u16 0 | u64 tag | u64 len
 * A message longer than one receive slot continues in CONT fragments, 8-byte header
 *   u8 type (CONT) | 7 x u8 0
 * that arrive in order on the same queue pair.
 */
enum lite_rdma_frame_type { LITE_RDMA_FRAME_FIRST = 0x4d, LITE_RDMA_FRAME_CONT = 0x43 };
#define LITE_RDMA_FIRST_HDR 24
#define LITE_RDMA_CONT_HDR  8

struct lite_rdma_frame {
    uint8_t type;
    uint8_t channel;
    uint8_t flags;
    uint16_t credits;
    uint64_t tag;
    uint64_t len; /* FIRST: the message's total payload length */
};

/* Encode a header; returns its length (LITE_RDMA_FIRST_HDR or LITE_RDMA_CONT_HDR). */
size_t lite_rdma_frame_encode(const struct lite_rdma_frame *f, uint8_t *out);
/* Decode and check the header of a received SEND of `n` bytes; returns the header length, or
 * -EPROTO with a reason for anything malformed. */
int lite_rdma_frame_decode(const uint8_t *in, size_t n, struct lite_rdma_frame *f,
                           const char **why);
/* How many SENDs a message of `len` payload bytes takes with `slot` bytes per receive buffer. */
uint64_t lite_rdma_frag_count(uint64_t len, uint32_t slot);

/*
 * ---- link resumption (rdma_link.c), over the side channel ----
 * RESUME: u32 link epoch | u32 rails | u64 the peer's SEND frames applied | rails x u64 the
 * peer's immediates counted per rail | the sender's new QP ends (LITE_RDMA_RESUME_EP_LEN each:
 * msg, then out and in of each rail). RESUMED: u32 link epoch.
 */
#define LITE_RDMA_RESUME_FIXED    16
#define LITE_RDMA_RESUME_EP_LEN   28
#define LITE_RDMA_RESUME_MAX_RAIL 8

struct lite_rdma_resume {
    uint32_t epoch, nrails;
    uint64_t applied;                                /* our SEND frames the peer applied */
    uint64_t imm_applied[LITE_RDMA_RESUME_MAX_RAIL]; /* our immediates it counted, per rail */
    const uint8_t *eps; /* its QP ends: LITE_RDMA_RESUME_EP_LEN * (1 + 2 * nrails) bytes */
};

/* Decode a RESUME of `len` bytes for a link of `nrails` rails (at most
 * LITE_RDMA_RESUME_MAX_RAIL): 0, or -LITE_ERR_PROTOCOL with a reason (the wrong size, another
 * rail count). m->eps points into p. */
int lite_rdma_resume_decode(const uint8_t *p, size_t len, uint32_t nrails,
                            struct lite_rdma_resume *m, const char **why);
/* After the frames the peer applied were dropped from the kept ones: is `applied` the count
 * this side can resume at? tx_seq frames were sent; `kept` tells whether some are still kept,
 * the first of them numbered kept_seq. */
bool lite_rdma_resume_frames_ok(uint64_t applied, uint64_t tx_seq, bool kept, uint64_t kept_seq);
/* Decode a RESUMED of `len` bytes: 0 with *epoch, or -LITE_ERR_PROTOCOL. */
int lite_rdma_resumed_decode(const uint8_t *p, size_t len, uint32_t *epoch);
/* What a RESUMED for `epoch` does to a link at link_epoch (ready: this side's QPs are connected
 * to the peer's; retry: they could not be, a new break is due): 1 the link is up, 0 ignored (a
 * late one), or -LITE_ERR_PROTOCOL. */
int lite_rdma_resumed_check(bool ready, bool retry, uint32_t link_epoch, uint32_t epoch);

#endif /* LITE_RDMA_LOGIC_H */
