/*
 * coll_barrier.c - barrier: a dissemination barrier over the collective channel.
 * Round k: send to (rank + 2^k) mod n, receive from (rank - 2^k) mod n; ceil(log2 n) rounds.
 * It runs on the round engine (coll_engine.c) like every collective, so that it starts only
 * after the context's earlier non-blocking collectives (tags to a peer must increase).
 */
#include <errno.h>
#include <stdlib.h>

#include "ctx.h"
#include "coll.h"

static int barrier_round(struct lite_coll_op *op, uint32_t k)
{
    static const uint8_t token = 0;
    int n = op->n, me = op->me, dist = 1 << k;
    int rc = lite_coll_recv(op, (me - dist + n) % n, k, &op->ctx->coll_sink, 1, k + 1);
    return rc ? rc : lite_coll_send(op, (me + dist) % n, k, &token, 1, k + 1);
}

static int start(lite_ctx_t *ctx, struct lite_coll_op **opp)
{
    *opp = NULL;
    struct lite_coll_op *op;
    int rc = lite_coll_op_begin(ctx, LITE_COLL_BARRIER, 0, LITE_U8, -1, &op);
    if (!op)
        return rc;
    if (rc)
        return lite_coll_abort(op);
    op->check = false; /* no arguments to compare */
    while ((1 << op->nrounds) < op->n)
        op->nrounds++;
    op->round_fn = barrier_round;
    rc = lite_coll_start(op);
    *opp = op;
    return rc;
}

LITE_API int lite_barrier(lite_ctx_t *ctx, int timeout_ms)
{
    if (!ctx)
        return -EINVAL;
    struct lite_coll_op *op;
    int rc = start(ctx, &op);
    return op ? lite_coll_run(op, timeout_ms) : rc;
}

LITE_API int lite_ibarrier(lite_ctx_t *ctx, lite_request_t **req)
{
    if (!ctx)
        return -EINVAL;
    if (!req) {
        ctx->coll_seq++;
        return lite_fail(ctx, -EINVAL, "ibarrier: NULL request pointer");
    }
    struct lite_coll_op *op;
    int rc = start(ctx, &op);
    if (!op)
        return rc;
    return rc ? lite_coll_run(op, 0) : lite_coll_to_request(op, req);
}
