/*
 * nccl_test - the nccl backend's cases (tests/nccl/CMakeLists.txt).
 *
 * Without a CUDA device: `probe`, `init_error` and `auto_skip` check the refusals (a reason
 * naming the missing device, a clean error from lite_init, "auto" passing over nccl). The other
 * cases run two ranks on a CUDA device (each rank started by nccl_gate, which skips them where
 * there is none): device buffers point to point, one-sided into a device region, collectives on
 * device buffers byte-identical to the same collectives on host buffers, and a peer lost with a
 * device transfer in flight ending in an error, not a hang.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu.h"
#include "lite_int.h"
#include "registry.h"
#include "tp_select.h"
#include "litetx/litetx.h"

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define CHECK_RC(call)                                                                             \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        CHECK(rc_ == 0, "%s returned %d (%s)", #call, rc_, lite_strerror(rc_));                    \
    } while (0)

static int me, peer;

static void skip(const char *why)
{
    printf("SKIPPED: %s\n", why);
    exit(77);
}

static uint8_t pat(int src, uint32_t id, size_t i)
{
    uint64_t x = ((uint64_t)src << 40) ^ ((uint64_t)id << 20) ^ i;
    x *= 0x9E3779B97F4A7C15ull;
    return (uint8_t)(x >> 56);
}

static uint8_t *host_pattern(size_t len, int src, uint32_t id)
{
    uint8_t *h = malloc(len ? len : 1);
    CHECK(h, "malloc");
    for (size_t i = 0; i < len; i++)
        h[i] = pat(src, id, i);
    return h;
}

static void *dev_pattern(size_t len, int src, uint32_t id)
{
    void *d = NULL;
    CHECK_RC(lite_gpu_mem_alloc(0, len ? len : 1, &d));
    uint8_t *h = host_pattern(len, src, id);
    if (len)
        CHECK_RC(lite_gpu_copy(d, h, len));
    free(h);
    return d;
}

static void check_bytes(const void *buf, bool dev, size_t len, int src, uint32_t id)
{
    uint8_t *h = malloc(len ? len : 1);
    CHECK(h, "malloc");
    if (dev && len)
        CHECK_RC(lite_gpu_copy(h, buf, len));
    else if (len)
        memcpy(h, buf, len);
    for (size_t i = 0; i < len; i++)
        CHECK(h[i] == pat(src, id, i), "byte %zu of %zu from rank %d (id %u) is wrong", i, len, src,
              id);
    free(h);
}

static int world;

static lite_ctx_t *job_init_n(int want)
{
    lite_config_t cfg = lite_config_default();
    lite_ctx_t *ctx = NULL;
    int rc = lite_init(&cfg, &ctx);
    CHECK(rc == 0, "lite_init: %s: %s", lite_strerror(rc), lite_init_error());
    CHECK(strcmp(lite_transport_name(ctx), "nccl") == 0, "transport is %s",
          lite_transport_name(ctx));
    me = lite_rank(ctx);
    world = lite_world_size(ctx);
    peer = 1 - me;
    CHECK(!want || world == want, "%d ranks expected", want);
    return ctx;
}

static lite_ctx_t *job_init(void)
{
    return job_init_n(2);
}

/* A one-rank job without a device: what the user sees when asking for nccl. */
static lite_config_t solo(const char *transport)
{
    lite_config_t cfg = lite_config_default();
    static char root[32];
    snprintf(root, sizeof(root), "127.0.0.1:%d", 20000 + (int)(getpid() % 20000));
    cfg.rank = 0;
    cfg.world_size = 1;
    cfg.root = root;
    cfg.transport = transport;
    return cfg;
}

static int case_probe(void)
{
    char gpu_why[256] = "", why[512] = "";
    bool gpu = lite_gpu_available(gpu_why, sizeof(gpu_why)) == 0;
    size_t n = 0;
    const struct lite_transport_ops *const *table = lite_registry(&n);
    const struct lite_transport_ops *ops = NULL;
    int rc = lite_transport_select(table, n, "nccl", &ops, why, sizeof(why));
    printf("gpu: %s; select nccl: %d (%s)\n", gpu ? "yes" : gpu_why, rc, why);
    if (!gpu) {
        CHECK(rc == -LITE_ERR_NO_TRANSPORT, "nccl selected without a CUDA device");
        CHECK(strstr(why, "no CUDA device"), "the reason does not name the device: %s", why);
    } else {
        CHECK(rc == 0 || strstr(why, "libnccl"), "unexpected refusal: %s", why);
    }
    return 0;
}

