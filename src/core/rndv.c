/*
 * rndv.c - the rendezvous protocol for large messages, above the credits (credits.c) that its
 * announcements and control messages take or carry.
 *
 * RENDEZVOUS. A message of rndv_threshold bytes or more is announced (RTS: length and id); the
 * receiver, once a receive matches it, registers the receive buffer and answers CTS with its
 * remote descriptor; the sender writes the payload one-sidedly into it and, when the write is
 * complete at the receiver, sends FIN; the receiver finishes the receive on FIN. On transports
 * with native RMA the payload moves with no copy at either end. On transports where a message
 * cannot overtake an earlier write (LITE_CAP_ORDERED_WRITE_MSG: one byte stream per peer), the
 * FIN goes right behind the write, saving the round trip of the write's acknowledgement; the
 * send then completes when both the write and the FIN have.
 *
 * MESSAGE-ONLY BACKENDS. A backend without one-sided ops gets them from the core (rma_emu.c:
 * the write is a header message plus one data message that the target places straight into the
 * registered receive buffer), and the rendezvous runs over that unchanged, with the emulation's
 * ordered, revocable writes. Not eager or pipelined instead: the memory a peer can pin here is
 * bounded by credits x threshold, so a large eager message would need staging nobody bounds (and
 * a copy), and a pipeline of credit-sized chunks would wait for receives just the same; the
 * rendezvous costs one round trip and lands the payload in the user's buffer.
 *
 * RECEIVER-INITIATED RENDEZVOUS (collectives, LITE_CAP_REVOCABLE_RMA). A collective posts its
 * receives before the matching sends, with exact sizes, so for a large collective receive the
 * receiver registers the buffer at once and sends RTR (tag, its id, length, descriptor); the
 * sender of that tag skips RTS/CTS: it writes as soon as both its send and the RTR are there
 * (a send that comes first is parked, an RTR that comes first is kept, at most credits_max per
 * peer), then FIN. The announced receive stays posted, so an eager message of that tag (the
 * ranks disagree on the size) still matches it, and the announcement is withdrawn. Withdrawing
 * deregisters the buffer; a write still on its way is then refused by the target (that is why
 * the transport must make such a refusal harmless) and its FIN is ignored.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "credits.h"
#include "gpu.h"
#include "mr.h"
#include "request.h"
#include "rma_emu.h"
#include "rndv.h"

#define CTS_LEN (8 + 8 + 8 + LITE_RDESC_SIZE) /* sender id, receiver id, status, descriptor */
#define RTR_LEN (8 + 8 + 8 + LITE_RDESC_SIZE) /* tag, receiver id, length, descriptor */
#define FIN_LEN 24                            /* receiver id, status, bytes written */
_Static_assert(CTS_LEN <= LITE_RNDV_MSG_MAX && RTR_LEN <= LITE_RNDV_MSG_MAX, "lite_rndv.msg");

/* An RTR kept by the sender until its send is posted. */
struct lite_rtr {
    uint64_t tag, rid, len;
    lite_rdesc_t desc;
    struct lite_rtr *next;
};

/* Stages of a rendezvous request. */
enum {
    ST_RTS = 1,       /* sender: RTS sent, waiting for CTS */
    ST_WRITE = 2,     /* sender: write posted; FIN when it completes */
    ST_FIN = 3,       /* sender: FIN posted (after the write, or a refusal) */
    ST_CTS = 4,       /* receiver: CTS sent, waiting for FIN */
    ST_WRITE_FIN = 5, /* sender, ordered transport: write and FIN both posted */
    ST_PARK = 6,      /* sender, collective: waiting for the receiver's RTR */
    ST_RTR = 7,       /* receiver, collective: RTR sent, still posted, waiting for FIN */
    ST_PIPE = 8       /* sender, device buffer: chunk writes posted as their copies land */
};

static bool rtr_mode(const struct lite_ctx *ctx, uint8_t chan, size_t len)
{
    unsigned need = LITE_CAP_WRITE | LITE_CAP_REVOCABLE_RMA;
    return chan == LITE_CHAN_COLL && len >= ctx->rndv_threshold && (ctx->ops.caps & need) == need;
}

static void rtr_write(struct lite_ctx *ctx, struct lite_request *r, const struct lite_rtr *a);

/* Drop kept RTRs for tags below `tag`: sends to a peer are posted in increasing tag order, so
 * none will ever use them (their receiver got an eager message or an RTS instead). */
