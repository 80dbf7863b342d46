/*
 * rdma_fault_test - hostile-peer checks of the rdma backend that need to reach into it to forge
 * traffic (run over Soft-RoCE by tests/rdma/vm_suite.sh; skipped on other transports).
 *
 *   litetx-run -n 3 rdma_fault_test mailbox_rows
 *
 * mailbox_rows: each rank reports its receive window into a row of its peer's mailbox array
 * with an RDMA write under a key the peer gave it. Rank 2 aims such a write one row lower, at
 * the row rank 1 reports into in rank 0's array. The key rank 2 holds must not reach it: the
 * write fails at rank 2 (remote access error: the pair 0-2 breaks) and rank 0's row for rank 1
 * keeps what rank 1 wrote. (With one registration for the whole array the write landed.)
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctx.h"
#include "mp_common.h"
#include "transports/rdma/rdma_int.h"

#define FORGED 0x5A5A5A5A5A5A5A5Aull

/* Progress for `ms` milliseconds (the peers' failures are expected here, not errors). */
static void idle(lite_ctx_t *ctx, int ms)
{
    int rc = lite_imm_wait(ctx, 0xDEAD0, 1, ms);
    CHECK(rc == -ETIMEDOUT || rc == -LITE_ERR_PEER_LOST, "idle wait gave %d (%s)", rc,
          lite_strerror(rc));
}

static void forge_row_write(lite_ctx_t *ctx)
{
    struct lite_transport *t = ctx->tp;
    struct lite_rdma_conn *c = &t->conns[0];
    CHECK(c->msg && c->peer_mbox >= 8 * LITE_RDMA_MBOX_ROW, "no connection to rank 0");
    /* A window report, one row too low: where rank 1 reports into rank 0's array. */
    int rc = lite_rdma_post_word(t, c, c->peer_mbox - 8ull * LITE_RDMA_MBOX_ROW, FORGED, WR_CREDIT,
                                 true);
    CHECK(rc == 0, "forged post refused: %s", lite_strerror(rc));
}

static void mailbox_rows(void)
{
    lite_ctx_t *ctx = mp_init();
    int me = lite_rank(ctx);
    CHECK(lite_world_size(ctx) == 3, "needs 3 ranks");
    struct lite_transport *t = ctx->tp;
    CHECK_RC(ctx, lite_barrier(ctx, 30000));
    if (me == 2) {
        forge_row_write(ctx);
        idle(ctx, 1500); /* the write's outcome arrives; then gone */
        lite_finalize(ctx);
        _exit(0);
    }
    /* Ranks 0 and 1 exchange nothing now, so rank 1's row in rank 0's array stays as it is,
     * unless the forged write lands there. */
    idle(ctx, 2500);
    if (me == 0) {
        const volatile uint64_t *row = t->mbox + 1 * LITE_RDMA_MBOX_ROW;
        for (int i = 0; i < LITE_RDMA_MBOX_ROW; i++)
            CHECK(row[i] != FORGED,
                  "rank 2 overwrote word %d of the mailbox row rank 1 reports into", i);
        printf("rank 0: rank 1's mailbox row is untouched by rank 2's write\n");
    }
    lite_finalize(ctx); /* rank 2 is gone: no barrier */
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mp_transport(), "rdma") != 0)
        mp_skip("these cases are the rdma backend's (LITETX_TRANSPORT=rdma)");
    if (!strcmp(mode, "mailbox_rows"))
        mailbox_rows();
    else
        CHECK(0, "unknown mode '%s'", mode);
    return 0;
}