static int case_init_error(void)
{
    if (lite_gpu_available(NULL, 0) == 0)
        skip("a CUDA device is present: the device cases cover lite_init over nccl");
    lite_config_t cfg = solo("nccl");
    lite_ctx_t *ctx = NULL;
    int rc = lite_init(&cfg, &ctx);
    const char *why = lite_init_error();
    printf("lite_init(transport=nccl): %d (%s): %s\n", rc, lite_strerror(rc), why);
    CHECK(rc == -LITE_ERR_NO_TRANSPORT && !ctx, "lite_init returned %d", rc);
    CHECK(why && strstr(why, "nccl") && strstr(why, "CUDA"), "unclear error: %s", why);
    return 0;
}

static int case_auto_skip(void)
{
    if (lite_gpu_available(NULL, 0) == 0)
        skip("a CUDA device is present: auto may pick nccl here");
    lite_config_t cfg = solo("auto");
    lite_ctx_t *ctx = NULL;
    int rc = lite_init(&cfg, &ctx);
    CHECK(rc == 0, "lite_init(auto): %s: %s", lite_strerror(rc), lite_init_error());
    printf("auto picked %s\n", lite_transport_name(ctx));
    CHECK(strcmp(lite_transport_name(ctx), "nccl") != 0, "auto picked nccl without a device");
    CHECK_RC(lite_finalize(ctx));
    return 0;
}

/* The real libnccl.so.2 over the test double of the CUDA driver: NCCL loads, makes rank 0's id
 * and starts the non-blocking init, which fails on the driver that has no real device. lite_init
 * must fail on every rank with NCCL's reason, after an abort, without a crash or a hang. */
static int case_init_nccl_error(void)
{
    lite_config_t cfg = lite_config_default();
    lite_ctx_t *ctx = NULL;
    int rc = lite_init(&cfg, &ctx);
    const char *why = lite_init_error();
    printf("lite_init over the real NCCL without a real device: %d (%s): %s\n", rc,
           lite_strerror(rc), why ? why : "");
    CHECK(rc != 0 && !ctx, "lite_init succeeded");
    CHECK(why && strstr(why, "nccl") && strstr(why, "ncclCommInitRankConfig"),
          "not NCCL's refusal: %s", why);
    return 0;
}

/* Both ranks send to each other at once (the pair's two directions in flight together). */
static void exchange(lite_ctx_t *ctx, const void *src, void *dst, size_t len, uint64_t tag)
{
    lite_request_t *rs = NULL, *rr = NULL;
    CHECK_RC(lite_irecv(ctx, peer, tag, dst, len, &rr));
    CHECK_RC(lite_isend(ctx, peer, tag, src, len, &rs));
    lite_status_t st;
    CHECK_RC(lite_wait(ctx, rs, LITE_TIMEOUT_DEFAULT, &st));
    CHECK_RC(lite_wait(ctx, rr, LITE_TIMEOUT_DEFAULT, &st));
    CHECK(st.bytes == len, "received %zu of %zu bytes", st.bytes, len);
}