static void rtr_purge(struct lite_peer *p, uint64_t tag)
{
    for (struct lite_rtr **pp = &p->rtr_ready; *pp;) {
        if ((*pp)->tag < tag) {
            struct lite_rtr *a = *pp;
            *pp = a->next;
            free(a);
            p->nrtr--;
        } else {
            pp = &(*pp)->next;
        }
    }
}

int lite_rndv_send(struct lite_ctx *ctx, struct lite_request *r)
{
    struct lite_peer *p = &ctx->peers[r->peer];
    bool rtr = rtr_mode(ctx, r->channel, r->len);
    if (r->channel == LITE_CHAN_COLL)
        rtr_purge(p, rtr ? r->tag : r->tag + 1); /* a tag that goes eager drops its RTR too */
    if (rtr) {
        r->rndv = calloc(1, sizeof(*r->rndv));
        if (!r->rndv)
            return -ENOMEM;
        for (struct lite_rtr **pp = &p->rtr_ready; *pp; pp = &(*pp)->next) {
            if ((*pp)->tag == r->tag) {
                struct lite_rtr *a = *pp;
                *pp = a->next;
                p->nrtr--;
                rtr_write(ctx, r, a);
                free(a);
                return 0;
            }
        }
        r->rndv->stage = ST_PARK; /* until the receiver's RTR */
        r->next = p->rtr_wait;
        p->rtr_wait = r;
        return 0;
    }
    if (r->len >= ctx->rndv_threshold) {
        r->rndv = calloc(1, sizeof(*r->rndv));
        if (!r->rndv)
            return -ENOMEM;
        if (ctx->pipe_next && ctx->pipe_next->host == r->buf && ctx->pipe_next->len == r->len) {
            r->pipe = ctx->pipe_next; /* a staged device buffer, still being copied */
            ctx->pipe_next = NULL;
        }
        r->rndv->stage = ST_RTS;
        r->rndv->id = ++p->rndv_next_id;
        lite_put64(r->rndv->msg, r->len);
        lite_put64(r->rndv->msg + 8, r->rndv->id);
    }
    return lite_credit_send(ctx, r); /* now, or when credit returns */
}

int lite_rndv_inject(struct lite_ctx *ctx, uint8_t chan, int peer, uint64_t tag, const void *buf,
                     size_t len)
{
    struct lite_peer *p = &ctx->peers[peer];
    /* Behind queued sends it would overtake them; at rendezvous size it is no eager message. */
    if (!ctx->ops.msg_inject || p->credits == 0 || p->sendq || len >= ctx->rndv_threshold)
        return -EAGAIN;
    if (chan == LITE_CHAN_COLL)
        rtr_purge(p, tag + 1); /* as lite_rndv_send: a tag that goes eager drops its RTR */
    struct lite_msg_hdr h = {.tag = tag, .len = len, .channel = chan};
    p->credits--;
    h.credits = lite_credit_take_owed(p);
    int rc = ctx->ops.msg_inject(ctx->tp, peer, &h, buf);
    if (rc)
        lite_credit_unsent(p, h.credits);
    return rc;
}

/* Refuse a rendezvous nobody will receive (its collective ended without it): the sender's send
 * ends as if the receiver's buffer were too short. */
void lite_rndv_rts_refuse(struct lite_ctx *ctx, int peer, uint64_t len, uint64_t id)
{
    struct lite_request *r = lite_request_new(ctx, LITE_REQ_RECV, LITE_CHAN_COLL, peer, 0, NULL, 0);
    if (!r)
        return;
    lite_rndv_rts_matched(ctx, r, len ? len : 1, id); /* longer than 0 bytes: refused */
    lite_request_release(ctx, r);
}

/* ---- rendezvous, receiver side ---- */

