/*
 * efa_msg.c - messages over rail 0's RDM endpoint.
 *
 * RECEIVE. A pool of eager buffers (header + eager_max bytes each) is pre-posted with
 * FI_ADDR_UNSPEC: (world - 1) x (credits + a slack for control messages), capped by the provider's
 * receive queue. The core never has more than `credits` eager messages outstanding per peer, so
 * with the default settings no message ever waits in the provider's unexpected queue. The pool is
 * touched at open so it counts in the resident-memory baseline, not against the flow-control
 * bound. A completed buffer is delivered to the core in the sender's sequence order (the header
 * carries it: providers complete receives in their own order, e.g. a SAR message after a later
 * small one), then reposted.
 *
 * SEND. The header and an inline payload (<= eager_max) are copied into a send slot, so the
 * core's buffer is free as soon as the op is posted and FI_MR_LOCAL providers need only the
 * slots registered; what fits the provider's inject size goes with fi_inject and completes at
 * once. Messages to one peer are posted in order; one that meets -FI_EAGAIN waits at the head of
 * the peer's queue and everything behind it waits too. A small message with an empty queue in
 * front of it skips the slot: it is injected from the stack (direct_inject).
 *
 * LARGE PAYLOADS. A core message above eager_max (a rendezvous threshold raised above it) is a
 * BIG header message plus the payload as a tagged message, tag = (sender << 32 | sequence). The
 * receiver, when the header's turn comes, asks the core where the payload goes and posts the
 * tagged receive there (zero copy; a discarded payload is truncated into 8 bytes of scratch);
 * later messages from that peer wait until it completes, so the core sees one message at a time.
 */
#include <stdlib.h>
#include <string.h>

#include "efa.h"

#define RX_SLACK   16   /* per peer, beyond the core's credits: control messages, keepalives */
#define RX_MAX     8192 /* buffers in the pool at most; the provider buffers the rest */
#define TX_CHUNK   16   /* send slots allocated (and registered) together */
#define SLOT_ALIGN 64
#define DIRECT_MAX 256 /* bytes (header + payload) injected from the stack at most */

static size_t round_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

/* ---- receive pool ---- */

static ssize_t rx_post(struct lite_transport *t, struct efa_rxbuf *b)
{
    return fi_recv(t->rail[0].ep, b->buf, t->rx_size, t->rx_mr ? t->rx_mr->desc[0] : NULL,
                   FI_ADDR_UNSPEC, &b->c.fi);
}

/* Reposting waits for the next progress call (lite_efa_rx_flush): a reply the core sends to
 * the message this buffer held leaves first (fi_recv costs about as much as the reply's
 * fi_inject on shm), and the pool is large enough that a few buffers out for that long do not
 * matter. */
void lite_efa_rx_repost(struct lite_transport *t, struct efa_rxbuf *b)
{
    if (t->closing && !t->rail[0].ep)
        return;
    b->next = t->rx_retry;
    t->rx_retry = b;
}

int lite_efa_rx_flush(struct lite_transport *t)
{
    int n = 0;
    while (t->rx_retry) {
        struct efa_rxbuf *b = t->rx_retry;
        ssize_t rc = rx_post(t, b);
        if (rc == -FI_EAGAIN)
            break;
        t->rx_retry = b->next;
        if (rc)
            LITE_ERROR("%s rank %d: reposting a receive buffer failed: %s", EFA_LOG, t->rank,
                       fi_strerror((int)-rc));
        n++;
    }
    return n;
}