/* max_len: the largest size tried (the test double's runs keep it small: loopback sockets). */
static int case_device_p2p(size_t max_len)
{
    lite_ctx_t *ctx = job_init();
    static const size_t sizes[] = {1, 4096, 65537, 1 << 20, 64u << 20};
    uint64_t tag = 1;
    uint32_t id = 0;
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t len = sizes[k];
        if (len > max_len)
            break;
        /* device -> device, host -> device, device -> host */
        for (int mode = 0; mode < 3; mode++, id++) {
            bool src_dev = mode != 1, dst_dev = mode != 2;
            void *src = src_dev ? dev_pattern(len, me, id) : host_pattern(len, me, id);
            void *dst = NULL;
            if (dst_dev)
                CHECK_RC(lite_gpu_mem_alloc(0, len, &dst));
            else
                dst = malloc(len);
            exchange(ctx, src, dst, len, tag++);
            check_bytes(dst, dst_dev, len, peer, id);
            if (src_dev)
                lite_gpu_mem_free(src);
            else
                free(src);
            if (dst_dev)
                lite_gpu_mem_free(dst);
            else
                free(dst);
        }
    }
    /* Order: a host message right behind an eager device one (below the rendezvous threshold,
     * so both leave at once) from the same rank arrives after it. */
    const size_t eager = 16u << 10;
    void *big = dev_pattern(eager, me, 999), *bigdst = NULL;
    CHECK_RC(lite_gpu_mem_alloc(0, eager, &bigdst));
    uint8_t small = (uint8_t)me, got = 0xff;
    lite_request_t *r1, *r2, *s1, *s2;
    CHECK_RC(lite_irecv(ctx, peer, tag, bigdst, eager, &r1));
    CHECK_RC(lite_irecv(ctx, peer, tag + 1, &got, 1, &r2));
    CHECK_RC(lite_isend(ctx, peer, tag, big, eager, &s1));
    CHECK_RC(lite_isend(ctx, peer, tag + 1, &small, 1, &s2));
    CHECK_RC(lite_wait(ctx, r2, LITE_TIMEOUT_DEFAULT, NULL));
    CHECK(lite_test(ctx, r1, NULL) == 1, "the host message overtook the device one");
    CHECK_RC(lite_wait(ctx, s1, LITE_TIMEOUT_DEFAULT, NULL));
    CHECK_RC(lite_wait(ctx, s2, LITE_TIMEOUT_DEFAULT, NULL));
    check_bytes(bigdst, true, eager, peer, 999);
    CHECK(got == (uint8_t)peer, "small message");
    lite_gpu_mem_free(big);
    lite_gpu_mem_free(bigdst);
    CHECK_RC(lite_finalize(ctx));
    printf("rank %d: device p2p ok\n", me);
    return 0;
}

/* Every rank sends a device buffer to every other rank at once (and then around a ring):
 * several pairs' groups interleave, each rank leading some and following others. */
static int case_device_ring(void)
{
    lite_ctx_t *ctx = job_init_n(0);
    const size_t len = (3u << 20) + 17;
    void **src = calloc((size_t)world, sizeof(*src)), **dst = calloc((size_t)world, sizeof(*dst));
    lite_request_t **rq = calloc(2 * (size_t)world, sizeof(*rq));
    CHECK(src && dst && rq, "calloc");
    for (int round = 0; round < 3; round++) {
        int nreq = 0;
        for (int q = 0; q < world; q++) {
            if (q == me)
                continue;
            src[q] = dev_pattern(len, me, (uint32_t)(q * 16 + round));
            CHECK_RC(lite_gpu_mem_alloc(0, len, &dst[q]));
            CHECK_RC(lite_irecv(ctx, q, 100 + (uint64_t)round, dst[q], len, &rq[nreq++]));
        }
        for (int q = 0; q < world; q++)
            if (q != me)
                CHECK_RC(lite_isend(ctx, q, 100 + (uint64_t)round, src[q], len, &rq[nreq++]));
        for (int i = 0; i < nreq; i++)
            CHECK_RC(lite_wait(ctx, rq[i], LITE_TIMEOUT_DEFAULT, NULL));
        for (int q = 0; q < world; q++) {
            if (q == me)
                continue;
            check_bytes(dst[q], true, len, q, (uint32_t)(me * 16 + round));
            lite_gpu_mem_free(src[q]);
            lite_gpu_mem_free(dst[q]);
        }
    }
    /* A ring: each rank sends to the next and receives from the previous. */
    int next = (me + 1) % world, prev = (me + world - 1) % world;
    void *s = dev_pattern(len, me, 500), *d = NULL;
    CHECK_RC(lite_gpu_mem_alloc(0, len, &d));
    lite_request_t *r1, *r2;
    CHECK_RC(lite_irecv(ctx, prev, 200, d, len, &r1));
    CHECK_RC(lite_isend(ctx, next, 200, s, len, &r2));
    CHECK_RC(lite_wait(ctx, r1, LITE_TIMEOUT_DEFAULT, NULL));
    CHECK_RC(lite_wait(ctx, r2, LITE_TIMEOUT_DEFAULT, NULL));
    check_bytes(d, true, len, prev, 500);
    lite_gpu_mem_free(s);
    lite_gpu_mem_free(d);
    free(src);
    free(dst);
    free(rq);
    CHECK_RC(lite_finalize(ctx));
    printf("rank %d: device all-pairs and ring ok\n", me);
    return 0;
}

