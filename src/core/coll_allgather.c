/*
 * coll_allgather.c - allgather: every rank sends its block to every rank in one step, each
 * block received straight into its place (a copy: the bytes are the senders' whatever the
 * order). Block of rank p: step 1.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"

static int ag_round(struct lite_coll_op *op, uint32_t t)
{
    size_t bytes = op->count * op->esz;
    int n = op->n, me = op->me, rc;
    if (!bytes)
        return 0;
    if (t == 0) {
        for (int i = 1; i < n; i++) {
            int p = (me - i + n) % n;
            if ((rc = lite_coll_recv(op, p, 1, op->rbuf + (size_t)p * bytes, bytes, UINT32_MAX)))
                return rc;
        }
        return 0;
    }
    uint8_t *mine = op->rbuf + (size_t)me * bytes;
    if (!op->inplace)
        memcpy(mine, op->sbuf, bytes);
    for (int i = 1; i < n; i++)
        if ((rc = lite_coll_send(op, (me + i) % n, 1, mine, bytes, UINT32_MAX)))
            return rc;
    return 0;
}

static int start(lite_ctx_t *ctx, const void *sendbuf, void *recvbuf, size_t count, int dtype,
                 struct lite_coll_op **opp)
{
    *opp = NULL;
    struct lite_coll_op *op;
    int rc = lite_coll_op_begin(ctx, LITE_COLL_ALLGATHER, count, dtype, -1, &op);
    if (!op)
        return rc;
    size_t esz = op->esz, bytes = count * esz;
    if (!rc && count > SIZE_MAX / esz / (size_t)op->n)
        rc = lite_coll_fail(op, -EINVAL, "count %zu is too large", count);
    if (!rc) {
        op->inplace =
            lite_coll_is_in_place(sendbuf) ||
            (count && recvbuf && sendbuf == (const uint8_t *)recvbuf + (size_t)op->me * bytes);
        if (count && (!recvbuf || (!op->inplace && !sendbuf)))
            rc = lite_coll_fail(op, -EINVAL, "NULL buffer with count %zu", count);
        else if (!op->inplace && lite_coll_overlap(sendbuf, bytes, recvbuf, bytes * (size_t)op->n))
            rc = lite_coll_fail(op, -EINVAL, "send and receive buffers overlap");
    }
    if (rc)
        return lite_coll_abort(op);
    op->sbuf = op->inplace ? NULL : sendbuf;
    op->rbuf = recvbuf;
    op->bytes_out = bytes * (size_t)op->n;
    op->nrounds = 2;
    op->round_fn = ag_round;
    op->eager = bytes <= LITE_COLL_EAGER;
    op->piggy = count > 0;
    rc = lite_coll_start(op);
    *opp = op;
    return rc;
}

int lite_coll_allgather(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf, size_t count,
                        int dtype, int timeout_ms)
{
    struct lite_coll_op *op;
    int rc = start(ctx, sendbuf, recvbuf, count, dtype, &op);
    return op ? lite_coll_run(op, timeout_ms) : rc;
}

int lite_coll_iallgather(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf, size_t count,
                         int dtype, struct lite_request **req)
{
    if (ctx && !req) {
        ctx->coll_seq++;
        return lite_fail(ctx, -EINVAL, "iallgather: NULL request pointer");
    }
    struct lite_coll_op *op;
    int rc = start(ctx, sendbuf, recvbuf, count, dtype, &op);
    if (!op)
        return rc;
    return rc ? lite_coll_run(op, 0) : lite_coll_to_request(op, req);
}
