/*
 * mp_common.h - helpers for the multi-process tests (run under litetx-run, one process per rank).
 * A failed check prints where and why and exits non-zero, which fails the whole litetx-run.
 */
#ifndef MP_COMMON_H
#define MP_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "litetx/litetx.h"

static int mp_rank = -1;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", mp_rank, __FILE__, __LINE__,     \
                    #cond);                                                                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CHECK_RC(ctx, call)                                                                        \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        CHECK(rc_ == 0, "%s returned %d (%s): %s", #call, rc_, lite_strerror(rc_),                 \
              lite_last_error(ctx));                                                               \
    } while (0)

/* A byte pattern that depends on (src, dst, id, i) so misplaced or mixed-up data is caught. */
static inline uint8_t mp_pattern(int src, int dst, uint32_t id, size_t i)
{
    uint64_t x = ((uint64_t)src * 0x9E3779B1u) ^ ((uint64_t)dst * 0x85EBCA77u) ^
                 ((uint64_t)id * 0xC2B2AE3Du) ^ (i * 0x27D4EB2Fu);
    x ^= x >> 29;
    return (uint8_t)(x ^ (x >> 8));
}

static inline void mp_fill(uint8_t *buf, size_t len, int src, int dst, uint32_t id)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = mp_pattern(src, dst, id, i);
}

/* Index of the first wrong byte, or -1 when the buffer holds the pattern. */
static inline long mp_verify(const uint8_t *buf, size_t len, int src, int dst, uint32_t id)
{
    for (size_t i = 0; i < len; i++)
        if (buf[i] != mp_pattern(src, dst, id, i))
            return (long)i;
    return -1;
}

/* Exit code CTest reads as "skipped" (SKIP_RETURN_CODE in tests/mp/CMakeLists.txt). */
#define MP_SKIP 77

/* Skip the test with a reason printed; every rank must decide the same way. */
static inline void mp_skip(const char *why)
{
    printf("SKIPPED: %s\n", why);
    exit(MP_SKIP);
}

/* The transport the launcher asked for ("auto" when none). */
static inline const char *mp_transport(void)
{
    const char *t = getenv("LITETX_TRANSPORT");
    return t && *t ? t : "auto";
}

static inline lite_ctx_t *mp_init(void)
{
    lite_config_t cfg = lite_config_default();
    lite_ctx_t *ctx = NULL;
    int rc = lite_init(&cfg, &ctx);
    CHECK(rc == 0, "lite_init: %s: %s", lite_strerror(rc), lite_init_error());
    mp_rank = lite_rank(ctx);
    return ctx;
}

#endif /* MP_COMMON_H */
