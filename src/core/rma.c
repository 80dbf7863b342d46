/*
 * rma.c - one-sided operations: write, write with immediate, read, and the two batch shapes
 * (paged KV-cache writes, scatter to many peers). Everything is checked here against the local
 * registration and the remote descriptor before the backend sees it; the target checks again.
 */
#include <errno.h>
#include <string.h>

#include "immcounter.h"
#include "mr.h"
#include "request.h"
#include "rma_emu.h"

/* One op to post: where it goes and whether more of its batch follow at once. */
struct one_op {
    int kind, peer;
    size_t local_off, remote_off, len;
    bool has_imm, more, local_completion;
    uint32_t imm;
};

/* One op of a batch: resolve, check, and post (or do locally when peer is this rank). `parsed`,
 * when not NULL, is `remote` already parsed for this peer (a batch to one region parses once). */
static int post_one(struct lite_ctx *ctx, struct lite_request *req, struct lite_mr *local,
                    const lite_rdesc_t *remote, const struct lite_rdesc_info *parsed,
                    const struct one_op *o)
{
    int kind = o->kind, peer = o->peer;
    size_t local_off = o->local_off, remote_off = o->remote_off, len = o->len;
    if (!local || !remote)
        return lite_fail(ctx, -EINVAL, "one-sided op: NULL region or descriptor");
    if (peer < 0 || peer >= ctx->s.world_size)
        return lite_fail(ctx, -EINVAL, "one-sided op: peer %d out of range", peer);
    if (local_off > local->len || len > local->len - local_off)
        return lite_fail(ctx, -ERANGE,
                         "one-sided op: local range [%zu, +%zu) outside the %zu-byte region",
                         local_off, len, local->len);
    struct lite_rdesc_info ri;
    int rc = 0;
    if (parsed)
        ri = *parsed;
    else if ((rc = lite_rdesc_parse(ctx, remote, peer, &ri)))
        return rc;
    if (remote_off > ri.len || len > ri.len - remote_off)
        return lite_fail(ctx, -ERANGE,
                         "one-sided op: remote range [%zu, +%zu) outside rank %d's %llu-byte "
                         "region",
                         remote_off, len, peer, (unsigned long long)ri.len);
    unsigned need = kind == LITE_RMA_WRITE ? LITE_ACCESS_REMOTE_WRITE : LITE_ACCESS_REMOTE_READ;
    if (!(ri.access & need))
        return lite_fail(ctx, -EACCES, "one-sided op: rank %d's region does not allow remote %s",
                         peer, kind == LITE_RMA_WRITE ? "writes" : "reads");
    struct lite_peer *p = &ctx->peers[peer];
    if (p->lost)
        return lite_fail(ctx, p->lost_code, "one-sided op to rank %d: peer lost earlier: %s", peer,
                         p->lost_why);
    uint8_t *laddr = (uint8_t *)local->addr + local_off;

    if (peer == ctx->s.rank) {
        /* Local: the same target-side check as for a peer, then a copy. */
        void *taddr, *token;
        rc = lite_mr_target((struct lite_core *)ctx, peer, ri.core_key, remote_off, len, need,
                            &taddr, &token);
        if (rc == 0) {
            if (len)
                memmove(kind == LITE_RMA_WRITE ? taddr : laddr,
                        kind == LITE_RMA_WRITE ? laddr : taddr, len);
            if (kind == LITE_RMA_WRITE && o->has_imm)
                lite_imm_arrived((struct lite_core *)ctx, peer, o->imm);
            lite_mr_target_done((struct lite_core *)ctx, token);
        }
        if (rc && !req->error)
            req->error = rc;
        return 0;
    }
    struct lite_tp_rma r = {
        .kind = kind,
        .peer = peer,
        .local = laddr,
        .local_handle = local->keys.handle,
        .len = len,
        .remote_addr = ri.addr,
        .remote_offset = remote_off,
        .remote_core_key = ri.core_key,
        .nrails = ri.nrails,
        .has_imm = o->has_imm,
        .imm = o->imm,
        .flags = (o->more ? LITE_RMA_F_MORE : 0) |
                 (o->local_completion ? LITE_RMA_F_LOCAL_DONE | LITE_RMA_F_REFUSAL_TO_NEXT : 0)};
    memcpy(r.rkey, ri.rkey, sizeof(r.rkey));
    req->pending_ops++;
    rc = lite_rma_post(ctx, &r, req);
    if (rc) {
        req->pending_ops--;
        if (rc == -ENOSYS)
            return lite_fail(ctx, rc, "one-sided %s is not supported by transport %s",
                             kind == LITE_RMA_WRITE ? "write" : "read", ctx->ops.name);
        return lite_fail(ctx, rc, "one-sided op to rank %d failed: %s", peer, lite_strerror(rc));
    }
    return 0;
}

