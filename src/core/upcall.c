/*
 * upcall.c - the router of the backends' upcalls (struct lite_core_upcalls), above every module
 * they reach: arrivals go to the matching (match.c), completions to the request, the
 * rendezvous or the emulated one-sided op they belong to, peers' one-sided ops to the regions
 * (mr.c) and ImmCounter, and failures to every module that holds state for the lost peer.
 */
#include <stdint.h>

#include "immcounter.h"
#include "match.h"
#include "mr.h"
#include "request.h"
#include "rma_emu.h"
#include "rndv.h"
#include "upcall.h"

static void up_send_done(struct lite_core *core, void *op, int status)
{
    struct lite_ctx *ctx = (struct lite_ctx *)core;
    struct lite_request *r = op;
    if (r->kind == 0) {
        /* An internal control message (credits.c, rndv.c): nobody waits for it but an emulated op.
         */
        if (status)
            LITE_DEBUG("control message to rank %d failed: %s", r->peer, lite_strerror(status));
        struct lite_emu_op *e = r->emu;
        lite_request_release(ctx, r);
        if (e)
            lite_emu_msg_done(ctx, e, status);
        return;
    }
    if (r->rndv && lite_rndv_send_done(ctx, r, status))
        return;
    if (status && !r->error)
        r->error = status;
    if (r->pending_ops > 1) {
        r->pending_ops--;
        return;
    }
    r->pending_ops = 0;
    if (r->kind == LITE_REQ_SEND && r->error == 0)
        r->bytes = r->len;
    lite_request_finish(r, r->error);
}

static void peer_lost(struct lite_ctx *ctx, int peer, int status, const char *why)
{
    struct lite_peer *p = &ctx->peers[peer];
    if (p->lost)
        return;
    p->lost = true;
    p->lost_code = status ? status : -LITE_ERR_PEER_LOST;
    lite_fmt(p->lost_why, sizeof(p->lost_why), "%s", why ? why : "connection lost");
    /* Info, not warn: a peer that finalized first is reported the same way, and callers get
     * the typed error on every operation that involved the peer. */
    LITE_INFO("rank %d: lost rank %d: %s", ctx->s.rank, peer, p->lost_why);
    lite_fail(ctx, p->lost_code, "rank %d lost: %s", peer, p->lost_why);

    lite_match_peer_lost(ctx, peer); /* the arriving message, the posted receives */
    if (ctx->emu)
        lite_emu_peer_failed(ctx, peer, p->lost_code); /* may end rendezvous writes: first */
    lite_rndv_peer_failed(ctx, peer, p->lost_code);
}

void lite_peer_fail_run(struct lite_ctx *ctx)
{
    ctx->fail_due = false;
    for (int i = 0; i < ctx->s.world_size; i++) {
        struct lite_peer *p = &ctx->peers[i];
        if (p->fail_due) {
            p->fail_due = false;
            peer_lost(ctx, i, p->fail_code, p->fail_why);
        }
    }
}

static void up_peer_failed(struct lite_core *core, int peer, int status, const char *why)
{
    lite_peer_fail_deferred((struct lite_ctx *)core, peer, status, why);
}

const struct lite_core_upcalls lite_core_upcalls = {
    .size = sizeof(struct lite_core_upcalls),
    .recv_begin = lite_match_recv_begin,
    .recv_end = lite_match_recv_end,
    .recv_msg = lite_match_recv_msg,
    .send_done = up_send_done,
    .peer_failed = up_peer_failed,
    .rma_target = lite_mr_target,
    .rma_target_done = lite_mr_target_done,
    .imm_arrived = lite_imm_arrived,
};
