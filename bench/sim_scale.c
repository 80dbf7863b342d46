/*
 * sim_scale - the core at many ranks in one process: N threads, each a rank with its own context
 * over the in-process `loop` backend (no sockets between ranks; the bootstrap still meets rank
 * 0 over loopback TCP). Every rank runs a barrier, an allreduce of 4 KiB (the `direct` algorithm)
 * and of 256 KiB (`rsag`), and an alltoall of 8 bytes per peer; results are checked against the
 * canonical fold. Prints, per phase, the messages each rank handed the backend (maximum over
 * ranks, and what the algorithm needs), and the memory the contexts hold per rank.
 *
 *   bench/sim_scale [-q|-i] [-x] N       e.g. build/bench/sim_scale 1024
 *
 * -q (for thousands of ranks): the barrier, an allreduce of 8 bytes and the alltoall only; the
 * 4 KiB allreduce's `direct` algorithm alone puts N x (N - 1) x 4 KiB in flight (4 GiB at 1,024
 * ranks). -i: init and the barrier only (past a few thousand threads on 2 cores, the N^2
 * messages of the other collectives take the harness, not the library, minutes: every one is
 * a malloc and a mutex shared by all threads). Run one N per process: the resident-set figure
 * is a difference. -x: exit without finalizing (every rank says goodbye to every peer: N^2
 * messages, minutes past a few thousand ranks in one process).
 *
 * Counting: the harness wraps the context's msg_send (a copy of the backend's table lives in
 * each context) and counts per thread. Memory: the process's resident set after every rank has
 * initialised, less the one before any did, divided by N (the threads' stacks, 256 KiB virtual
 * each, are counted only as far as they are touched).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "ctx.h"
#include "registry.h"

#define SMALL (4096 / 8)
#define BIG   (256 * 1024 / 8)
#define A2A   8

enum phase { PH_INIT, PH_BARRIER, PH_AR_SMALL, PH_AR_BIG, PH_A2A, PH_COUNT };
static const char *const phase_name[PH_COUNT] = {"init", "barrier", "allreduce 4 KiB",
                                                 "allreduce 256 KiB", "alltoall 8 B/peer"};

static int (*real_send)(struct lite_transport *, int, const struct lite_msg_hdr *, const void *,
                        void *);
static _Thread_local uint64_t t_msgs, t_bytes;

static int counting_send(struct lite_transport *t, int peer, const struct lite_msg_hdr *h,
                         const void *payload, void *op)
{
    t_msgs++;
    t_bytes += h->len;
    return real_send(t, peer, h, payload, op);
}

struct rank {
    pthread_t th;
    int me, n;
    char root[64];
    uint64_t msgs[PH_COUNT], bytes[PH_COUNT];
    double init_s;
    int failed;
};

static pthread_barrier_t g_inited, g_measured, g_worked, g_release;
static atomic_int g_fail;
static bool g_quick, g_init_only, g_no_finalize;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof(line), f))
        if (!strncmp(line, "VmRSS:", 6))
            v = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

#define FAIL(r, ...)                                                                               \
    do {                                                                                           \
        fprintf(stderr, "rank %d: ", (r)->me);                                                     \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
        (r)->failed = 1;                                                                           \
        atomic_store(&g_fail, 1);                                                                  \
    } while (0)

static void mark(struct rank *r, enum phase p)
{
    r->msgs[p] = t_msgs;
    r->bytes[p] = t_bytes;
    t_msgs = t_bytes = 0;
}

static void allreduce(struct rank *r, lite_ctx_t *ctx, size_t count)
{
    int64_t *in = malloc(count * 8), *out = malloc(count * 8);
    for (size_t i = 0; i < count; i++)
        in[i] = (int64_t)r->me * 7919 + (int64_t)i;
    int rc = lite_allreduce(ctx, in, out, count, LITE_I64, LITE_SUM, 600000);
    int64_t ranks = (int64_t)r->n * (r->n - 1) / 2;
    if (rc)
        FAIL(r, "allreduce %zu: %s: %s", count, lite_strerror(rc), lite_last_error(ctx));
    for (size_t i = 0; !rc && i < count; i++)
        if (out[i] != ranks * 7919 + (int64_t)r->n * (int64_t)i) {
            FAIL(r, "allreduce %zu: element %zu wrong", count, i);
            break;
        }
    free(in);
    free(out);
}

static void *rank_main(void *p)
{
    struct rank *r = p;
    lite_config_t cfg = lite_config_default();
    cfg.rank = r->me;
    cfg.world_size = r->n;
    cfg.root = r->root;
    cfg.transport = "loop";
    cfg.init_timeout_ms = 600000;
    cfg.op_timeout_ms = 600000;
    lite_ctx_t *ctx = NULL;
    double t0 = now_s();
    int rc = lite_init(&cfg, &ctx);
    r->init_s = now_s() - t0;
    if (rc) {
        FAIL(r, "lite_init: %s: %s", lite_strerror(rc), lite_init_error());
        pthread_barrier_wait(&g_inited);
        pthread_barrier_wait(&g_measured);
        pthread_barrier_wait(&g_worked);
        pthread_barrier_wait(&g_release);
        return NULL;
    }
    ctx->ops.msg_send = counting_send;
    mark(r, PH_INIT);
    pthread_barrier_wait(&g_inited);
    pthread_barrier_wait(&g_measured); /* the main thread reads the RSS in between */
    rc = lite_barrier(ctx, 600000);
    if (rc)
        FAIL(r, "barrier: %s: %s", lite_strerror(rc), lite_last_error(ctx));
    mark(r, PH_BARRIER);
    if (g_init_only)
        goto done;
    allreduce(r, ctx, g_quick ? 1 : SMALL);
    mark(r, PH_AR_SMALL);
    if (!g_quick)
        allreduce(r, ctx, BIG);
    mark(r, PH_AR_BIG);
    uint8_t *s = malloc((size_t)r->n * A2A), *d = malloc((size_t)r->n * A2A);
    for (int q = 0; q < r->n; q++)
        memset(s + (size_t)q * A2A, (r->me * 31 + q) & 0xff, A2A);
    rc = lite_alltoall(ctx, s, d, A2A, LITE_U8, 600000);
    if (rc)
        FAIL(r, "alltoall: %s: %s", lite_strerror(rc), lite_last_error(ctx));
    for (int q = 0; !rc && q < r->n; q++)
        if (d[(size_t)q * A2A] != ((q * 31 + r->me) & 0xff)) {
            FAIL(r, "alltoall: block from rank %d wrong", q);
            break;
        }
    mark(r, PH_A2A);
    free(s);
    free(d);
