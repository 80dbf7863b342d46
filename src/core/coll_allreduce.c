/*
 * coll_allreduce.c - allreduce and reduce_scatter, both folding every element in the canonical
 * order: r = x0; r = r OP x1; ...; r = r OP x(n-1) (docs/DETERMINISM.md).
 *
 * One schedule serves three cases. The buffer is split into owner ranges; the owner of a range
 * receives every other rank's contribution to it and folds the n contributions itself, in rank
 * order, with lite_reduce_inplace. Nothing is ever combined in any other place or order, so the
 * result is the canonical fold whatever the chunking, the algorithm or the arrival order:
 *
 *   direct (allreduce)   every rank owns the whole buffer: each sends its input to every rank
 *                        and folds all n locally. One round: the latency algorithm.
 *   rsag (allreduce)     rank b owns block b (count/n elements): a direct reduce-scatter, then
 *                        each owner sends its folded block to every rank (allgather). Each rank
 *                        sends 2 (n-1)/n of the buffer: the bandwidth algorithm.
 *   reduce_scatter       the first half of rsag, blocks of recvcount elements.
 *
 * Owner ranges are cut in chunks of plan.chunk_elems and pipelined: round t (1 <= t <= K+1)
 * folds chunk t-2 (and for rsag sends it to every rank), posts the receives for chunk t, and
 * sends this rank's contribution to chunk t-1 of every owner. Contributions land in two sets of
 * n-1 chunk slots (double buffering); rank 0's contribution lands straight in the output when
 * that is free. Tags: header step 0, contribution to chunk k step 2k+1, result of chunk k step
 * 2k+2, so the steps sent to any peer increase with the rounds (round t sends result t-2, step
 * 2t-2, then contribution t-1, step 2t-1).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "reduce.h"

/* The state lives in the op; these derive the geometry from it. */
static size_t owner_lo(const struct lite_coll_op *op, int b)
{
    if (op->kind == LITE_COLL_REDUCE_SCATTER)
        return (size_t)b * op->count;
    if (op->plan.algo == LITE_COLL_ALGO_RSAG)
        return lite_coll_block_lo(op->count, op->n, b);
    return 0;
}

static size_t owner_len(const struct lite_coll_op *op, int b)
{
    if (op->kind == LITE_COLL_REDUCE_SCATTER)
        return op->count;
    if (op->plan.algo == LITE_COLL_ALGO_RSAG)
        return lite_coll_block_len(op->count, op->n, b);
    return op->count;
}

/* Elements of chunk k of owner b's range (0 past its end). */
static size_t chunk_len(const struct lite_coll_op *op, int b, size_t k)
{
    size_t len = owner_len(op, b), c = op->plan.chunk_elems, lo = k * c;
    return lo >= len ? 0 : (len - lo < c ? len - lo : c);
}

static uint8_t *out_block(const struct lite_coll_op *op)
{
    /* reduce_scatter writes rbuf (in place: this rank's block of the input); allreduce the
     * owner range of rbuf */
    if (op->kind == LITE_COLL_REDUCE_SCATTER)
        return op->rbuf;
    return op->rbuf + owner_lo(op, op->me) * op->esz;
}

static uint8_t *slot(const struct lite_coll_op *op, size_t k, int p)
{
    int idx = p < op->me ? p : p - 1;
    return op->tmp + ((k & 1) * (size_t)(op->n - 1) + (size_t)idx) * op->slot_bytes;
}

/* Where rank p's contribution to chunk k of this rank's range lands. */
static uint8_t *contrib_dst(const struct lite_coll_op *op, size_t k, int p)
{
    if (p == 0 && op->me != 0 && !op->inplace)
        return out_block(op) + k * op->plan.chunk_elems * op->esz;
    return slot(op, k, p);
}

static int post_contrib_recvs(struct lite_coll_op *op, size_t k)
{
    size_t len = chunk_len(op, op->me, k) * op->esz;
    if (!len)
        return 0;
    for (int i = 1; i < op->n; i++) {
        int p = (op->me - i + op->n) % op->n;
        int rc = lite_coll_recv(op, p, (uint32_t)(2 * k + 1), contrib_dst(op, k, p), len,
                                (uint32_t)k + 2);
        if (rc)
            return rc;
    }
    return 0;
}

/* Elements folded at a time: one cache-sized block goes through every step of the fold (copy,
 * n - 1 reductions, scaling) while it is hot, instead of each step streaming the whole chunk. */
#define FOLD_BLOCK_BYTES (32 * 1024)