int lite_efa_msg_init(struct lite_transport *t)
{
    t->rx_size = round_up(LITE_EFA_HDR_LEN + t->cfg.eager_max, SLOT_ALIGN);
    t->tx_size = t->rx_size;
    uint64_t want = (uint64_t)(t->world - 1) * (t->cfg.credits + RX_SLACK);
    size_t cap = t->rail[0].info->rx_attr->size;
    /* Leave room in the receive queue for tagged receives of large payloads. */
    if (cap > 128)
        cap -= 64;
    if (cap && want > cap)
        want = cap;
    if (want > RX_MAX)
        want = RX_MAX;
    t->nrx = (uint32_t)want;
    if (t->nrx == 0)
        return 0;
    size_t bytes = (size_t)t->nrx * t->rx_size;
    t->rx_mem = aligned_alloc(4096, round_up(bytes, 4096));
    t->rxbufs = calloc(t->nrx, sizeof(*t->rxbufs));
    if (!t->rx_mem || !t->rxbufs)
        return -ENOMEM;
    memset(t->rx_mem, 0, bytes);
    if (t->mr_local) {
        int rc = lite_efa_mr_make(t, t->rx_mem, bytes, LITE_MEM_HOST, 0, 0, 1, &t->rx_mr);
        if (rc)
            return rc;
    }
    for (uint32_t i = 0; i < t->nrx; i++) {
        struct efa_rxbuf *b = &t->rxbufs[i];
        b->c.kind = CTX_RX;
        b->buf = t->rx_mem + (size_t)i * t->rx_size;
        ssize_t rc = rx_post(t, b);
        if (rc == -FI_EAGAIN) {
            b->next = t->rx_retry;
            t->rx_retry = b;
        } else if (rc) {
            LITE_ERROR("%s rank %d: posting receive buffer %u failed: %s", EFA_LOG, t->rank, i,
                       fi_strerror((int)-rc));
            return lite_efa_err((int)rc);
        }
    }
    LITE_DEBUG("%s rank %d: %u eager receive buffers of %zu bytes posted", EFA_LOG, t->rank, t->nrx,
               t->rx_size);
    return 0;
}

/* ---- send slots ---- */

static struct efa_tx *tx_get(struct lite_transport *t)
{
    if (!t->tx_free) {
        struct efa_txchunk *c = calloc(1, sizeof(*c));
        if (!c)
            return NULL;
        c->mem = aligned_alloc(4096, round_up(TX_CHUNK * t->tx_size, 4096));
        c->slots = calloc(TX_CHUNK, sizeof(*c->slots));
        int rc = c->mem && c->slots ? 0 : -ENOMEM;
        if (!rc && t->mr_local)
            rc = lite_efa_mr_make(t, c->mem, TX_CHUNK * t->tx_size, LITE_MEM_HOST, 0, 0, 1, &c->mr);
        if (rc) {
            free(c->mem);
            free(c->slots);
            free(c);
            return NULL;
        }
        c->next = t->chunks;
        t->chunks = c;
        for (int i = 0; i < TX_CHUNK; i++) {
            struct efa_tx *x = &c->slots[i];
            x->buf = c->mem + (size_t)i * t->tx_size;
            x->desc = c->mr ? c->mr->desc[0] : NULL;
            x->next = t->tx_free;
            t->tx_free = x;
        }
    }
    struct efa_tx *x = t->tx_free;
    t->tx_free = x->next;
    uint8_t *buf = x->buf;
    void *desc = x->desc;
    memset(x, 0, sizeof(*x));
    x->buf = buf;
    x->desc = desc;
    x->c.kind = CTX_TX;
    x->big_c.kind = CTX_TXBIG;
    return x;
}

static void tx_put(struct lite_transport *t, struct efa_tx *x)
{
    if (x->big_mr)
        fi_close(&x->big_mr->fid);
    x->big_mr = NULL;
    x->next = t->tx_free;
    t->tx_free = x;
}

static void inflight_add(struct efa_peer *p, struct efa_tx *x)
{
    x->inflight = true;
    x->iprev = NULL;
    x->inext = p->inflight;
    if (p->inflight)
        p->inflight->iprev = x;
    p->inflight = x;
}