void lite_rndv_rts_matched(struct lite_ctx *ctx, struct lite_request *r, uint64_t len, uint64_t id)
{
    struct lite_peer *p = &ctx->peers[r->peer];
    struct lite_rndv *rv = calloc(1, sizeof(*rv));
    int status = 0;
    if (!rv) {
        lite_request_finish(r, -ENOMEM);
        return;
    }
    r->rndv = rv;
    rv->stage = ST_CTS;
    rv->id = ++p->rndv_next_id;
    rv->peer_id = id;
    r->state = LITE_REQ_ACTIVE;
    r->bytes = len;
    lite_rdesc_t desc;
    memset(&desc, 0, sizeof(desc));
    if (len > r->len) {
        status = -LITE_ERR_TRUNCATED;
    } else {
        status = lite_mr_reg(ctx, r->buf, len ? len : 1, LITE_MEM_HOST, LITE_ACCESS_REMOTE_WRITE,
                             &rv->mr);
        if (!status)
            lite_mr_desc(ctx, rv->mr, &desc);
    }
    lite_put64(rv->msg, id);
    lite_put64(rv->msg + 8, rv->id);
    lite_put64(rv->msg + 16, (uint64_t)(int64_t)status);
    memcpy(rv->msg + 24, desc.bytes, LITE_RDESC_SIZE);
    /* The CTS goes out through a request of its own; this request waits for FIN. */
    struct lite_request *cts = lite_request_new(ctx, 0, LITE_CHAN_CTRL, r->peer, 0, NULL, 0);
    int rc = cts ? 0 : -ENOMEM;
    if (cts) {
        cts->pending_ops = 1;
        /* The payload lives in r->rndv until FIN, which comes only after the CTS left. A
         * refusal finishes r at once, and its owner may release it before the CTS has left:
         * then the CTS carries its own copy (freed with it). */
        const uint8_t *payload = rv->msg;
        if (status && (cts->rndv = malloc(sizeof(*cts->rndv))) != NULL) {
            memcpy(cts->rndv->msg, rv->msg, CTS_LEN);
            payload = cts->rndv->msg;
        } else if (status) {
            rc = -ENOMEM;
        }
        if (!rc)
            rc = lite_ctrl_send(ctx, r->peer, LITE_CTRL_CTS, payload, CTS_LEN, cts);
        if (rc)
            lite_request_release(ctx, cts);
    }
    if (rc || status) {
        if (rv->mr)
            lite_mr_dereg(ctx, rv->mr);
        rv->mr = NULL;
        r->bytes = 0;
        lite_request_finish(r, rc ? rc : status);
        return;
    }
    r->next = p->rndv_recv;
    p->rndv_recv = r;
}

static struct lite_request *take_by_id(struct lite_request **head, uint64_t id)
{
    for (struct lite_request **pp = head; *pp; pp = &(*pp)->next) {
        if ((*pp)->rndv->id == id) {
            struct lite_request *r = *pp;
            *pp = r->next;
            r->next = NULL;
            return r;
        }
    }
    return NULL;
}

/* ---- rendezvous, sender side ---- */

/* ---- a device buffer's send, chunk by chunk (docs/GPU.md, "Staging") ----
 * The CTS came while the chunks' device-to-host copies may still run: each chunk is written as
 * soon as its copy has landed, so the copies overlap the network. Ordered transports get the
 * FIN behind the last write (as start_write); others after every write has completed. */

static void pipe_unlist(struct lite_ctx *ctx, struct lite_request *r)
{
    for (struct lite_request **pp = &ctx->pipe_head; *pp; pp = &(*pp)->pipe->next) {
        if (*pp == r) {
            *pp = r->pipe->next;
            break;
        }
    }
    r->pipe->next = NULL;
    r->pipe->listed = false;
}

/* Every chunk is posted, or posting stopped at an error (rv->status). */
static void pipe_posted(struct lite_ctx *ctx, struct lite_request *r)
{
    struct lite_rndv *rv = r->rndv;
    if (!(ctx->ops.caps & LITE_CAP_ORDERED_WRITE_MSG)) {
        if (rv->pending == 0) { /* else the last write's completion comes here */
            rv->stage = ST_WRITE;
            lite_rndv_send_done(ctx, r, rv->status); /* FIN with the status */
        }
        return;
    }
    rv->stage = ST_WRITE_FIN;
    rv->pending++;
    lite_put64(rv->msg, rv->peer_id);
    lite_put64(rv->msg + 8, (uint64_t)(int64_t)rv->status);
    lite_put64(rv->msg + 16, rv->status ? 0 : r->len);
    int rc = lite_ctrl_send(ctx, r->peer, LITE_CTRL_FIN, rv->msg, FIN_LEN, r);
    if (rc) {
        if (!rv->status)
            rv->status = rc;
        if (--rv->pending == 0)
            lite_request_finish(r, rv->status);
    }
}