static int case_device_rma(void)
{
    lite_ctx_t *ctx = job_init();
    const size_t len = 16u << 20;
    void *region = NULL, *src = dev_pattern(len, me, 7);
    CHECK_RC(lite_gpu_mem_alloc(0, len, &region));
    CHECK_RC(lite_gpu_memset(region, 0, len));
    lite_mr_t *mr = NULL, *smr = NULL;
    CHECK_RC(lite_mr_reg(ctx, region, len, LITE_MEM_CUDA,
                         LITE_ACCESS_REMOTE_WRITE | LITE_ACCESS_REMOTE_READ, &mr));
    CHECK_RC(lite_mr_reg(ctx, src, len, LITE_MEM_CUDA, 0, &smr));
    lite_rdesc_t descs[2];
    CHECK_RC(lite_mr_exchange(ctx, mr, descs, LITE_TIMEOUT_DEFAULT));
    lite_request_t *req = NULL;
    CHECK_RC(lite_write_imm(ctx, peer, smr, 0, &descs[peer], 0, len, 0x5a, &req));
    CHECK_RC(lite_wait(ctx, req, LITE_TIMEOUT_DEFAULT, NULL));
    CHECK_RC(lite_imm_wait(ctx, 0x5a, 1, LITE_TIMEOUT_DEFAULT));
    check_bytes(region, true, len, peer, 7);
    /* A read back from the peer's region lands in our device memory. */
    CHECK_RC(lite_barrier(ctx, LITE_TIMEOUT_DEFAULT));
    CHECK_RC(lite_read(ctx, peer, smr, 0, &descs[peer], 0, len, &req));
    CHECK_RC(lite_wait(ctx, req, LITE_TIMEOUT_DEFAULT, NULL));
    check_bytes(src, true, len, me, 7); /* the peer's region holds what we wrote */
    CHECK_RC(lite_barrier(ctx, LITE_TIMEOUT_DEFAULT));
    CHECK_RC(lite_mr_dereg(ctx, smr));
    CHECK_RC(lite_mr_dereg(ctx, mr));
    lite_gpu_mem_free(region);
    lite_gpu_mem_free(src);
    CHECK_RC(lite_finalize(ctx));
    printf("rank %d: device one-sided ok\n", me);
    return 0;
}

static int case_device_coll(void)
{
    lite_ctx_t *ctx = job_init();
    static const size_t counts[] = {1, 1000, 1 << 20, 16u << 20};
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
        size_t n = counts[k], bytes = n * sizeof(float);
        float *h = malloc(bytes), *hout = malloc(bytes), *dout_h = malloc(bytes);
        CHECK(h && hout && dout_h, "malloc");
        for (size_t i = 0; i < n; i++)
            h[i] = (float)ldexp((double)(pat(me, (uint32_t)k, i) + 1), (int)(i % 40) - 20);
        void *d = NULL, *dout = NULL;
        CHECK_RC(lite_gpu_mem_alloc(0, bytes, &d));
        CHECK_RC(lite_gpu_mem_alloc(0, bytes, &dout));
        CHECK_RC(lite_gpu_copy(d, h, bytes));
        CHECK_RC(lite_allreduce(ctx, h, hout, n, LITE_F32, LITE_SUM, LITE_TIMEOUT_DEFAULT));
        CHECK_RC(lite_allreduce(ctx, d, dout, n, LITE_F32, LITE_SUM, LITE_TIMEOUT_DEFAULT));
        CHECK_RC(lite_gpu_copy(dout_h, dout, bytes));
        CHECK(memcmp(hout, dout_h, bytes) == 0,
              "allreduce of %zu f32 on device buffers differs from host buffers", n);
        lite_gpu_mem_free(d);
        lite_gpu_mem_free(dout);
        free(h);
        free(hout);
        free(dout_h);
    }
    CHECK_RC(lite_finalize(ctx));
    printf("rank %d: device allreduce byte-identical to host\n", me);
    return 0;
}

