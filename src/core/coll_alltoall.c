/*
 * coll_alltoall.c - alltoall and alltoallv: every rank posts its receives and copies its own
 * segment (step 0), then sends every other segment in one step (step 1), starting with the next
 * rank so the load spreads. Zero-length segments send nothing (the argument header
 * still checks that the two sides agree on the count).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"

/* op->v = [scounts | sdispls | rcounts | rdispls], n entries each, in elements. */
#define SCNT(op, p) ((op)->v[(p)])
#define SDSP(op, p) ((op)->v[(size_t)(op)->n + (p)])
#define RCNT(op, p) ((op)->v[2 * (size_t)(op)->n + (p)])
#define RDSP(op, p) ((op)->v[3 * (size_t)(op)->n + (p)])

static int a2a_round(struct lite_coll_op *op, uint32_t t)
{
    int n = op->n, me = op->me, rc;
    size_t esz = op->esz;
    if (t == 0) {
        for (int i = 1; i < n; i++) {
            int p = (me - i + n) % n;
            if (RCNT(op, p) && !lite_coll_disputed(op, p) &&
                (rc = lite_coll_recv(op, p, 1, op->rbuf + RDSP(op, p) * esz, RCNT(op, p) * esz,
                                     UINT32_MAX)))
                return rc;
        }
        /* Own segment now: the copy fills the wait for the peers' argument headers (large
         * ops), and the sends then go out with nothing local left to hold up the receives. */
        if (SCNT(op, me))
            memcpy(op->rbuf + RDSP(op, me) * esz, op->sbuf + SDSP(op, me) * esz,
                   SCNT(op, me) * esz);
        return 0;
    }
    for (int i = 1; i < n; i++) {
        int p = (me + i) % n;
        if (SCNT(op, p) && (rc = lite_coll_send(op, p, 1, op->sbuf + SDSP(op, p) * esz,
                                                SCNT(op, p) * esz, UINT32_MAX)))
            return rc;
    }
    return 0;
}

struct seg {
    size_t lo, hi;
};

