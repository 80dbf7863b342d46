/*
 * upcall.h - the upcalls the core gives every backend, and the handling of deferred peer
 * failures (upcall.c). Not installed.
 */
#ifndef LITE_UPCALL_H
#define LITE_UPCALL_H

#include "ctx.h"

/* The upcalls the core gives every backend (lite_init also keeps them in ctx->up). */
extern const struct lite_core_upcalls lite_core_upcalls;

/* Handle the failures lite_peer_fail_deferred recorded (progress.c calls it through
 * ctx->peer_fail_run when the backend's progress returns). */
void lite_peer_fail_run(struct lite_ctx *ctx);

#endif /* LITE_UPCALL_H */
