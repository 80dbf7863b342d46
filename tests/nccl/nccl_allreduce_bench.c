/*
 * nccl_allreduce_bench - the deterministic allreduce on device buffers over the nccl backend
 * against ncclAllReduce, interleaved in the same run, medians and their ratio:
 *     litetx-run -n 2 --transport nccl nccl_gate nccl_allreduce_bench [MiB] [rounds]
 * ncclAllReduce runs on a communicator of the bench's own (same ranks, same GPU placement; its
 * unique id broadcast through the library), so the backend's communicator is left alone.
 * Prints one line per size on rank 0: lite ms, nccl ms, ratio (lite / nccl).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nccl.h>

#include "gpu.h"
#include "litetx/litetx.h"

#define DIE(...)                                                                                   \
    do {                                                                                           \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
        exit(1);                                                                                   \
    } while (0)

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 64;
    int rounds = argc > 2 ? atoi(argv[2]) : 10;
    if (mib == 0 || rounds <= 0)
        DIE("usage: nccl_allreduce_bench [MiB] [rounds]");
    void *h = dlopen("libnccl.so.2", RTLD_NOW);
    if (!h)
        DIE("libnccl.so.2: %s", dlerror());
    __typeof__(ncclGetUniqueId) *get_id =
        (__typeof__(ncclGetUniqueId) *)dlsym(h, "ncclGetUniqueId");
    __typeof__(ncclCommInitRank) *init =
        (__typeof__(ncclCommInitRank) *)dlsym(h, "ncclCommInitRank");
    __typeof__(ncclAllReduce) *allreduce = (__typeof__(ncclAllReduce) *)dlsym(h, "ncclAllReduce");
    __typeof__(ncclCommDestroy) *destroy =
        (__typeof__(ncclCommDestroy) *)dlsym(h, "ncclCommDestroy");
    if (!get_id || !init || !allreduce || !destroy)
        DIE("libnccl.so.2 lacks a symbol");

    lite_config_t cfg = lite_config_default();
    lite_ctx_t *ctx = NULL;
    int rc = lite_init(&cfg, &ctx);
    if (rc)
        DIE("lite_init: %s: %s", lite_strerror(rc), lite_init_error());
    int me = lite_rank(ctx), n = lite_world_size(ctx);
    ncclUniqueId id;
    if (me == 0 && get_id(&id) != ncclSuccess)
        DIE("ncclGetUniqueId failed");
    rc = lite_bcast(ctx, &id, sizeof(id), LITE_U8, 0, LITE_TIMEOUT_DEFAULT);
    if (rc)
        DIE("lite_bcast: %s", lite_strerror(rc));
    ncclComm_t comm;
    if (init(&comm, n, id, me) != ncclSuccess)
        DIE("ncclCommInitRank failed");

    size_t count = mib * (1u << 20) / sizeof(float), bytes = count * sizeof(float);
    float *host = malloc(bytes);
    void *in = NULL, *out = NULL;
    struct lite_gpu_stream *st = NULL;
    if (!host || lite_gpu_mem_alloc(0, bytes, &in) || lite_gpu_mem_alloc(0, bytes, &out) ||
        lite_gpu_stream_create(0, &st))
        DIE("allocation failed");
    for (size_t i = 0; i < count; i++)
        host[i] = (float)((i * 2654435761u + (size_t)me) % 1000) / 7.0f;
    if (lite_gpu_copy(in, host, bytes))
        DIE("copy failed");
    double *tl = calloc((size_t)rounds, sizeof(double)),
           *tn = calloc((size_t)rounds, sizeof(double));
    if (!tl || !tn)
        DIE("calloc");
    /* one warm-up of each, then interleaved rounds */
    for (int r = -1; r < rounds; r++) {
        lite_barrier(ctx, LITE_TIMEOUT_DEFAULT);
        double t0 = now_ms();
        rc = lite_allreduce(ctx, in, out, count, LITE_F32, LITE_SUM, LITE_TIMEOUT_DEFAULT);
        double t1 = now_ms();
        if (rc)
            DIE("lite_allreduce: %s: %s", lite_strerror(rc), lite_last_error(ctx));
        lite_barrier(ctx, LITE_TIMEOUT_DEFAULT);
        double t2 = now_ms();
        if (allreduce(in, out, count, ncclFloat32, ncclSum, comm,
                      (cudaStream_t)lite_gpu_stream_raw(st)) != ncclSuccess ||
            lite_gpu_stream_sync(st))
            DIE("ncclAllReduce failed");
        double t3 = now_ms();
        if (r >= 0) {
            tl[r] = t1 - t0;
            tn[r] = t3 - t2;
        }
    }
    double ml = median(tl, rounds), mn = median(tn, rounds);
    if (me == 0)
        printf("allreduce f32 sum %zu MiB, %d ranks, %d rounds: litetx (nccl backend, "
               "deterministic) %.2f ms, ncclAllReduce %.2f ms, ratio %.2f\n",
               mib, n, rounds, ml, mn, ml / mn);
    destroy(comm);
    lite_gpu_stream_destroy(st);
    lite_gpu_mem_free(in);
    lite_gpu_mem_free(out);
    free(host);
    free(tl);
    free(tn);
    return lite_finalize(ctx) ? 1 : 0;
}
