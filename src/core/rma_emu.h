/*
 * rma_emu.h - one-sided ops the core emulates over messages for backends that lack them
 * (rma_emu.c), and lite_rma_post, which every one-sided op goes through. Not installed.
 */
#ifndef LITE_RMA_EMU_H
#define LITE_RMA_EMU_H

#include "ctx.h"

/* Which ops the core emulates for the backend `ops` (the table as the backend gave it), and the
 * capability bits the core then provides on the backend's behalf. */
uint8_t lite_emu_needed(const struct lite_transport_ops *ops, uint32_t *caps_added);
/* Post a one-sided op the core emulates: as rma_post (0 and send_done(op) follows, or a code). */
int lite_emu_post(struct lite_ctx *ctx, const struct lite_tp_rma *rma, void *op);
/* rma_post, or the core's emulation where the backend lacks the op. */
static inline int lite_rma_post(struct lite_ctx *ctx, const struct lite_tp_rma *rma, void *op)
{
    if (__builtin_expect(ctx->emu != 0, 0)) {
        uint8_t need = rma->kind == LITE_RMA_READ ? LITE_EMU_READ
                       : rma->has_imm             ? LITE_EMU_IMM
                                                  : LITE_EMU_WRITE;
        if (ctx->emu & need)
            return lite_emu_post(ctx, rma, op);
    }
    return ctx->ops.rma_post(ctx->tp, rma, op);
}
int lite_emu_ctrl_begin(struct lite_ctx *ctx, int peer, const struct lite_msg_hdr *hdr, void **dst);
int lite_emu_ctrl_end(struct lite_ctx *ctx, int peer);
/* An internal message of an emulated op finished (up_send_done). */
void lite_emu_msg_done(struct lite_ctx *ctx, struct lite_emu_op *e, int status);
void lite_emu_peer_failed(struct lite_ctx *ctx, int peer, int code);
void lite_emu_fini(struct lite_ctx *ctx);

#endif /* LITE_RMA_EMU_H */
