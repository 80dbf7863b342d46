/*
 * p2p.c - tagged point-to-point messaging: posting, matching (exact tag per peer and channel),
 * the unexpected queue, request completion, and the upcalls backends report through.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"
#include "gpu_stage.h"

int lite_fail(struct lite_ctx *ctx, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->last_error, sizeof(ctx->last_error), fmt, ap);
    va_end(ap);
    LITE_DEBUG("%s", ctx->last_error);
    return code;
}

void lite_request_finish(struct lite_request *r, int error)
{
    r->error = error;
    r->state = LITE_REQ_DONE;
}
#define finish lite_request_finish

/* A request per message: reusing released ones instead of malloc + free saves ~200
 * instructions of an 8-byte ping-pong's round trip (callgrind, glibc 2.36). A context is used by
 * one thread at a time, so the cache needs no lock. */
#if defined(__SANITIZE_ADDRESS__)
#define REQ_CACHE_MAX 0 /* sanitizer builds free every request: a use after release is caught */
#else
#define REQ_CACHE_MAX 64
#endif

struct lite_request *lite_request_alloc(struct lite_ctx *ctx)
{
    struct lite_request *r = calloc(1, sizeof(*r));
    if (r) {
        r->all_next = ctx->req_all;
        if (ctx->req_all)
            ctx->req_all->all_prev = r;
        ctx->req_all = r;
    }
    return r;
}

void lite_request_free(struct lite_ctx *ctx, struct lite_request *r)
{
    if (r->all_prev)
        r->all_prev->all_next = r->all_next;
    else
        ctx->req_all = r->all_next;
    if (r->all_next)
        r->all_next->all_prev = r->all_prev;
    free(r);
}

void lite_request_release(struct lite_ctx *ctx, struct lite_request *req)
{
    if (!req)
        return;
    if (req->stage)
        lite_stage_req_end(req);
    free(req->rndv);
    req->rndv = NULL;
    if (ctx->req_cached < REQ_CACHE_MAX) {
        req->next = ctx->req_cache;
        ctx->req_cache = req;
        ctx->req_cached++;
    } else {
        lite_request_free(ctx, req);
    }
}

bool lite_any_peer_lost(const struct lite_ctx *ctx)
{
    for (int i = 0; i < ctx->s.world_size; i++)
        if (ctx->peers[i].lost)
            return true;
    return false;
}

int lite_lost_peers(const struct lite_ctx *ctx, char *out, size_t len)
{
    int first = -1, more = 0;
    for (int i = 0; i < ctx->s.world_size; i++)
        if (ctx->peers[i].lost && first < 0)
            first = i;
        else if (ctx->peers[i].lost)
            more++;
    if (first < 0)
        lite_fmt(out, len, "no peer is lost");
    else if (more)
        lite_fmt(out, len, "rank %d is lost (%s), and %d more", first, ctx->peers[first].lost_why,
                 more);
    else
        lite_fmt(out, len, "rank %d is lost (%s)", first, ctx->peers[first].lost_why);
    return first;
}

static const char *op_name(const struct lite_request *r)
{
    return r->kind == LITE_REQ_SEND   ? "send to"
           : r->kind == LITE_REQ_RECV ? "recv from"
                                      : "one-sided op with";
}

/* Record why request r ended with err: the op, its peer and, when that peer is lost, the cause.
 * A batch of one-sided ops to several peers (write_scatter, peer -1) names the lost ones. */
static int req_fail(struct lite_ctx *ctx, const struct lite_request *r, int err)
{
    char tag[40] = "";
    if (r->kind != LITE_REQ_RMA)
        lite_fmt(tag, sizeof(tag), " (tag %#llx)", (unsigned long long)r->tag);
    if (r->peer >= 0 && r->peer < ctx->s.world_size) {
        const struct lite_peer *p = &ctx->peers[r->peer];
        if (p->lost && err == p->lost_code)
            return lite_fail(ctx, err, "%s rank %d%s: %s: %s", op_name(r), r->peer, tag,
                             lite_strerror(err), p->lost_why);
        return lite_fail(ctx, err, "%s rank %d%s: %s", op_name(r), r->peer, tag,
                         lite_strerror(err));
    }
    char lost[200];
    if (lite_lost_peers(ctx, lost, sizeof(lost)) >= 0)
        return lite_fail(ctx, err, "one-sided batch to several ranks: %s: %s", lite_strerror(err),
                         lost);
    return lite_fail(ctx, err, "one-sided batch to several ranks: %s", lite_strerror(err));
}

