/*
 * quic_frame.h - what the quic backend decodes from a peer itself (ngtcp2 decodes the packets):
 * the bytes of a connection's receive stream cut into the core's frames (src/core/wire.c: a
 * 48-byte header, then the payload) however the packets split them, and the check of the
 * HELLO, the first frame, which names the sender's rank and carries the bootstrap nonces; and
 * the preamble a connection of a link starts with (HELLO, then ACK: the link bytes the peer
 * took), checked against the link it joins. Header-only and free of ngtcp2, so the fuzz target
 * (tests/fuzz/fuzz_quic_stream.c) runs it as quic.c does.
 */
#ifndef LITE_QUIC_FRAME_H
#define LITE_QUIC_FRAME_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tp_support.h"

#define QUIC_SMALL_MAX  4096                /* payloads handed over whole (msg) up to this */
#define QUIC_FRAME_MAX  ((uint64_t)1 << 48) /* longest payload a frame may announce */
#define QUIC_ERR_REFUSE (-EACCES)           /* a certificate that contradicts the HELLO */

/* What the receive stream's frames turn into; each returns 0 or a negative code (why filled). */
struct quic_rx_ops {
    /* The first frame: the peer's HELLO. */
    int (*hello)(void *u, const struct lite_wire_hdr *h, char *why, size_t why_len);
    /* A whole message of at most QUIC_SMALL_MAX bytes, its payload in hand. */
    int (*msg)(void *u, const struct lite_msg_hdr *h, const uint8_t *payload, char *why,
               size_t why_len);
    /* A longer one: where its h->len payload bytes go (NULL: nowhere), then end() once they
     * are all there. */
    int (*begin)(void *u, const struct lite_msg_hdr *h, void **dst, void **token);
    void (*end)(void *u, void *token);
};

struct quic_rx {
    uint8_t hbuf[LITE_WIRE_HDR_LEN]; /* a frame header being gathered */
    size_t hfill;
    bool in_body, small_mode, hello_rx;
    bool discard; /* closing: payloads are skipped, nothing goes up */
    struct lite_msg_hdr rh;
    uint64_t body_left;
    uint8_t *dst;
    void *token;
    uint8_t *small; /* QUIC_SMALL_MAX bytes: a short payload split across packets */
};

static inline void quic_rx_free(struct quic_rx *rx)
{
    free(rx->small);
    rx->small = NULL;
}

/* Feed the next n bytes of the stream, in order. 0, or a negative code with why filled: the
 * stream is broken then (the connection is refused or closed), nothing more may be fed. */
