/*
 * coll_barrier.c - barrier: a dissemination barrier over the collective channel.
 * Round k: send to (rank + 2^k) mod n, receive from (rank - 2^k) mod n; ceil(log2 n) rounds.
 */
#include <errno.h>

#include "ctx.h"
#include "coll.h"

LITE_API int lite_barrier(lite_ctx_t *ctx, int timeout_ms)
{
    if (!ctx)
        return -EINVAL;
    int n = ctx->s.world_size, me = ctx->s.rank;
    int64_t deadline =
        lite_deadline_ns(timeout_ms == LITE_TIMEOUT_DEFAULT ? ctx->s.op_timeout_ms : timeout_ms);
    uint64_t seq = ctx->coll_seq++;
    static const uint8_t token = 0;
    for (int k = 0, dist = 1; dist < n; k++, dist <<= 1) {
        struct lite_request *reqs[2] = {NULL, NULL};
        uint64_t tag = lite_coll_tag(seq, (uint32_t)k);
        int rc = lite_post_recv(ctx, LITE_CHAN_COLL, (me - dist + n) % n, tag, &ctx->coll_sink, 1,
                                &reqs[0]);
        if (!rc)
            rc = lite_post_send(ctx, LITE_CHAN_COLL, (me + dist) % n, tag, &token, 1, &reqs[1]);
        if (!rc)
            rc = lite_wait_all(ctx, reqs, 2, deadline);
        /* On a timeout, withdraw what is left; a send the backend still holds is completed by it
         * (the buffers it may still touch are static or in the context). */
        for (int i = 0; i < 2; i++)
            if (reqs[i])
                lite_cancel(ctx, reqs[i]);
        if (rc)
            return rc;
    }
    return 0;
}
