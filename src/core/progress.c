/*
 * progress.c - progress and waiting: one round of the backend's progress (with the credits a
 * sleeping wait returns and the failures reported meanwhile), the library's wait loops, and
 * the test and wait of a point-to-point or one-sided request.
 */
#include <errno.h>
#include <sched.h>
#include <string.h>

#include "credits.h"
#include "progress.h"
#include "request.h"

/* One round of progress: poll the backend, or sleep in it up to sleep_ms. Inlined into
 * lite_wait, whose spin is this call back to back: its length delays the sight of a message. */
static inline int progress_step(struct lite_ctx *ctx, int sleep_ms)
{
    if (sleep_ms > 0)
        lite_credit_idle(ctx);
    int rc = ctx->ops.progress(ctx->tp, sleep_ms);
    if (__builtin_expect(ctx->fail_due, 0))
        ctx->peer_fail_run(ctx); /* upcall.c, installed by lite_init */
    if (__builtin_expect(ctx->pipe_head != NULL, 0))
        ctx->pipe_poll(ctx); /* rndv.c: chunks of device sends whose copies landed */
    if (sleep_ms == 0 && ctx->yield_polls)
        sched_yield(); /* oversubscribed host: let a rank with work run */
    if (rc < 0)
        return lite_fail(ctx, rc, "transport %s progress failed: %s", ctx->ops.name,
                         lite_strerror(rc));
    return rc;
}

/* A step of the library's own wait loops: a poll that found nothing is followed by the spin
 * pause (LITETX_SPIN_PAUSE_NS). lite_test and lite_progress do not pause: between the user's
 * calls there may be other work. */
static inline int wait_step(struct lite_ctx *ctx, int sleep_ms)
{
    int rc = progress_step(ctx, sleep_ms);
    if (rc == 0 && sleep_ms == 0 && !ctx->yield_polls)
        lite_cpu_relax(ctx->spin_pause);
    return rc;
}

int lite_progress_once(struct lite_ctx *ctx, int sleep_ms)
{
    return wait_step(ctx, sleep_ms);
}

int lite_progress_poll(struct lite_ctx *ctx)
{
    return progress_step(ctx, 0);
}

int lite_wait_all(struct lite_ctx *ctx, struct lite_request **reqs, int n, int64_t deadline_ns)
{
    struct lite_waiter w;
    lite_waiter_start(&w, deadline_ns, 0, ctx->spin_ns);
    int first_err = 0;
    for (;;) {
        int pending = 0;
        const struct lite_request *stuck = NULL;
        for (int i = 0; i < n; i++) {
            struct lite_request *r = reqs[i];
            if (!r)
                continue;
            if (r->state == LITE_REQ_DONE) {
                if (r->error && !first_err)
                    first_err = lite_request_failed(ctx, r, r->error);
                lite_request_release(ctx, r);
                reqs[i] = NULL;
            } else {
                pending++;
                stuck = stuck ? stuck : r;
            }
        }
        if (!pending)
            return first_err;
        int sleep_ms = lite_waiter_next(&w);
        if (sleep_ms < 0)
            return lite_fail(ctx, -ETIMEDOUT,
                             "timed out: %d operation(s) pending, first: %s rank %d (tag %#llx)",
                             pending, lite_request_op_name(stuck), stuck->peer,
                             (unsigned long long)stuck->tag);
        int rc = lite_progress_once(ctx, sleep_ms);
        if (rc < 0)
            return rc;
    }
}

static void fill_status(struct lite_ctx *ctx, struct lite_request *r, lite_status_t *st)
{
    if (r->stage) /* a staged receive's bytes reach the device before anyone sees it done */
        ctx->stage_end(r);
    if (!st)
        return;
    st->peer = r->peer;
    st->tag = r->tag;
    st->bytes = r->bytes;
    st->error = r->error;
}

int lite_request_test(struct lite_ctx *ctx, struct lite_request *req, lite_status_t *status)
{
    if (req->state != LITE_REQ_DONE) {
        int rc = progress_step(ctx, 0);
        if (rc < 0)
            return rc;
        if (req->state != LITE_REQ_DONE)
            return 0;
    }
    fill_status(ctx, req, status);
    int err = req->error;
    if (err)
        lite_request_failed(ctx, req, err);
    lite_request_release(ctx, req);
    return err ? err : 1;
}

int lite_request_wait(struct lite_ctx *ctx, struct lite_request *req, int timeout_ms,
                      lite_status_t *status)
{
    if (req->state == LITE_REQ_DONE && !req->error) {
        /* Done already (an injected send): no clock, no loop. */
        fill_status(ctx, req, status);
        lite_request_release(ctx, req);
        return 0;
    }
    struct lite_waiter w;
    lite_waiter_start(&w, 0, timeout_ms == LITE_TIMEOUT_DEFAULT ? ctx->s.op_timeout_ms : timeout_ms,
                      ctx->spin_ns);
    while (req->state != LITE_REQ_DONE) {
        int ms = lite_waiter_next(&w);
        if (ms < 0)
            return lite_fail(ctx, -ETIMEDOUT, "wait: %s rank %d (tag %#llx) timed out",
                             lite_request_op_name(req), req->peer, (unsigned long long)req->tag);
        int rc = wait_step(ctx, ms);
        if (rc < 0)
            return rc;
    }
    fill_status(ctx, req, status);
    int err = req->error;
    if (err)
        lite_request_failed(ctx, req, err);
    lite_request_release(ctx, req);
    return err;
}
