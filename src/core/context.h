/*
 * context.h - what context.c (lite_init, lite_finalize) offers the rest of the core: the
 * header each rank publishes in the bootstrap and its check. Not installed.
 */
#ifndef LITE_CONTEXT_H
#define LITE_CONTEXT_H

#include "ctx.h"

/* The header each rank puts before its transport's blob in the bootstrap (context.c), and the
 * check of every rank's against this rank's: blobs[r]/lens[r] are left holding the transport's
 * blob alone. -LITE_ERR_PROTOCOL or -LITE_ERR_CONFIG naming the rank (tests/fuzz). */
void lite_boot_hdr(const struct lite_ctx *ctx, uint8_t *h);
int lite_boot_check(const struct lite_ctx *ctx, const uint8_t *mine, void **blobs, size_t *lens,
                    char *why, size_t why_len);

#endif /* LITE_CONTEXT_H */