static void inflight_del(struct efa_peer *p, struct efa_tx *x)
{
    if (!x->inflight)
        return;
    if (x->iprev)
        x->iprev->inext = x->inext;
    else
        p->inflight = x->inext;
    if (x->inext)
        x->inext->iprev = x->iprev;
    x->inflight = false;
}

/* Post what is left of x. 0, -FI_EAGAIN, or another negative fi code. 1: x completed (inject)
 * and was released. */
static int tx_post(struct lite_transport *t, struct efa_tx *x)
{
    struct efa_rail *r = &t->rail[0];
    fi_addr_t a = r->addr[x->peer];
    ssize_t rc;
    if (!x->hdr_posted) {
        if (!x->big && x->len <= t->inject_size) {
            rc = fi_inject(r->ep, x->buf, x->len, a);
            if (rc)
                return (int)rc;
            /* Injected: the buffer is free and nothing more will be reported. */
            void *op = x->op;
            if (x->type == LITE_EFA_T_KEEPALIVE)
                t->peers[x->peer].ka_out = false;
            tx_put(t, x);
            if (op)
                t->up->send_done(t->core, op, 0);
            return 1;
        }
        rc = fi_send(r->ep, x->buf, x->len, x->desc, a, &x->c.fi);
        if (rc)
            return (int)rc;
        x->hdr_posted = true;
        inflight_add(&t->peers[x->peer], x);
    }
    if (x->big && !x->big_posted) {
        rc = fi_tsend(r->ep, x->big, x->big_len, x->big_mr ? fi_mr_desc(x->big_mr) : NULL, a,
                      x->big_tag, &x->big_c.fi);
        if (rc)
            return (int)rc;
        x->big_posted = true;
    }
    return 0;
}

/* Post the peer's queue in order, as far as the provider takes it. */
static int flush_peer(struct lite_transport *t, int peer)
{
    struct efa_peer *p = &t->peers[peer];
    int posted = 0;
    while (p->txq && !p->dead && !lite_efa_peer_gone(t, peer)) {
        struct efa_tx *x = p->txq;
        p->txq = x->next;
        if (!p->txq)
            p->txq_tail = NULL;
        x->next = NULL;
        int rc = tx_post(t, x);
        if (rc == -FI_EAGAIN) {
            /* Back to the head: order is kept. */
            x->next = p->txq;
            p->txq = x;
            if (!p->txq_tail)
                p->txq_tail = x;
            lite_efa_peer_stuck(t, peer, true);
            t->flush_pending = true;
            break;
        }
        lite_efa_peer_stuck(t, peer, false);
        p->last_tx_ns = t->clock_ns; /* recent enough for keepalives, and free */
        posted++;
        if (rc < 0) {
            /* The provider refused the op outright: the pair is broken. x is completed with
             * the rest of the peer's ops (as in flight if a part of it was posted). */
            x->next = p->txq;
            p->txq = x;
            if (!p->txq_tail)
                p->txq_tail = x;
            char why[128];
            lite_fmt(why, sizeof(why), "send to rank %d failed: %s", peer, fi_strerror(-rc));
            lite_efa_peer_fail(t, peer, lite_efa_loss_code(t, lite_efa_err(rc)), why);
            break;
        }
    }
    return posted;
}

static void enqueue(struct lite_transport *t, int peer, struct efa_tx *x)
{
    struct efa_peer *p = &t->peers[peer];
    bool was_empty = p->txq == NULL;
    if (p->txq_tail)
        p->txq_tail->next = x;
    else
        p->txq = x;
    p->txq_tail = x;
    if (was_empty)
        flush_peer(t, peer); /* latency: post now rather than at the next progress */
}

/* The wire header of a core message. */
static struct lite_efa_hdr wire_hdr(const struct lite_transport *t, uint8_t type,
                                    const struct lite_msg_hdr *hdr, uint32_t seq)
{
    return (struct lite_efa_hdr){.type = type,
                                 .channel = hdr->channel,
                                 .flags = hdr->flags,
                                 .credits = hdr->credits,
                                 .src = (uint32_t)t->rank,
                                 .seq = seq,
                                 .tag = hdr->tag,
                                 .len = hdr->len};
}

