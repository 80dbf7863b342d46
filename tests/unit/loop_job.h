/*
 * loop_job.h - whole jobs in one process for the unit tests: ranks as threads, one context per
 * thread over the loop backend (the TCP bootstrap over loopback), and the byte patterns the
 * tests check. Shared by test_loop.c and test_core_scripted.c.
 */
#ifndef LITE_TEST_LOOP_JOB_H
#define LITE_TEST_LOOP_JOB_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "litetx/litetx.h"

/* ---- a job of threads ---- */

/* A failed check in a rank thread: say where, and end that rank's function with 1. */
#define T_CHECK(cond, ...)                                                                         \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", lite_rank(ctx), __FILE__,        \
                    __LINE__, #cond);                                                              \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, " [%s]\n", lite_last_error(ctx));                                      \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)
#define T_RC(call)                                                                                 \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        T_CHECK(rc_ == 0, "%s returned %d (%s)", #call, rc_, lite_strerror(rc_));                  \
    } while (0)

typedef int (*rank_fn)(lite_ctx_t *ctx, int me, int n);

/* Ranks whose context has been finalized (test_deferred waits for its peer's). */
static atomic_int g_finalized;
/* Credits every rank of the next job asks for (0: the default). */
static int g_job_credits;
/* lite_finalize may return an error (a job that lost a peer on purpose). */
static bool g_job_finalize_may_fail;

struct rank_arg {
    int me, n;
    char root[64];
    rank_fn fn;
    int result;
};

static inline void *rank_main(void *p)
{
    struct rank_arg *a = p;
    lite_config_t cfg = lite_config_default();
    cfg.rank = a->me;
    cfg.world_size = a->n;
    cfg.root = a->root;
    cfg.transport = "loop";
    cfg.init_timeout_ms = 20000;
    cfg.op_timeout_ms = 20000;
    if (g_job_credits)
        cfg.credits = g_job_credits;
    lite_ctx_t *ctx = NULL;
    int rc = lite_init(&cfg, &ctx);
    if (rc) {
        fprintf(stderr, "rank %d: lite_init: %s: %s\n", a->me, lite_strerror(rc),
                lite_init_error());
        a->result = 1;
        return NULL;
    }
    a->result = a->fn(ctx, a->me, a->n);
    rc = lite_finalize(ctx);
    atomic_fetch_add(&g_finalized, 1);
    if (rc && !a->result && !g_job_finalize_may_fail) {
        fprintf(stderr, "rank %d: lite_finalize: %s\n", a->me, lite_strerror(rc));
        a->result = 1;
    }
    return NULL;
}

/* A port nothing listens on now, for the job's bootstrap root. */
static inline int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
        getsockname(fd, (struct sockaddr *)&sa, &len))
        return 29900 + (int)(getpid() % 1000);
    close(fd);
    return ntohs(sa.sin_port);
}

struct job {
    int n;
    pthread_t th[8];
    struct rank_arg args[8];
};

static inline void job_start(struct job *j, int n, rank_fn fn)
{
    char root[64];
    snprintf(root, sizeof(root), "127.0.0.1:%d", free_port());
    j->n = n;
    for (int i = 0; i < n; i++) {
        j->args[i] = (struct rank_arg){.me = i, .n = n, .fn = fn};
        memcpy(j->args[i].root, root, sizeof(root));
        assert_int_equal(pthread_create(&j->th[i], NULL, rank_main, &j->args[i]), 0);
    }
}

static inline int job_join(struct job *j)
{
    int failed = 0;
    for (int i = 0; i < j->n; i++) {
        pthread_join(j->th[i], NULL);
        failed += j->args[i].result != 0;
    }
    return failed;
}

static inline void run_job(int n, rank_fn fn)
{
    struct job j;
    job_start(&j, n, fn);
    assert_int_equal(job_join(&j), 0);
}

/* ---- data ---- */

static inline uint8_t pattern(int src, int dst, uint32_t id, size_t i)
{
    uint64_t x = ((uint64_t)src * 0x9E3779B1u) ^ ((uint64_t)dst * 0x85EBCA77u) ^
                 ((uint64_t)id * 0xC2B2AE3Du) ^ (i * 0x27D4EB2Fu);
    x ^= x >> 29;
    return (uint8_t)(x ^ (x >> 8));
}

static inline void fill(uint8_t *b, size_t len, int src, int dst, uint32_t id)
{
    for (size_t i = 0; i < len; i++)
        b[i] = pattern(src, dst, id, i);
}

/* Index of the first wrong byte, or -1. */
static inline long verify(const uint8_t *b, size_t len, int src, int dst, uint32_t id)
{
    for (size_t i = 0; i < len; i++)
        if (b[i] != pattern(src, dst, id, i))
            return (long)i;
    return -1;
}

#endif
