/*
 * fault_test.c - failure cases, each a mode run under litetx-run:
 *   missing_rank       the ranks start a world one larger than launched: every rank gets
 *                      -ETIMEDOUT from lite_init naming the missing rank, within its deadline
 *   config_mismatch    rank 1 of 3 runs other credits than the rest: every rank's lite_init
 *                      fails with -LITE_ERR_CONFIG naming a rank that differs
 *   world_mismatch     rank 2 of 3 says the world has 4 ranks: every rank's lite_init fails
 *                      with -LITE_ERR_CONFIG naming the world sizes, at once (not at the deadline)
 *   rank_exits         rank 2 of 3 exits without finalize; the survivors' pending and later
 *                      operations with it fail with -LITE_ERR_PEER_LOST, each detail naming the
 *                      op and rank 2 (lite_imm_wait's too), and they still talk
 *   writes_to_lost     rank 1 of 2 exits while 64 writes of rank 0 to it are on their way: each
 *                      ends done or with -LITE_ERR_PEER_LOST, none hangs, finalize works
 *   finalize_inflight  4 ranks: rank 1 finalizes while its 64 MiB write to rank 0 is still
 *                      arriving, and rank 0's finalize (its barrier does not wait for rank 1)
 *                      closes under it once the first bytes landed: no byte of state is used
 *                      after it is freed (the sanitizer build checks), every finalize ends
 *   coll_pending_lost  3 ranks: ranks 0 and 1 start a non-blocking allreduce that rank 2 never
 *                      joins; rank 2 exits; they finalize without waiting for it: the op's
 *                      requests are released once, finalize ends
 *   timeouts           2 ranks, blocking calls that time out: a large receive whose sender
 *                      answers late returns with the data (never written after it returned); a
 *                      large send nobody receives in time returns -ETIMEDOUT and the later
 *                      receive fails with -LITE_ERR_CANCELLED, not with bytes read from a buffer
 *                      the caller had back; a send queued for credit leaves nothing
 *   garbage_transport  rank 1 sends garbage and forged frames to rank 0's transport port; rank 0
 *                      refuses each connection and keeps working
 *   garbage_root       rank 1 sends garbage to the bootstrap root before joining; init still works
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lite_int.h" /* the wire header, to forge frames */
#include "mp_common.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int env_int(const char *name)
{
    const char *v = getenv(name);
    CHECK(v != NULL, "%s not set (run under litetx-run)", name);
    return atoi(v);
}

static int root_port(void)
{
    const char *v = getenv("LITETX_ROOT");
    CHECK(v && strrchr(v, ':'), "LITETX_ROOT not set");
    return atoi(strrchr(v, ':') + 1);
}

/* Connect to 127.0.0.1:port, retrying for up to 5 s. */
static int connect_local(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < 500; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(fd >= 0, "socket");
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
            return fd;
        close(fd);
        usleep(10000);
    }
    CHECK(0, "could not connect to port %d", port);
    return -1;
}