static inline int quic_rx_feed(struct quic_rx *rx, const struct quic_rx_ops *ops, void *u,
                               const uint8_t *p, size_t n, char *why, size_t why_len)
{
    while (n) {
        if (!rx->in_body) {
            size_t k = LITE_WIRE_HDR_LEN - rx->hfill;
            if (k > n)
                k = n;
            memcpy(rx->hbuf + rx->hfill, p, k);
            rx->hfill += k;
            p += k;
            n -= k;
            if (rx->hfill < LITE_WIRE_HDR_LEN)
                return 0;
            rx->hfill = 0;
            struct lite_wire_hdr h;
            const char *bad = NULL;
            if (lite_wire_decode(rx->hbuf, QUIC_FRAME_MAX, &h, &bad) < 0) {
                lite_fmt(why, why_len, "it sent a bad frame (%s)", bad ? bad : "?");
                return -LITE_ERR_PROTOCOL;
            }
            if (h.type == LITE_WIRE_HELLO) {
                if (rx->hello_rx || h.len) {
                    lite_fmt(why, why_len, "it sent a second HELLO");
                    return -LITE_ERR_PROTOCOL;
                }
                int rc = ops->hello(u, &h, why, why_len);
                if (rc)
                    return rc;
                rx->hello_rx = true;
                continue;
            }
            if (!rx->hello_rx) {
                lite_fmt(why, why_len, "it sent a frame before its HELLO");
                return -LITE_ERR_PROTOCOL;
            }
            if (h.type != LITE_WIRE_MSG) {
                lite_fmt(why, why_len, "it sent a frame of a type this transport never sends");
                return -LITE_ERR_PROTOCOL;
            }
            rx->rh = (struct lite_msg_hdr){.tag = h.tag,
                                           .len = h.len,
                                           .channel = h.channel,
                                           .flags = h.flags,
                                           .credits = h.credits};
            rx->small_mode = false;
            rx->dst = NULL;
            if (rx->discard) {
                rx->body_left = h.len;
                rx->in_body = h.len > 0;
            } else if (h.len <= QUIC_SMALL_MAX && n >= h.len) {
                int rc = ops->msg(u, &rx->rh, p, why, why_len); /* the common case: no copy */
                if (rc)
                    return rc;
                p += h.len;
                n -= h.len;
            } else if (h.len <= QUIC_SMALL_MAX) {
                if (!rx->small && !(rx->small = malloc(QUIC_SMALL_MAX))) {
                    lite_fmt(why, why_len, "out of memory");
                    return -ENOMEM;
                }
                rx->small_mode = true;
                rx->dst = rx->small;
                rx->body_left = h.len;
                rx->in_body = true;
            } else {
                void *dst = NULL;
                int rc = ops->begin(u, &rx->rh, &dst, &rx->token);
                if (rc < 0) {
                    lite_fmt(why, why_len, "it sent a message the core refused (%d)", rc);
                    return rc;
                }
                rx->dst = dst;
                rx->body_left = h.len;
                rx->in_body = true;
            }
            continue;
        }
        size_t k = rx->body_left < n ? (size_t)rx->body_left : n;
        if (rx->dst)
            memcpy(rx->dst + (rx->rh.len - rx->body_left), p, k);
        rx->body_left -= k;
        p += k;
        n -= k;
        if (rx->body_left)
            return 0;
        rx->in_body = false;
        if (rx->discard)
            continue;
        if (rx->small_mode) {
            rx->small_mode = false;
            int rc = ops->msg(u, &rx->rh, rx->small, why, why_len);
            if (rc)
                return rc;
        } else {
            ops->end(u, rx->token);
        }
    }
    return 0;
}

/* Who may say HELLO to this rank, and with what. */
struct quic_hello_ctx {
    int rank, world;
    uint64_t nonce;             /* this rank's bootstrap nonce */
    const uint64_t *peer_nonce; /* world entries: each rank's, from the bootstrap */
    int dialled;                /* the rank this side dialled (client), -1 on the server side */
    bool cert_checked;          /* security ca: the rank must be the certificate's */
    int cert_rank;              /* the certificate's rank, -1 when it names none */
};

/* The HELLO's sender: its rank (>= 0), or a negative code with why filled. */
static inline int quic_hello_check(const struct quic_hello_ctx *x, const struct lite_wire_hdr *h,
                                   char *why, size_t why_len)
{
    if (h->tag >= (uint64_t)x->world || (int)h->tag == x->rank) {
        lite_fmt(why, why_len, "its HELLO names no rank of this job");
        return -LITE_ERR_PROTOCOL;
    }
    int r = (int)h->tag;
    if (h->key != x->nonce || h->offset != x->peer_nonce[r]) {
        lite_fmt(why, why_len,
                 "it belongs to another job or an earlier run (it says it is rank %d)", r);
        return -LITE_ERR_PROTOCOL;
    }
    if (x->dialled >= 0 ? r != x->dialled : r > x->rank) {
        lite_fmt(why, why_len, "it says it is rank %d, which dials no connection to this rank", r);
        return -LITE_ERR_PROTOCOL;
    }
    if (x->cert_checked && x->cert_rank != r) {
        if (x->cert_rank >= 0)
            lite_fmt(why, why_len, "it says it is rank %d, but its certificate is rank %d's", r,
                     x->cert_rank);
        else
            lite_fmt(why, why_len, "it says it is rank %d, but its certificate names no rank", r);
        return QUIC_ERR_REFUSE;
    }
    return r;
}

/* ---- a connection's preamble: HELLO (rank, both incarnations, epoch), then ACK ---- */

#define QUIC_PRE_LEN (2 * LITE_WIRE_HDR_LEN)

enum { QUIC_LINK_INIT, QUIC_LINK_UP, QUIC_LINK_DOWN, QUIC_LINK_FAILED };

/* What the peer's preamble says. */
struct quic_preamble {
    int rank;         /* the sender (quic_hello_check) */
    uint32_t epoch;   /* the link epoch its HELLO names */
    uint64_t applied; /* its ACK: bytes of this side's link stream it took */
    bool takeover;    /* server: the link is up here, the peer saw a break first: break it */
};