/* Elements [lo, lo + cnt) of chunk j. */
static void fold_block(struct lite_coll_op *op, size_t j, size_t lo, size_t cnt)
{
    size_t off = j * op->plan.chunk_elems + lo, bytes = cnt * op->esz, sl = lo * op->esz;
    uint8_t *out = out_block(op) + off * op->esz;
    const uint8_t *own = op->sbuf + (owner_lo(op, op->me) + off) * op->esz;
    int n = op->n, me = op->me, dt = op->dtype, rop = op->redop;
    if (me == 0) {
        if (!op->inplace)
            memcpy(out, own, bytes);
        for (int p = 1; p < n; p++)
            lite_reduce_inplace(out, slot(op, j, p) + sl, cnt, dt, rop);
    } else if (!op->inplace) {
        /* rank 0's contribution is already in out */
        for (int p = 1; p < n; p++)
            lite_reduce_inplace(out, p == me ? own : slot(op, j, p) + sl, cnt, dt, rop);
    } else {
        /* out holds this rank's own contribution: fold in rank 0's slot, then copy */
        uint8_t *acc = slot(op, j, 0) + sl;
        for (int p = 1; p < n; p++)
            lite_reduce_inplace(acc, p == me ? own : slot(op, j, p) + sl, cnt, dt, rop);
        memcpy(out, acc, bytes);
    }
    if (rop == LITE_AVG)
        lite_reduce_scale_avg(out, cnt, dt, n);
}

/* The canonical fold of chunk j of this rank's range, block by block (elements are folded
 * independently of each other, so the blocking changes no result). */
static void fold(struct lite_coll_op *op, size_t j)
{
    size_t cnt = chunk_len(op, op->me, j), step = FOLD_BLOCK_BYTES / op->esz;
    for (size_t lo = 0; lo < cnt; lo += step)
        fold_block(op, j, lo, cnt - lo < step ? cnt - lo : step);
}

static int ar_round(struct lite_coll_op *op, uint32_t t)
{
    size_t K = op->nchunks, esz = op->esz, c = op->plan.chunk_elems;
    int n = op->n, me = op->me, rc;
    bool allgather = op->kind == LITE_COLL_ALLREDUCE && op->plan.algo == LITE_COLL_ALGO_RSAG;
    if (t == 0)
        return K ? post_contrib_recvs(op, 0) : 0;
    if (t >= 2) {
        size_t j = t - 2;
        fold(op, j);
        size_t len = chunk_len(op, me, j) * esz;
        for (int i = 1; allgather && len && i < n; i++) {
            rc = lite_coll_send(op, (me + i) % n, (uint32_t)(2 * j + 2),
                                out_block(op) + j * c * esz, len, UINT32_MAX);
            if (rc)
                return rc;
        }
    }
    size_t k = t - 1;
    if (k >= K)
        return 0;
    for (int i = 1; allgather && i < n; i++) {
        int p = (me - i + n) % n;
        size_t len = chunk_len(op, p, k) * esz;
        if (len &&
            (rc = lite_coll_recv(op, p, (uint32_t)(2 * k + 2),
                                 op->rbuf + (owner_lo(op, p) + k * c) * esz, len, UINT32_MAX)))
            return rc;
    }
    if (k + 1 < K && (rc = post_contrib_recvs(op, k + 1)))
        return rc;
    for (int i = 1; i < n; i++) {
        int p = (me + i) % n;
        size_t len = chunk_len(op, p, k) * esz;
        if (len &&
            (rc = lite_coll_send(op, p, (uint32_t)(2 * k + 1),
                                 op->sbuf + (owner_lo(op, p) + k * c) * esz, len, (uint32_t)k + 2)))
            return rc;
    }
    return 0;
}