/* True when the other side closes (or resets) the connection within `secs`. */
static int closed_by_peer(int fd, double secs)
{
    struct timeval tv = {.tv_sec = 0, .tv_usec = 100000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    double until = now_s() + secs;
    char b[256];
    while (now_s() < until) {
        ssize_t n = recv(fd, b, sizeof(b), 0);
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            return 1;
    }
    return 0;
}

static void missing_rank(void)
{
    lite_config_t cfg = lite_config_default();
    cfg.world_size = env_int("LITETX_WORLD_SIZE") + 1;
    cfg.init_timeout_ms = 2000;
    lite_ctx_t *ctx = NULL;
    double t0 = now_s();
    int rc = lite_init(&cfg, &ctx);
    double took = now_s() - t0;
    mp_rank = env_int("LITETX_RANK");
    CHECK(rc == -ETIMEDOUT, "lite_init gave %d (%s): %s", rc, lite_strerror(rc), lite_init_error());
    CHECK(ctx == NULL, "context returned on failure");
    char want[64];
    snprintf(want, sizeof(want), "rank(s) %d did not arrive", cfg.world_size - 1);
    CHECK(strstr(lite_init_error(), want), "detail does not name the missing rank: %s",
          lite_init_error());
    CHECK(took < 8.0, "took %.1f s for a 2 s deadline", took);
    printf("rank %d: missing rank reported in %.2f s: %s\n", mp_rank, took, lite_init_error());
}

static void config_mismatch(void)
{
    mp_rank = env_int("LITETX_RANK");
    lite_config_t cfg = lite_config_default();
    cfg.init_timeout_ms = 10000;
    if (mp_rank == 1)
        cfg.credits = 32; /* the others use the default (64) */
    lite_ctx_t *ctx = NULL;
    int rc = lite_init(&cfg, &ctx);
    CHECK(rc == -LITE_ERR_CONFIG, "lite_init gave %d (%s): %s", rc, lite_strerror(rc),
          lite_init_error());
    CHECK(ctx == NULL, "context returned on failure");
    char want[32];
    snprintf(want, sizeof(want), "rank %d runs credits", mp_rank == 1 ? 0 : 1);
    CHECK(strstr(lite_init_error(), want), "detail does not name the rank: %s", lite_init_error());
    printf("rank %d: %s\n", mp_rank, lite_init_error());
}

static void world_mismatch(void)
{
    mp_rank = env_int("LITETX_RANK");
    lite_config_t cfg = lite_config_default();
    cfg.init_timeout_ms = 10000;
    if (mp_rank == 2)
        cfg.world_size = 4; /* the others: 3, from the launcher */
    lite_ctx_t *ctx = NULL;
    double t0 = now_s();
    int rc = lite_init(&cfg, &ctx);
    double took = now_s() - t0;
    CHECK(rc == -LITE_ERR_CONFIG, "lite_init gave %d (%s) after %.2f s: %s", rc, lite_strerror(rc),
          took, lite_init_error());
    CHECK(ctx == NULL, "context returned on failure");
    CHECK(strstr(lite_init_error(), "rank 2 runs world size 4, the root (rank 0) 3"),
          "detail does not name the world sizes: %s", lite_init_error());
    CHECK(took < 5.0, "took %.1f s for a mismatch the root sees at once", took);
    printf("rank %d: in %.2f s: %s\n", mp_rank, took, lite_init_error());
}

/* The detail of the last failure names `want` (an op, a rank). */
static void detail_names(lite_ctx_t *ctx, const char *what, const char *want)
{
    CHECK(strstr(lite_last_error(ctx), want), "%s: the detail does not name \"%s\": %s", what, want,
          lite_last_error(ctx));
}

static void rank_exits(lite_ctx_t *ctx)
{
    int me = lite_rank(ctx);
    CHECK(lite_world_size(ctx) == 3, "needs 3 ranks");
    uint8_t b[4096];
    if (me == 2) {
        CHECK_RC(ctx, lite_barrier(ctx, 30000));
        /* Leave once both survivors are past the barrier: a socket closed with unread data
         * sends a reset, which can destroy the barrier's last message to a survivor before it
         * was read (a survivor failing within 0.24 s, once, under ctest -j2, fits this). */
        for (int peer = 0; peer < 2; peer++)
            CHECK_RC(ctx, lite_recv(ctx, peer, 1, b, 1, NULL, 30000));
        /* Leave mid-run: no finalize, sockets closed by the kernel as in a crash. */
        _exit(0);
    }
    lite_request_t *pending;
    CHECK_RC(ctx, lite_irecv(ctx, 2, 1, b, sizeof(b), &pending));
    CHECK_RC(ctx, lite_barrier(ctx, 30000));
    CHECK_RC(ctx, lite_send(ctx, 2, 1, b, 1, 30000)); /* "past the barrier" */
    double t0 = now_s();
    int rc = lite_wait(ctx, pending, 20000, NULL);
    double took = now_s() - t0;
    CHECK(rc == -LITE_ERR_PEER_LOST, "pending receive from the lost rank gave %d (%s)", rc,
          lite_strerror(rc));
    CHECK(took < 10.0, "loss noticed after %.1f s", took);
    detail_names(ctx, "pending receive", "recv from rank 2");
    rc = lite_send(ctx, 2, 2, b, 10, 5000);
    CHECK(rc == -LITE_ERR_PEER_LOST, "send to the lost rank gave %d", rc);
    detail_names(ctx, "send", "send to rank 2");
    rc = lite_recv(ctx, 2, 3, b, 10, NULL, 5000);
    CHECK(rc == -LITE_ERR_PEER_LOST, "recv from the lost rank gave %d", rc);
    detail_names(ctx, "recv", "recv from rank 2");
    /* A count nobody may complete now: the wait names the lost rank, not "a peer". */
    rc = lite_imm_wait(ctx, 0x134, 1, 5000);
    CHECK(rc == -LITE_ERR_PEER_LOST, "imm_wait with a lost rank gave %d (%s)", rc,
          lite_strerror(rc));
    detail_names(ctx, "imm_wait", "imm_wait(0x134)");
    detail_names(ctx, "imm_wait", "rank 2 is lost");
    char imm_detail[200];
    snprintf(imm_detail, sizeof(imm_detail), "%s", lite_last_error(ctx));
    /* the survivors still talk */
    int other = 1 - me;
    mp_fill(b, sizeof(b), me, other, 5);
    lite_request_t *s;
    CHECK_RC(ctx, lite_isend(ctx, other, 10, b, sizeof(b), &s));
    uint8_t r[4096];
    CHECK_RC(ctx, lite_recv(ctx, other, 10, r, sizeof(r), NULL, 30000));
    CHECK_RC(ctx, lite_wait(ctx, s, 30000, NULL));
    CHECK(mp_verify(r, sizeof(r), other, me, 5) < 0, "survivor traffic corrupted");
    printf("rank %d: lost peer reported in %.3f s; %s\n", me, took, imm_detail);
}

static void writes_to_lost(lite_ctx_t *ctx)
{
    int me = lite_rank(ctx);
    CHECK(lite_world_size(ctx) == 2, "needs 2 ranks");
    enum { WRITES = 64, WLEN = 4096 };
    uint8_t *region = calloc(WRITES, WLEN);
    CHECK(region, "oom");
    lite_mr_t *mr;
    lite_rdesc_t descs[2];
    CHECK_RC(ctx, lite_mr_reg(ctx, region, (size_t)WRITES * WLEN, LITE_MEM_HOST,
                              LITE_ACCESS_REMOTE_WRITE, &mr));
    CHECK_RC(ctx, lite_mr_exchange(ctx, mr, descs, 30000));
    CHECK_RC(ctx, lite_barrier(ctx, 30000));
    uint8_t go = 1;
    if (me == 1) {
        CHECK_RC(ctx, lite_recv(ctx, 0, 1, &go, 1, NULL, 30000));
        _exit(0); /* no finalize: gone as in a crash, with writes still arriving */
    }
    /* tcp;ofi_rxm batches the writes' acknowledgements: some are sent and wait for one that
     * never comes; they must end with the peer like the rest. */
    lite_request_t *w[WRITES], *batch;
    for (int i = 0; i < WRITES; i++)
        CHECK_RC(ctx, lite_write(ctx, 1, mr, (size_t)i * WLEN, &descs[1], (size_t)i * WLEN, WLEN,
                                 &w[i]));
    /* a batch for several ranks (a scatter: its request has no one peer) */
    lite_scatter_entry_t e[2] = {{.peer = 1, .remote = &descs[1], .len = WLEN},
                                 {.peer = 0, .remote = &descs[0], .len = WLEN}};
    CHECK_RC(ctx, lite_write_scatter(ctx, mr, e, 2, &batch));
    CHECK_RC(ctx, lite_send(ctx, 1, 1, &go, 1, 30000));
    int done = 0;
    double t0 = now_s();
    for (int i = 0; i < WRITES; i++) {
        int rc = lite_wait(ctx, w[i], 20000, NULL);
        CHECK(rc == 0 || rc == -LITE_ERR_PEER_LOST, "write %d to the lost rank ended %d (%s)", i,
              rc, lite_strerror(rc));
        if (rc)
            detail_names(ctx, "write", "one-sided op with rank 1");
        done += rc == 0;
    }
    int rc = lite_wait(ctx, batch, 20000, NULL);
    CHECK(rc == 0 || rc == -LITE_ERR_PEER_LOST, "scatter ended %d (%s)", rc, lite_strerror(rc));
    if (rc)
        detail_names(ctx, "scatter", "rank 1 is lost");
    /* once the loss is known (a receive from rank 1 meets it), later ops name it too */
    uint8_t none;
    rc = lite_recv(ctx, 1, 2, &none, 1, NULL, 20000);
    CHECK(rc == -LITE_ERR_PEER_LOST, "recv from the lost rank gave %d (%s)", rc, lite_strerror(rc));
    lite_request_t *late;
    rc = lite_write(ctx, 1, mr, 0, &descs[1], 0, WLEN, &late);
    CHECK(rc == -LITE_ERR_PEER_LOST, "write after the loss gave %d (%s)", rc, lite_strerror(rc));
    detail_names(ctx, "write after the loss", "rank 1");
    rc = lite_imm_wait(ctx, 0x134, 1, 5000);
    CHECK(rc == -LITE_ERR_PEER_LOST, "imm_wait gave %d (%s)", rc, lite_strerror(rc));
    detail_names(ctx, "imm_wait", "rank 1 is lost");
    double took = now_s() - t0;
    CHECK(took < 15.0, "the writes took %.1f s to end", took);
    CHECK_RC(ctx, lite_mr_dereg(ctx, mr));
    free(region);
    printf("rank 0: of %d writes to the lost rank %d done, %d lost, all ended in %.3f s\n", WRITES,
           done, WRITES - done, took);
}

static void finalize_inflight(lite_ctx_t *ctx)
{
    int me = lite_rank(ctx);
    CHECK(lite_world_size(ctx) == 4, "needs 4 ranks");
    const size_t len = 64u << 20;
    uint8_t *region = me < 2 ? calloc(1, len) : malloc(1);
    CHECK(region, "oom");
    if (me == 1)
        memset(region, 0xa5, len);
    lite_mr_t *mr;
    lite_rdesc_t descs[4];
    CHECK_RC(ctx, lite_mr_reg(ctx, region, me < 2 ? len : 1, LITE_MEM_HOST,
                              LITE_ACCESS_REMOTE_WRITE, &mr));
    CHECK_RC(ctx, lite_mr_exchange(ctx, mr, descs, 30000));
    CHECK_RC(ctx, lite_barrier(ctx, 30000));
    if (me == 1) {
        lite_request_t *w; /* never waited for: finalize must cope */
        CHECK_RC(ctx, lite_write(ctx, 0, mr, 0, &descs[0], 0, len, &w));
    }
    /* Rank 0 finalizes once the write has started to land. The dissemination barrier of 4
     * ranks has it hear from ranks 3 and 2 only, so it closes while the rest still arrives. */
    double until = now_s() + 20;
    while (me == 0 && *(volatile uint8_t *)region != 0xa5 && now_s() < until)
        CHECK(lite_progress(ctx) >= 0, "progress: %s", lite_last_error(ctx));
    int rc = lite_finalize(ctx);
    CHECK(rc == 0 || rc == -LITE_ERR_PEER_LOST || rc == -ESHUTDOWN, "finalize: %d (%s)", rc,
          lite_strerror(rc));
    size_t landed = 0;
    for (size_t i = 0; me == 0 && i < len; i++)
        landed += region[i] == 0xa5;
    free(region);
    printf("rank %d: finalize ended (%d), %zu bytes landed\n", me, rc, landed);
}

static void coll_pending_lost(lite_ctx_t *ctx)
{
    int me = lite_rank(ctx);
    CHECK(lite_world_size(ctx) == 3, "needs 3 ranks");
    uint8_t b[8];
    CHECK_RC(ctx, lite_barrier(ctx, 30000));
    if (me == 2) {
        for (int peer = 0; peer < 2; peer++) /* both started their allreduce */
            CHECK_RC(ctx, lite_recv(ctx, peer, 1, b, 1, NULL, 30000));
        _exit(0);
    }
    enum { COUNT = 1 << 20 };
    float *in = calloc(COUNT, sizeof(float)), *out = calloc(COUNT, sizeof(float));
    CHECK(in && out, "oom");
    lite_request_t *coll;
    CHECK_RC(ctx, lite_iallreduce(ctx, in, out, COUNT, LITE_F32, LITE_SUM, &coll));
    CHECK_RC(ctx, lite_send(ctx, 2, 1, b, 1, 30000));
    int rc = lite_recv(ctx, 2, 2, b, 1, NULL, 20000);
    CHECK(rc == -LITE_ERR_PEER_LOST, "recv from the lost rank gave %d (%s)", rc, lite_strerror(rc));
    detail_names(ctx, "recv", "recv from rank 2");
    rc = lite_barrier(ctx, 20000); /* a collective started after the loss names it too */
    CHECK(rc == -LITE_ERR_PEER_LOST, "barrier without rank 2 gave %d (%s): %s", rc,
          lite_strerror(rc), lite_last_error(ctx));
    detail_names(ctx, "barrier", "rank 2");
    printf("rank %d: %s\n", me, lite_last_error(ctx));
    rc = lite_finalize(ctx); /* the allreduce never waited for */
    CHECK(rc == 0 || rc == -LITE_ERR_PEER_LOST, "finalize: %d (%s)", rc, lite_strerror(rc));
    free(in);
    free(out);
    printf("rank %d: finalize with a pending allreduce ended (%d)\n", me, rc);
}

static void timeouts(lite_ctx_t *ctx)
{
    int me = lite_rank(ctx);
    CHECK(lite_world_size(ctx) == 2, "needs 2 ranks");
    const size_t big = 1u << 20; /* above the rendezvous threshold */
    uint8_t *buf = malloc(big), sync = 0;
    CHECK(buf, "oom");
    CHECK_RC(ctx, lite_barrier(ctx, 30000));

    /* 1. Rank 0's large receive times out while rank 1 sleeps after announcing its send: the
     *    write is already agreed (CTS), so the call waits for it and returns the data. */
    if (me == 1) {
        mp_fill(buf, big, 1, 0, 1);
        lite_request_t *s;
        CHECK_RC(ctx, lite_isend(ctx, 0, 1, buf, big, &s));
        usleep(800 * 1000); /* no progress: the CTS waits here */
        CHECK_RC(ctx, lite_wait(ctx, s, 30000, NULL));
    } else {
        memset(buf, 0, big);
        size_t got = 0;
        double t0 = now_s();
        int rc = lite_recv(ctx, 1, 1, buf, big, &got, 200);
        double took = now_s() - t0;
        CHECK(rc == 0 && got == big, "late large receive: %d (%s), %zu bytes after %.2f s", rc,
              lite_strerror(rc), got, took);
        CHECK(mp_verify(buf, big, 1, 0, 1) < 0, "late large receive corrupted");
        printf("rank 0: a large receive past its timeout returned its data after %.2f s\n", took);
    }
    CHECK_RC(ctx, lite_barrier(ctx, 30000));

    /* 2. Rank 0's large send times out before rank 1 posts the receive; rank 0 then reuses its
     *    buffer. The receive posted later fails with -LITE_ERR_CANCELLED. */
    if (me == 0) {
        mp_fill(buf, big, 0, 1, 2);
        int rc = lite_send(ctx, 1, 2, buf, big, 200);
        CHECK(rc == -ETIMEDOUT, "large send nobody receives: %d (%s)", rc, lite_strerror(rc));
        memset(buf, 0xee, big); /* the caller's again */
        CHECK_RC(ctx, lite_send(ctx, 1, 3, &sync, 1, 30000));
        CHECK_RC(ctx, lite_recv(ctx, 1, 4, &sync, 1, NULL, 30000)); /* progress meanwhile */
    } else {
        CHECK_RC(ctx, lite_recv(ctx, 0, 3, &sync, 1, NULL, 30000));
        memset(buf, 0, big);
        int rc = lite_recv(ctx, 0, 2, buf, big, NULL, 30000);
        CHECK(rc == -LITE_ERR_CANCELLED, "receive of the abandoned send: %d (%s)", rc,
              lite_strerror(rc));
        CHECK_RC(ctx, lite_send(ctx, 0, 4, &sync, 1, 30000));
        printf("rank 1: the receive of a send given up on failed with: %s\n", lite_strerror(rc));
    }
    CHECK_RC(ctx, lite_barrier(ctx, 30000));

    /* 3. Rank 0 fills rank 1's window with small sends while rank 1 is busy elsewhere; one
     *    more, blocking, waits for credit and times out: it must never arrive. */
    int credits = getenv("LITETX_CREDITS") ? atoi(getenv("LITETX_CREDITS")) : 64;
    lite_request_t **w = calloc((size_t)credits + 1, sizeof(*w));
    uint32_t *v = calloc((size_t)credits + 1, sizeof(*v));
    CHECK(w && v, "oom");
    if (me == 0) {
        int queued = -1;
        for (int i = 0; i < credits + 1 && queued < 0; i++) {
            v[i] = (uint32_t)i;
            /* the first send that has to wait for credit times out */
            int rc = lite_send(ctx, 1, 100 + (uint64_t)i, &v[i], sizeof(v[i]), 300);
            if (rc == -ETIMEDOUT)
                queued = i;
            else
                CHECK_RC(ctx, rc);
        }
        CHECK(queued >= 0, "no send waited for credit");
        CHECK_RC(ctx, lite_send(ctx, 1, 1000, &queued, sizeof(queued), 30000));
    } else {
        usleep(1500 * 1000); /* busy elsewhere: no progress, no credit back */
        int k = 0, rc = 0;
        for (; k < credits + 1; k++) {
            rc = lite_recv(ctx, 0, 100 + (uint64_t)k, &v[k], sizeof(v[k]), NULL, 1000);
            if (rc)
                break;
            CHECK(v[k] == (uint32_t)k, "message %d holds %u", k, v[k]);
        }
        CHECK(rc == -ETIMEDOUT, "receive %d: %d (%s)", k, rc, lite_strerror(rc));
        int queued = -1;
        CHECK_RC(ctx, lite_recv(ctx, 0, 1000, &queued, sizeof(queued), NULL, 30000));
        CHECK(k == queued, "messages up to %d arrived, rank 0's send %d had timed out", k - 1,
              queued);
        printf("rank 1: send %d of rank 0 timed out waiting for credit and never came\n", queued);
    }
    free(w);
    free(v);
    free(buf);
}

static void exchange(lite_ctx_t *ctx, uint64_t tag)
{
    int me = lite_rank(ctx), other = 1 - me;
    uint8_t s[1000], r[1000];
    mp_fill(s, sizeof(s), me, other, (uint32_t)tag);
    lite_request_t *sr;
    CHECK_RC(ctx, lite_isend(ctx, other, tag, s, sizeof(s), &sr));
    CHECK_RC(ctx, lite_recv(ctx, other, tag, r, sizeof(r), NULL, 30000));
    CHECK_RC(ctx, lite_wait(ctx, sr, 30000, NULL));
    CHECK(mp_verify(r, sizeof(r), other, me, (uint32_t)tag) < 0, "exchange %llu corrupted",
          (unsigned long long)tag);
}

/* A frame header as a liblitetx peer of this version writes it (docs/PROTOCOL.md). */
static void frame(uint8_t out[LITE_WIRE_HDR_LEN], uint8_t type, uint64_t tag, uint64_t len)
{
    memset(out, 0, LITE_WIRE_HDR_LEN);
    lite_put16(out, LITE_WIRE_MAGIC);
    out[2] = LITE_WIRE_VERSION;
    out[3] = type;
    lite_put64(out + 8, tag);
    lite_put64(out + 16, len);
}

/* A port nobody holds right now (the kernel picks it; closed again at once). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0, "socket");
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    CHECK(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
              getsockname(fd, (struct sockaddr *)&a, &len) == 0,
          "bind/getsockname: %s", strerror(errno));
    close(fd);
    return ntohs(a.sin_port);
}

static void garbage_transport(void)
{
    if (strcmp(mp_transport(), "tcp") != 0)
        mp_skip("garbage_transport attacks the TCP transport's port; not applicable here");
    /* Rank 0's transport listens on a port it knows (LITETX_TCP_PORT, rank 0 = the base itself),
     * picked free just before init: a fixed offset from the root port could be held by another
     * test's socket. Rank 1 learns it in the first message. */
    if (env_int("LITETX_RANK") == 0) {
        char v[16];
        snprintf(v, sizeof(v), "%d", free_port());
        setenv("LITETX_TCP_PORT", v, 1);
    }
    lite_ctx_t *ctx = mp_init();
    CHECK(lite_world_size(ctx) == 2, "needs 2 ranks");
    uint32_t base = 0;
    if (lite_rank(ctx) == 0) {
        base = (uint32_t)env_int("LITETX_TCP_PORT");
        CHECK_RC(ctx, lite_send(ctx, 1, 1, &base, sizeof(base), 30000));
    } else {
        CHECK_RC(ctx, lite_recv(ctx, 0, 1, &base, sizeof(base), NULL, 30000));
    }
    if (lite_rank(ctx) == 1) {
        /* Well-formed headers of the current wire version, so each is refused for what it
         * says, not for its format: random bytes; a hello from rank 1 (already connected); a
         * hello from rank 0 (which never connects to itself); a hello of an older wire version;
         * a message as first frame, with a huge length. */
        uint8_t junk[4096];
        srand(42);
        for (size_t i = 0; i < sizeof(junk); i++)
            junk[i] = (uint8_t)rand();
        uint8_t hello1[LITE_WIRE_HDR_LEN], hello0[LITE_WIRE_HDR_LEN], old[LITE_WIRE_HDR_LEN],
            huge[LITE_WIRE_HDR_LEN];
        frame(hello1, LITE_WIRE_HELLO, 1, 0);
        frame(hello0, LITE_WIRE_HELLO, 0, 0);
        frame(old, LITE_WIRE_HELLO, 1, 0);
        old[2] = LITE_WIRE_VERSION - 1;
        frame(huge, LITE_WIRE_MSG, 1, INT64_MAX);
        struct {
            const void *p;
            size_t n;
            const char *what;
        } cases[] = {{junk, sizeof(junk), "random bytes"},
                     {hello1, sizeof(hello1), "duplicate hello"},
                     {hello0, sizeof(hello0), "hello from rank 0"},
                     {old, sizeof(old), "an older wire version"},
                     {huge, sizeof(huge), "a huge length"}};
        /* With connections on demand, rank 0 dialled rank 1 and rank 1 never dials back, so
         * a hello claiming rank 1 is what rank 1's own connection would say: plaintext TCP
         * cannot tell them apart (that takes the TLS mode's authenticated identities). */
        const char *connect_mode = getenv("LITETX_TCP_CONNECT");
        bool lazy = connect_mode && !strcmp(connect_mode, "lazy");
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            if (lazy && cases[i].p == hello1)
                continue;
            int fd = connect_local((int)base);
            CHECK(send(fd, cases[i].p, cases[i].n, MSG_NOSIGNAL) >= 0, "send garbage");
            CHECK(closed_by_peer(fd, 10.0), "rank 0 kept a connection that sent %s", cases[i].what);
            close(fd);
        }
        printf("rank 1: rank 0 refused all %zu hostile connections\n",
               sizeof(cases) / sizeof(cases[0]));
        /* Connections that never say HELLO fill rank 0's table of unidentified ones (room for
         * 2 (N - 1) connections of its peers and 16 more); once they have been silent for over
         * 2 s, a new one makes rank 0 drop the oldest instead of refusing every newcomer (a
         * peer's own connection among them) for good. */
        enum { SILENT = 2 * (2 - 1) + 16 };
        CHECK(lite_world_size(ctx) == 2, "this case runs on 2 ranks");
        int quiet[SILENT];
        for (int i = 0; i < SILENT; i++)
            quiet[i] = connect_local((int)base);
        usleep(2500 * 1000);
        int late = connect_local((int)base);
        CHECK(closed_by_peer(quiet[0], 10.0), "rank 0 kept the oldest silent connection");
        CHECK(!closed_by_peer(late, 0.5), "rank 0 refused a new connection");
        for (int i = 0; i < SILENT; i++)
            close(quiet[i]);
        close(late);
        printf("rank 1: a full table of silent connections gave way to a new one\n");
    }
    /* rank 0 handled the garbage while waiting here */
    exchange(ctx, 2);
    exchange(ctx, 3);
    CHECK_RC(ctx, lite_finalize(ctx));
}