done:
    ctx->ops.msg_send = real_send;
    pthread_barrier_wait(&g_worked);  /* the main thread reports */
    pthread_barrier_wait(&g_release); /* ... and lets the ranks finalize, or exits (-x) */
    rc = lite_finalize(ctx);
    if (rc)
        FAIL(r, "finalize: %s", lite_strerror(rc));
    return NULL;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    int port = 29900 + (int)(getpid() % 1000);
    if (fd >= 0 && !bind(fd, (struct sockaddr *)&sa, sizeof(sa)) &&
        !getsockname(fd, (struct sockaddr *)&sa, &len))
        port = ntohs(sa.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static int run(int n)
{
    struct rank *rk = calloc((size_t)n, sizeof(*rk));
    if (!rk)
        return 1;
    char root[64];
    snprintf(root, sizeof(root), "127.0.0.1:%d", free_port());
    pthread_barrier_init(&g_inited, NULL, (unsigned)n + 1);
    pthread_barrier_init(&g_measured, NULL, (unsigned)n + 1);
    pthread_barrier_init(&g_worked, NULL, (unsigned)n + 1);
    pthread_barrier_init(&g_release, NULL, (unsigned)n + 1);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    long rss0 = rss_kib();
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        rk[i].me = i;
        rk[i].n = n;
        memcpy(rk[i].root, root, sizeof(root));
        if (pthread_create(&rk[i].th, &attr, rank_main, &rk[i]) != 0) {
            fprintf(stderr, "sim_scale: cannot start thread %d\n", i);
            return 1;
        }
    }
    pthread_barrier_wait(&g_inited);
    double init_wall = now_s() - t0;
    long rss1 = rss_kib();
    pthread_barrier_wait(&g_measured);
    t0 = now_s();
    pthread_barrier_wait(&g_worked);
    double coll_wall = now_s() - t0;
    double init_max = 0;
    uint64_t mx[PH_COUNT] = {0}, mn[PH_COUNT], bx[PH_COUNT] = {0};
    for (int p = 0; p < PH_COUNT; p++)
        mn[p] = UINT64_MAX;
    for (int i = 0; i < n; i++) {
        init_max = rk[i].init_s > init_max ? rk[i].init_s : init_max;
        for (int p = 0; p < PH_COUNT; p++) {
            mx[p] = rk[i].msgs[p] > mx[p] ? rk[i].msgs[p] : mx[p];
            mn[p] = rk[i].msgs[p] < mn[p] ? rk[i].msgs[p] : mn[p];
            bx[p] = rk[i].bytes[p] > bx[p] ? rk[i].bytes[p] : bx[p];
        }
    }
    printf("sim_scale: %d ranks: init %.2f s (slowest rank %.2f s), collectives %.2f s, "
           "%.1f KiB resident per rank after init (%ld -> %ld KiB in all)%s\n",
           n, init_wall, init_max, coll_wall, (double)(rss1 - rss0) / n, rss0, rss1,
           atomic_load(&g_fail) ? ", FAILED" : ", results checked");
    for (int p = PH_BARRIER; p < PH_COUNT; p++)
        if ((!g_quick || p != PH_AR_BIG) && (!g_init_only || p == PH_BARRIER))
            printf(
                "sim_scale: %d ranks: %-18s messages per rank %llu..%llu, payload bytes per rank "
                "max %llu\n",
                n, g_quick && p == PH_AR_SMALL ? "allreduce 8 B" : phase_name[p],
                (unsigned long long)mn[p], (unsigned long long)mx[p], (unsigned long long)bx[p]);
    fflush(stdout);
    if (g_no_finalize)
        _exit(atomic_load(&g_fail));
    t0 = now_s();
    pthread_barrier_wait(&g_release);
    for (int i = 0; i < n; i++)
        pthread_join(rk[i].th, NULL);
    printf("sim_scale: %d ranks: finalize %.2f s%s\n", n, now_s() - t0,
           atomic_load(&g_fail) ? ", FAILED" : "");
    pthread_barrier_destroy(&g_worked);
    pthread_barrier_destroy(&g_release);
    pthread_barrier_destroy(&g_inited);
    pthread_barrier_destroy(&g_measured);
    free(rk);
    return atomic_load(&g_fail);
}

int main(int argc, char **argv)
{
    /* The transport table every context copies: the wrapper calls the backend's own op. */
    size_t count;
    const struct lite_transport_ops *const *table = lite_registry(&count);
    for (size_t i = 0; i < count; i++)
        if (!strcmp(table[i]->name, "loop"))
            real_send = table[i]->msg_send;
    if (!real_send) {
        fprintf(stderr, "sim_scale: the loop backend is not built (LITE_WITH_LOOP)\n");
        return 77;
    }
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "-q"))
            g_quick = true;
        else if (!strcmp(argv[i], "-i"))
            g_init_only = true;
        else if (!strcmp(argv[i], "-x"))
            g_no_finalize = true;
        else
            break;
    }
    int n = i < argc ? atoi(argv[i]) : 64;
    if (n < 1 || n > 65536) {
        fprintf(stderr, "usage: sim_scale [-q|-i] [-x] N (1..65536)\n");
        return 2;
    }
    return run(n);
}
