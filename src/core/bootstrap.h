/*
 * bootstrap.h - the out-of-band exchange that starts a job (bootstrap.c). Not
 * installed.
 */
#ifndef LITE_BOOTSTRAP_H
#define LITE_BOOTSTRAP_H

#include "config.h"
#include "lite_int.h"

struct lite_bootstrap;
/* Rank 0 starts listening at the root address; the others connect to it, retrying until the
 * deadline. With world_size 1 nothing is opened. */
int lite_bootstrap_connect(const struct lite_settings *s, int64_t deadline_ns,
                           struct lite_bootstrap **out, char *why, size_t why_len);
/* The numeric address of this host's interface toward the root (to publish to the others). */
int lite_bootstrap_local_host(struct lite_bootstrap *b, char *host, size_t len);
/* What each rank publishes in the bootstrap: the settings every rank must share (wire.c-style
 * header, context.c), then the transport's address blob. */
#define LITE_BOOT_HDR_LEN  16
#define LITE_BOOT_BLOB_MAX (LITE_TRANSPORT_ADDR_MAX + LITE_BOOT_HDR_LEN)
/* Gather every rank's blob (at most LITE_BOOT_BLOB_MAX bytes) at the root and send the
 * table to all. On success blobs[r]/lens[r] hold rank r's blob (free with
 * lite_bootstrap_free_blobs). A rank that does not arrive in time gives every rank -ETIMEDOUT
 * with the missing ranks named in why. */
int lite_bootstrap_allgather(struct lite_bootstrap *b, const void *blob, size_t len,
                             int64_t deadline_ns, void ***blobs, size_t **lens, char *why,
                             size_t why_len);
/* A barrier over the bootstrap connections (ends init). */
int lite_bootstrap_barrier(struct lite_bootstrap *b, int64_t deadline_ns, char *why,
                           size_t why_len);
void lite_bootstrap_close(struct lite_bootstrap *b);
/* The decoders of the bootstrap's frames (bytes off the network; tests/fuzz/fuzz_bootstrap.c).
 * A frame starts with a 20-byte header: u32 magic | u32 type | u32 rank | u32 world | u32 len. */
#define LITE_BOOT_FRAME_HDR 20
struct lite_boot_frame {
    uint32_t type, rank, world, len;
};
/* 0, or -LITE_ERR_PROTOCOL for a wrong magic, an unknown type or a payload over 16 MiB. */
int lite_bootstrap_frame_decode(const uint8_t *h, struct lite_boot_frame *f);
/* The root's check of a header a joining rank sent first: 0, or -LITE_ERR_PROTOCOL with why. */
int lite_bootstrap_hello_check(const uint8_t *h, const char **bad);
/* A TABLE payload of `len` bytes: per rank u32 length | bytes. blobs[r]/lens[r] for r < world
 * (malloc'd; on failure those set so far stay for the caller to free), or -LITE_ERR_PROTOCOL. */
int lite_bootstrap_table_parse(const uint8_t *p, uint32_t len, int world, void **blobs,
                               size_t *lens);
/* The code an ABORT frame carries in its rank field (or, from an older root, in its reason). */
int lite_bootstrap_abort_code(uint32_t code, const char *reason);
void lite_bootstrap_free_blobs(void **blobs, size_t *lens, int n);

#endif /* LITE_BOOTSTRAP_H */
