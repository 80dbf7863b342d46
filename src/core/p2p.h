/*
 * p2p.h - the end of point-to-point messaging (p2p.c; its public calls are in litetx.h). Not
 * installed.
 */
#ifndef LITE_P2P_H
#define LITE_P2P_H

#include "ctx.h"

/* Tear down matching state (frees unexpected messages, fails posted requests) and every
 * request of the context. */
void lite_p2p_fini(struct lite_ctx *ctx);

#endif /* LITE_P2P_H */
