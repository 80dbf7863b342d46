/*
 * credits.c - credit-based flow control: the eager slots each peer may fill here, the sends
 * that wait for credit, and the control messages that carry returned credit.
 *
 * CREDITS. Each rank grants every peer `credits_max` eager slots. A message on the user or
 * collective channel (an eager message, or the announcement of a large one) takes a slot; the
 * receiver frees it when the message no longer occupies its memory (placed in a posted receive,
 * or delivered out of the unexpected queue) and returns freed slots piggy-backed on its next
 * message to that peer, or in a CREDIT control message once half the window is owed. A sender
 * without credit queues the send (the call still returns 0; the request completes later), in
 * posting order. The receiver enforces the grant: a peer exceeding its slots, or sending an
 * eager message at or above the rendezvous threshold, is refused as a protocol violation. So the
 * unexpected-message memory a peer can pin here is at most credits_max x rndv_threshold bytes.
 *
 * Control messages travel on LITE_CHAN_CTRL, take no credit, and are handled at once.
 *
 * The rendezvous (rndv.c) sits above: it decides how a message goes and hands this module the
 * message or its announcement (RTS) to send when credit allows.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "credits.h"
#include "request.h"

int lite_credit_init(struct lite_ctx *ctx, char *why, size_t why_len)
{
    ctx->credits_max = (uint32_t)ctx->s.credits;
    ctx->rndv_threshold = (size_t)ctx->s.rndv_threshold;
    for (int i = 0; i < ctx->s.world_size; i++)
        ctx->peers[i].credits = ctx->credits_max;
    return 0;
}

/* A control message to `peer`; `payload` must live until the backend is done with it, so it
 * is the request's own buffer (or NULL). `op` NULL: fire and forget through a heap request. */
int lite_ctrl_send(struct lite_ctx *ctx, int peer, uint8_t type, const void *payload, size_t len,
                   struct lite_request *op)
{
    struct lite_peer *p = &ctx->peers[peer];
    if (p->lost)
        return p->lost_code;
    struct lite_request *r = op;
    if (!r) {
        r = lite_request_new(ctx, LITE_REQ_SEND, LITE_CHAN_CTRL, peer, 0, NULL, 0);
        if (!r)
            return -ENOMEM;
        r->pending_ops = 1;
        r->kind = 0; /* internal: released by upcall.c's send_done */
    }
    struct lite_msg_hdr h = {.tag = ++p->ctrl_seq,
                             .len = len,
                             .channel = LITE_CHAN_CTRL,
                             .flags = type,
                             .credits = lite_credit_take_owed(p)};
    int rc = ctx->ops.msg_send(ctx->tp, peer, &h, payload, r);
    if (rc) { /* the credits did not leave: still owed */
        p->credits_owed += h.credits;
        p->rx_outstanding += h.credits;
    }
    if (rc && !op)
        lite_request_release(ctx, r);
    return rc;
}

int lite_ctrl_send_emu(struct lite_ctx *ctx, int peer, uint8_t type, const void *payload,
                       size_t len, struct lite_emu_op *emu)
{
    struct lite_request *r = lite_request_new(ctx, LITE_REQ_SEND, LITE_CHAN_CTRL, peer, 0, NULL, 0);
    if (!r)
        return -ENOMEM;
    r->pending_ops = 1;
    r->kind = 0; /* internal: released by up_send_done, which tells `emu` first */
    r->emu = emu;
    int rc = lite_ctrl_send(ctx, peer, type, payload, len, r);
    if (rc)
        lite_request_release(ctx, r);
    return rc;
}

/* Hand a user/collective message to the backend now: eager, or an RTS for a large one. */
static int post_now(struct lite_ctx *ctx, struct lite_request *r)
{
    struct lite_peer *p = &ctx->peers[r->peer];
    struct lite_msg_hdr h = {.tag = r->tag, .channel = r->channel};
    const void *payload = r->buf;
    h.len = r->len;
    if (r->rndv) {
        h.flags = LITE_MSGF_RTS;
        h.len = 16;
        payload = r->rndv->msg;
    }
    p->credits--;
    h.credits = lite_credit_take_owed(p);
    int rc = ctx->ops.msg_send(ctx->tp, r->peer, &h, payload, r);
    if (rc)
        lite_credit_unsent(p, h.credits);
    return rc;
}

/* Take r off a list if it is there (a backend that failed the peer inside msg_send may have
 * emptied the list already). */
static void unlink_req(struct lite_request **head, struct lite_request *r)
{
    for (struct lite_request **pp = head; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            r->next = NULL;
            return;
        }
}

/* Post r now. A large send is listed for its CTS before it goes (the answer may come at once)
 * and unlisted again if it failed or a backend already finished it. */
static int post_listed(struct lite_ctx *ctx, struct lite_peer *p, struct lite_request *r)
{
    if (r->rndv) {
        r->next = p->rndv_send;
        p->rndv_send = r;
    }
    int rc = post_now(ctx, r);
    if (r->rndv && (rc || r->state == LITE_REQ_DONE))
        unlink_req(&p->rndv_send, r);
    return rc;
}

/* Send what waits for credit, in order, as far as the credit goes. */
static void drain(struct lite_ctx *ctx, int peer)
{
    struct lite_peer *p = &ctx->peers[peer];
    while (p->sendq && p->credits > 0 && !p->lost) {
        struct lite_request *r = p->sendq;
        p->sendq = r->next;
        if (!p->sendq)
            p->sendq_tail = NULL;
        r->next = NULL;
        int rc = post_listed(ctx, p, r);
        if (rc) {
            lite_fail(ctx, rc, "queued send to rank %d failed: %s", peer, lite_strerror(rc));
            lite_request_finish(r, rc);
        }
    }
}