/* Post the writes of the chunks whose copies have landed, in order. */
static void pipe_step(struct lite_ctx *ctx, struct lite_request *r)
{
    struct lite_rndv *rv = r->rndv;
    struct lite_pipe *pp = r->pipe;
    if (!pp->listed)
        return; /* failed meanwhile (pipe_fail) */
    bool ordered = (ctx->ops.caps & LITE_CAP_ORDERED_WRITE_MSG) != 0;
    while (pp->posted < pp->nchunk && !rv->status) {
        int q = lite_gpu_event_query(pp->ev[pp->posted]);
        if (q == -EAGAIN)
            return; /* polled again by progress */
        if (q) {
            rv->status = lite_fail(ctx, q, "send to rank %d: copying a device buffer failed: %s",
                                   r->peer, lite_strerror(q));
            break;
        }
        size_t off = pp->posted * pp->chunk;
        struct lite_tp_rma *w = &pp->w[pp->posted];
        *w = rv->write;
        w->local = (unsigned char *)r->buf + off;
        w->len = r->len - off < pp->chunk ? r->len - off : pp->chunk;
        w->remote_offset = rv->write.remote_offset + off;
        if (ordered)
            w->flags |= LITE_RMA_F_LOCAL_DONE;
        pp->posted++;
        rv->pending++;
        int rc = lite_rma_post(ctx, w, r); /* may complete inside: pending counts it */
        if (rc) {
            rv->pending--;
            rv->status = lite_fail(ctx, rc, "rendezvous write to rank %d failed: %s", r->peer,
                                   lite_strerror(rc));
        }
    }
    pipe_unlist(ctx, r);
    pipe_posted(ctx, r);
}

static void pipe_poll(struct lite_ctx *ctx)
{
    for (struct lite_request *r = ctx->pipe_head, *nx; r; r = nx) {
        nx = r->pipe->next;
        pipe_step(ctx, r);
    }
}

/* A pipelined send's peer failed (or the context ends) before every chunk was posted. */
static void pipe_fail(struct lite_ctx *ctx, int peer, int code)
{
    for (struct lite_request *r = ctx->pipe_head, *nx; r; r = nx) {
        nx = r->pipe->next;
        if (peer >= 0 && r->peer != peer)
            continue;
        pipe_unlist(ctx, r);
        struct lite_rndv *rv = r->rndv;
        if (!rv->status)
            rv->status = code;
        rv->stage = ST_WRITE_FIN; /* the writes still out finish it */
        if (rv->pending == 0)
            lite_request_finish(r, rv->status);
    }
}

static void start_write(struct lite_ctx *ctx, struct lite_request *r)
{
    struct lite_rndv *rv = r->rndv;
    if (r->pipe) {
        rv->stage = ST_PIPE;
        rv->pending = 0;
        r->pipe->listed = true;
        r->pipe->next = ctx->pipe_head;
        ctx->pipe_head = r;
        ctx->pipe_poll = pipe_poll;
        pipe_step(ctx, r);
        return;
    }
    /* With the FIN right behind it (ordered transports), the write need not wait for its
     * acknowledgement: the send is complete when its buffer may be reused (as an MPI send is).
     * The stage is set before the post: the write may complete inside rma_post. */
    bool ordered = (ctx->ops.caps & LITE_CAP_ORDERED_WRITE_MSG) != 0;
    if (ordered)
        rv->write.flags |= LITE_RMA_F_LOCAL_DONE;
    rv->stage = ordered ? ST_WRITE_FIN : ST_WRITE;
    rv->pending = 2; /* ST_WRITE_FIN: the write and the FIN */
    int rc = lite_rma_post(ctx, &rv->write, r);
    if (rc) {
        lite_fail(ctx, rc, "rendezvous write to rank %d failed: %s", r->peer, lite_strerror(rc));
        lite_request_finish(r, rc);
        return;
    }
    if (!ordered)
        return; /* FIN when the write completes (lite_rndv_send_done) */
    /* The FIN cannot overtake the data: send it now. The write was checked against the
     * receiver's own fresh registration, so its status is 0 unless the connection dies, and
     * then the receiver never sees this FIN either. */
    lite_put64(rv->msg, rv->peer_id);
    lite_put64(rv->msg + 8, 0);
    lite_put64(rv->msg + 16, r->len);
    rc = lite_ctrl_send(ctx, r->peer, LITE_CTRL_FIN, rv->msg, FIN_LEN, r);
    if (rc) {
        /* No FIN completion will come: the write's (or this, if it came already) ends it. */
        if (!rv->status)
            rv->status = rc;
        if (--rv->pending == 0)
            lite_request_finish(r, rv->status);
    }
}

/* ---- receiver-initiated rendezvous (collectives) ---- */

