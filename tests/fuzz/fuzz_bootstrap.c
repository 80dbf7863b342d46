/*
 * fuzz_bootstrap.c - the decoders of the bootstrap (src/core/bootstrap.c, context.c): bytes a
 * joining rank or the root sends before any transport is up, over a socket anyone on the
 * network can reach (the root listens for strangers).
 *
 * Input: u8 world (1 .. 64), then one frame as it comes off the socket: the 20-byte header and
 * its payload. The header goes through the root's hello check and the frame decoder; an ABORT
 * frame's code through the abort decoder; a TABLE payload through the table parser and then
 * every rank's entry through the check of the settings header each rank puts before its
 * transport's address (credits, rendezvous threshold). Invariants: a parsed table's entries lie
 * inside the payload one after the other; a header check that passes leaves each blob 16 bytes
 * shorter, the settings header gone; every code is one the callers know.
 */
#include "bootstrap.h"
#include "context.h"
#include "ctx.h"
#include "fuzz_check.h"

#define WORLD_MAX 64

static struct lite_ctx ctx;
static uint8_t mine[LITE_BOOT_HDR_LEN];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    lite_log_set_level(LITE_LOG_ERROR);
    ctx.ops.name = "tcp";
    ctx.credits_max = 64;
    ctx.rndv_threshold = 65536;
    lite_boot_hdr(&ctx, mine);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int world = 1 + data[0] % WORLD_MAX;
    data++;
    size--;
    uint8_t h[LITE_BOOT_FRAME_HDR] = {0};
    memcpy(h, data, size < sizeof(h) ? size : sizeof(h));
    const uint8_t *payload = size > sizeof(h) ? data + sizeof(h) : data + size;
    uint32_t have = size > sizeof(h) ? (uint32_t)(size - sizeof(h)) : 0;

    const char *bad = NULL;
    int rc = lite_bootstrap_hello_check(h, &bad);
    FUZZ_CHECK(rc == 0 || (rc == -LITE_ERR_PROTOCOL && bad && *bad));

    struct lite_boot_frame f;
    rc = lite_bootstrap_frame_decode(h, &f);
    FUZZ_CHECK(rc == 0 || rc == -LITE_ERR_PROTOCOL);
    if (rc)
        return 0;
    FUZZ_CHECK(f.type >= 1 && f.type <= 5 && f.len <= (1u << 24));
    /* The payload is what the frame announces, as far as the input goes. */
    uint32_t len = f.len < have ? f.len : have;
    char *text = malloc((size_t)len + 1); /* recv_frame NUL-terminates what it read */
    FUZZ_CHECK(text);
    memcpy(text, payload, len);
    text[len] = 0;
    if (f.type == 3) { /* ABORT */
        int code = lite_bootstrap_abort_code(f.rank, text);
        FUZZ_CHECK(code == -ETIMEDOUT || code == -LITE_ERR_PEER_LOST || code == -LITE_ERR_CONFIG ||
                   code == -LITE_ERR_PROTOCOL);
    }
    if (f.type == 2) { /* TABLE */
        void *blobs[WORLD_MAX] = {0};
        size_t lens[WORLD_MAX] = {0};
        rc = lite_bootstrap_table_parse((const uint8_t *)text, len, world, blobs, lens);
        FUZZ_CHECK(rc == 0 || rc == -LITE_ERR_PROTOCOL);
        if (rc == 0) {
            size_t off = 0;
            for (int r = 0; r < world; r++) {
                FUZZ_CHECK(off + 4 + lens[r] <= len);
                FUZZ_CHECK(memcmp(blobs[r], text + off + 4, lens[r]) == 0);
                off += 4 + lens[r];
            }
            ctx.s.world_size = world;
            size_t before[WORLD_MAX];
            memcpy(before, lens, sizeof(before));
            char why[256] = "";
            rc = lite_boot_check(&ctx, mine, blobs, lens, why, sizeof(why));
            FUZZ_CHECK(rc == 0 || ((rc == -LITE_ERR_PROTOCOL || rc == -LITE_ERR_CONFIG) && why[0]));
            if (rc == 0)
                for (int r = 0; r < world; r++)
                    FUZZ_CHECK(lens[r] + LITE_BOOT_HDR_LEN == before[r]);
        }
        for (int r = 0; r < world; r++)
            free(blobs[r]);
    }
    free(text);
    return 0;
}
