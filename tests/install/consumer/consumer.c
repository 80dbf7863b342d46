/* A one-rank program against the installed library: init, a self send/recv, finalize. */
#include <litetx/litetx.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    lite_config_t cfg = lite_config_default();
    cfg.world_size = 1;
    cfg.rank = 0;
    lite_ctx_t *ctx;
    int rc = lite_init(&cfg, &ctx);
    if (rc) {
        fprintf(stderr, "init: %s: %s\n", lite_strerror(rc), lite_init_error());
        return 1;
    }
    char out[] = "installed", in[16] = "";
    rc = lite_send(ctx, 0, 1, out, sizeof(out), 1000);
    if (!rc)
        rc = lite_recv(ctx, 0, 1, in, sizeof(in), NULL, 1000);
    lite_finalize(ctx);
    if (rc || strcmp(in, out) != 0) {
        fprintf(stderr, "self send/recv failed: %s\n", lite_strerror(rc));
        return 1;
    }
    printf("consumer ok: liblitetx %s\n", lite_version());
    return 0;
}
