/*
 * post.h - posting a send (post.c), and the checks and bookkeeping the blocking send shares
 * with it (inline: they are on every small message's path). Not installed.
 */
#ifndef LITE_POST_H
#define LITE_POST_H

#include "request.h"

/* What every send to `peer` must pass before anything is posted. */
static inline int lite_send_check(struct lite_ctx *ctx, uint8_t chan, int peer, uint64_t tag,
                                  const void *buf, size_t len)
{
    int rc = lite_peer_check(ctx, peer, "send");
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

static inline void lite_note_sent(struct lite_ctx *ctx, uint8_t chan, int peer, uint64_t tag)
{
    ctx->peers[peer].sent_any[chan] = true;
    ctx->peers[peer].last_sent_tag[chan] = tag;
}

/* A send the backend refused: recorded, with what transport or peer. */
int lite_send_failed(struct lite_ctx *ctx, int peer, int rc);
/* A checked send with its request: looped back, injected (the request done at once), or handed
 * to flow control. `inject` false: the caller tried that already. */
int lite_post_checked(struct lite_ctx *ctx, uint8_t chan, int peer, uint64_t tag, const void *buf,
                      size_t len, bool inject, struct lite_request **out);
/* Internal posting of a send with an explicit channel (collectives use LITE_CHAN_COLL). */
int lite_post_send(struct lite_ctx *ctx, uint8_t chan, int peer, uint64_t tag, const void *buf,
                   size_t len, struct lite_request **out);

#endif /* LITE_POST_H */