int lite_credit_send(struct lite_ctx *ctx, struct lite_request *r)
{
    struct lite_peer *p = &ctx->peers[r->peer];
    if (p->credits == 0 || p->sendq) {
        /* Out of credit: queue behind what already waits, so order is kept. */
        if (p->sendq_tail)
            p->sendq_tail->next = r;
        else
            p->sendq = r;
        p->sendq_tail = r;
        return 0;
    }
    return post_listed(ctx, p, r);
}

/* Which rule an arriving message broke (out of line: lite_credit_admit, on every message's path,
 * stays a few loads and one branch). */
static __attribute__((noinline, cold)) int admit_refused(struct lite_ctx *ctx, int peer,
                                                         const struct lite_msg_hdr *hdr)
{
    const struct lite_peer *p = &ctx->peers[peer];
    if ((uint64_t)p->credits + hdr->credits > ctx->credits_max)
        lite_fail(ctx, -LITE_ERR_PROTOCOL, "rank %d returned more credits than it had", peer);
    else if (p->rx_outstanding >= ctx->credits_max)
        lite_fail(ctx, -LITE_ERR_PROTOCOL, "rank %d sent beyond its %u credits", peer,
                  ctx->credits_max);
    else if (hdr->flags & ~LITE_MSGF_RTS)
        lite_fail(ctx, -LITE_ERR_PROTOCOL, "rank %d sent unknown message flags", peer);
    else
        lite_fail(ctx, -LITE_ERR_PROTOCOL,
                  "rank %d sent a %llu-byte eager message (rendezvous threshold %zu)", peer,
                  (unsigned long long)hdr->len, ctx->rndv_threshold);
    return -LITE_ERR_PROTOCOL;
}

int lite_credit_admit(struct lite_ctx *ctx, int peer, const struct lite_msg_hdr *hdr)
{
    struct lite_peer *p = &ctx->peers[peer];
    uint64_t credits = (uint64_t)p->credits + hdr->credits;
    if (credits > ctx->credits_max || p->rx_outstanding >= ctx->credits_max ||
        (hdr->flags & ~LITE_MSGF_RTS) ||
        (!(hdr->flags & LITE_MSGF_RTS) && hdr->len >= ctx->rndv_threshold))
        return admit_refused(ctx, peer, hdr);
    p->credits = (uint32_t)credits;
    if (hdr->credits && p->sendq)
        drain(ctx, peer);
    p->rx_outstanding++;
    return 0;
}

void lite_credit_freed(struct lite_ctx *ctx, int peer)
{
    struct lite_peer *p = &ctx->peers[peer];
    p->credits_owed++;
    /* Return credit explicitly once half the window is owed and no message carried it. */
    if (p->credits_owed >= ctx->credits_max / 2 && !p->lost)
        lite_ctrl_send(ctx, peer, LITE_CTRL_CREDIT, NULL, 0, NULL);
}

/* A wait is about to sleep: return what we owe to a peer that has no credit left. Credits go
 * back on their own only at half the window; receives may take a peer's messages in any tag
 * order, so a receiver can owe fewer than half while the rest of the window sits unexpected
 * here, and the sender's next message, the one we wait for, would wait for a credit that
 * never comes. */
void lite_credit_idle(struct lite_ctx *ctx)
{
    for (int i = 0; i < ctx->s.world_size; i++) {
        struct lite_peer *p = &ctx->peers[i];
        if (p->credits_owed && p->rx_outstanding >= ctx->credits_max && !p->lost &&
            i != ctx->s.rank)
            lite_ctrl_send(ctx, i, LITE_CTRL_CREDIT, NULL, 0, NULL);
    }
}

int lite_credit_ctrl_in(struct lite_ctx *ctx, int peer, const struct lite_msg_hdr *hdr)
{
    struct lite_peer *p = &ctx->peers[peer];
    if (p->rcvd_any[LITE_CHAN_CTRL] && hdr->tag <= p->last_rcvd_tag[LITE_CHAN_CTRL]) {
        lite_fail(ctx, -LITE_ERR_PROTOCOL, "rank %d repeated a control message", peer);
        return -LITE_ERR_PROTOCOL;
    }
    p->rcvd_any[LITE_CHAN_CTRL] = true;
    p->last_rcvd_tag[LITE_CHAN_CTRL] = hdr->tag;
    if (hdr->credits) {
        p->credits += hdr->credits;
        if (p->credits > ctx->credits_max) {
            lite_fail(ctx, -LITE_ERR_PROTOCOL, "rank %d returned more credits than it had", peer);
            return -LITE_ERR_PROTOCOL;
        }
        drain(ctx, peer);
    }
    p->rx_hdr = *hdr;
    return 0;
}

bool lite_credit_unqueue(struct lite_ctx *ctx, struct lite_request *r)
{
    struct lite_peer *p = &ctx->peers[r->peer];
    for (struct lite_request *q = p->sendq, *prev = NULL; q; prev = q, q = q->next) {
        if (q != r)
            continue;
        if (prev)
            prev->next = r->next;
        else
            p->sendq = r->next;
        if (p->sendq_tail == r)
            p->sendq_tail = prev;
        return true;
    }
    return false;
}
