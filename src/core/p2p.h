/*
 * p2p.h - blocking sends and receives of host buffers, and the end of point-to-point messaging
 * (p2p.c). Not installed.
 */
#ifndef LITE_P2P_H
#define LITE_P2P_H

#include "ctx.h"

/* lite_send and lite_recv of a host buffer (the public calls hand device buffers to
 * gpu_stage.c, which calls these on its bounce buffers). */
int lite_p2p_send(struct lite_ctx *ctx, int peer, uint64_t tag, const void *buf, size_t len,
                  int timeout_ms);
int lite_p2p_recv(struct lite_ctx *ctx, int peer, uint64_t tag, void *buf, size_t len,
                  size_t *received, int timeout_ms);

/* Tear down matching state (frees unexpected messages, fails posted requests) and every
 * request of the context. */
void lite_p2p_fini(struct lite_ctx *ctx);

#endif /* LITE_P2P_H */