/* Sender: both the send and its RTR are here. Write, or refuse a too-short buffer with FIN. */
static void rtr_write(struct lite_ctx *ctx, struct lite_request *r, const struct lite_rtr *a)
{
    struct lite_rndv *rv = r->rndv;
    rv->peer_id = a->rid;
    rv->rts_done = true;
    struct lite_rdesc_info ri;
    int rc = a->rid ? 0 : -LITE_ERR_REMOTE; /* the receiver could not register its buffer */
    if (!rc && r->len > a->len) {
        /* The receiver expects less: it fails with -LITE_ERR_TRUNCATED, the send is done. */
        rv->stage = ST_FIN;
        lite_put64(rv->msg, rv->peer_id);
        lite_put64(rv->msg + 8, (uint64_t)(int64_t)-LITE_ERR_TRUNCATED);
        lite_put64(rv->msg + 16, 0);
        rc = lite_ctrl_send(ctx, r->peer, LITE_CTRL_FIN, rv->msg, FIN_LEN, r);
        if (rc)
            lite_request_finish(r, rc);
        return;
    }
    if (!rc && !(rc = lite_rdesc_parse(ctx, &a->desc, r->peer, &ri)) && ri.len < a->len)
        rc = -LITE_ERR_PROTOCOL;
    if (rc) {
        lite_request_finish(r, rc);
        return;
    }
    rv->write = (struct lite_tp_rma){.kind = LITE_RMA_WRITE,
                                     .peer = r->peer,
                                     .local = r->buf,
                                     .len = r->len,
                                     .remote_addr = ri.addr,
                                     .remote_core_key = ri.core_key,
                                     .nrails = ri.nrails,
                                     .flags = LITE_RMA_F_TRUSTED};
    memcpy(rv->write.rkey, ri.rkey, sizeof(rv->write.rkey));
    start_write(ctx, r);
}

/* Sender: an RTR arrived (payload in m). */
static int rtr_arrived(struct lite_ctx *ctx, int peer, const uint8_t *m)
{
    struct lite_peer *p = &ctx->peers[peer];
    struct lite_rtr a = {.tag = lite_get64(m), .rid = lite_get64(m + 8), .len = lite_get64(m + 16)};
    memcpy(a.desc.bytes, m + 24, LITE_RDESC_SIZE);
    for (struct lite_request **pp = &p->rtr_wait; *pp; pp = &(*pp)->next) {
        if ((*pp)->tag == a.tag) {
            struct lite_request *r = *pp;
            *pp = r->next;
            r->next = NULL;
            rtr_write(ctx, r, &a);
            return 0;
        }
    }
    if (p->sent_any[LITE_CHAN_COLL] && a.tag <= p->last_sent_tag[LITE_CHAN_COLL])
        return 0; /* that tag went as an eager message: the receiver withdrew this RTR */
    if (p->nrtr >= ctx->credits_max) {
        lite_fail(ctx, -LITE_ERR_PROTOCOL, "rank %d announced more than %u receives", peer,
                  ctx->credits_max);
        return -LITE_ERR_PROTOCOL;
    }
    struct lite_rtr *k = malloc(sizeof(*k));
    if (!k)
        return -ENOMEM;
    *k = a;
    k->next = p->rtr_ready;
    p->rtr_ready = k;
    p->nrtr++;
    return 0;
}

bool lite_rndv_rtr_post(struct lite_ctx *ctx, struct lite_request *r)
{
    if (r->peer == ctx->s.rank || !rtr_mode(ctx, r->channel, r->len))
        return false;
    struct lite_peer *p = &ctx->peers[r->peer];
    struct lite_rndv *rv = calloc(1, sizeof(*rv));
    struct lite_request *req = lite_request_new(ctx, 0, LITE_CHAN_CTRL, r->peer, 0, NULL, 0);
    if (!rv || !req) {
        free(rv);
        lite_request_release(ctx, req);
        return false; /* no memory: the sender will wait; the collective's deadline ends it */
    }
    rv->stage = ST_RTR;
    rv->id = ++p->rndv_next_id;
    lite_rdesc_t desc;
    memset(&desc, 0, sizeof(desc));
    if (lite_mr_reg(ctx, r->buf, r->len, LITE_MEM_HOST, LITE_ACCESS_REMOTE_WRITE, &rv->mr) == 0)
        lite_mr_desc(ctx, rv->mr, &desc);
    lite_put64(rv->msg, r->tag);
    lite_put64(rv->msg + 8, rv->mr ? rv->id : 0); /* 0: refused (the send fails) */
    lite_put64(rv->msg + 16, r->len);
    memcpy(rv->msg + 24, desc.bytes, LITE_RDESC_SIZE);
    r->rndv = rv;
    req->pending_ops = 1;
    if (lite_ctrl_send(ctx, r->peer, LITE_CTRL_RTR, rv->msg, RTR_LEN, req)) {
        lite_request_release(ctx, req);
        lite_rndv_rtr_withdraw(ctx, r);
        return false;
    }
    return true;
}