struct lite_request *lite_request_new(struct lite_ctx *ctx, uint8_t kind, uint8_t chan, int peer,
                                      uint64_t tag, void *buf, size_t len)
{
    struct lite_request *r = ctx->req_cache;
    if (r) {
        ctx->req_cache = r->next;
        ctx->req_cached--;
    } else if (!(r = lite_request_alloc(ctx))) {
        return NULL;
    }
    /* A copy of a blank request (up to the links of the context's list), then the fields: GCC
     * zeroes a compound literal of this size with `rep stos`, whose start-up costs more than
     * the plain stores of a copy. */
    static const struct lite_request blank = {.state = LITE_REQ_POSTED};
    memcpy(r, &blank, offsetof(struct lite_request, all_prev));
    r->kind = kind;
    r->channel = chan;
    r->peer = peer;
    r->tag = tag;
    r->buf = buf;
    r->len = len;
    return r;
}

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

void lite_p2p_purge_coll(struct lite_ctx *ctx, uint64_t below)
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
                lite_flow_freed(ctx, i);
            if (u->rts)
                lite_flow_rts_refuse(ctx, i, u->len, u->rts_id);
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

void lite_request_unpost(struct lite_ctx *ctx, struct lite_request *r)
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
        lite_flow_freed(ctx, r->peer);
    if (u->rts) {
        lite_flow_rts_matched(ctx, r, u->len, u->rts_id);
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

/* ---- upcalls ---- */

/* The token of a receive tells recv_end what it filled: a request, an unexpected buffer (low
 * bit set), or the peer's small buffer for an RTS or a control message (these markers). */
#define TOKEN_UNEXP ((uintptr_t)1)
static char token_rts, token_ctrl;

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
        int rc = lite_flow_admit(ctx, peer, hdr);
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
        lite_flow_rtr_withdraw(ctx, r);
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
        lite_flow_freed(ctx, peer);
    if (r->truncated) {
        r->bytes = 0;
        finish(r, -LITE_ERR_TRUNCATED);
    } else {
        finish(r, 0);
    }
}

