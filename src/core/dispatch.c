/*
 * dispatch.c - the public calls that take message or collective buffers: a device buffer goes to
 * gpu_stage.c, which stages it through host memory and runs the host call of the modules below
 * (p2p.c, post.c, match.c, the collectives) on its bounce buffers; a host buffer goes to that
 * host call directly. Keeping the choice here, above gpu_stage.c, is what lets every call of
 * the core point down (docs/HACKING.md, "Layout").
 */
#include <errno.h>

#include "coll.h"
#include "gpu_stage.h"
#include "match.h"
#include "p2p.h"
#include "post.h"
#include "request.h"

LITE_API int lite_isend(lite_ctx_t *ctx, int peer, uint64_t tag, const void *buf, size_t len,
                        lite_request_t **req)
{
    if (!ctx)
        return -EINVAL;
    if (!req)
        return lite_fail(ctx, -EINVAL, "isend: NULL request pointer");
    if (lite_stage_msg_dev(ctx, buf))
        return lite_stage_isend(ctx, peer, tag, buf, len, req);
    return lite_post_send(ctx, LITE_CHAN_USER, peer, tag, buf, len, req);
}

LITE_API int lite_irecv(lite_ctx_t *ctx, int peer, uint64_t tag, void *buf, size_t len,
                        lite_request_t **req)
{
    if (!ctx)
        return -EINVAL;
    if (!req)
        return lite_fail(ctx, -EINVAL, "irecv: NULL request pointer");
    if (lite_stage_msg_dev(ctx, buf))
        return lite_stage_irecv(ctx, peer, tag, buf, len, req);
    return lite_post_recv(ctx, LITE_CHAN_USER, peer, tag, buf, len, req);
}

LITE_API int lite_send(lite_ctx_t *ctx, int peer, uint64_t tag, const void *buf, size_t len,
                       int timeout_ms)
{
    if (ctx && lite_stage_msg_dev(ctx, buf))
        return lite_stage_send(ctx, peer, tag, buf, len, timeout_ms);
    return lite_p2p_send(ctx, peer, tag, buf, len, timeout_ms);
}

LITE_API int lite_recv(lite_ctx_t *ctx, int peer, uint64_t tag, void *buf, size_t len,
                       size_t *received, int timeout_ms)
{
    if (ctx && lite_stage_msg_dev(ctx, buf))
        return lite_stage_recv(ctx, peer, tag, buf, len, received, timeout_ms);
    return lite_p2p_recv(ctx, peer, tag, buf, len, received, timeout_ms);
}

/* Collectives: either buffer on the device stages the call (the other may be host memory). A
 * non-blocking call without a request pointer is refused by the host call, whatever the
 * buffers. */

LITE_API int lite_bcast(lite_ctx_t *ctx, void *buf, size_t count, int dtype, int root,
                        int timeout_ms)
{
    if (ctx && lite_stage_coll_dev(buf, NULL))
        return lite_stage_bcast(ctx, buf, count, dtype, root, timeout_ms);
    return lite_coll_bcast(ctx, buf, count, dtype, root, timeout_ms);
}

LITE_API int lite_ibcast(lite_ctx_t *ctx, void *buf, size_t count, int dtype, int root,
                         lite_request_t **req)
{
    if (ctx && req && lite_stage_coll_dev(buf, NULL))
        return lite_stage_ibcast(ctx, buf, count, dtype, root, req);
    return lite_coll_ibcast(ctx, buf, count, dtype, root, req);
}

LITE_API int lite_allgather(lite_ctx_t *ctx, const void *sendbuf, void *recvbuf, size_t count,
                            int dtype, int timeout_ms)
{
    if (ctx && lite_stage_coll_dev(sendbuf, recvbuf))
        return lite_stage_allgather(ctx, sendbuf, recvbuf, count, dtype, timeout_ms);
    return lite_coll_allgather(ctx, sendbuf, recvbuf, count, dtype, timeout_ms);
}

LITE_API int lite_iallgather(lite_ctx_t *ctx, const void *sendbuf, void *recvbuf, size_t count,
                             int dtype, lite_request_t **req)
{
    if (ctx && req && lite_stage_coll_dev(sendbuf, recvbuf))
        return lite_stage_iallgather(ctx, sendbuf, recvbuf, count, dtype, req);
    return lite_coll_iallgather(ctx, sendbuf, recvbuf, count, dtype, req);
}