/* A small message with nothing queued before it to the peer goes with fi_inject straight from
 * the stack: no send slot, no queue (a ping-pong's reply: ~200 instructions fewer per message).
 * True if it went; false leaves everything as it was (the sequence number too), and the queued
 * path retries the post, or reports the provider's refusal, as for any message. */
static bool direct_inject(struct lite_transport *t, int peer, const struct lite_msg_hdr *hdr,
                          const void *payload, void *op)
{
    struct efa_peer *p = &t->peers[peer];
    uint8_t b[DIRECT_MAX];
    struct lite_efa_hdr h = wire_hdr(t, LITE_EFA_T_MSG, hdr, p->tx_seq);
    size_t n = lite_efa_hdr_encode(&h, b);
    if (hdr->len)
        memcpy(b + n, payload, hdr->len);
    if (fi_inject(t->rail[0].ep, b, n + hdr->len, t->rail[0].addr[peer]))
        return false;
    p->tx_seq++;
    p->stuck_since = 0; /* a post went through: not stuck (lite_efa_peer_stuck) */
    p->last_tx_ns = t->clock_ns;
    if (op)
        t->up->send_done(t->core, op, 0);
    return true;
}

/* 0 when messages may be posted to `peer`. Not connected (init failed before connect_all)
 * counts as lost, as on TCP. */
static inline int can_send(struct lite_transport *t, int peer)
{
    if (peer < 0 || peer >= t->world || peer == t->rank)
        return -EINVAL;
    const struct efa_peer *p = &t->peers[peer];
    if (p->dead || p->lost || t->rail[0].addr[peer] == FI_ADDR_NOTAVAIL ||
        lite_efa_peer_gone(t, peer))
        return -LITE_ERR_PEER_LOST;
    return 0;
}

/* Small enough for direct_inject, with nothing queued to the peer that it would overtake. */
static bool direct_ok(const struct lite_transport *t, int peer, const struct lite_msg_hdr *hdr)
{
    return !t->peers[peer].txq && hdr->len <= t->cfg.eager_max &&
           LITE_EFA_HDR_LEN + hdr->len <= DIRECT_MAX &&
           LITE_EFA_HDR_LEN + hdr->len <= t->inject_size;
}

int lite_efa_msg_inject(struct lite_transport *t, int peer, const struct lite_msg_hdr *hdr,
                        const void *payload)
{
    int rc = can_send(t, peer);
    if (rc)
        return rc;
    return direct_ok(t, peer, hdr) && direct_inject(t, peer, hdr, payload, NULL) ? 0 : -EAGAIN;
}

int lite_efa_msg_send(struct lite_transport *t, int peer, const struct lite_msg_hdr *hdr,
                      const void *payload, void *op)
{
    int rc = can_send(t, peer);
    if (rc)
        return rc;
    struct efa_peer *p = &t->peers[peer];
    if (direct_ok(t, peer, hdr) && direct_inject(t, peer, hdr, payload, op))
        return 0;
    struct efa_tx *x = tx_get(t);
    if (!x)
        return -ENOMEM;
    bool big = hdr->len > t->cfg.eager_max;
    if (big && t->mr_local && hdr->len) {
        void *desc;
        rc = lite_efa_mr_fly(t, 0, payload, hdr->len, FI_SEND, &x->big_mr, &desc);
        if (rc) {
            tx_put(t, x);
            return rc;
        }
    }
    struct lite_efa_hdr h = wire_hdr(t, big ? LITE_EFA_T_BIG : LITE_EFA_T_MSG, hdr, p->tx_seq++);
    size_t n = lite_efa_hdr_encode(&h, x->buf);
    x->op = op;
    x->peer = peer;
    x->type = h.type;
    x->len = n;
    if (big) {
        x->big = payload;
        x->big_len = hdr->len;
        x->big_tag = (uint64_t)(uint32_t)t->rank << 32 | h.seq;
        x->parts = 2;
    } else {
        if (hdr->len)
            memcpy(x->buf + n, payload, hdr->len);
        x->len += hdr->len;
        x->parts = 1;
    }
    enqueue(t, peer, x);
    return 0;
}