static int up_recv_begin(struct lite_core *core, int peer, const struct lite_msg_hdr *hdr,
                         void **dst, void **token)
{
    struct lite_ctx *ctx = (struct lite_ctx *)core;
    if (peer < 0 || peer >= ctx->s.world_size || hdr->channel >= LITE_CHAN_COUNT)
        return -LITE_ERR_PROTOCOL;
    struct lite_peer *p = &ctx->peers[peer];
    uint8_t ch = hdr->channel;
    if (ch == LITE_CHAN_CTRL) {
        int rc = lite_flow_ctrl_begin(ctx, peer, hdr, dst);
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
        lite_flow_rtr_withdraw(ctx, r);
        lite_flow_freed(ctx, peer);
        lite_flow_rts_matched(ctx, r, len, id);
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

static void up_recv_end(struct lite_core *core, int peer, void *token)
{
    struct lite_ctx *ctx = (struct lite_ctx *)core;
    ctx->peers[peer].rx_token = NULL;
    if (token == &token_ctrl) {
        int rc = lite_flow_ctrl_end(ctx, peer);
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
static int up_recv_msg(struct lite_core *core, int peer, const struct lite_msg_hdr *hdr,
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
    int rc = up_recv_begin(core, peer, hdr, &dst, &token);
    if (rc < 0)
        return rc;
    if (dst && hdr->len)
        memcpy(dst, payload, hdr->len);
    up_recv_end(core, peer, token);
    return 0;
}

static void up_send_done(struct lite_core *core, void *op, int status)
{
    struct lite_ctx *ctx = (struct lite_ctx *)core;
    struct lite_request *r = op;
    if (r->kind == 0) {
        /* An internal control message (flow.c): nobody waits for it but an emulated op. */
        if (status)
            LITE_DEBUG("control message to rank %d failed: %s", r->peer, lite_strerror(status));
        struct lite_emu_op *e = r->emu;
        lite_request_release(ctx, r);
        if (e)
            lite_emu_msg_done(ctx, e, status);
        return;
    }
    if (r->rndv && lite_flow_send_done(ctx, r, status))
        return;
    if (status && !r->error)
        r->error = status;
    if (r->pending_ops > 1) {
        r->pending_ops--;
        return;
    }
    r->pending_ops = 0;
    if (r->kind == LITE_REQ_SEND && r->error == 0)
        r->bytes = r->len;
    finish(r, r->error);
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

/*
 * DEFERRED FAILURE. A backend may report a peer's failure from inside any op: progress, but also
 * msg_send or rma_post, where the core may be half-way through building the op's state (a
 * rendezvous listed for its CTS, an emulated op whose header left and whose data did not). So
 * the core never acts on it at once: it notes the failure and handles it when the backend's
 * progress call returns (at the next progress for one reported outside progress). Backends need
 * no private copy of that rule any more.
 */
void lite_peer_fail_deferred(struct lite_ctx *ctx, int peer, int code, const char *why)
{
    if (peer < 0 || peer >= ctx->s.world_size)
        return;
    struct lite_peer *p = &ctx->peers[peer];
    if (p->lost || p->fail_due)
        return;
    p->fail_due = true;
    p->fail_code = code ? code : -LITE_ERR_PEER_LOST;
    lite_fmt(p->fail_why, sizeof(p->fail_why), "%s", why ? why : "connection lost");
    ctx->fail_due = true;
}

static void peer_lost(struct lite_ctx *ctx, int peer, int status, const char *why);

void lite_peer_fail_run(struct lite_ctx *ctx)
{
    ctx->fail_due = false;
    for (int i = 0; i < ctx->s.world_size; i++) {
        struct lite_peer *p = &ctx->peers[i];
        if (p->fail_due) {
            p->fail_due = false;
            peer_lost(ctx, i, p->fail_code, p->fail_why);
        }
    }
}

static void up_peer_failed(struct lite_core *core, int peer, int status, const char *why)
{
    lite_peer_fail_deferred((struct lite_ctx *)core, peer, status, why);
}

static void peer_lost(struct lite_ctx *ctx, int peer, int status, const char *why)
{
    struct lite_peer *p = &ctx->peers[peer];
    if (p->lost)
        return;
    p->lost = true;
    p->lost_code = status ? status : -LITE_ERR_PEER_LOST;
    lite_fmt(p->lost_why, sizeof(p->lost_why), "%s", why ? why : "connection lost");
    /* Info, not warn: a peer that finalized first is reported the same way, and callers get
     * the typed error on every operation that involved the peer. */
    LITE_INFO("rank %d: lost rank %d: %s", ctx->s.rank, peer, p->lost_why);
    lite_fail(ctx, p->lost_code, "rank %d lost: %s", peer, p->lost_why);

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
        lite_flow_rtr_withdraw(ctx, r); /* release announced buffers: nothing will write there */
    for (int ch = 0; ch < LITE_CHAN_COUNT; ch++)
        fail_list(&p->posted[ch], p->lost_code);
    if (ctx->emu)
        lite_emu_peer_failed(ctx, peer, p->lost_code); /* may end rendezvous writes: first */
    lite_flow_peer_failed(ctx, peer, p->lost_code);
}

const struct lite_core_upcalls lite_core_upcalls = {
    .size = sizeof(struct lite_core_upcalls),
    .recv_begin = up_recv_begin,
    .recv_end = up_recv_end,
    .recv_msg = up_recv_msg,
    .send_done = up_send_done,
    .peer_failed = up_peer_failed,
    .rma_target = lite_mr_target,
    .rma_target_done = lite_mr_target_done,
    .imm_arrived = lite_imm_arrived,
};

/* ---- posting ---- */

static int check_peer(struct lite_ctx *ctx, int peer, const char *op)
{
    if (peer < 0 || peer >= ctx->s.world_size)
        return lite_fail(ctx, -EINVAL, "%s: peer %d out of range (world size %d)", op, peer,
                         ctx->s.world_size);
    return 0;
}

/* A send to this rank goes straight through the matching code, as if it had arrived. */
static int send_self(struct lite_ctx *ctx, uint8_t chan, uint64_t tag, const void *buf, size_t len,
                     struct lite_request *r)
{
    struct lite_msg_hdr h = {.tag = tag, .len = len, .channel = chan};
    void *dst, *token;
    int rc = up_recv_begin((struct lite_core *)ctx, ctx->s.rank, &h, &dst, &token);
    if (rc)
        return rc;
    if (dst && len)
        memcpy(dst, buf, len);
    up_recv_end((struct lite_core *)ctx, ctx->s.rank, token);
    r->bytes = len;
    finish(r, 0);
    return 0;
}

/* What every send to `peer` must pass before anything is posted. */
static int send_check(struct lite_ctx *ctx, uint8_t chan, int peer, uint64_t tag, const void *buf,
                      size_t len)
{
    int rc = check_peer(ctx, peer, "send");
    if (rc)
        return rc;
    if (!buf && len)
        return lite_fail(ctx, -EINVAL, "send: NULL buffer with length %zu", len);
    struct lite_peer *p = &ctx->peers[peer];
    if (p->lost)
        return lite_fail(ctx, p->lost_code, "send to rank %d: peer lost earlier: %s", peer,
                         p->lost_why);
    if (p->sent_any[chan] && tag <= p->last_sent_tag[chan])
        return lite_fail(ctx, -LITE_ERR_TAG_ORDER,
                         "send to rank %d: tag %#llx is not greater than the previous %#llx", peer,
                         (unsigned long long)tag, (unsigned long long)p->last_sent_tag[chan]);
    return 0;
}

static void note_sent(struct lite_ctx *ctx, uint8_t chan, int peer, uint64_t tag)
{
    ctx->peers[peer].sent_any[chan] = true;
    ctx->peers[peer].last_sent_tag[chan] = tag;
}

static int send_failed(struct lite_ctx *ctx, int peer, int rc)
{
    if (rc == -ENOSYS)
        return lite_fail(ctx, rc, "send is not supported by transport %s", ctx->ops.name);
    return lite_fail(ctx, rc, "send to rank %d failed: %s", peer, lite_strerror(rc));
}

/* A checked send with its request: looped back, injected (the request done at once), or handed
 * to flow control. `inject` false: the caller tried that already. */
static int post_checked(struct lite_ctx *ctx, uint8_t chan, int peer, uint64_t tag, const void *buf,
                        size_t len, bool inject, struct lite_request **out)
{
    struct lite_request *r =
        lite_request_new(ctx, LITE_REQ_SEND, chan, peer, tag, (void *)buf, len);
    if (!r)
        return lite_fail(ctx, -ENOMEM, "send: out of memory");
    r->pending_ops = 1;
    int rc = -EAGAIN;
    if (peer == ctx->s.rank) {
        rc = send_self(ctx, chan, tag, buf, len, r);
    } else {
        if (inject && (rc = lite_flow_inject(ctx, chan, peer, tag, buf, len)) == 0) {
            r->pending_ops = 0;
            r->bytes = len;
            finish(r, 0);
        }
        if (rc == -EAGAIN)
            rc = lite_flow_send(ctx, r);
    }
    if (rc) {
        lite_request_release(ctx, r);
        return send_failed(ctx, peer, rc);
    }
    note_sent(ctx, chan, peer, tag);
    *out = r;
    return 0;
}

int lite_post_send(struct lite_ctx *ctx, uint8_t chan, int peer, uint64_t tag, const void *buf,
                   size_t len, struct lite_request **out)
{
    int rc = send_check(ctx, chan, peer, tag, buf, len);
    return rc ? rc : post_checked(ctx, chan, peer, tag, buf, len, true, out);
}

int lite_post_recv(struct lite_ctx *ctx, uint8_t chan, int peer, uint64_t tag, void *buf,
                   size_t len, struct lite_request **out)
{
    int rc = check_peer(ctx, peer, "recv");
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
            lite_flow_rtr_post(ctx, r); /* a large collective receive announces its buffer */
    }
    *out = r;
    return 0;
}

/* ---- waiting ---- */

/* One round of progress: poll the backend, or sleep in it up to sleep_ms. Inlined into
 * lite_wait, whose spin is this call back to back: its length delays the sight of a message. */
static inline int progress_step(struct lite_ctx *ctx, int sleep_ms)
{
    if (sleep_ms > 0)
        lite_flow_idle(ctx);
    int rc = ctx->ops.progress(ctx->tp, sleep_ms);
    if (__builtin_expect(ctx->fail_due, 0))
        lite_peer_fail_run(ctx);
    if (sleep_ms == 0 && ctx->yield_polls)
        sched_yield(); /* oversubscribed host: let a rank with work run */
    if (rc < 0)
        return lite_fail(ctx, rc, "transport %s progress failed: %s", ctx->ops.name,
                         lite_strerror(rc));
    return rc;
}

/* A step of the library's own wait loops: a poll that found nothing is followed by the spin
 * pause (LITETX_SPIN_PAUSE_NS). lite_test and lite_progress do not pause: between the user's
 * calls there may be other work. */
static inline int wait_step(struct lite_ctx *ctx, int sleep_ms)
{
    int rc = progress_step(ctx, sleep_ms);
    if (rc == 0 && sleep_ms == 0 && !ctx->yield_polls)
        lite_cpu_relax(ctx->spin_pause);
    return rc;
}

int lite_progress_once(struct lite_ctx *ctx, int sleep_ms)
{
    return wait_step(ctx, sleep_ms);
}

int lite_progress_poll(struct lite_ctx *ctx)
{
    return progress_step(ctx, 0);
}

int lite_wait_all(struct lite_ctx *ctx, struct lite_request **reqs, int n, int64_t deadline_ns)
{
    struct lite_waiter w;
    lite_waiter_start(&w, deadline_ns, 0, ctx->spin_ns);
    int first_err = 0;
    for (;;) {
        int pending = 0;
        const struct lite_request *stuck = NULL;
        for (int i = 0; i < n; i++) {
            struct lite_request *r = reqs[i];
            if (!r)
                continue;
            if (r->state == LITE_REQ_DONE) {
                if (r->error && !first_err)
                    first_err = req_fail(ctx, r, r->error);
                lite_request_release(ctx, r);
                reqs[i] = NULL;
            } else {
                pending++;
                stuck = stuck ? stuck : r;
            }
        }
        if (!pending)
            return first_err;
        int sleep_ms = lite_waiter_next(&w);
        if (sleep_ms < 0)
            return lite_fail(ctx, -ETIMEDOUT,
                             "timed out: %d operation(s) pending, first: %s rank %d (tag %#llx)",
                             pending, op_name(stuck), stuck->peer, (unsigned long long)stuck->tag);
        int rc = lite_progress_once(ctx, sleep_ms);
        if (rc < 0)
            return rc;
    }
}

void lite_p2p_fini(struct lite_ctx *ctx)
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
    /* Last: the cached requests, and those the user never waited for (their handles end with
     * the context, as lite_finalize documents). */
    while (ctx->req_all) {
        free(ctx->req_all->rndv);
        lite_request_free(ctx, ctx->req_all);
    }
    ctx->req_cache = NULL;
    ctx->req_cached = 0;
}

/* ---- public API ---- */

#define CHECK_CTX(ctx)                                                                             \
    do {                                                                                           \
        if (!(ctx))                                                                                \
            return -EINVAL;                                                                        \
    } while (0)

LITE_API int lite_isend(lite_ctx_t *ctx, int peer, uint64_t tag, const void *buf, size_t len,
                        lite_request_t **req)
{
    CHECK_CTX(ctx);
    if (!req)
        return lite_fail(ctx, -EINVAL, "isend: NULL request pointer");
    if (lite_stage_msg_dev(ctx, buf))
        return lite_stage_isend(ctx, peer, tag, buf, len, req);
    return lite_post_send(ctx, LITE_CHAN_USER, peer, tag, buf, len, req);
}

LITE_API int lite_irecv(lite_ctx_t *ctx, int peer, uint64_t tag, void *buf, size_t len,
                        lite_request_t **req)
{
    CHECK_CTX(ctx);
    if (!req)
        return lite_fail(ctx, -EINVAL, "irecv: NULL request pointer");
    if (lite_stage_msg_dev(ctx, buf))
        return lite_stage_irecv(ctx, peer, tag, buf, len, req);
    return lite_post_recv(ctx, LITE_CHAN_USER, peer, tag, buf, len, req);
}

static void fill_status(struct lite_request *r, lite_status_t *st)
{
    if (r->stage) /* a staged receive's bytes reach the device before anyone sees it done */
        lite_stage_req_end(r);
    if (!st)
        return;
    st->peer = r->peer;
    st->tag = r->tag;
    st->bytes = r->bytes;
    st->error = r->error;
}

LITE_API int lite_test(lite_ctx_t *ctx, lite_request_t *req, lite_status_t *status)
{
    CHECK_CTX(ctx);
    if (!req)
        return lite_fail(ctx, -EINVAL, "test: NULL request");
    if (req->kind == LITE_REQ_COLL)
        return lite_coll_test(ctx, req, status);
    if (req->state != LITE_REQ_DONE) {
        int rc = progress_step(ctx, 0);
        if (rc < 0)
            return rc;
        if (req->state != LITE_REQ_DONE)
            return 0;
    }
    fill_status(req, status);
    int err = req->error;
    if (err)
        req_fail(ctx, req, err);
    lite_request_release(ctx, req);
    return err ? err : 1;
}

LITE_API int lite_wait(lite_ctx_t *ctx, lite_request_t *req, int timeout_ms, lite_status_t *status)
{
    CHECK_CTX(ctx);
    if (!req)
        return lite_fail(ctx, -EINVAL, "wait: NULL request");
    if (req->kind == LITE_REQ_COLL)
        return lite_coll_wait(ctx, req, timeout_ms, status);
    if (req->state == LITE_REQ_DONE && !req->error) {
        /* Done already (an injected send): no clock, no loop. */
        fill_status(req, status);
        lite_request_release(ctx, req);
        return 0;
    }
    struct lite_waiter w;
    lite_waiter_start(&w, 0, timeout_ms == LITE_TIMEOUT_DEFAULT ? ctx->s.op_timeout_ms : timeout_ms,
                      ctx->spin_ns);
    while (req->state != LITE_REQ_DONE) {
        int ms = lite_waiter_next(&w);
        if (ms < 0)
            return lite_fail(ctx, -ETIMEDOUT, "wait: %s rank %d (tag %#llx) timed out",
                             op_name(req), req->peer, (unsigned long long)req->tag);
        int rc = wait_step(ctx, ms);
        if (rc < 0)
            return rc;
    }
    fill_status(req, status);
    int err = req->error;
    if (err)
        req_fail(ctx, req, err);
    lite_request_release(ctx, req);
    return err;
}

LITE_API int lite_cancel(lite_ctx_t *ctx, lite_request_t *req)
{
    CHECK_CTX(ctx);
    if (!req)
        return -EINVAL;
    if (req->kind == LITE_REQ_COLL)
        return lite_coll_cancel(ctx, req);
    if (req->state == LITE_REQ_DONE) {
        lite_request_release(ctx, req);
        return 0;
    }
    if (lite_flow_send_parked(req)) {
        /* a collective send still waiting for the receiver's RTR: nothing has moved */
        lite_flow_send_unpark(ctx, req);
        lite_request_release(ctx, req);
        return 0;
    }
    if (req->kind != LITE_REQ_RECV || req->state != LITE_REQ_POSTED)
        return lite_fail(ctx, -EBUSY, "cancel: the request is already moving data");
    lite_request_unpost(ctx, req);
    lite_flow_rtr_withdraw(ctx, req);
    lite_request_release(ctx, req);
    return 0;
}

/* A blocking send or receive timed out. The caller's buffer must be theirs again when the call
 * returns: withdraw what has not started; what is moving bytes is waited for (bounded by the
 * op timeout and by the peer's liveness), and then its outcome is the call's. */
static int give_up(struct lite_ctx *ctx, struct lite_request *r, lite_status_t *st)
{
    char detail[sizeof(ctx->last_error)];
    memcpy(detail, ctx->last_error, sizeof(detail));
    if (r->state == LITE_REQ_POSTED && r->kind == LITE_REQ_RECV) {
        lite_cancel(ctx, r);
        return -ETIMEDOUT;
    }
    if (r->state != LITE_REQ_DONE && lite_flow_abandon(ctx, r) == 0) {
        memcpy(ctx->last_error, detail, sizeof(detail));
        return -ETIMEDOUT;
    }
    /* what the log names: the wait releases r */
    const char *what = r->kind == LITE_REQ_SEND ? "send to" : "recv from";
    int peer = r->peer;
    unsigned long long tag = (unsigned long long)r->tag;
    int rc = lite_wait(ctx, r, ctx->s.op_timeout_ms, st);
    if (rc == -ETIMEDOUT)
        LITE_ERROR("rank %d: %s rank %d (tag %#llx) still moves bytes after its timeout; its "
                   "buffer stays in use until it ends",
                   ctx->s.rank, what, peer, tag);
    else if (rc == 0)
        LITE_INFO("rank %d: %s rank %d (tag %#llx) ended after its timeout, with its data",
                  ctx->s.rank, what, peer, tag);
    return rc;
}

LITE_API int lite_send(lite_ctx_t *ctx, int peer, uint64_t tag, const void *buf, size_t len,
                       int timeout_ms)
{
    CHECK_CTX(ctx);
    if (lite_stage_msg_dev(ctx, buf))
        return lite_stage_send(ctx, peer, tag, buf, len, timeout_ms);
    int rc = send_check(ctx, LITE_CHAN_USER, peer, tag, buf, len);
    if (rc)
        return rc;
    /* A small message the backend sends with its bytes needs no request and no wait. */
    if (peer != ctx->s.rank) {
        rc = lite_flow_inject(ctx, LITE_CHAN_USER, peer, tag, buf, len);
        if (rc == 0) {
            note_sent(ctx, LITE_CHAN_USER, peer, tag);
            return 0;
        }
        if (rc != -EAGAIN)
            return send_failed(ctx, peer, rc);
    }
    lite_request_t *r;
    rc = post_checked(ctx, LITE_CHAN_USER, peer, tag, buf, len, false, &r);
    if (rc)
        return rc;
    rc = lite_wait(ctx, r, timeout_ms, NULL);
    if (rc == -ETIMEDOUT)
        rc = give_up(ctx, r, NULL);
    return rc;
}

LITE_API int lite_recv(lite_ctx_t *ctx, int peer, uint64_t tag, void *buf, size_t len,
                       size_t *received, int timeout_ms)
{
    lite_request_t *r;
    lite_status_t st = {0};
    if (ctx && lite_stage_msg_dev(ctx, buf))
        return lite_stage_recv(ctx, peer, tag, buf, len, received, timeout_ms);
    int rc = lite_irecv(ctx, peer, tag, buf, len, &r);
    if (rc)
        return rc;
    rc = lite_wait(ctx, r, timeout_ms, &st);
    if (rc == -ETIMEDOUT)
        rc = give_up(ctx, r, &st);
    if (received)
        *received = rc ? 0 : st.bytes;
    return rc;
}

LITE_API int lite_progress(lite_ctx_t *ctx)
{
    CHECK_CTX(ctx);
    int rc = progress_step(ctx, 0);
    return rc < 0 ? rc : 0;
}