static int seg_cmp(const void *a, const void *b)
{
    const struct seg *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Check the layout: no overflow, receive segments disjoint from each other and from the send
 * extent. Sets *sext / *rext to the extents in bytes. */
static int check_layout(struct lite_coll_op *op, const void *sbuf, const void *rbuf)
{
    int n = op->n;
    size_t esz = op->esz, sext = 0, rext = 0, maxsend = 0, total = 0;
    struct seg *segs = malloc((size_t)n * sizeof(*segs));
    if (!segs)
        return lite_coll_fail(op, -ENOMEM, "out of memory");
    int nseg = 0;
    for (int p = 0; p < n; p++) {
        size_t sc = SCNT(op, p), sd = SDSP(op, p), rcn = RCNT(op, p), rd = RDSP(op, p);
        size_t lim = SIZE_MAX / esz;
        if (sc > lim || sd > lim - sc || rcn > lim || rd > lim - rcn) {
            free(segs);
            return lite_coll_fail(op, -EINVAL, "counts/displacements for rank %d overflow", p);
        }
        if (sc && (sd + sc) * esz > sext)
            sext = (sd + sc) * esz;
        if (sc * esz > maxsend && p != op->me)
            maxsend = sc * esz;
        if (rcn) {
            segs[nseg++] = (struct seg){rd * esz, (rd + rcn) * esz};
            if ((rd + rcn) * esz > rext)
                rext = (rd + rcn) * esz;
        }
        total += rcn * esz;
    }
    qsort(segs, (size_t)nseg, sizeof(*segs), seg_cmp);
    int rc = 0;
    for (int i = 1; i < nseg && !rc; i++)
        if (segs[i].lo < segs[i - 1].hi)
            rc = lite_coll_fail(op, -EINVAL, "receive segments overlap");
    free(segs);
    if (rc)
        return rc;
    if ((sext && !sbuf) || (rext && !rbuf))
        return lite_coll_fail(op, -EINVAL, "NULL buffer with non-zero counts");
    if (lite_coll_overlap(sbuf, sext, rbuf, rext))
        return lite_coll_fail(op, -EINVAL, "send and receive buffers overlap (no in-place form)");
    if (SCNT(op, op->me) != RCNT(op, op->me))
        return lite_coll_fail(op, -EINVAL,
                              "sendcounts[%d] = %zu but recvcounts[%d] = %zu (this rank)", op->me,
                              SCNT(op, op->me), op->me, RCNT(op, op->me));
    op->bytes_out = total;
    op->eager = maxsend <= LITE_COLL_EAGER;
    return 0;
}

static int start(lite_ctx_t *ctx, int kind, const void *sendbuf, const size_t *scounts,
                 const size_t *sdispls, void *recvbuf, const size_t *rcounts, const size_t *rdispls,
                 size_t count, int dtype, struct lite_coll_op **opp)
{
    *opp = NULL;
    struct lite_coll_op *op;
    int rc = lite_coll_op_begin(ctx, kind, count, dtype, -1, &op);
    if (!op)
        return rc;
    size_t esz = op->esz;
    int n = op->n;
    if (!rc && kind == LITE_COLL_ALLTOALLV && (!scounts || !sdispls || !rcounts || !rdispls))
        rc = lite_coll_fail(op, -EINVAL, "NULL count or displacement array");
    else if (!rc && kind == LITE_COLL_ALLTOALL && count > SIZE_MAX / esz / (size_t)n)
        rc = lite_coll_fail(op, -EINVAL, "count %zu is too large", count);
    if (!rc && !(op->v = malloc(4 * (size_t)n * sizeof(size_t))))
        rc = lite_coll_fail(op, -ENOMEM, "out of memory");
    if (!rc) {
        for (int p = 0; p < n; p++) {
            if (kind == LITE_COLL_ALLTOALL) {
                SCNT(op, p) = RCNT(op, p) = count;
                SDSP(op, p) = RDSP(op, p) = (size_t)p * count;
            } else {
                SCNT(op, p) = scounts[p];
                SDSP(op, p) = sdispls[p];
                RCNT(op, p) = rcounts[p];
                RDSP(op, p) = rdispls[p];
            }
        }
        rc = check_layout(op, sendbuf, recvbuf);
    }
    if (rc)
        return lite_coll_abort(op);
    op->sbuf = sendbuf;
    op->rbuf = recvbuf;
    op->nrounds = 2;
    op->round_fn = a2a_round;
    op->piggy = kind == LITE_COLL_ALLTOALL && count > 0;
    rc = lite_coll_start(op);
    *opp = op;
    return rc;
}

int lite_coll_alltoall(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf, size_t count,
                       int dtype, int timeout_ms)
{
    struct lite_coll_op *op;
    int rc =
        start(ctx, LITE_COLL_ALLTOALL, sendbuf, NULL, NULL, recvbuf, NULL, NULL, count, dtype, &op);
    return op ? lite_coll_run(op, timeout_ms) : rc;
}

int lite_coll_alltoallv(struct lite_ctx *ctx, const void *sendbuf, const size_t *sendcounts,
                        const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                        const size_t *rdispls, int dtype, int timeout_ms)
{
    struct lite_coll_op *op;
    int rc = start(ctx, LITE_COLL_ALLTOALLV, sendbuf, sendcounts, sdispls, recvbuf, recvcounts,
                   rdispls, 0, dtype, &op);
    return op ? lite_coll_run(op, timeout_ms) : rc;
}

static int nonblocking(lite_ctx_t *ctx, int kind, const void *sendbuf, const size_t *scounts,
                       const size_t *sdispls, void *recvbuf, const size_t *rcounts,
                       const size_t *rdispls, size_t count, int dtype, lite_request_t **req)
{
    if (ctx && !req) {
        ctx->coll_seq++;
        return lite_fail(ctx, -EINVAL, "%s: NULL request pointer", lite_coll_kind_name(kind));
    }
    struct lite_coll_op *op;
    int rc =
        start(ctx, kind, sendbuf, scounts, sdispls, recvbuf, rcounts, rdispls, count, dtype, &op);
    if (!op)
        return rc;
    return rc ? lite_coll_run(op, 0) : lite_coll_to_request(op, req);
}

int lite_coll_ialltoall(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf, size_t count,
                        int dtype, struct lite_request **req)
{
    return nonblocking(ctx, LITE_COLL_ALLTOALL, sendbuf, NULL, NULL, recvbuf, NULL, NULL, count,
                       dtype, req);
}

int lite_coll_ialltoallv(struct lite_ctx *ctx, const void *sendbuf, const size_t *sendcounts,
                         const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                         const size_t *rdispls, int dtype, struct lite_request **req)
{
    return nonblocking(ctx, LITE_COLL_ALLTOALLV, sendbuf, sendcounts, sdispls, recvbuf, recvcounts,
                       rdispls, 0, dtype, req);
}
