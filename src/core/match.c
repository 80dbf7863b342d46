/*
 * match.c - tagged matching: the receives posted and the messages that arrived before them
 * (exact tag per peer and channel), and the receive path the backends' upcalls take into it
 * (recv_begin, recv_end, recv_msg), control messages handed on to the rendezvous (rndv.c) or
 * the emulated one-sided ops (rma_emu.c).
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "credits.h"
#include "match.h"
#include "request.h"
#include "rma_emu.h"
#include "rndv.h"

#define finish lite_request_finish

static struct lite_request *take_posted(struct lite_peer *p, uint8_t chan, uint64_t tag)
{
    struct lite_request **pp = &p->posted[chan];
    for (; *pp; pp = &(*pp)->next) {
        if ((*pp)->tag == tag) {
            struct lite_request *hit = *pp;
            *pp = hit->next;
            hit->next = NULL;
            return hit;
        }
    }
    return NULL;
}

static struct lite_unexp *find_unexp(struct lite_peer *p, uint8_t chan, uint64_t tag)
{
    for (struct lite_unexp *u = p->unexp[chan]; u; u = u->next)
        if (u->tag == tag && !u->claimed)
            return u;
    return NULL;
}

static void unlink_unexp(struct lite_peer *p, struct lite_unexp *u)
{
    struct lite_unexp **pp = &p->unexp[u->channel];
    while (*pp && *pp != u)
        pp = &(*pp)->next;
    if (*pp)
        *pp = u->next;
    u->next = NULL;
}

void lite_match_purge_coll(struct lite_ctx *ctx, uint64_t below)
{
    for (int i = 0; i < ctx->s.world_size; i++) {
        struct lite_unexp **pp = &ctx->peers[i].unexp[LITE_CHAN_COLL];
        while (*pp) {
            struct lite_unexp *u = *pp;
            if (u->tag >= below || !u->complete || u->claimed) {
                pp = &u->next;
                continue;
            }
            *pp = u->next;
            LITE_DEBUG("rank %d: dropped a message of rank %d for a collective that ended "
                       "without it (tag %#llx)",
                       ctx->s.rank, i, (unsigned long long)u->tag);
            if (i != ctx->s.rank)
                lite_credit_freed(ctx, i);
            if (u->rts)
                lite_rndv_rts_refuse(ctx, i, u->len, u->rts_id);
            free(u->data);
            free(u);
        }
    }
}

static void append_posted(struct lite_peer *p, struct lite_request *r)
{
    struct lite_request **pp = &p->posted[r->channel];
    while (*pp)
        pp = &(*pp)->next;
    *pp = r;
}

void lite_match_unpost(struct lite_ctx *ctx, struct lite_request *r)
{
    if (r->kind != LITE_REQ_RECV || r->peer < 0 || r->peer >= ctx->s.world_size)
        return;
    struct lite_request **pp = &ctx->peers[r->peer].posted[r->channel];
    while (*pp && *pp != r)
        pp = &(*pp)->next;
    if (*pp)
        *pp = r->next;
}

static void append_unexp(struct lite_peer *p, struct lite_unexp *u)
{
    struct lite_unexp **pp = &p->unexp[u->channel];
    while (*pp)
        pp = &(*pp)->next;
    *pp = u;
}

/* Deliver a complete unexpected message into a receive; its credit slot is free afterwards. */
static void deliver_unexp(struct lite_ctx *ctx, struct lite_request *r, struct lite_unexp *u)
{
    if (r->peer != ctx->s.rank && u->channel != LITE_CHAN_CTRL)
        lite_credit_freed(ctx, r->peer);
    if (u->rts) {
        lite_rndv_rts_matched(ctx, r, u->len, u->rts_id);
    } else if (u->len > r->len) {
        r->bytes = 0;
        finish(r, -LITE_ERR_TRUNCATED);
    } else {
        if (u->len)
            memcpy(r->buf, u->data, u->len);
        r->bytes = u->len;
        finish(r, 0);
    }
    free(u->data);
    free(u);
}

/* ---- the receive path (upcalls) ---- */

/* The token of a receive tells recv_end what it filled: a request, an unexpected buffer (low
 * bit set), or the peer's small buffer for an RTS or a control message (these markers). */
#define TOKEN_UNEXP ((uintptr_t)1)
static char token_rts, token_ctrl;

/* A control message: the rendezvous's or, where this context emulates one-sided ops (the peer
 * runs the same backend), the emulation's; a native backend's peer has no business sending
 * those. */