void lite_rndv_rtr_withdraw(struct lite_ctx *ctx, struct lite_request *r)
{
    struct lite_rndv *rv = r->rndv;
    if (!rv || rv->stage != ST_RTR)
        return;
    if (rv->mr && lite_mr_dereg(ctx, rv->mr) == 0)
        rv->mr = NULL;
    if (rv->mr) /* a write still in place after the dereg wait: keep it registered (leaked) */
        LITE_ERROR("rank %d: a write from rank %d into a withdrawn receive did not end",
                   ctx->s.rank, r->peer);
    free(rv);
    r->rndv = NULL;
}

bool lite_rndv_send_parked(const struct lite_request *r)
{
    return r->kind == LITE_REQ_SEND && r->rndv && r->rndv->stage == ST_PARK;
}

void lite_rndv_send_unpark(struct lite_ctx *ctx, struct lite_request *r)
{
    struct lite_peer *p = &ctx->peers[r->peer];
    for (struct lite_request **pp = &p->rtr_wait; *pp; pp = &(*pp)->next) {
        if (*pp == r) {
            *pp = r->next;
            r->next = NULL;
            return;
        }
    }
}

/* Receiver: the announced receive with id `id` (it is still posted on the collective channel). */
static struct lite_request *take_announced(struct lite_peer *p, uint64_t id)
{
    for (struct lite_request **pp = &p->posted[LITE_CHAN_COLL]; *pp; pp = &(*pp)->next) {
        struct lite_request *r = *pp;
        if (r->rndv && r->rndv->stage == ST_RTR && r->rndv->id == id) {
            *pp = r->next;
            r->next = NULL;
            return r;
        }
    }
    return NULL;
}

/* ---- control messages ---- */

bool lite_rndv_ctrl_ok(const struct lite_msg_hdr *hdr)
{
    size_t want = hdr->flags == LITE_CTRL_CTS   ? CTS_LEN
                  : hdr->flags == LITE_CTRL_FIN ? FIN_LEN
                  : hdr->flags == LITE_CTRL_RTR ? RTR_LEN
                                                : 0;
    return hdr->flags >= LITE_CTRL_CTS && hdr->flags <= LITE_CTRL_RTR && hdr->len == want;
}

/* An abandoned send (lite_rndv_abandon) got its CTS: a FIN that cancels, so the receiver's
 * receive fails instead of waiting; the request goes when the FIN has left. */
static void cancel_fin(struct lite_ctx *ctx, struct lite_request *r)
{
    struct lite_rndv *rv = r->rndv;
    rv->stage = ST_FIN;
    rv->status = -LITE_ERR_CANCELLED;
    lite_put64(rv->msg, rv->peer_id);
    lite_put64(rv->msg + 8, (uint64_t)(int64_t)-LITE_ERR_CANCELLED);
    lite_put64(rv->msg + 16, 0);
    if (lite_ctrl_send(ctx, r->peer, LITE_CTRL_FIN, rv->msg, FIN_LEN, r))
        lite_request_release(ctx, r);
}

/* The answer to our RTS ends the send without a write. While the backend still owns the RTS
 * (some report its completion after the answer, and a hostile peer can answer one still
 * queued) the request is not finished yet: lite_rndv_send_done finishes it. */
static void cts_end(struct lite_request *r, int status)
{
    if (r->rndv->rts_done) {
        lite_request_finish(r, status);
        return;
    }
    r->rndv->status = status;
    r->rndv->cts_ended = true;
}

