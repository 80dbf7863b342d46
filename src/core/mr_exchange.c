/*
 * mr_exchange.c - lite_mr_exchange: every rank's remote descriptor to every rank. An allgather,
 * so it sits above both the registrations (mr.c) and the collectives.
 */
#include <errno.h>
#include <string.h>

#include "coll.h"
#include "mr.h"

LITE_API int lite_mr_exchange(lite_ctx_t *ctx, const lite_mr_t *mr, lite_rdesc_t *descs,
                              int timeout_ms)
{
    if (!ctx || !descs)
        return -EINVAL;
    lite_rdesc_t mine;
    memset(&mine, 0, sizeof(mine));
    if (mr)
        lite_mr_desc(ctx, mr, &mine);
    /* An allgather, so it takes its turn among the collectives in flight (a non-blocking one
     * started before it keeps its place). */
    return lite_allgather(ctx, &mine, descs, sizeof(mine), LITE_U8, timeout_ms);
}