int lite_efa_ctl_send(struct lite_transport *t, int peer, uint8_t type, uint64_t tag,
                      const void *payload, size_t len)
{
    struct efa_peer *p = &t->peers[peer];
    if (p->dead || t->rail[0].addr[peer] == FI_ADDR_NOTAVAIL || lite_efa_peer_gone(t, peer))
        return -LITE_ERR_PEER_LOST;
    if (len > t->cfg.eager_max)
        return -EINVAL;
    struct efa_tx *x = tx_get(t);
    if (!x)
        return -ENOMEM;
    /* Keepalives are not sequenced: they may overtake anything and are never delivered. */
    struct lite_efa_hdr h = {.type = type,
                             .src = (uint32_t)t->rank,
                             .seq = type == LITE_EFA_T_KEEPALIVE ? 0 : p->tx_seq++,
                             .tag = tag,
                             .len = len};
    size_t n = lite_efa_hdr_encode(&h, x->buf);
    if (len)
        memcpy(x->buf + n, payload, len);
    x->len = n + len;
    x->parts = 1;
    x->peer = peer;
    x->type = type;
    enqueue(t, peer, x);
    return 0;
}

void lite_efa_ctl_must(struct lite_transport *t, int peer, uint8_t type, uint64_t tag,
                       const void *payload, size_t len)
{
    int rc = lite_efa_ctl_send(t, peer, type, tag, payload, len);
    if (rc && !t->peers[peer].dead) {
        char why[128];
        lite_fmt(why, sizeof(why), "control message (type %u) to rank %d could not be sent: %s",
                 type, peer, lite_strerror(rc));
        LITE_ERROR("%s rank %d: %s", EFA_LOG, t->rank, why);
        lite_efa_peer_fail(t, peer, rc, why);
    }
}

void lite_efa_tx_done(struct lite_transport *t, struct efa_tx *x, bool big_part, int status)
{
    if (status && !x->status)
        x->status = status;
    if (--x->parts > 0)
        return;
    struct efa_peer *p = &t->peers[x->peer];
    inflight_del(p, x);
    int peer = x->peer, st = lite_efa_loss_code(t, x->status);
    void *op = x->orphan ? NULL : x->op;
    uint8_t type = x->type;
    tx_put(t, x);
    if (type == LITE_EFA_T_KEEPALIVE)
        p->ka_out = false;
    if (op)
        t->up->send_done(t->core, op, st);
    if (st && !p->dead && !t->closing) {
        /* A message is lost: ordering and credits with this peer cannot be trusted. */
        char why[128];
        lite_fmt(why, sizeof(why), "send to rank %d failed: %s", peer, lite_strerror(st));
        lite_efa_peer_fail(t, peer, -LITE_ERR_PEER_LOST, why);
    }
}

/* ---- delivery ---- */

static void held_insert(struct efa_peer *p, struct efa_rxbuf *b)
{
    struct efa_rxbuf **pp = &p->held;
    while (*pp && (int32_t)((*pp)->h.seq - b->h.seq) < 0)
        pp = &(*pp)->next;
    b->next = *pp;
    *pp = b;
}

