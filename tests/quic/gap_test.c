/*
 * gap_test.c - the longest gap between progress calls (docs/QUIC.md): rank 1 stays out of the
 * library for GAP_MS while rank 0 keeps waiting on it, then the pair talks again.
 *
 *   litetx-run -n 2 gap_test GAP_MS survive|lost
 *
 * survive: GAP_MS is below the idle timeout: a 1 MiB message each way after the gap arrives
 *          intact. lost: GAP_MS is beyond it: rank 0 reports -LITE_ERR_PEER_LOST (its idle timer
 *          fired while rank 1 was away), and rank 1 learns the same once it is back.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mp_common.h"

int main(int argc, char **argv)
{
    CHECK(argc == 3, "usage: gap_test GAP_MS survive|lost");
    long gap_ms = strtol(argv[1], NULL, 10);
    bool survive = strcmp(argv[2], "survive") == 0;
    lite_ctx_t *ctx = mp_init();
    int me = lite_rank(ctx), other = 1 - me;
    CHECK(lite_world_size(ctx) == 2, "needs 2 ranks");
    enum { LEN = 1 << 20 };
    uint8_t *s = malloc(LEN), *r = malloc(LEN);
    CHECK(s && r, "oom");
    mp_fill(s, LEN, me, other, 7);
    CHECK_RC(ctx, lite_barrier(ctx, 30000));
    if (me == 1) {
        /* Away from the library: no progress at all. */
        struct timespec ts = {.tv_sec = gap_ms / 1000, .tv_nsec = (gap_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    lite_request_t *sr;
    int rc = lite_isend(ctx, other, 1, s, LEN, &sr);
    if (rc == 0)
        rc = lite_recv(ctx, other, 1, r, LEN, NULL, 30000);
    if (rc == 0)
        rc = lite_wait(ctx, sr, 30000, NULL);
    if (survive) {
        CHECK(rc == 0, "after a %ld ms gap: %d (%s): %s", gap_ms, rc, lite_strerror(rc),
              lite_last_error(ctx));
        CHECK(mp_verify(r, LEN, other, me, 7) < 0, "the message after the gap is corrupted");
        CHECK_RC(ctx, lite_finalize(ctx));
        printf("rank %d: the pair survived a %ld ms gap\n", me, gap_ms);
    } else {
        CHECK(rc == -LITE_ERR_PEER_LOST || rc == -ESHUTDOWN,
              "after a %ld ms gap past the idle timeout: %d (%s), want peer lost", gap_ms, rc,
              lite_strerror(rc));
        printf("rank %d: a %ld ms gap lost the pair as documented: %s\n", me, gap_ms,
               lite_last_error(ctx));
        lite_finalize(ctx);
    }
    free(s);
    free(r);
    return 0;
}