static int ctrl_begin(struct lite_ctx *ctx, int peer, const struct lite_msg_hdr *hdr, void **dst)
{
    bool emu = hdr->flags >= LITE_CTRL_EMU_FIRST && hdr->flags <= LITE_CTRL_EMU_LAST && ctx->emu;
    if (!emu && !lite_rndv_ctrl_ok(hdr)) {
        lite_fail(ctx, -LITE_ERR_PROTOCOL, "rank %d sent a malformed control message", peer);
        return -LITE_ERR_PROTOCOL;
    }
    int rc = lite_credit_ctrl_in(ctx, peer, hdr);
    if (rc)
        return rc;
    if (emu)
        return lite_emu_ctrl_begin(ctx, peer, hdr, dst);
    *dst = hdr->len ? ctx->peers[peer].rx_small : NULL;
    return 0;
}

static int ctrl_end(struct lite_ctx *ctx, int peer)
{
    if (ctx->peers[peer].rx_hdr.flags >= LITE_CTRL_EMU_FIRST)
        return lite_emu_ctrl_end(ctx, peer);
    return lite_rndv_ctrl_end(ctx, peer);
}

/* Out of line, so that admit() stays short. */
static __attribute__((noinline, cold)) int tag_refused(struct lite_ctx *ctx, int peer,
                                                       const struct lite_msg_hdr *hdr)
{
    uint8_t ch = hdr->channel;
    return lite_fail(ctx, -LITE_ERR_PROTOCOL,
                     "rank %d sent tag %#llx after %#llx on channel %u: tags must increase", peer,
                     (unsigned long long)hdr->tag,
                     (unsigned long long)ctx->peers[peer].last_rcvd_tag[ch], ch);
}

/* What every eager message or RTS on the user and collective channels passes: the credit it
 * used, and tags that strictly increase per peer and channel (anything else is a broken or
 * hostile peer). */
static inline int admit(struct lite_ctx *ctx, int peer, const struct lite_msg_hdr *hdr)
{
    struct lite_peer *p = &ctx->peers[peer];
    uint8_t ch = hdr->channel;
    if (peer != ctx->s.rank) {
        int rc = lite_credit_admit(ctx, peer, hdr);
        if (rc)
            return rc;
    }
    if (p->rcvd_any[ch] && hdr->tag <= p->last_rcvd_tag[ch])
        return tag_refused(ctx, peer, hdr);
    p->rcvd_any[ch] = true;
    p->last_rcvd_tag[ch] = hdr->tag;
    return 0;
}

/* A posted receive takes an eager message: where its payload goes (NULL: discard it). */
static void *accept_eager(struct lite_ctx *ctx, struct lite_request *r,
                          const struct lite_msg_hdr *hdr)
{
    /* An eager message for an announced receive: the sender did not take the RTR. */
    if (r->rndv)
        lite_rndv_rtr_withdraw(ctx, r);
    r->state = LITE_REQ_ACTIVE;
    r->bytes = hdr->len;
    if (hdr->len > r->len) {
        r->truncated = true;
        return NULL;
    }
    return r->buf;
}

/* All of an accepted message is in: its credit slot is free, the receive done. */
static void recv_filled(struct lite_ctx *ctx, int peer, struct lite_request *r)
{
    if (peer != ctx->s.rank && r->channel != LITE_CHAN_CTRL)
        lite_credit_freed(ctx, peer);
    if (r->truncated) {
        r->bytes = 0;
        finish(r, -LITE_ERR_TRUNCATED);
    } else {
        finish(r, 0);
    }
}

int lite_match_recv_begin(struct lite_core *core, int peer, const struct lite_msg_hdr *hdr,
                          void **dst, void **token)
{
    struct lite_ctx *ctx = (struct lite_ctx *)core;
    if (peer < 0 || peer >= ctx->s.world_size || hdr->channel >= LITE_CHAN_COUNT)
        return -LITE_ERR_PROTOCOL;
    struct lite_peer *p = &ctx->peers[peer];
    uint8_t ch = hdr->channel;
    if (ch == LITE_CHAN_CTRL) {
        int rc = ctrl_begin(ctx, peer, hdr, dst);
        *token = &token_ctrl;
        p->rx_token = NULL;
        return rc;
    }
    int rc = admit(ctx, peer, hdr);
    if (rc)
        return rc;
    if (hdr->flags & LITE_MSGF_RTS) {
        if (hdr->len != 16)
            return -LITE_ERR_PROTOCOL;
        p->rx_hdr = *hdr;
        *dst = p->rx_small;
        *token = &token_rts;
        p->rx_token = NULL;
        return 0;
    }
    struct lite_request *r = take_posted(p, ch, hdr->tag);
    if (r) {
        *dst = accept_eager(ctx, r, hdr);
        *token = r;
    } else {
        struct lite_unexp *u = calloc(1, sizeof(*u));
        void *data = hdr->len ? malloc(hdr->len) : NULL;
        if (!u || (hdr->len && !data)) {
            free(u);
            free(data);
            lite_fail(ctx, -ENOMEM, "no memory for an unexpected %llu-byte message from rank %d",
                      (unsigned long long)hdr->len, peer);
            return -ENOMEM;
        }
        u->tag = hdr->tag;
        u->channel = ch;
        u->len = hdr->len;
        u->data = data;
        append_unexp(p, u);
        *dst = data;
        *token = (void *)((uintptr_t)u | TOKEN_UNEXP);
    }
    p->rx_token = *token;
    return 0;
}

