/*
 * mr.h - registered regions (mr.c): remote descriptors, and the target-side check of peers'
 * one-sided ops. The public calls (lite_mr_reg, lite_mr_dereg, lite_mr_desc) are in litetx.h.
 * Not installed.
 */
#ifndef LITE_MR_H
#define LITE_MR_H

#include "ctx.h"

/* The target side of a peer's one-sided op (also the upcalls rma_target, rma_target_done). */
int lite_mr_target(struct lite_core *core, int peer, uint64_t key, uint64_t offset, uint64_t len,
                   unsigned access, void **addr, void **token);
void lite_mr_target_done(struct lite_core *core, void *token);
void lite_mr_close(struct lite_ctx *ctx); /* before the transport closes */
void lite_mr_fini(struct lite_ctx *ctx);  /* after */
/* Parse a remote descriptor for an op with `peer`: checks version, checksum, transport, owner. */
struct lite_rdesc_info {
    uint64_t addr, len, core_key;
    unsigned access;
    int kind;
    uint32_t owner;
    uint32_t nrails;
    uint64_t rkey[LITE_MAX_RAILS];
};
/* A descriptor parsed before (mr.c): the bytes parse reads (up to its checksum) and the result. */
#define LITE_RDESC_PARSED 112
#define LITE_RDESC_MEMOS  8
struct lite_rdesc_memo {
    bool valid;
    uint8_t raw[LITE_RDESC_PARSED];
    struct lite_rdesc_info info;
};
int lite_rdesc_parse(struct lite_ctx *ctx, const lite_rdesc_t *d, int peer,
                     struct lite_rdesc_info *out);

#endif /* LITE_MR_H */
