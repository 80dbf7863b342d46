/*
 * request.h - requests, the context's last error, and the record of lost peers (request.c): the
 * bottom of point-to-point messaging, which every module above uses. Not installed.
 */
#ifndef LITE_REQUEST_H
#define LITE_REQUEST_H

#include "ctx.h"

/* Record the detail of a failure and return code (for `return lite_fail(ctx, rc, ...)`). Cold:
 * the compiler lays the hot paths out (and saves registers) as if failures never happen. */
int lite_fail(struct lite_ctx *ctx, int code, const char *fmt, ...)
    __attribute__((cold, format(printf, 3, 4)));

/* A zeroed request of the context (NULL when out of memory), and its end. */
struct lite_request *lite_request_alloc(struct lite_ctx *ctx);
void lite_request_free(struct lite_ctx *ctx, struct lite_request *r);
/* A request from the context's cache (or new), set up for the op. */
struct lite_request *lite_request_new(struct lite_ctx *ctx, uint8_t kind, uint8_t chan, int peer,
                                      uint64_t tag, void *buf, size_t len);
/* Release a finished (or never posted) request; NULL-safe. The context keeps a few for reuse. */
void lite_request_release(struct lite_ctx *ctx, struct lite_request *req);
/* Finish a request (status 0 or negative). */
void lite_request_finish(struct lite_request *r, int error);
/* Free every request of the context (lite_finalize, last). */
void lite_request_fini(struct lite_ctx *ctx);
/* "send to", "recv from" or "one-sided op with", for messages about r. */
const char *lite_request_op_name(const struct lite_request *r);
/* Record why r ended with err (the op, its peer, the cause when that peer is lost): err. */
int lite_request_failed(struct lite_ctx *ctx, const struct lite_request *r, int err);

/* True when some peer has been lost (waits that depend on all peers then fail). */
bool lite_any_peer_lost(const struct lite_ctx *ctx);
/* The first lost peer (-1: none), and in out "rank N is lost (cause)" with how many more are,
 * for the details of waits that depend on every peer. */
int lite_lost_peers(const struct lite_ctx *ctx, char *out, size_t len);

/* Deferred failures: a backend's peer_failed outside progress, or the core's own (an op's
 * second message could not be posted after its first left), handled when progress returns
 * (upcall.c's lite_peer_fail_run, through ctx->peer_fail_run). */
void lite_peer_fail_deferred(struct lite_ctx *ctx, int peer, int code, const char *why);

/* A peer index in range for op ("send", "recv"): 0, or -EINVAL recorded. */
static inline int lite_peer_check(struct lite_ctx *ctx, int peer, const char *op)
{
    if (peer < 0 || peer >= ctx->s.world_size)
        return lite_fail(ctx, -EINVAL, "%s: peer %d out of range (world size %d)", op, peer,
                         ctx->s.world_size);
    return 0;
}

#endif /* LITE_REQUEST_H */