/* An RTS is in: match it to a posted receive, or keep it as an unexpected (data-less) entry. */
static void rts_arrived(struct lite_ctx *ctx, int peer)
{
    struct lite_peer *p = &ctx->peers[peer];
    uint64_t len = lite_get64(p->rx_small), id = lite_get64(p->rx_small + 8);
    struct lite_request *r = take_posted(p, p->rx_hdr.channel, p->rx_hdr.tag);
    if (r) {
        lite_rndv_rtr_withdraw(ctx, r);
        lite_credit_freed(ctx, peer);
        lite_rndv_rts_matched(ctx, r, len, id);
        return;
    }
    struct lite_unexp *u = calloc(1, sizeof(*u));
    if (!u) {
        LITE_ERROR("rank %d: out of memory for a rendezvous announcement from rank %d", ctx->s.rank,
                   peer);
        return;
    }
    u->tag = p->rx_hdr.tag;
    u->channel = p->rx_hdr.channel;
    u->complete = true;
    u->rts = true;
    u->rts_id = id;
    u->len = len;
    append_unexp(p, u);
}

void lite_match_recv_end(struct lite_core *core, int peer, void *token)
{
    struct lite_ctx *ctx = (struct lite_ctx *)core;
    ctx->peers[peer].rx_token = NULL;
    if (token == &token_ctrl) {
        int rc = ctrl_end(ctx, peer);
        if (rc)
            LITE_ERROR("rank %d: bad control message from rank %d", ctx->s.rank, peer);
        return;
    }
    if (token == &token_rts) {
        rts_arrived(ctx, peer);
        return;
    }
    if ((uintptr_t)token & TOKEN_UNEXP) {
        struct lite_unexp *u = (struct lite_unexp *)((uintptr_t)token & ~TOKEN_UNEXP);
        u->complete = true;
        if (u->claimed) {
            /* A receive was posted while the payload was arriving: hand it over now. */
            struct lite_request *r = u->claimed;
            r->waiting_on = NULL;
            unlink_unexp(&ctx->peers[peer], u);
            deliver_unexp(ctx, r, u);
        }
        return;
    }
    recv_filled(ctx, peer, token);
}

/* The whole message is in memory. The usual case, an eager message that the first receive
 * posted on its channel takes, is matched, copied and completed here (an 8-byte ping-pong's
 * every message); the rest goes the way of recv_begin + copy + recv_end. */
int lite_match_recv_msg(struct lite_core *core, int peer, const struct lite_msg_hdr *hdr,
                        const void *payload)
{
    struct lite_ctx *ctx = (struct lite_ctx *)core;
    uint8_t ch = hdr->channel;
    if (peer >= 0 && peer < ctx->s.world_size && ch < LITE_CHAN_CTRL &&
        !(hdr->flags & LITE_MSGF_RTS)) {
        struct lite_peer *p = &ctx->peers[peer];
        struct lite_request *r = p->posted[ch];
        if (r && r->tag == hdr->tag) {
            int rc = admit(ctx, peer, hdr);
            if (rc)
                return rc;
            p->posted[ch] = r->next;
            r->next = NULL;
            void *dst = accept_eager(ctx, r, hdr);
            if (dst && hdr->len)
                memcpy(dst, payload, hdr->len);
            recv_filled(ctx, peer, r);
            return 0;
        }
    }
    void *dst = NULL, *token = NULL;
    int rc = lite_match_recv_begin(core, peer, hdr, &dst, &token);
    if (rc < 0)
        return rc;
    if (dst && hdr->len)
        memcpy(dst, payload, hdr->len);
    lite_match_recv_end(core, peer, token);
    return 0;
}

