/*
 * rndv.h - the rendezvous protocol for large messages, sender- and receiver-initiated
 * (rndv.c), and the decision how a message goes. Not installed.
 */
#ifndef LITE_RNDV_H
#define LITE_RNDV_H

#include "ctx.h"

/* Submit a send to another rank: eager or rendezvous, now or when credit returns. */
int lite_rndv_send(struct lite_ctx *ctx, struct lite_request *r);
/* Send a small eager message with the backend's msg_inject, its bytes gone on return: 0, or
 * -EAGAIN when that cannot be done now (no msg_inject, no credit, sends queued, too long, the
 * backend busy) and the message must go through lite_rndv_send; other codes are failures. */
int lite_rndv_inject(struct lite_ctx *ctx, uint8_t chan, int peer, uint64_t tag, const void *buf,
                     size_t len);
/* A receive matched a rendezvous announcement of `len` bytes, sender id `id`. */
void lite_rndv_rts_matched(struct lite_ctx *ctx, struct lite_request *r, uint64_t len, uint64_t id);
/* Refuse a peer's rendezvous announcement that nothing will receive. */
void lite_rndv_rts_refuse(struct lite_ctx *ctx, int peer, uint64_t len, uint64_t id);
/* Receiver-initiated rendezvous for collective receives (see rndv.c): announce a posted
 * receive's buffer (true when it did), withdraw the announcement, and the sender side's
 * parked sends (waiting for an announcement) and their withdrawal. */
bool lite_rndv_rtr_post(struct lite_ctx *ctx, struct lite_request *r);
void lite_rndv_rtr_withdraw(struct lite_ctx *ctx, struct lite_request *r);
bool lite_rndv_send_parked(const struct lite_request *r);
void lite_rndv_send_unpark(struct lite_ctx *ctx, struct lite_request *r);
/* An arriving control message of the rendezvous (CTS, FIN, RTR, CREDIT): true when its type
 * and length are right; then lite_rndv_ctrl_end handles it once its payload is in. */
bool lite_rndv_ctrl_ok(const struct lite_msg_hdr *hdr);
int lite_rndv_ctrl_end(struct lite_ctx *ctx, int peer);
/* A backend completion for a request in a rendezvous stage: true when rndv.c took it. */
bool lite_rndv_send_done(struct lite_ctx *ctx, struct lite_request *r, int status);
void lite_rndv_peer_failed(struct lite_ctx *ctx, int peer, int code);
/* A blocking call's timeout: 0 when r no longer uses the caller's buffer (r is no longer the
 * caller's), -EBUSY when bytes are moving. */
int lite_rndv_abandon(struct lite_ctx *ctx, struct lite_request *r);
void lite_rndv_fini(struct lite_ctx *ctx);

#endif /* LITE_RNDV_H */