/* The link the preamble's rank names, as this side has it. */
struct quic_link_view {
    bool server;         /* this side accepted the connection */
    int state;           /* QUIC_LINK_* */
    bool other_conn;     /* another live connection carries the link already */
    bool resumable;      /* reconnection is on */
    uint32_t link_epoch; /* the link's epoch */
    uint32_t conn_epoch; /* client: the epoch this connection was dialled for */
    uint64_t tx_acked;   /* link bytes the peer took before */
    uint64_t tx_end;     /* link bytes queued so far */
};

/* Decode the QUIC_PRE_LEN bytes of a preamble and check its HELLO: the sender's rank (>= 0,
 * out filled but for takeover), or a negative code with why filled. */
static inline int quic_preamble_decode(const struct quic_hello_ctx *x, const uint8_t *pre,
                                       struct quic_preamble *out, char *why, size_t why_len)
{
    struct lite_wire_hdr h, a;
    const char *bad = NULL;
    if (lite_wire_decode(pre, QUIC_FRAME_MAX, &h, &bad) < 0) {
        lite_fmt(why, why_len, "it sent a bad frame (%s)", bad ? bad : "?");
        return -LITE_ERR_PROTOCOL;
    }
    if (h.type != LITE_WIRE_HELLO || h.len) {
        lite_fmt(why, why_len, "it sent a frame before its HELLO");
        return -LITE_ERR_PROTOCOL;
    }
    int r = quic_hello_check(x, &h, why, why_len);
    if (r < 0)
        return r;
    if (lite_wire_decode(pre + LITE_WIRE_HDR_LEN, QUIC_FRAME_MAX, &a, &bad) < 0 ||
        a.type != LITE_WIRE_FENCE || a.tag || a.len) {
        lite_fmt(why, why_len, "its HELLO is not followed by an ACK");
        return -LITE_ERR_PROTOCOL;
    }
    *out = (struct quic_preamble){.rank = r, .epoch = h.imm, .applied = a.key};
    return r;
}

/* Check a decoded preamble against its link (every check before anything changes): 0, with
 * p->takeover set, or a negative code with why filled (QUIC_ERR_REFUSE: a late or lost
 * resume, refused without a protocol error). */
static inline int quic_preamble_link_check(const struct quic_link_view *v, struct quic_preamble *p,
                                           char *why, size_t why_len)
{
    p->takeover = false;
    if (v->server) {
        if (v->state == QUIC_LINK_INIT) {
            if (v->other_conn) {
                lite_fmt(why, why_len, "rank %d is connected already (a second connection)",
                         p->rank);
                return -LITE_ERR_PROTOCOL;
            }
            if (p->epoch) {
                lite_fmt(why, why_len, "it resumes (epoch %u) a link this rank never had",
                         p->epoch);
                return -LITE_ERR_PROTOCOL;
            }
        } else if (v->state == QUIC_LINK_FAILED || !v->resumable) {
            lite_fmt(why, why_len, "it resumes the link to rank %d, which is lost already",
                     p->rank);
            return QUIC_ERR_REFUSE;
        } else if (p->epoch <= v->link_epoch) {
            lite_fmt(why, why_len,
                     "it resumes epoch %u of rank %d's link, at %u already (a late attempt)",
                     p->epoch, p->rank, v->link_epoch);
            return QUIC_ERR_REFUSE;
        } else if (v->state == QUIC_LINK_UP) {
            p->takeover = true;
        }
    } else if (p->epoch != v->conn_epoch) {
        lite_fmt(why, why_len, "its HELLO names epoch %u, this connection is epoch %u", p->epoch,
                 v->conn_epoch);
        return -LITE_ERR_PROTOCOL;
    }
    if (p->applied < v->tx_acked || p->applied > v->tx_end) {
        lite_fmt(why, why_len,
                 "it says it took %llu bytes of this rank's link stream, which has %llu (%llu "
                 "taken before)",
                 (unsigned long long)p->applied, (unsigned long long)v->tx_end,
                 (unsigned long long)v->tx_acked);
        return -LITE_ERR_PROTOCOL;
    }
    return 0;
}

#endif