static void fail_list(struct lite_request **head, int code)
{
    while (*head) {
        struct lite_request *r = *head;
        *head = r->next;
        r->next = NULL;
        finish(r, code);
    }
}

/* A lost peer: the message arriving from it and the receives posted for it fail. */
void lite_match_peer_lost(struct lite_ctx *ctx, int peer)
{
    struct lite_peer *p = &ctx->peers[peer];
    /* The message that was arriving is lost with its peer. */
    void *tok = p->rx_token;
    p->rx_token = NULL;
    if (tok && ((uintptr_t)tok & TOKEN_UNEXP)) {
        struct lite_unexp *u = (struct lite_unexp *)((uintptr_t)tok & ~TOKEN_UNEXP);
        unlink_unexp(p, u);
        if (u->claimed) {
            u->claimed->waiting_on = NULL;
            finish(u->claimed, p->lost_code);
        }
        free(u->data);
        free(u);
    } else if (tok) {
        finish((struct lite_request *)tok, p->lost_code);
    }
    for (struct lite_request *r = p->posted[LITE_CHAN_COLL]; r; r = r->next)
        lite_rndv_rtr_withdraw(ctx, r); /* release announced buffers: nothing will write there */
    for (int ch = 0; ch < LITE_CHAN_COUNT; ch++)
        fail_list(&p->posted[ch], p->lost_code);
}

/* ---- posting a receive, cancelling ---- */

int lite_post_recv(struct lite_ctx *ctx, uint8_t chan, int peer, uint64_t tag, void *buf,
                   size_t len, struct lite_request **out)
{
    int rc = lite_peer_check(ctx, peer, "recv");
    if (rc)
        return rc;
    if (!buf && len)
        return lite_fail(ctx, -EINVAL, "recv: NULL buffer with length %zu", len);
    struct lite_peer *p = &ctx->peers[peer];
    struct lite_request *r = lite_request_new(ctx, LITE_REQ_RECV, chan, peer, tag, buf, len);
    if (!r)
        return lite_fail(ctx, -ENOMEM, "recv: out of memory");
    struct lite_unexp *u = find_unexp(p, chan, tag);
    if (u) {
        if (u->complete) {
            unlink_unexp(p, u);
            deliver_unexp(ctx, r, u);
        } else {
            /* Still arriving: it stays queued (so a lost peer can fail it) until recv_end. */
            u->claimed = r;
            r->waiting_on = u;
            r->state = LITE_REQ_ACTIVE;
        }
    } else if (p->lost) {
        lite_request_release(ctx, r);
        return lite_fail(ctx, p->lost_code, "recv from rank %d: peer lost earlier: %s", peer,
                         p->lost_why);
    } else {
        append_posted(p, r);
        if (chan == LITE_CHAN_COLL)
            lite_rndv_rtr_post(ctx, r); /* a large collective receive announces its buffer */
    }
    *out = r;
    return 0;
}

int lite_request_cancel(struct lite_ctx *ctx, struct lite_request *req)
{
    if (!req)
        return -EINVAL;
    if (req->state == LITE_REQ_DONE) {
        lite_request_release(ctx, req);
        return 0;
    }
    if (lite_rndv_send_parked(req)) {
        /* a collective send still waiting for the receiver's RTR: nothing has moved */
        lite_rndv_send_unpark(ctx, req);
        lite_request_release(ctx, req);
        return 0;
    }
    if (req->kind != LITE_REQ_RECV || req->state != LITE_REQ_POSTED)
        return lite_fail(ctx, -EBUSY, "cancel: the request is already moving data");
    lite_match_unpost(ctx, req);
    lite_rndv_rtr_withdraw(ctx, req);
    lite_request_release(ctx, req);
    return 0;
}

/* The unexpected messages and posted receives at the context's end. */
void lite_match_fini(struct lite_ctx *ctx)
{
    for (int i = 0; ctx->peers && i < ctx->s.world_size; i++) {
        struct lite_peer *p = &ctx->peers[i];
        for (int ch = 0; ch < LITE_CHAN_COUNT; ch++) {
            while (p->unexp[ch]) {
                struct lite_unexp *u = p->unexp[ch];
                p->unexp[ch] = u->next;
                free(u->data);
                free(u);
            }
            while (p->posted[ch]) {
                struct lite_request *r = p->posted[ch];
                p->posted[ch] = r->next;
                lite_request_release(ctx, r);
            }
        }
    }
}
