/*
 * p2p.c - blocking sends and receives of host buffers (what lite_send and lite_recv run, and
 * gpu_stage.c on its bounce buffers), what such a call does when it times out, lite_progress,
 * and the end of point-to-point state. The public calls that take a buffer: dispatch.c;
 * lite_test, lite_wait and lite_cancel, which collectives' requests share: wait.c.
 */
#include <errno.h>
#include <string.h>

#include "match.h"
#include "p2p.h"
#include "post.h"
#include "progress.h"
#include "request.h"
#include "rndv.h"

#define CHECK_CTX(ctx)                                                                             \
    do {                                                                                           \
        if (!(ctx))                                                                                \
            return -EINVAL;                                                                        \
    } while (0)

/* A blocking send or receive timed out. The caller's buffer must be theirs again when the call
 * returns: withdraw what has not started; what is moving bytes is waited for (bounded by the
 * op timeout and by the peer's liveness), and then its outcome is the call's. */
static int give_up(struct lite_ctx *ctx, struct lite_request *r, lite_status_t *st)
{
    char detail[sizeof(ctx->last_error)];
    memcpy(detail, ctx->last_error, sizeof(detail));
    if (r->state == LITE_REQ_POSTED && r->kind == LITE_REQ_RECV) {
        lite_request_cancel(ctx, r);
        return -ETIMEDOUT;
    }
    if (r->state != LITE_REQ_DONE && lite_rndv_abandon(ctx, r) == 0) {
        memcpy(ctx->last_error, detail, sizeof(detail));
        return -ETIMEDOUT;
    }
    /* what the log names: the wait releases r */
    const char *what = r->kind == LITE_REQ_SEND ? "send to" : "recv from";
    int peer = r->peer;
    unsigned long long tag = (unsigned long long)r->tag;
    int rc = lite_request_wait(ctx, r, ctx->s.op_timeout_ms, st);
    if (rc == -ETIMEDOUT)
        LITE_ERROR("rank %d: %s rank %d (tag %#llx) still moves bytes after its timeout; its "
                   "buffer stays in use until it ends",
                   ctx->s.rank, what, peer, tag);
    else if (rc == 0)
        LITE_INFO("rank %d: %s rank %d (tag %#llx) ended after its timeout, with its data",
                  ctx->s.rank, what, peer, tag);
    return rc;
}

int lite_p2p_send(struct lite_ctx *ctx, int peer, uint64_t tag, const void *buf, size_t len,
                  int timeout_ms)
{
    CHECK_CTX(ctx);
    int rc = lite_send_check(ctx, LITE_CHAN_USER, peer, tag, buf, len);
    if (rc)
        return rc;
    /* A small message the backend sends with its bytes needs no request and no wait. */
    if (peer != ctx->s.rank) {
        rc = lite_rndv_inject(ctx, LITE_CHAN_USER, peer, tag, buf, len);
        if (rc == 0) {
            lite_note_sent(ctx, LITE_CHAN_USER, peer, tag);
            return 0;
        }
        if (rc != -EAGAIN)
            return lite_send_failed(ctx, peer, rc);
    }
    lite_request_t *r;
    rc = lite_post_checked(ctx, LITE_CHAN_USER, peer, tag, buf, len, false, &r);
    if (rc)
        return rc;
    rc = lite_request_wait(ctx, r, timeout_ms, NULL);
    if (rc == -ETIMEDOUT)
        rc = give_up(ctx, r, NULL);
    return rc;
}

int lite_p2p_recv(struct lite_ctx *ctx, int peer, uint64_t tag, void *buf, size_t len,
                  size_t *received, int timeout_ms)
{
    lite_request_t *r;
    lite_status_t st = {0};
    CHECK_CTX(ctx);
    int rc = lite_post_recv(ctx, LITE_CHAN_USER, peer, tag, buf, len, &r);
    if (rc)
        return rc;
    rc = lite_request_wait(ctx, r, timeout_ms, &st);
    if (rc == -ETIMEDOUT)
        rc = give_up(ctx, r, &st);
    if (received)
        *received = rc ? 0 : st.bytes;
    return rc;
}

LITE_API int lite_progress(lite_ctx_t *ctx)
{
    CHECK_CTX(ctx);
    int rc = lite_progress_poll(ctx);
    return rc < 0 ? rc : 0;
}

void lite_p2p_fini(struct lite_ctx *ctx)
{
    lite_match_fini(ctx);
    /* Last: the cached requests, and those the user never waited for. */
    lite_request_fini(ctx);
}