static void big_post(struct lite_transport *t, struct efa_bigrx *g)
{
    if (g->posted)
        return;
    ssize_t rc =
        fi_trecv(t->rail[0].ep, g->dst, g->len, g->desc, FI_ADDR_UNSPEC, g->tag, 0, &g->c.fi);
    if (rc == -FI_EAGAIN) {
        t->flush_pending = true; /* retried by lite_efa_msg_flush */
        return;
    }
    if (rc) {
        char why[128];
        lite_fmt(why, sizeof(why), "receive of a large message from rank %d failed: %s", g->peer,
                 fi_strerror((int)-rc));
        lite_efa_peer_fail(t, g->peer, lite_efa_loss_code(t, lite_efa_err((int)rc)), why);
        return;
    }
    g->posted = true;
}

/* A BIG header's turn: ask the core where the payload goes and post the tagged receive. */
static int big_begin(struct lite_transport *t, int peer, const struct lite_efa_hdr *h)
{
    struct lite_msg_hdr mh = {.tag = h->tag,
                              .len = h->len,
                              .channel = h->channel,
                              .flags = h->flags,
                              .credits = h->credits};
    void *dst = NULL, *token = NULL;
    int rc = t->up->recv_begin(t->core, peer, &mh, &dst, &token);
    t->events++;
    if (rc < 0)
        return rc;
    struct efa_bigrx *g = calloc(1, sizeof(*g));
    if (!g)
        return -ENOMEM;
    g->c.kind = CTX_BIGRX;
    g->peer = peer;
    g->token = token;
    g->tag = (uint64_t)(uint32_t)peer << 32 | h->seq;
    g->discard = dst == NULL;
    g->dst = dst ? dst : g->scratch;
    g->len = dst ? h->len : sizeof(g->scratch);
    if (t->mr_local) {
        rc = lite_efa_mr_fly(t, 0, g->dst, g->len, FI_RECV, &g->mr, &g->desc);
        if (rc) {
            free(g);
            return rc;
        }
    }
    t->peers[peer].bigrx = g;
    big_post(t, g);
    return 0;
}

static void deliver(struct lite_transport *t, int peer, struct efa_rxbuf *b)
{
    struct efa_peer *p = &t->peers[peer];
    const struct lite_efa_hdr *h = &b->h;
    const uint8_t *payload = b->buf + LITE_EFA_HDR_LEN;
    size_t plen = b->got - LITE_EFA_HDR_LEN;
    const char *bad = NULL;
    int rc = 0;
    p->rx_seq++;
    switch (h->type) {
    case LITE_EFA_T_MSG: {
        struct lite_msg_hdr mh = {.tag = h->tag,
                                  .len = h->len,
                                  .channel = h->channel,
                                  .flags = h->flags,
                                  .credits = h->credits};
        rc = t->up->recv_msg(t->core, peer, &mh, payload);
        t->events++;
        if (rc < 0)
            bad = "message refused by the core";
        break;
    }
    case LITE_EFA_T_BIG:
        rc = big_begin(t, peer, h);
        if (rc)
            bad = "large message refused";
        break;
    case LITE_EFA_T_HELLO:
        /* The second one carries the peer's flush targets (efa_plan.h), checked before use. */
        if (plen) {
            struct lite_efa_flush f;
            if (lite_efa_flush_unpack(payload, plen, &f) != 0) {
                rc = -LITE_ERR_PROTOCOL;
                bad = "malformed HELLO";
                break;
            }
            lite_efa_dc_learn(t, peer, &f);
        }
        /* The lower rank speaks first, so each pair connects once: tcp;ofi_rxm mishandles
         * connections opened from both ends at the same moment. */
        if (p->hellos < 255)
            p->hellos++;
        if (!p->hello_sent && !p->dead) {
            p->hello_sent = true;
            lite_efa_ctl_must(t, peer, LITE_EFA_T_HELLO, 0, NULL, 0);
        }
        break;
    case LITE_EFA_T_BYE:
        p->bye_rcvd = true;
        break;
    default:
        lite_efa_rma_ctl(t, peer, h, payload, plen);
        break;
    }
    lite_efa_rx_repost(t, b);
    if (bad) {
        char why[128];
        lite_fmt(why, sizeof(why), "rank %d: %s (%s)", peer, bad, lite_strerror(rc));
        lite_efa_peer_fail(t, peer, rc, why);
    } else if (h->type == LITE_EFA_T_BYE && !t->closing && !p->lost) {
        /* The peer is finalizing: later ops with it fail at once instead of waiting. Its
         * endpoint stays up until it has our BYE too, so the pair is not marked dead. */
        char why[64];
        lite_fmt(why, sizeof(why), "rank %d finalized and closed", peer);
        p->lost = true;
        t->up->peer_failed(t->core, peer, -LITE_ERR_PEER_LOST, why);
        t->events++;
    }
}