/* Validate, plan and start; *opp is the started op (or NULL on error, already freed). */
static int start(lite_ctx_t *ctx, int kind, const void *sendbuf, void *recvbuf, size_t count,
                 int dtype, int redop, struct lite_coll_op **opp)
{
    *opp = NULL;
    struct lite_coll_op *op;
    int rc = lite_coll_op_begin(ctx, kind, count, dtype, redop, &op);
    if (!op)
        return rc;
    int n = op->n, me = op->me;
    size_t esz = op->esz;
    /* total input elements and the output length */
    size_t total = kind == LITE_COLL_REDUCE_SCATTER ? count * (size_t)n : count;
    if (!rc && (count > SIZE_MAX / esz / (size_t)n))
        rc = lite_coll_fail(op, -EINVAL, "count %zu is too large", count);
    if (rc)
        return lite_coll_abort(op);
    op->redop = redop;
    size_t in_bytes = total * esz, out_bytes = count * esz;
    if (lite_coll_is_in_place(sendbuf)) {
        op->inplace = true;
        sendbuf = recvbuf;
        if (kind == LITE_COLL_REDUCE_SCATTER && recvbuf)
            recvbuf = (uint8_t *)recvbuf + (size_t)me * out_bytes;
    } else if (sendbuf == recvbuf && kind == LITE_COLL_ALLREDUCE) {
        op->inplace = true;
    } else if (kind == LITE_COLL_REDUCE_SCATTER && count &&
               (const uint8_t *)recvbuf == (const uint8_t *)sendbuf + (size_t)me * out_bytes) {
        op->inplace = true;
    }
    if (count && (!sendbuf || !recvbuf))
        rc = lite_coll_fail(op, -EINVAL, "NULL buffer with count %zu", count);
    else if (!op->inplace && lite_coll_overlap(sendbuf, in_bytes, recvbuf, out_bytes))
        rc = lite_coll_fail(op, -EINVAL,
                            "send and receive buffers overlap (in-place needs "
                            "LITE_IN_PLACE or the documented layout)");
    if (rc)
        return lite_coll_abort(op);
    op->sbuf = sendbuf;
    op->rbuf = recvbuf;
    op->bytes_out = out_bytes;
    size_t c = op->plan.chunk_elems;
    size_t len0 = owner_len(op, 0), mylen = owner_len(op, me);
    op->nchunks = len0 ? (len0 + c - 1) / c : 0;
    op->nrounds = (uint32_t)op->nchunks + 2;
    op->round_fn = ar_round;
    op->eager = (len0 < c ? len0 : c) * esz <= LITE_COLL_EAGER;
    /* every pair's first message is a contribution when no owner range is empty */
    op->piggy = owner_len(op, n - 1) > 0;
    if (n > 1 && mylen) {
        op->slot_bytes = (mylen < c ? mylen : c) * esz;
        size_t sets = op->nchunks > 1 ? 2 : 1;
        op->tmp = malloc(sets * (size_t)(n - 1) * op->slot_bytes);
        if (!op->tmp) {
            lite_coll_fail(op, -ENOMEM, "out of memory for %zu-byte chunk slots",
                           sets * (size_t)(n - 1) * op->slot_bytes);
            return lite_coll_abort(op);
        }
    }
    rc = lite_coll_start(op);
    *opp = op;
    return rc;
}

static int run_blocking(lite_ctx_t *ctx, int kind, const void *sendbuf, void *recvbuf, size_t count,
                        int dtype, int redop, int timeout_ms)
{
    struct lite_coll_op *op;
    int rc = start(ctx, kind, sendbuf, recvbuf, count, dtype, redop, &op);
    if (!op)
        return rc;
    return lite_coll_run(op, timeout_ms);
}

static int run_nonblocking(lite_ctx_t *ctx, int kind, const void *sendbuf, void *recvbuf,
                           size_t count, int dtype, int redop, lite_request_t **req)
{
    if (!ctx)
        return -EINVAL;
    if (!req) {
        ctx->coll_seq++;
        return lite_fail(ctx, -EINVAL, "%s: NULL request pointer", lite_coll_kind_name(kind));
    }
    struct lite_coll_op *op;
    int rc = start(ctx, kind, sendbuf, recvbuf, count, dtype, redop, &op);
    if (!op)
        return rc;
    if (rc) /* failed while starting: report now, like the blocking form */
        return lite_coll_run(op, 0);
    return lite_coll_to_request(op, req);
}

int lite_coll_allreduce(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf, size_t count,
                        int dtype, int op, int timeout_ms)
{
    return run_blocking(ctx, LITE_COLL_ALLREDUCE, sendbuf, recvbuf, count, dtype, op, timeout_ms);
}

int lite_coll_iallreduce(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf, size_t count,
                         int dtype, int op, struct lite_request **req)
{
    return run_nonblocking(ctx, LITE_COLL_ALLREDUCE, sendbuf, recvbuf, count, dtype, op, req);
}

int lite_coll_reduce_scatter(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf,
                             size_t recvcount, int dtype, int op, int timeout_ms)
{
    return run_blocking(ctx, LITE_COLL_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, dtype, op,
                        timeout_ms);
}

int lite_coll_ireduce_scatter(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf,
                              size_t recvcount, int dtype, int op, struct lite_request **req)
{
    return run_nonblocking(ctx, LITE_COLL_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, dtype, op,
                           req);
}
