/*
 * tls_boot_test.c - a job for boot_check.sh, under litetx-run with security on: every rank but
 * 0 waits for the file $TLS_BOOT_GO (the script's attacks on the root's port are over) before
 * lite_init, then each rank sends its rank to the next and checks what the previous one sent:
 * a stranger's address in the table, or a stranger in a rank's place, fails the job.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "litetx/litetx.h"

#define GO_WAIT_STEPS 300 /* x 100 ms */

int main(void)
{
    int rank = atoi(getenv("LITETX_RANK") ? getenv("LITETX_RANK") : "0");
    const char *go = getenv("TLS_BOOT_GO");
    if (rank != 0 && go) {
        int i = 0;
        for (; i < GO_WAIT_STEPS && access(go, F_OK) != 0; i++)
            usleep(100 * 1000);
        if (i == GO_WAIT_STEPS) {
            fprintf(stderr, "rank %d: FAILED: no go file %s after 30 s\n", rank, go);
            return 1;
        }
    }
    lite_config_t cfg = lite_config_default();
    lite_ctx_t *ctx = NULL;
    int rc = lite_init(&cfg, &ctx);
    if (rc) {
        fprintf(stderr, "rank %d: FAILED: lite_init: %s\n", rank, lite_init_error());
        return 1;
    }
    int n = lite_world_size(ctx), next = (rank + 1) % n, prev = (rank + n - 1) % n;
    int mine = rank * 1000 + 7, got = -1;
    lite_request_t *req = NULL;
    rc = lite_irecv(ctx, prev, 5, &got, sizeof(got), &req);
    if (!rc)
        rc = lite_send(ctx, next, 5, &mine, sizeof(mine), 30000);
    if (!rc)
        rc = lite_wait(ctx, req, 30000, NULL);
    if (rc || got != prev * 1000 + 7) {
        fprintf(stderr, "rank %d: FAILED: ring exchange: rc %d (%s), got %d from rank %d\n", rank,
                rc, rc ? lite_last_error(ctx) : "", got, prev);
        lite_finalize(ctx);
        return 1;
    }
    printf("rank %d: ring ok\n", rank);
    return lite_finalize(ctx) ? 1 : 0;
}