/* Deliver held messages whose turn has come. */
static void drain(struct lite_transport *t, int peer)
{
    struct efa_peer *p = &t->peers[peer];
    while (!p->dead && !p->bigrx && p->held && p->held->h.seq == p->rx_seq) {
        struct efa_rxbuf *b = p->held;
        p->held = b->next;
        b->next = NULL;
        deliver(t, peer, b);
    }
}

void lite_efa_rx_done(struct lite_transport *t, struct efa_rxbuf *b, size_t len)
{
    b->got = len;
    b->next = NULL;
    struct lite_efa_hdr *h = &b->h;
    int src = -1;
    const char *bad = NULL;
    if (lite_efa_hdr_decode(b->buf, len, h) != 0)
        bad = "malformed header";
    else if (h->src >= (uint32_t)t->world || (int)h->src == t->rank)
        bad = "impossible sender rank";
    if (!bad) {
        src = (int)h->src;
        if (h->type == LITE_EFA_T_BIG)
            bad = h->len <= t->cfg.eager_max ? "large message announced at eager size" : NULL;
        else if (h->len > t->cfg.eager_max)
            bad = "oversized eager message";
    }
    if (bad) {
        lite_efa_rx_repost(t, b);
        if (src >= 0 && !t->peers[src].dead) {
            char why[96];
            lite_fmt(why, sizeof(why), "bad message from rank %d: %s", src, bad);
            LITE_ERROR("%s rank %d: %s", EFA_LOG, t->rank, why);
            lite_efa_peer_fail(t, src, -LITE_ERR_PROTOCOL, why);
        } else if (src < 0) {
            LITE_WARN("%s rank %d: dropped a message: %s", EFA_LOG, t->rank, bad);
        }
        return;
    }
    struct efa_peer *p = &t->peers[src];
    if (p->dead || h->type == LITE_EFA_T_KEEPALIVE) {
        lite_efa_rx_repost(t, b);
        return;
    }
    if ((int32_t)(h->seq - p->rx_seq) < 0) {
        lite_efa_rx_repost(t, b);
        lite_efa_peer_fail(t, src, -LITE_ERR_PROTOCOL, "repeated message sequence number");
        return;
    }
    if (h->seq == p->rx_seq && !p->held && !p->bigrx) {
        deliver(t, src, b); /* its turn, nothing held before it: the usual case */
        return;
    }
    held_insert(p, b);
    drain(t, src);
}

void lite_efa_bigrx_done(struct lite_transport *t, struct efa_bigrx *g, int status, size_t len)
{
    if (g->mr)
        fi_close(&g->mr->fid);
    if (g->orphan) {
        free(g);
        return;
    }
    int peer = g->peer;
    struct efa_peer *p = &t->peers[peer];
    p->bigrx = NULL;
    void *token = g->token;
    char why[128] = "";
    if (!status && !g->discard && len != g->len) {
        /* Fewer bytes than the header announced: the core would take stale memory for them. */
        lite_fmt(why, sizeof(why),
                 "large message from rank %d: %zu bytes arrived of the %llu announced", peer, len,
                 (unsigned long long)g->len);
        status = -LITE_ERR_PROTOCOL;
    } else if (status) {
        status = lite_efa_loss_code(t, status);
        lite_fmt(why, sizeof(why), "large message from rank %d failed: %s", peer,
                 lite_strerror(status));
    }
    free(g);
    if (status) {
        lite_efa_peer_fail(t, peer, status, why);
        return;
    }
    t->up->recv_end(t->core, peer, token);
    t->events++;
    drain(t, peer);
}

