/*
 * wait.c - lite_test, lite_wait and lite_cancel: a collective's request goes to the collective
 * engine (coll_engine.c), any other to progress.c and match.c.
 */
#include <errno.h>

#include "coll.h"
#include "match.h"
#include "progress.h"
#include "request.h"

#define CHECK_CTX(ctx)                                                                             \
    do {                                                                                           \
        if (!(ctx))                                                                                \
            return -EINVAL;                                                                        \
    } while (0)

LITE_API int lite_test(lite_ctx_t *ctx, lite_request_t *req, lite_status_t *status)
{
    CHECK_CTX(ctx);
    if (!req)
        return lite_fail(ctx, -EINVAL, "test: NULL request");
    if (req->kind == LITE_REQ_COLL)
        return lite_coll_test(ctx, req, status);
    return lite_request_test(ctx, req, status);
}

LITE_API int lite_wait(lite_ctx_t *ctx, lite_request_t *req, int timeout_ms, lite_status_t *status)
{
    CHECK_CTX(ctx);
    if (!req)
        return lite_fail(ctx, -EINVAL, "wait: NULL request");
    if (req->kind == LITE_REQ_COLL)
        return lite_coll_wait(ctx, req, timeout_ms, status);
    return lite_request_wait(ctx, req, timeout_ms, status);
}

LITE_API int lite_cancel(lite_ctx_t *ctx, lite_request_t *req)
{
    CHECK_CTX(ctx);
    if (!req)
        return -EINVAL;
    if (req->kind == LITE_REQ_COLL)
        return lite_coll_cancel(ctx, req);
    return lite_request_cancel(ctx, req);
}