LITE_API int lite_reduce_scatter(lite_ctx_t *ctx, const void *sendbuf, void *recvbuf,
                                 size_t recvcount, int dtype, int op, int timeout_ms)
{
    if (ctx && lite_stage_coll_dev(sendbuf, recvbuf))
        return lite_stage_reduce_scatter(ctx, sendbuf, recvbuf, recvcount, dtype, op, timeout_ms);
    return lite_coll_reduce_scatter(ctx, sendbuf, recvbuf, recvcount, dtype, op, timeout_ms);
}

LITE_API int lite_ireduce_scatter(lite_ctx_t *ctx, const void *sendbuf, void *recvbuf,
                                  size_t recvcount, int dtype, int op, lite_request_t **req)
{
    if (ctx && req && lite_stage_coll_dev(sendbuf, recvbuf))
        return lite_stage_ireduce_scatter(ctx, sendbuf, recvbuf, recvcount, dtype, op, req);
    return lite_coll_ireduce_scatter(ctx, sendbuf, recvbuf, recvcount, dtype, op, req);
}

LITE_API int lite_allreduce(lite_ctx_t *ctx, const void *sendbuf, void *recvbuf, size_t count,
                            int dtype, int op, int timeout_ms)
{
    if (ctx && lite_stage_coll_dev(sendbuf, recvbuf))
        return lite_stage_allreduce(ctx, sendbuf, recvbuf, count, dtype, op, timeout_ms);
    return lite_coll_allreduce(ctx, sendbuf, recvbuf, count, dtype, op, timeout_ms);
}

LITE_API int lite_iallreduce(lite_ctx_t *ctx, const void *sendbuf, void *recvbuf, size_t count,
                             int dtype, int op, lite_request_t **req)
{
    if (ctx && req && lite_stage_coll_dev(sendbuf, recvbuf))
        return lite_stage_iallreduce(ctx, sendbuf, recvbuf, count, dtype, op, req);
    return lite_coll_iallreduce(ctx, sendbuf, recvbuf, count, dtype, op, req);
}

LITE_API int lite_alltoall(lite_ctx_t *ctx, const void *sendbuf, void *recvbuf, size_t count,
                           int dtype, int timeout_ms)
{
    if (ctx && lite_stage_coll_dev(sendbuf, recvbuf))
        return lite_stage_alltoall(ctx, sendbuf, recvbuf, count, dtype, timeout_ms);
    return lite_coll_alltoall(ctx, sendbuf, recvbuf, count, dtype, timeout_ms);
}

LITE_API int lite_ialltoall(lite_ctx_t *ctx, const void *sendbuf, void *recvbuf, size_t count,
                            int dtype, lite_request_t **req)
{
    if (ctx && req && lite_stage_coll_dev(sendbuf, recvbuf))
        return lite_stage_ialltoall(ctx, sendbuf, recvbuf, count, dtype, req);
    return lite_coll_ialltoall(ctx, sendbuf, recvbuf, count, dtype, req);
}

LITE_API int lite_alltoallv(lite_ctx_t *ctx, const void *sendbuf, const size_t *sendcounts,
                            const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                            const size_t *rdispls, int dtype, int timeout_ms)
{
    if (ctx && lite_stage_coll_dev(sendbuf, recvbuf))
        return lite_stage_alltoallv(ctx, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls,
                                    dtype, timeout_ms);
    return lite_coll_alltoallv(ctx, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls,
                               dtype, timeout_ms);
}

LITE_API int lite_ialltoallv(lite_ctx_t *ctx, const void *sendbuf, const size_t *sendcounts,
                             const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                             const size_t *rdispls, int dtype, lite_request_t **req)
{
    if (ctx && req && lite_stage_coll_dev(sendbuf, recvbuf))
        return lite_stage_ialltoallv(ctx, sendbuf, sendcounts, sdispls, recvbuf, recvcounts,
                                     rdispls, dtype, req);
    return lite_coll_ialltoallv(ctx, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls,
                                dtype, req);
}
