/*
 * match.h - tagged matching and the receive path of the backends' upcalls (match.c). Not
 * installed.
 */
#ifndef LITE_MATCH_H
#define LITE_MATCH_H

#include "ctx.h"

/* The upcalls recv_begin, recv_end and recv_msg (struct lite_core_upcalls). */
int lite_match_recv_begin(struct lite_core *core, int peer, const struct lite_msg_hdr *hdr,
                          void **dst, void **token);
void lite_match_recv_end(struct lite_core *core, int peer, void *token);
int lite_match_recv_msg(struct lite_core *core, int peer, const struct lite_msg_hdr *hdr,
                        const void *payload);

/* Internal posting of a receive with an explicit channel (collectives use LITE_CHAN_COLL). */
int lite_post_recv(struct lite_ctx *ctx, uint8_t chan, int peer, uint64_t tag, void *buf,
                   size_t len, struct lite_request **out);
/* Take a receive off its peer's posted list, if it is still there (no other effect). */
void lite_match_unpost(struct lite_ctx *ctx, struct lite_request *r);
/* lite_cancel of a request that is not a collective's (the same results). */
int lite_request_cancel(struct lite_ctx *ctx, struct lite_request *req);
/* Drop complete unexpected collective messages with tags below `below`. */
void lite_match_purge_coll(struct lite_ctx *ctx, uint64_t below);
/* A lost peer: the message arriving from it and the receives posted for it fail. */
void lite_match_peer_lost(struct lite_ctx *ctx, int peer);
void lite_match_fini(struct lite_ctx *ctx);

#endif /* LITE_MATCH_H */