/* Start a batch request; ops are added with post_one; then seal it. */
static struct lite_request *batch_new(struct lite_ctx *ctx, int peer)
{
    struct lite_request *r = lite_request_new(ctx, LITE_REQ_RMA, 0, peer, 0, NULL, 0);
    if (r)
        r->pending_ops = 1; /* held until sealed, so early completions cannot finish it */
    return r;
}

/*
 * Seal a batch: drop the hold. rc != 0 means posting stopped part-way: ops already posted still
 * complete (they reference the request), so the request is returned to the caller with the
 * error recorded rather than freed under the backend.
 */
static int batch_seal(struct lite_ctx *ctx, struct lite_request *r, int rc, lite_request_t **out)
{
    if (rc && !r->error)
        r->error = rc;
    if (--r->pending_ops == 0)
        lite_request_finish(r, r->error);
    if (rc && r->state == LITE_REQ_DONE) {
        lite_request_release(ctx, r);
        return rc;
    }
    *out = r;
    return 0; /* a part-way failure is the request's error: lite_wait reports it */
}

static int single(struct lite_ctx *ctx, int kind, int peer, lite_mr_t *local, size_t local_off,
                  const lite_rdesc_t *remote, size_t remote_off, size_t len, bool has_imm,
                  uint32_t imm, lite_request_t **req)
{
    if (!ctx)
        return -EINVAL;
    if (!req)
        return lite_fail(ctx, -EINVAL, "one-sided op: NULL request pointer");
    struct lite_request *r = batch_new(ctx, peer);
    if (!r)
        return lite_fail(ctx, -ENOMEM, "one-sided op: out of memory");
    r->len = len;
    struct one_op o = {.kind = kind,
                       .peer = peer,
                       .local_off = local_off,
                       .remote_off = remote_off,
                       .len = len,
                       .has_imm = has_imm,
                       .imm = imm};
    int rc = post_one(ctx, r, local, remote, NULL, &o);
    if (rc) {
        lite_request_release(ctx, r); /* nothing was posted */
        return rc;
    }
    r->bytes = len;
    return batch_seal(ctx, r, 0, req);
}

LITE_API int lite_write(lite_ctx_t *ctx, int peer, lite_mr_t *local, size_t local_off,
                        const lite_rdesc_t *remote, size_t remote_off, size_t len,
                        lite_request_t **req)
{
    return single(ctx, LITE_RMA_WRITE, peer, local, local_off, remote, remote_off, len, false, 0,
                  req);
}

LITE_API int lite_write_imm(lite_ctx_t *ctx, int peer, lite_mr_t *local, size_t local_off,
                            const lite_rdesc_t *remote, size_t remote_off, size_t len, uint32_t imm,
                            lite_request_t **req)
{
    return single(ctx, LITE_RMA_WRITE, peer, local, local_off, remote, remote_off, len, true, imm,
                  req);
}

LITE_API int lite_read(lite_ctx_t *ctx, int peer, lite_mr_t *local, size_t local_off,
                       const lite_rdesc_t *remote, size_t remote_off, size_t len,
                       lite_request_t **req)
{
    return single(ctx, LITE_RMA_READ, peer, local, local_off, remote, remote_off, len, false, 0,
                  req);
}

