/*
 * progress.h - progress and waiting (progress.c). Not installed.
 */
#ifndef LITE_PROGRESS_H
#define LITE_PROGRESS_H

#include "ctx.h"

/* A wait loop's step: make progress once, sleeping in the backend up to sleep_ms; with sleep_ms
 * 0, a poll that finds nothing ends with the spin pause. >= 0 or a negative code. */
int lite_progress_once(struct lite_ctx *ctx, int sleep_ms);
/* One poll without the pause (lite_test, lite_progress: the user's loop decides). */
int lite_progress_poll(struct lite_ctx *ctx);
/* Wait for every request in reqs[0..n) (NULL entries skipped) until the deadline; each finished
 * request is released and its slot set to NULL. Returns 0 or the first error. */
int lite_wait_all(struct lite_ctx *ctx, struct lite_request **reqs, int n, int64_t deadline_ns);
/* lite_test and lite_wait of a request that is not a collective's (the same results). */
int lite_request_test(struct lite_ctx *ctx, struct lite_request *req, lite_status_t *status);
int lite_request_wait(struct lite_ctx *ctx, struct lite_request *req, int timeout_ms,
                      lite_status_t *status);

#endif /* LITE_PROGRESS_H */
