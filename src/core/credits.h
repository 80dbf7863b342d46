/*
 * credits.h - credit-based flow control and the control messages that carry returned credit
 * (credits.c). Not installed.
 */
#ifndef LITE_CREDITS_H
#define LITE_CREDITS_H

#include "ctx.h"

#define LITE_MSGF_RTS 0x01 /* msg flags: a rendezvous announcement (payload: len, id) */

/* Control message types (channel LITE_CHAN_CTRL, carried in lite_msg_hdr.flags). The
 * rendezvous (rndv.c) owns 1..15, rma_emu.c 16..31. */
enum { LITE_CTRL_CTS = 1, LITE_CTRL_FIN = 2, LITE_CTRL_CREDIT = 3, LITE_CTRL_RTR = 4 };
#define LITE_CTRL_EMU_FIRST 16
#define LITE_CTRL_EMU_LAST  20

int lite_credit_init(struct lite_ctx *ctx, char *why, size_t why_len);

/* Credits owed to the peer, taken for piggy-backing on a message to it. */
static inline uint16_t lite_credit_take_owed(struct lite_peer *p)
{
    uint32_t n = p->credits_owed > 0xffff ? 0xffff : p->credits_owed;
    p->credits_owed -= n;
    p->rx_outstanding -= n;
    return (uint16_t)n;
}

/* A message that did not leave: its credit is ours again and the credits it carried still owed. */
static inline void lite_credit_unsent(struct lite_peer *p, uint16_t carried)
{
    p->credits++;
    p->credits_owed += carried;
    p->rx_outstanding += carried;
}

/* A control message to `peer`; `payload` must live until the backend is done with it, so it
 * is the request's own buffer (or NULL). `op` NULL: fire and forget through a heap request. */
int lite_ctrl_send(struct lite_ctx *ctx, int peer, uint8_t type, const void *payload, size_t len,
                   struct lite_request *op);
/* A control message to `peer` through an internal request (released when the backend is done
 * with it; `emu` then hears of it): 0 or the code msg_send returned. */
int lite_ctrl_send_emu(struct lite_ctx *ctx, int peer, uint8_t type, const void *payload,
                       size_t len, struct lite_emu_op *emu);

/* Send a user/collective message (or, with r->rndv, its RTS) now, or queue it until credit
 * returns, in posting order. */
int lite_credit_send(struct lite_ctx *ctx, struct lite_request *r);
/* Take a send still waiting for credit off its queue: true when it was there. */
bool lite_credit_unqueue(struct lite_ctx *ctx, struct lite_request *r);

/* Receiver side of an arriving user/collective message: apply piggy-backed credits, check the
 * peer keeps within its credits and the eager size. */
int lite_credit_admit(struct lite_ctx *ctx, int peer, const struct lite_msg_hdr *hdr);
/* A credit-consuming message no longer occupies memory here. */
void lite_credit_freed(struct lite_ctx *ctx, int peer);
/* A wait is about to sleep: return owed credits to peers left without any. */
void lite_credit_idle(struct lite_ctx *ctx);
/* An arriving control message (its type already checked): in order, the credits it returns
 * applied (queued sends go), its header kept in the peer's rx_hdr. */
int lite_credit_ctrl_in(struct lite_ctx *ctx, int peer, const struct lite_msg_hdr *hdr);

#endif /* LITE_CREDITS_H */
