/*
 * immcounter.h - ImmCounter: arrivals of one-sided writes counted per immediate (immcounter.c;
 * lite_imm_wait and friends are public, litetx.h). Not installed.
 */
#ifndef LITE_IMMCOUNTER_H
#define LITE_IMMCOUNTER_H

#include "ctx.h"

void lite_imm_arrived(struct lite_core *core, int peer, uint32_t imm); /* also an upcall */
void lite_imm_setup(struct lite_ctx *ctx); /* reads LITETX_IMM_COUNTERS */
void lite_imm_fini(struct lite_ctx *ctx);

#endif /* LITE_IMMCOUNTER_H */