/* Rank 1 announces a 64 MiB device payload and vanishes: rank 0's receive ends with an error
 * (the pair's NCCL work aborted), and finalize returns. The test's timeout is the hang bound. */
static int case_peer_lost(void)
{
    lite_ctx_t *ctx = job_init();
    const size_t len = 64u << 20;
    void *buf = NULL;
    CHECK_RC(lite_gpu_mem_alloc(0, len, &buf));
    CHECK_RC(lite_barrier(ctx, LITE_TIMEOUT_DEFAULT));
    lite_request_t *req = NULL;
    if (me == 1) {
        CHECK_RC(lite_isend(ctx, 0, 1, buf, len, &req));
        for (int i = 0; i < 100; i++)
            lite_progress(ctx); /* the envelope leaves */
        _exit(0);
    }
    CHECK_RC(lite_irecv(ctx, 1, 1, buf, len, &req));
    lite_status_t st;
    int rc = lite_wait(ctx, req, 60000, &st);
    printf("rank 0: receive from the lost rank ended with %d (%s)\n", rc, lite_strerror(rc));
    CHECK(rc != 0 && rc != -ETIMEDOUT, "the receive from a vanished rank did not fail: %d", rc);
    /* The failed receive's buffer is the application's again at once: nothing of the aborted
     * transfer may write into it any more (under ASan, a late write into it is reported). */
    lite_gpu_mem_free(buf);
    lite_finalize(ctx); /* must return; its result reports the lost peer */
    return 0;
}

/* Rank 1 stops calling the library (alive, its connection open) while rank 0 sends it a device
 * payload: rank 0 leads the pair, so its group is posted at once and waits for a partner that
 * never posts. The backend gives it up after the op timeout (LITETX_OP_TIMEOUT_MS, 5 s here)
 * instead of hanging: the send fails, with the stall named. */
static int case_stall(void)
{
    lite_ctx_t *ctx = job_init();
    /* Eager (the test runs with LITETX_RNDV_THRESHOLD=64 MiB), so no rendezvous round trip
     * needs rank 1 first, and larger than the transport's buffers, so the send cannot finish
     * without its receive. */
    const size_t len = 32u << 20;
    void *buf = NULL;
    CHECK_RC(lite_gpu_mem_alloc(0, len, &buf));
    CHECK_RC(lite_barrier(ctx, LITE_TIMEOUT_DEFAULT));
    if (me == 1) {
        sleep(10); /* not reading the envelope or the GO: its side is never posted */
        _exit(0);
    }
    sleep(2); /* rank 1 is asleep before anything for it leaves */
    lite_request_t *req = NULL;
    CHECK_RC(lite_isend(ctx, 1, 1, buf, len, &req));
    lite_status_t st;
    int rc = lite_wait(ctx, req, 60000, &st);
    const char *why = lite_last_error(ctx);
    printf("rank 0: send to the stalled rank ended with %d (%s): %s\n", rc, lite_strerror(rc),
           why ? why : "");
    CHECK(rc != 0, "the send to a stalled rank succeeded");
    CHECK(why && strstr(why, "did not finish"), "not ended by the backend's stall bound: %s", why);
    lite_finalize(ctx);
    lite_gpu_mem_free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    const char *c = argc > 1 ? argv[1] : "";
    if (!strcmp(c, "probe"))
        return case_probe();
    if (!strcmp(c, "init_error"))
        return case_init_error();
    if (!strcmp(c, "auto_skip"))
        return case_auto_skip();
    if (!strcmp(c, "device_p2p")) /* [max MiB] */
        return case_device_p2p(argc > 2 ? (size_t)atol(argv[2]) << 20 : SIZE_MAX);
    if (!strcmp(c, "device_ring"))
        return case_device_ring();
    if (!strcmp(c, "device_rma"))
        return case_device_rma();
    if (!strcmp(c, "device_coll"))
        return case_device_coll();
    if (!strcmp(c, "init_nccl_error"))
        return case_init_nccl_error();
    if (!strcmp(c, "stall"))
        return case_stall();
    if (!strcmp(c, "peer_lost"))
        return case_peer_lost();
    fprintf(stderr, "usage: nccl_test probe|init_error|auto_skip|device_p2p|device_rma|"
                    "device_coll|peer_lost\n");
    return 2;
}