LITE_API int lite_write_paged(lite_ctx_t *ctx, int peer, lite_mr_t *local,
                              const uint32_t *src_pages, const lite_rdesc_t *remote,
                              const uint32_t *dst_pages, size_t npages, size_t page_size,
                              uint32_t imm, unsigned flags, lite_request_t **req)
{
    if (!ctx)
        return -EINVAL;
    if (!req || (npages && (!src_pages || !dst_pages)) || (flags & ~LITE_WRITE_WITH_IMM))
        return lite_fail(ctx, -EINVAL, "write_paged: NULL argument or unknown flags");
    /* Check every page before posting any, so a bad list posts nothing. */
    for (size_t i = 0; i < npages; i++) {
        if ((uint64_t)src_pages[i] * page_size / (page_size ? page_size : 1) != src_pages[i] ||
            (uint64_t)dst_pages[i] * page_size / (page_size ? page_size : 1) != dst_pages[i])
            return lite_fail(ctx, -ERANGE, "write_paged: page index overflow at entry %zu", i);
        if (!local || (uint64_t)src_pages[i] * page_size + page_size > local->len)
            return lite_fail(ctx, -ERANGE,
                             "write_paged: source page %u is outside the local region",
                             src_pages[i]);
    }
    struct lite_rdesc_info ri;
    int rc = 0;
    bool parsed = npages && remote && peer >= 0 && peer < ctx->s.world_size;
    if (parsed && (rc = lite_rdesc_parse(ctx, remote, peer, &ri)))
        return rc;
    for (size_t i = 0; parsed && i < npages; i++)
        if ((uint64_t)dst_pages[i] * page_size + page_size > ri.len)
            return lite_fail(ctx, -ERANGE,
                             "write_paged: destination page %u is outside the remote region",
                             dst_pages[i]);
    struct lite_request *r = batch_new(ctx, peer);
    if (!r)
        return lite_fail(ctx, -ENOMEM, "write_paged: out of memory");
    /* On an ordered transport only the last page waits for the target's answer: it comes after
     * every earlier page is in place, and carries the refusal of any earlier page. */
    bool ordered = (ctx->ops.caps & LITE_CAP_ORDERED_WRITE_MSG) != 0;
    for (size_t i = 0; i < npages && !rc; i++) {
        struct one_op o = {.kind = LITE_RMA_WRITE,
                           .peer = peer,
                           .local_off = (size_t)src_pages[i] * page_size,
                           .remote_off = (size_t)dst_pages[i] * page_size,
                           .len = page_size,
                           .has_imm = (flags & LITE_WRITE_WITH_IMM) != 0,
                           .imm = imm,
                           .more = i + 1 < npages,
                           .local_completion = ordered && i + 1 < npages};
        rc = post_one(ctx, r, local, remote, &ri, &o);
    }
    if (rc && r->pending_ops == 1) {
        lite_request_release(ctx, r);
        return rc;
    }
    r->bytes = npages * page_size;
    return batch_seal(ctx, r, rc, req);
}

LITE_API int lite_write_scatter(lite_ctx_t *ctx, lite_mr_t *local,
                                const lite_scatter_entry_t *entries, size_t n, lite_request_t **req)
{
    if (!ctx)
        return -EINVAL;
    if (!req || (n && !entries))
        return lite_fail(ctx, -EINVAL, "write_scatter: NULL argument");
    for (size_t i = 0; i < n; i++)
        if (entries[i].flags & ~LITE_WRITE_WITH_IMM)
            return lite_fail(ctx, -EINVAL, "write_scatter: unknown flags in entry %zu", i);
    struct lite_request *r = batch_new(ctx, -1);
    if (!r)
        return lite_fail(ctx, -ENOMEM, "write_scatter: out of memory");
    int rc = 0;
    size_t bytes = 0, last_remote = 0; /* the batch ends at its last entry for a peer */
    for (size_t i = 0; i < n; i++)
        if (entries[i].peer != ctx->s.rank)
            last_remote = i;
    for (size_t i = 0; i < n && !rc; i++) {
        const lite_scatter_entry_t *e = &entries[i];
        struct one_op o = {.kind = LITE_RMA_WRITE,
                           .peer = e->peer,
                           .local_off = e->local_off,
                           .remote_off = e->remote_off,
                           .len = e->len,
                           .has_imm = (e->flags & LITE_WRITE_WITH_IMM) != 0,
                           .imm = e->imm,
                           .more = i < last_remote};
        rc = post_one(ctx, r, local, e->remote, NULL, &o);
        bytes += e->len;
    }
    if (rc && r->pending_ops == 1) {
        lite_request_release(ctx, r);
        return rc;
    }
    r->bytes = bytes;
    return batch_seal(ctx, r, rc, req);
}
