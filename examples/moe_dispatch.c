/*
 * moe_dispatch - one MoE layer's dispatch and combine across ranks, one expert per rank:
 * each rank routes its tokens to experts (top-1), exchanges the per-expert token counts
 * (alltoall), sends the tokens to their experts (alltoallv), every expert transforms the tokens
 * it got, and the results go back to their owners (alltoallv with the counts reversed).
 *
 *   litetx-run -n 4 build/examples/moe_dispatch [tokens_per_rank] [hidden]
 *
 * The "expert" of rank e multiplies a token by (e + 1), so each owner checks every returned
 * token against its own copy times the expert it was routed to.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <litetx/litetx.h>

#define TRY(call)                                                                                  \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_) {                                                                                 \
            fprintf(stderr, "rank %d: %s: %s (%s)\n", lite_rank(ctx), #call, lite_strerror(rc_),   \
                    lite_last_error(ctx));                                                         \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A skewed router: low-numbered experts are popular, as in real MoE traffic. */
static int route(int rank, int t, int experts)
{
    uint32_t h = (uint32_t)(rank * 2654435761u) ^ (uint32_t)(t * 40503u);
    h ^= h >> 13;
    int e = (int)(h % (uint32_t)(experts * experts));
    return (int)(e % experts) < experts / 2 ? e % experts : (e / experts) % experts;
}

int main(int argc, char **argv)
{
    int tokens = argc > 1 ? atoi(argv[1]) : 512, hidden = argc > 2 ? atoi(argv[2]) : 1024;
    lite_config_t cfg = lite_config_default();
    lite_ctx_t *ctx;
    int rc = lite_init(&cfg, &ctx);
    if (rc || tokens < 1 || hidden < 1) {
        fprintf(stderr, "lite_init: %s: %s\n", lite_strerror(rc), lite_init_error());
        return 1;
    }
    int me = lite_rank(ctx), n = lite_world_size(ctx);
    size_t tok_bytes = (size_t)hidden * sizeof(float);
    float *x = malloc((size_t)tokens * tok_bytes), *sendb = malloc((size_t)tokens * tok_bytes);
    int *expert = malloc(sizeof(int) * (size_t)tokens),
        *order = malloc(sizeof(int) * (size_t)tokens);
    size_t *scount = calloc((size_t)n, sizeof(size_t)), *sdispl = calloc((size_t)n, sizeof(size_t));
    size_t *rcount = calloc((size_t)n, sizeof(size_t)), *rdispl = calloc((size_t)n, sizeof(size_t));
    uint64_t *cnt_out = calloc((size_t)n, 8), *cnt_in = calloc((size_t)n, 8);
    for (int t = 0; t < tokens; t++) {
        for (int h = 0; h < hidden; h++)
            x[(size_t)t * hidden + h] = (float)(me * 1000 + t) + (float)h / 1024.0f;
        expert[t] = route(me, t, n);
        cnt_out[expert[t]]++;
    }
    double t0 = now_ms();
    /* 1. how many tokens go to each expert (elements of hidden floats) */
    TRY(lite_alltoall(ctx, cnt_out, cnt_in, 1, LITE_U64, 10000));
    /* 2. pack tokens grouped by expert, then dispatch */
    size_t off = 0, roff = 0;
    for (int e = 0; e < n; e++) {
        scount[e] = cnt_out[e] * (size_t)hidden;
        sdispl[e] = off;
        off += scount[e];
        rcount[e] = cnt_in[e] * (size_t)hidden;
        rdispl[e] = roff;
        roff += rcount[e];
    }
    size_t fill[64] = {0}, *pos = n <= 64 ? fill : calloc((size_t)n, sizeof(size_t));
    for (int t = 0; t < tokens; t++) {
        int e = expert[t];
        size_t slot = sdispl[e] / (size_t)hidden + pos[e]++;
        order[t] = (int)slot;
        memcpy(sendb + slot * (size_t)hidden, x + (size_t)t * hidden, tok_bytes);
    }
    float *recvb = malloc(roff * sizeof(float) + 1);
    TRY(lite_alltoallv(ctx, sendb, scount, sdispl, recvb, rcount, rdispl, LITE_F32, 10000));
    /* 3. the expert: scale by (rank + 1) */
    for (size_t i = 0; i < roff; i++)
        recvb[i] *= (float)(me + 1);
    /* 4. combine: send results back, counts reversed */
    TRY(lite_alltoallv(ctx, recvb, rcount, rdispl, sendb, scount, sdispl, LITE_F32, 10000));
    double took = now_ms() - t0;

    long bad = 0;
    for (int t = 0; t < tokens; t++)
        for (int h = 0; h < hidden; h++)
            bad += sendb[(size_t)order[t] * hidden + h] !=
                   x[(size_t)t * hidden + h] * (float)(expert[t] + 1);
    printf("rank %d: %d tokens dispatched to %d experts (to expert 0: %llu), %zu received for "
           "its expert, round trip %.2f ms, results %s\n",
           me, tokens, n, (unsigned long long)cnt_out[0], roff / (size_t)hidden, took,
           bad ? "WRONG" : "ok");
    if (pos != fill)
        free(pos);
    free(x), free(sendb), free(recvb), free(expert), free(order);
    free(scount), free(sdispl), free(rcount), free(rdispl), free(cnt_out), free(cnt_in);
    lite_finalize(ctx);
    return bad ? 1 : 0;
}