int lite_rndv_ctrl_end(struct lite_ctx *ctx, int peer)
{
    struct lite_peer *p = &ctx->peers[peer];
    const uint8_t *m = p->rx_small;
    switch (p->rx_hdr.flags) {
    case LITE_CTRL_CREDIT:
        break;
    case LITE_CTRL_CTS: {
        struct lite_request *r = take_by_id(&p->rndv_send, lite_get64(m));
        if (!r || r->rndv->stage != ST_RTS) {
            lite_fail(ctx, -LITE_ERR_PROTOCOL, "rank %d answered an unknown rendezvous", peer);
            return -LITE_ERR_PROTOCOL;
        }
        struct lite_rndv *rv = r->rndv;
        rv->peer_id = lite_get64(m + 8);
        int status = (int)(int64_t)lite_get64(m + 16);
        if (status > 0)
            status = -LITE_ERR_PROTOCOL;
        if (status) {
            /* The receiver refused (too short a buffer): the message is delivered as
             * truncated there; for the sender it is done. */
            cts_end(r, 0);
            break;
        }
        struct lite_rdesc_info ri;
        lite_rdesc_t d;
        memcpy(d.bytes, m + 24, LITE_RDESC_SIZE);
        int rc = lite_rdesc_parse(ctx, &d, peer, &ri);
        if (!rc && ri.len < r->len)
            rc = -LITE_ERR_PROTOCOL;
        if (rc) {
            cts_end(r, -LITE_ERR_PROTOCOL);
            return -LITE_ERR_PROTOCOL;
        }
        rv->write = (struct lite_tp_rma){.kind = LITE_RMA_WRITE,
                                         .peer = peer,
                                         .local = r->buf,
                                         .local_handle = NULL,
                                         .len = r->len,
                                         .remote_addr = ri.addr,
                                         .remote_offset = 0,
                                         .remote_core_key = ri.core_key,
                                         .nrails = ri.nrails,
                                         .flags = LITE_RMA_F_TRUSTED};
        memcpy(rv->write.rkey, ri.rkey, sizeof(rv->write.rkey));
        if (rv->abandoned) {
            /* The caller gave up on this send: the receiver's receive fails instead. */
            if (rv->rts_done)
                cancel_fin(ctx, r);
            else
                rv->cts_ended = true; /* the RTS's completion sends it */
            break;
        }
        rv->cts_seen = true;
        /* Some backends report the RTS's own completion after the answer: wait for both. */
        if (rv->rts_done)
            start_write(ctx, r);
        break;
    }
    case LITE_CTRL_RTR:
        return rtr_arrived(ctx, peer, m);
    case LITE_CTRL_FIN: {
        uint64_t id = lite_get64(m), len = lite_get64(m + 16);
        int status = (int)(int64_t)lite_get64(m + 8);
        struct lite_request *r = take_by_id(&p->rndv_recv, id);
        bool announced = !r && (r = take_announced(p, id)) != NULL;
        if (!r) {
            if (id && id <= p->rndv_next_id)
                break; /* for a receive withdrawn after its RTR: nothing to finish */
            lite_fail(ctx, -LITE_ERR_PROTOCOL, "rank %d finished an unknown rendezvous", peer);
            return -LITE_ERR_PROTOCOL;
        }
        if (r->rndv->mr)
            lite_mr_dereg(ctx, r->rndv->mr);
        r->rndv->mr = NULL;
        if (status > 0 || (!status && len > r->len))
            status = -LITE_ERR_PROTOCOL;
        if (announced)
            r->bytes = len; /* an RTS said the length; here only the FIN does */
        if (status)
            r->bytes = 0;
        lite_request_finish(r, status);
        break;
    }
    }
    return 0;
}

bool lite_rndv_send_done(struct lite_ctx *ctx, struct lite_request *r, int status)
{
    struct lite_rndv *rv = r->rndv;
    if (rv->stage == ST_RTS) {
        /* The RTS left; the request waits for CTS (on rndv_send). An error fails it. */
        if (status) {
            struct lite_peer *p = &ctx->peers[r->peer];
            take_by_id(&p->rndv_send, rv->id);
            if (rv->abandoned)
                lite_request_release(ctx, r); /* nobody holds it any more */
            else
                lite_request_finish(r, status);
            return true;
        }
        rv->rts_done = true;
        if (rv->cts_seen)
            start_write(ctx, r);
        else if (rv->cts_ended && rv->abandoned)
            cancel_fin(ctx, r);
        else if (rv->cts_ended)
            lite_request_finish(r, rv->status);
        return true;
    }
    if (rv->stage == ST_WRITE) {
        /* The data is in place at the receiver (or refused): tell it with FIN. */
        rv->status = status;
        rv->stage = ST_FIN;
        lite_put64(rv->msg, rv->peer_id);
        lite_put64(rv->msg + 8, (uint64_t)(int64_t)status);
        lite_put64(rv->msg + 16, status ? 0 : r->len);
        int rc = lite_ctrl_send(ctx, r->peer, LITE_CTRL_FIN, rv->msg, FIN_LEN, r);
        if (rc)
            lite_request_finish(r, rc);
        return true;
    }
    if (rv->stage == ST_PIPE) {
        if (status && !rv->status)
            rv->status = status;
        if (--rv->pending > 0 || r->pipe->listed)
            return true; /* pipe_step posts the rest */
        rv->stage = ST_WRITE;
        return lite_rndv_send_done(ctx, r, rv->status); /* FIN with the status */
    }
    if (rv->stage == ST_WRITE_FIN) {
        if (status && !rv->status)
            rv->status = status;
        if (--rv->pending > 0)
            return true;
        if (!rv->status)
            r->bytes = r->len;
        lite_request_finish(r, rv->status);
        return true;
    }
    if (rv->stage == ST_FIN) {
        if (rv->abandoned) { /* nobody holds it any more */
            lite_request_release(ctx, r);
            return true;
        }
        if (status == 0)
            r->bytes = r->len;
        lite_request_finish(r, rv->status ? rv->status : status);
        return true;
    }
    return false;
}

