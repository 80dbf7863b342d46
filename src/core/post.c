/*
 * post.c - posting a send: the checks every send passes, then a send to this rank looped through
 * the matching, a small one injected, or the rest handed to the rendezvous and the credits.
 */
#include <errno.h>
#include <string.h>

#include "match.h"
#include "post.h"
#include "request.h"
#include "rndv.h"

/* A send to this rank goes straight through the matching code, as if it had arrived. */
static int send_self(struct lite_ctx *ctx, uint8_t chan, uint64_t tag, const void *buf, size_t len,
                     struct lite_request *r)
{
    struct lite_msg_hdr h = {.tag = tag, .len = len, .channel = chan};
    void *dst, *token;
    int rc = lite_match_recv_begin((struct lite_core *)ctx, ctx->s.rank, &h, &dst, &token);
    if (rc)
        return rc;
    if (dst && len)
        memcpy(dst, buf, len);
    lite_match_recv_end((struct lite_core *)ctx, ctx->s.rank, token);
    r->bytes = len;
    lite_request_finish(r, 0);
    return 0;
}

int lite_send_failed(struct lite_ctx *ctx, int peer, int rc)
{
    if (rc == -ENOSYS)
        return lite_fail(ctx, rc, "send is not supported by transport %s", ctx->ops.name);
    return lite_fail(ctx, rc, "send to rank %d failed: %s", peer, lite_strerror(rc));
}

/* A checked send with its request: looped back, injected (the request done at once), or handed
 * to flow control. `inject` false: the caller tried that already. */
int lite_post_checked(struct lite_ctx *ctx, uint8_t chan, int peer, uint64_t tag, const void *buf,
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
        if (inject && (rc = lite_rndv_inject(ctx, chan, peer, tag, buf, len)) == 0) {
            r->pending_ops = 0;
            r->bytes = len;
            lite_request_finish(r, 0);
        }
        if (rc == -EAGAIN)
            rc = lite_rndv_send(ctx, r);
    }
    if (rc) {
        lite_request_release(ctx, r);
        return lite_send_failed(ctx, peer, rc);
    }
    lite_note_sent(ctx, chan, peer, tag);
    *out = r;
    return 0;
}

int lite_post_send(struct lite_ctx *ctx, uint8_t chan, int peer, uint64_t tag, const void *buf,
                   size_t len, struct lite_request **out)
{
    int rc = lite_send_check(ctx, chan, peer, tag, buf, len);
    return rc ? rc : lite_post_checked(ctx, chan, peer, tag, buf, len, true, out);
}