static void garbage_root(void)
{
    if (env_int("LITETX_RANK") == 1) {
        int fd = connect_local(root_port());
        const char junk[] = "GET / HTTP/1.0\r\n\r\nthis is not a liblitetx peer";
        CHECK(send(fd, junk, sizeof(junk), MSG_NOSIGNAL) > 0, "send");
        CHECK(closed_by_peer(fd, 10.0), "root kept a garbage connection");
        close(fd);
    }
    lite_ctx_t *ctx = mp_init();
    exchange(ctx, 1);
    CHECK_RC(ctx, lite_finalize(ctx));
    printf("rank %d: init survived a garbage connection to the root\n", mp_rank);
}

int main(int argc, char **argv)
{
    CHECK(argc == 2,
          "usage: fault_test "
          "missing_rank|config_mismatch|world_mismatch|rank_exits|writes_to_lost|finalize_inflight|"
          "coll_pending_lost|timeouts|garbage_transport|garbage_root");
    const char *mode = argv[1];
    if (!strcmp(mode, "missing_rank")) {
        missing_rank();
    } else if (!strcmp(mode, "config_mismatch")) {
        config_mismatch();
    } else if (!strcmp(mode, "world_mismatch")) {
        world_mismatch();
    } else if (!strcmp(mode, "rank_exits")) {
        lite_ctx_t *ctx = mp_init();
        rank_exits(ctx);
        CHECK_RC(ctx, lite_finalize(ctx));
    } else if (!strcmp(mode, "writes_to_lost")) {
        lite_ctx_t *ctx = mp_init();
        writes_to_lost(ctx);
        /* The finalize barrier meets the loss if nothing before it did; resources go either way. */
        int rc = lite_finalize(ctx);
        CHECK(rc == 0 || rc == -LITE_ERR_PEER_LOST, "finalize: %d (%s)", rc, lite_strerror(rc));
    } else if (!strcmp(mode, "finalize_inflight")) {
        finalize_inflight(mp_init());
    } else if (!strcmp(mode, "coll_pending_lost")) {
        coll_pending_lost(mp_init());
    } else if (!strcmp(mode, "timeouts")) {
        lite_ctx_t *ctx = mp_init();
        timeouts(ctx);
        CHECK_RC(ctx, lite_finalize(ctx));
    } else if (!strcmp(mode, "garbage_transport")) {
        garbage_transport();
    } else if (!strcmp(mode, "garbage_root")) {
        garbage_root();
    } else {
        CHECK(0, "unknown mode %s", mode);
    }
    return 0;
}