int lite_efa_msg_flush(struct lite_transport *t)
{
    int n = 0;
    /* Only a post refused with -FI_EAGAIN leaves work behind: skip the O(world) scan when
     * none was. */
    if (!t->flush_pending)
        return n;
    t->flush_pending = false;
    for (int p = 0; p < t->world; p++) {
        struct efa_peer *pe = &t->peers[p];
        if (pe->bigrx && !pe->bigrx->posted && !pe->dead)
            big_post(t, pe->bigrx);
        if (pe->txq && !pe->dead)
            n += flush_peer(t, p);
        if (!pe->dead && (pe->txq || (pe->bigrx && !pe->bigrx->posted)))
            t->flush_pending = true;
    }
    return n;
}

void lite_efa_msg_peer_failed(struct lite_transport *t, int peer, int code)
{
    struct efa_peer *p = &t->peers[peer];
    while (p->txq) {
        struct efa_tx *x = p->txq;
        p->txq = x->next;
        void *op = x->op;
        /* A BIG message whose header left but whose payload did not is in flight too. */
        if (x->inflight) {
            x->orphan = true;
            x->parts -= x->big && !x->big_posted;
            if (x->parts == 0) {
                /* The header's completion came already: nothing more will. */
                inflight_del(p, x);
                tx_put(t, x);
            }
        } else {
            tx_put(t, x);
        }
        if (op)
            t->up->send_done(t->core, op, code);
    }
    p->txq_tail = NULL;
    /* Posted ops: the core hears now; the provider may still complete them, then they go. */
    for (struct efa_tx *x = p->inflight; x; x = x->inext) {
        if (!x->orphan && x->op)
            t->up->send_done(t->core, x->op, code);
        x->orphan = true;
    }
    while (p->held) {
        struct efa_rxbuf *b = p->held;
        p->held = b->next;
        lite_efa_rx_repost(t, b);
    }
    struct efa_bigrx *g = p->bigrx;
    p->bigrx = NULL;
    if (g) {
        if (g->posted) {
            g->orphan = true;
            fi_cancel(&t->rail[0].ep->fid, &g->c.fi);
        } else {
            if (g->mr)
                fi_close(&g->mr->fid);
            free(g);
        }
    }
}

void lite_efa_msg_fini(struct lite_transport *t)
{
    /* Called with the endpoints closed: nothing the provider held is referenced any more. */
    for (int i = 0; t->peers && i < t->world; i++) {
        struct efa_peer *p = &t->peers[i];
        while (p->inflight) {
            struct efa_tx *x = p->inflight;
            inflight_del(p, x);
            tx_put(t, x);
        }
        while (p->txq) {
            struct efa_tx *x = p->txq;
            p->txq = x->next;
            tx_put(t, x);
        }
        if (p->bigrx) {
            if (p->bigrx->mr)
                fi_close(&p->bigrx->mr->fid);
            free(p->bigrx);
            p->bigrx = NULL;
        }
    }
    while (t->chunks) {
        struct efa_txchunk *c = t->chunks;
        t->chunks = c->next;
        lite_efa_mr_free(t, c->mr);
        free(c->mem);
        free(c->slots);
        free(c);
    }
    t->tx_free = NULL;
    lite_efa_mr_free(t, t->rx_mr);
    t->rx_mr = NULL;
    free(t->rx_mem);
    free(t->rxbufs);
    t->rx_mem = NULL;
    t->rxbufs = NULL;
}