/* A blocking call timed out on r: end r's use of the caller's buffer without waiting for the
 * peer where that can be done. Returns 0 when the buffer is the caller's again (r released, or
 * kept by the library and never touching the buffer), -EBUSY when bytes are moving (the caller
 * waits for r to end). */
int lite_rndv_abandon(struct lite_ctx *ctx, struct lite_request *r)
{
    struct lite_rndv *rv = r->rndv;
    if (r->kind == LITE_REQ_SEND) {
        if (lite_credit_unqueue(ctx, r)) {
            /* still waiting for credit: nothing has left */
            lite_request_release(ctx, r);
            return 0;
        }
        if (rv && rv->stage == ST_RTS && !rv->cts_seen && !rv->cts_ended) {
            rv->abandoned = true; /* the CTS, if one comes, gets a FIN that cancels */
            r->pipe = NULL;       /* never written: its stager frees it */
            return 0;
        }
        return -EBUSY;
    }
    if (r->kind != LITE_REQ_RECV)
        return -EBUSY;
    if (r->waiting_on) {
        /* matched to a message still arriving into our own staging: it stays unexpected, for
         * a later receive of that tag */
        r->waiting_on->claimed = NULL;
        r->waiting_on = NULL;
        lite_request_release(ctx, r);
        return 0;
    }
    /* A rendezvous whose CTS went out (ST_CTS) waits: withdrawing the registration would make
     * the sender's write fail, and on some providers (tcp;ofi_rxm) a write to a closed key
     * breaks the whole connection. The sender writes as soon as it progresses. */
    return -EBUSY;
}

/* Internal control requests (kind 0) are released when the backend is done with them. */
static void fail_chain(struct lite_request **head, int code)
{
    while (*head) {
        struct lite_request *r = *head;
        *head = r->next;
        r->next = NULL;
        lite_request_finish(r, code);
    }
}

static void free_rtrs(struct lite_peer *p)
{
    while (p->rtr_ready) {
        struct lite_rtr *a = p->rtr_ready;
        p->rtr_ready = a->next;
        free(a);
    }
    p->nrtr = 0;
}

void lite_rndv_peer_failed(struct lite_ctx *ctx, int peer, int code)
{
    struct lite_peer *p = &ctx->peers[peer];
    pipe_fail(ctx, peer, code);
    fail_chain(&p->sendq, code);
    p->sendq_tail = NULL;
    fail_chain(&p->rndv_send, code);
    fail_chain(&p->rtr_wait, code);
    free_rtrs(p);
    for (struct lite_request *r = p->rndv_recv; r; r = r->next)
        if (r->rndv->mr) {
            lite_mr_dereg(ctx, r->rndv->mr);
            r->rndv->mr = NULL;
        }
    fail_chain(&p->rndv_recv, code);
}

void lite_rndv_fini(struct lite_ctx *ctx)
{
    pipe_fail(ctx, -1, -LITE_ERR_CANCELLED);
    for (int i = 0; ctx->peers && i < ctx->s.world_size; i++) {
        struct lite_peer *p = &ctx->peers[i];
        fail_chain(&p->sendq, -LITE_ERR_CANCELLED);
        fail_chain(&p->rndv_send, -LITE_ERR_CANCELLED);
        fail_chain(&p->rndv_recv, -LITE_ERR_CANCELLED);
        fail_chain(&p->rtr_wait, -LITE_ERR_CANCELLED);
        free_rtrs(p);
    }
}
