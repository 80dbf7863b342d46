/*
 * request.c - the bottom of point-to-point messaging: requests (allocation, the per-context
 * cache, completion), the context's last error, and the record of lost peers and of failures
 * reported for later (handled by upcall.c when progress returns).
 */
#include <errno.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"
#include "request.h"

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
        ctx->stage_end(req); /* gpu_stage.c, installed by lite_init */
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

const char *lite_request_op_name(const struct lite_request *r)
{
    return r->kind == LITE_REQ_SEND   ? "send to"
           : r->kind == LITE_REQ_RECV ? "recv from"
                                      : "one-sided op with";
}

/* Record why request r ended with err: the op, its peer and, when that peer is lost, the cause.
 * A batch of one-sided ops to several peers (write_scatter, peer -1) names the lost ones. */
int lite_request_failed(struct lite_ctx *ctx, const struct lite_request *r, int err)
{
    char tag[40] = "";
    if (r->kind != LITE_REQ_RMA)
        lite_fmt(tag, sizeof(tag), " (tag %#llx)", (unsigned long long)r->tag);
    if (r->peer >= 0 && r->peer < ctx->s.world_size) {
        const struct lite_peer *p = &ctx->peers[r->peer];
        if (p->lost && err == p->lost_code)
            return lite_fail(ctx, err, "%s rank %d%s: %s: %s", lite_request_op_name(r), r->peer,
                             tag, lite_strerror(err), p->lost_why);
        return lite_fail(ctx, err, "%s rank %d%s: %s", lite_request_op_name(r), r->peer, tag,
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

/* The context's requests at its end: the cached ones, and those the user never waited for
 * (their handles end with the context, as lite_finalize documents). */
void lite_request_fini(struct lite_ctx *ctx)
{
    while (ctx->req_all) {
        free(ctx->req_all->rndv);
        lite_request_free(ctx, ctx->req_all);
    }
    ctx->req_cache = NULL;
    ctx->req_cached = 0;
}
