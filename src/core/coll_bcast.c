/*
 * coll_bcast.c - broadcast. A copy, so any schedule gives the root's bytes; two schedules:
 *
 *   direct  the root sends the buffer to every rank in one message each (latency: one step).
 *   pipe    chunks flow along the chain root, root+1, ..., root-1 (mod n): each rank forwards
 *           chunk k while chunk k+1 arrives, so the root sends the buffer once instead of n-1
 *           times. Receives are posted PIPE_WINDOW chunks ahead; chunk k uses step k+1.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"

#define PIPE_WINDOW 4

static int direct_round(struct lite_coll_op *op, uint32_t t)
{
    size_t bytes = op->count * op->esz;
    if (!bytes)
        return 0;
    if (t == 0 && op->me != op->root)
        return lite_coll_recv(op, op->root, 1, op->rbuf, bytes, UINT32_MAX);
    if (t == 1 && op->me == op->root) {
        for (int i = 1; i < op->n; i++) {
            int rc = lite_coll_send(op, (op->me + i) % op->n, 1, op->rbuf, bytes, UINT32_MAX);
            if (rc)
                return rc;
        }
    }
    return 0;
}

static size_t pipe_len(const struct lite_coll_op *op, size_t k)
{
    size_t c = op->plan.chunk_elems, lo = k * c;
    return (op->count - lo < c ? op->count - lo : c) * op->esz;
}

static int pipe_round(struct lite_coll_op *op, uint32_t t)
{
    int n = op->n, me = op->me, q = (me - op->root + n) % n, rc;
    int prev = (me - 1 + n) % n, next = (me + 1) % n;
    size_t K = op->nchunks, c = op->plan.chunk_elems * op->esz;
    if (t == 0) {
        for (size_t k = 0; q > 0 && k < K && k < PIPE_WINDOW; k++)
            if ((rc = lite_coll_recv(op, prev, (uint32_t)k + 1, op->rbuf + k * c, pipe_len(op, k),
                                     (uint32_t)k + 1)))
                return rc;
        return 0;
    }
    size_t k = t - 1; /* chunk to send on this round (it arrived: due t) */
    if (q > 0 && k + PIPE_WINDOW < K &&
        (rc = lite_coll_recv(op, prev, (uint32_t)(k + PIPE_WINDOW) + 1,
                             op->rbuf + (k + PIPE_WINDOW) * c, pipe_len(op, k + PIPE_WINDOW),
                             (uint32_t)(k + PIPE_WINDOW) + 1)))
        return rc;
    if (q < n - 1 && k < K)
        return lite_coll_send(op, next, (uint32_t)k + 1, op->rbuf + k * c, pipe_len(op, k), t + 2);
    return 0;
}

static int start(lite_ctx_t *ctx, void *buf, size_t count, int dtype, int root,
                 struct lite_coll_op **opp)
{
    *opp = NULL;
    struct lite_coll_op *op;
    int rc = lite_coll_op_begin(ctx, LITE_COLL_BCAST, count, dtype, -1, &op);
    if (!op)
        return rc;
    size_t esz = op->esz;
    if (!rc && (root < 0 || root >= op->n))
        rc = lite_coll_fail(op, -EINVAL, "root %d out of range (world size %d)", root, op->n);
    else if (!rc && count > SIZE_MAX / esz)
        rc = lite_coll_fail(op, -EINVAL, "count %zu is too large", count);
    else if (!rc && count && !buf)
        rc = lite_coll_fail(op, -EINVAL, "NULL buffer with count %zu", count);
    if (rc)
        return lite_coll_abort(op);
    op->root = root;
    op->rbuf = buf;
    op->sbuf = buf;
    op->bytes_out = count * esz;
    if (op->plan.algo == LITE_COLL_ALGO_PIPE && op->n > 1) {
        size_t c = op->plan.chunk_elems;
        op->nchunks = count ? (count + c - 1) / c : 0;
        op->nrounds = (uint32_t)op->nchunks + 1;
        op->round_fn = pipe_round;
        op->eager = (count < c ? count : c) * esz <= LITE_COLL_EAGER;
    } else {
        op->nrounds = 2;
        op->round_fn = direct_round;
        op->eager = count * esz <= LITE_COLL_EAGER;
    }
    rc = lite_coll_start(op);
    *opp = op;
    return rc;
}

int lite_coll_bcast(struct lite_ctx *ctx, void *buf, size_t count, int dtype, int root,
                    int timeout_ms)
{
    struct lite_coll_op *op;
    int rc = start(ctx, buf, count, dtype, root, &op);
    return op ? lite_coll_run(op, timeout_ms) : rc;
}

int lite_coll_ibcast(struct lite_ctx *ctx, void *buf, size_t count, int dtype, int root,
                     struct lite_request **req)
{
    if (ctx && !req) {
        ctx->coll_seq++;
        return lite_fail(ctx, -EINVAL, "ibcast: NULL request pointer");
    }
    struct lite_coll_op *op;
    int rc = start(ctx, buf, count, dtype, root, &op);
    if (!op)
        return rc;
    return rc ? lite_coll_run(op, 0) : lite_coll_to_request(op, req);
}
