/*
 * reconnect_test.c - connections broken on purpose while traffic flows (tcp and quic backends).
 *
 * Each rank sets LITETX_TEST_BREAK_AT before lite_init to a seeded list of byte counts (gaps
 * drawn from 1 .. gap): the backend shuts a connection down whenever this rank has received
 * that many bytes from its peers, so breaks fall inside headers, payloads, between a payload and
 * its acknowledgement and inside acknowledgements, on both ranks. Every workload then checks:
 * every message arrives exactly once with the right bytes, every write's bytes are in place,
 * every ImmCounter reaches exactly its count and never more, no operation fails, and the run
 * ends before its deadline.
 *
 *   reconnect_test WORKLOAD SEED GAP NBREAKS [ROUNDS]
 *   WORKLOAD: send | write | write_imm | read | paged | scatter | coll | mixed
 *   reconnect_test restart VICTIM   (LITETX_TCP_PORT or LITETX_QUIC_PORT_BASE set, 2 ranks):
 *     rank VICTIM exits without finalize and a new listener takes its address (a restarted
 *     process, which refuses what was meant for its predecessor; on quic it holds the UDP port
 *     and answers nothing); the survivor's pending ops must end -LITE_ERR_PEER_LOST within the
 *     reconnection budget (plus the idle timeout on quic), and nothing is resumed.
 *   reconnect_test lost ROUNDS BOUND_S   (2 ranks, behind tests/reconnect/tcp_proxy): the link is
 *     lost for good; every op ends within BOUND_S, failed ops place no wrong byte (see lost()).
 * RECONNECT_MIN_BREAKS=N: the workloads also check this rank saw at least N breaks.
 * RECONNECT_DROP_EVERY=K (quic): every K-th break drops the connection silently instead of
 *   closing it (the peer finds out by its idle timeout, or by the redial).
 */

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../mp/mp_common.h"

#define TMO      60000
#define REGION   (4u << 20)
#define DEADLINE 100.0 /* seconds: the run must end well before ctest's timeout */
#define IMM_BASE 0x5200

static uint64_t rng_state;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Message sizes: small eager, near the copy limit, large eager, rendezvous, bulk-sized. */
static size_t msg_size(uint64_t r)
{
    static const size_t sizes[] = {0, 8, 100, 4096, 5000, 40000, 65535, 70000, 300000, 1 << 20};
    return sizes[r % (sizeof(sizes) / sizeof(sizes[0]))];
}

static void set_breaks(int rank, uint64_t seed, uint64_t gap, int n)
{
    if (n <= 0 || gap == 0)
        return;
    char *buf = malloc((size_t)n * 25 + 1), *p = buf;
    uint64_t at = 0;
    const char *de = getenv("RECONNECT_DROP_EVERY");
    int drop = de ? atoi(de) : 0;
    rng_state = seed * 0x9E3779B97F4A7C15ull + (uint64_t)rank + 1;
    for (int i = 0; i < n; i++) {
        at += 1 + rnd() % gap;
        p += sprintf(p, "%s%llu%s", i ? "," : "", (unsigned long long)at,
                     drop > 0 && i % drop == drop - 1 ? "d" : "");
    }
    setenv("LITETX_TEST_BREAK_AT", buf, 1);
    free(buf);
}

/* Both ranks of each pair exchange `rounds` messages of mixed sizes, all posted at once. */
static void wl_send(lite_ctx_t *ctx, int rank, int world, int rounds, uint64_t seed)
{
    int n = rounds * (world - 1);
    lite_request_t **rq = calloc((size_t)n * 2, sizeof(*rq));
    uint8_t **sb = calloc((size_t)n, sizeof(*sb)), **rb = calloc((size_t)n, sizeof(*rb));
    size_t *rlen = calloc((size_t)n, sizeof(*rlen));
    int k = 0;
    for (int i = 0; i < rounds; i++) {
        for (int p = 0; p < world; p++) {
            if (p == rank)
                continue;
            /* the sizes a pair uses are drawn from a sequence both ends know */
            uint64_t s_out = seed ^ ((uint64_t)rank << 40) ^ ((uint64_t)p << 32) ^ (uint64_t)i;
            uint64_t s_in = seed ^ ((uint64_t)p << 40) ^ ((uint64_t)rank << 32) ^ (uint64_t)i;
            rng_state = s_in * 0x2545F4914F6CDD1Dull + 1;
            rlen[k] = msg_size(rnd());
            rb[k] = malloc(rlen[k] + 1);
            CHECK_RC(ctx, lite_irecv(ctx, p, (uint64_t)i + 1, rb[k], rlen[k], &rq[2 * k]));
            rng_state = s_out * 0x2545F4914F6CDD1Dull + 1;
            size_t len = msg_size(rnd());
            sb[k] = malloc(len + 1);
            mp_fill(sb[k], len, rank, p, (uint32_t)i);
            CHECK_RC(ctx, lite_isend(ctx, p, (uint64_t)i + 1, sb[k], len, &rq[2 * k + 1]));
            k++;
        }
    }
    for (int j = 0; j < 2 * n; j++) {
        lite_status_t st;
        CHECK_RC(ctx, lite_wait(ctx, rq[j], TMO, &st));
        if (j % 2 == 0) {
            int kk = j / 2;
            int p = st.peer;
            CHECK(st.bytes == rlen[kk], "message %d from %d: %zu bytes, want %zu", kk, p, st.bytes,
                  rlen[kk]);
            long bad = mp_verify(rb[kk], rlen[kk], p, rank, (uint32_t)(st.tag - 1));
            CHECK(bad < 0, "message tag %llu from %d: byte %ld wrong", (unsigned long long)st.tag,
                  p, bad);
        }
    }
    for (int j = 0; j < n; j++) {
        free(sb[j]);
        free(rb[j]);
    }
    free(sb);
    free(rb);
    free(rq);
    free(rlen);
}

struct regions {
    uint8_t *src, *dst;
    lite_mr_t *msrc, *mdst;
    lite_rdesc_t *descs;
};

static void regions_open(lite_ctx_t *ctx, int world, struct regions *g)
{
    g->src = malloc(REGION);
    g->dst = calloc(1, REGION);
    CHECK_RC(ctx,
             lite_mr_reg(ctx, g->src, REGION, LITE_MEM_HOST, LITE_ACCESS_REMOTE_READ, &g->msrc));
    CHECK_RC(ctx, lite_mr_reg(ctx, g->dst, REGION, LITE_MEM_HOST,
                              LITE_ACCESS_REMOTE_WRITE | LITE_ACCESS_REMOTE_READ, &g->mdst));
    g->descs = calloc((size_t)world, sizeof(*g->descs));
    CHECK_RC(ctx, lite_mr_exchange(ctx, g->mdst, g->descs, TMO));
}

static void regions_close(lite_ctx_t *ctx, struct regions *g)
{
    CHECK_RC(ctx, lite_mr_dereg(ctx, g->msrc));
    CHECK_RC(ctx, lite_mr_dereg(ctx, g->mdst));
    free(g->src);
    free(g->dst);
    free(g->descs);
}

/* Writes (kind 0), writes with an immediate (1), paged writes (2), scatter writes (3): each
 * rank fills its slice of every peer's region; the peer checks the bytes and the exact count. */
static void wl_write(lite_ctx_t *ctx, int rank, int world, int rounds, int kind)
{
    struct regions g;
    regions_open(ctx, world, &g);
    size_t slice = (REGION / (size_t)world) & ~(size_t)65535, page = 16384;
    uint32_t imm = IMM_BASE + (uint32_t)kind;
    mp_fill(g.src, REGION, rank, 0, 7);
    uint64_t expect = 0; /* immediates this rank receives from all peers */
    for (int p = 0; p < world; p++) {
        if (p == rank)
            continue;
        size_t off = (size_t)rank * slice;
        lite_request_t *rq[64];
        int nr = 0;
        for (int i = 0; i < rounds; i++) {
            size_t len = i % 4 == 3 ? slice : (size_t)(rnd() % slice) + 1;
            if (kind == 2) {
                size_t np = slice / page;
                uint32_t sp[256], dp[256];
                for (size_t j = 0; j < np; j++) {
                    dp[j] = (uint32_t)(off / page + j);
                    sp[j] = (uint32_t)(off / page + (np - 1 - j));
                }
                CHECK_RC(ctx, lite_write_paged(ctx, p, g.msrc, sp, &g.descs[p], dp, np, page, imm,
                                               LITE_WRITE_WITH_IMM, &rq[nr++]));
            } else if (kind == 3) {
                lite_scatter_entry_t e[4];
                for (int j = 0; j < 4; j++)
                    e[j] = (lite_scatter_entry_t){.peer = p,
                                                  .local_off = off + (size_t)j * (slice / 4),
                                                  .remote = &g.descs[p],
                                                  .remote_off = off + (size_t)j * (slice / 4),
                                                  .len = slice / 4,
                                                  .imm = imm,
                                                  .flags = LITE_WRITE_WITH_IMM};
                CHECK_RC(ctx, lite_write_scatter(ctx, g.msrc, e, 4, &rq[nr++]));
            } else if (kind == 1) {
                CHECK_RC(ctx, lite_write_imm(ctx, p, g.msrc, off, &g.descs[p], off, len, imm,
                                             &rq[nr++]));
            } else {
                CHECK_RC(ctx, lite_write(ctx, p, g.msrc, off, &g.descs[p], off, len, &rq[nr++]));
            }
            if (nr == 64 || i == rounds - 1) {
                for (int j = 0; j < nr; j++)
                    CHECK_RC(ctx, lite_wait(ctx, rq[j], TMO, NULL));
                nr = 0;
            }
        }
    }
    /* what each peer sent this rank, in immediates */
    uint64_t per = kind == 2 ? slice / page : kind == 3 ? 4 : 1;
    expect = kind ? (uint64_t)rounds * per * (uint64_t)(world - 1) : 0;
    if (expect) {
        CHECK_RC(ctx, lite_imm_wait(ctx, imm, expect, TMO));
    }
    CHECK_RC(ctx, lite_barrier(ctx, TMO));
    if (expect) {
        uint64_t left = 99;
        CHECK_RC(ctx, lite_imm_peek(ctx, imm, &left));
        CHECK(left == 0, "ImmCounter %#x counted %llu more than sent", imm,
              (unsigned long long)left);
    }
    /* every peer's slice holds that peer's bytes (the last full-slice write of each) */
    for (int p = 0; p < world; p++) {
        if (p == rank)
            continue;
        size_t off = (size_t)p * slice;
        for (size_t i = 0; i < slice; i++) {
            size_t src_i = off + i;
            if (kind == 2) {
                size_t np = slice / page, j = i / page;
                src_i = off + (np - 1 - j) * page + i % page;
            }
            CHECK(g.dst[off + i] == mp_pattern(p, 0, 7, src_i),
                  "write from %d: byte %zu of its slice wrong", p, i);
        }
    }
    CHECK_RC(ctx, lite_barrier(ctx, TMO));
    regions_close(ctx, &g);
}

/* Reads: each rank reads every peer's source region in pieces and checks them. */
static void wl_read(lite_ctx_t *ctx, int rank, int world, int rounds)
{
    struct regions g;
    g.src = malloc(REGION);
    g.dst = calloc(1, REGION);
    mp_fill(g.src, REGION, rank, 0, 9);
    CHECK_RC(ctx, lite_mr_reg(ctx, g.src, REGION, LITE_MEM_HOST, LITE_ACCESS_REMOTE_READ, &g.msrc));
    CHECK_RC(ctx, lite_mr_reg(ctx, g.dst, REGION, LITE_MEM_HOST, 0, &g.mdst));
    g.descs = calloc((size_t)world, sizeof(*g.descs));
    CHECK_RC(ctx, lite_mr_exchange(ctx, g.msrc, g.descs, TMO));
    for (int p = 0; p < world; p++) {
        if (p == rank)
            continue;
        for (int i = 0; i < rounds; i++) {
            size_t len = (size_t)(rnd() % (REGION / 2)) + 1, off = (size_t)(rnd() % (REGION / 2));
            memset(g.dst, 0, len);
            lite_request_t *rq;
            CHECK_RC(ctx, lite_read(ctx, p, g.mdst, 0, &g.descs[p], off, len, &rq));
            CHECK_RC(ctx, lite_wait(ctx, rq, TMO, NULL));
            for (size_t j = 0; j < len; j++)
                CHECK(g.dst[j] == mp_pattern(p, 0, 9, off + j), "read from %d: byte %zu wrong", p,
                      j);
        }
    }
    CHECK_RC(ctx, lite_barrier(ctx, TMO));
    regions_close(ctx, &g);
}

/* Collectives: results are checked against the values every rank can compute. */
static void wl_coll(lite_ctx_t *ctx, int rank, int world, int rounds)
{
    size_t n = 100000;
    int64_t *a = malloc(n * sizeof(*a)), *b = malloc(n * sizeof(*b) * (size_t)world);
    for (int r = 0; r < rounds; r++) {
        for (size_t i = 0; i < n; i++)
            a[i] = (int64_t)(i * 3 + (size_t)rank * 7 + (size_t)r);
        CHECK_RC(ctx, lite_allreduce(ctx, a, b, n, LITE_I64, LITE_SUM, TMO));
        for (size_t i = 0; i < n; i++) {
            int64_t want = 0;
            for (int q = 0; q < world; q++)
                want += (int64_t)(i * 3 + (size_t)q * 7 + (size_t)r);
            CHECK(b[i] == want, "allreduce round %d: element %zu is %lld, want %lld", r, i,
                  (long long)b[i], (long long)want);
        }
        CHECK_RC(ctx, lite_allgather(ctx, a, b, n, LITE_I64, TMO));
        for (int q = 0; q < world; q++)
            for (size_t i = 0; i < n; i += 97)
                CHECK(b[(size_t)q * n + i] == (int64_t)(i * 3 + (size_t)q * 7 + (size_t)r),
                      "allgather round %d: rank %d's element %zu wrong", r, q, i);
        if (rank == r % world)
            for (size_t i = 0; i < n; i++)
                a[i] = (int64_t)(i ^ (size_t)r);
        CHECK_RC(ctx, lite_bcast(ctx, a, n, LITE_I64, r % world, TMO));
        for (size_t i = 0; i < n; i++)
            CHECK(a[i] == (int64_t)(i ^ (size_t)r), "bcast round %d: element %zu wrong", r, i);
        CHECK_RC(ctx, lite_barrier(ctx, TMO));
    }
    free(a);
    free(b);
}

/* The restarted process: the victim's listening socket is kept (so the address never stops
 * listening, as when a new process binds it at once), every other descriptor of the victim is
 * closed; it accepts, reads what comes and closes each connection, as a new incarnation refuses
 * a resume meant for its predecessor. */
static void stand_in(int port, double secs, pid_t victim, bool udp)
{
    int lfd = -1;
    for (int fd = 3; fd < 1024; fd++) {
        struct sockaddr_in a;
        socklen_t al = sizeof(a);
        int acc = 0, type = 0;
        socklen_t ol = sizeof(acc), tl = sizeof(type);
        if (lfd < 0 && getsockname(fd, (struct sockaddr *)&a, &al) == 0 &&
            a.sin_family == AF_INET && ntohs(a.sin_port) == port &&
            getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 &&
            (udp ? type == SOCK_DGRAM
                 : getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &ol) == 0 && acc)) {
            lfd = fd;
            continue;
        }
        close(fd);
    }
    for (int i = 0; i < 10000 && getppid() == victim; i++)
        usleep(1000);
    double end = now_s() + secs;
    /* quic: the port stays bound (no ICMP "port unreachable"), nothing is answered */
    while (udp && lfd >= 0 && now_s() < end) {
        char buf[65536];
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        if (poll(&p, 1, 100) > 0)
            (void)!recv(lfd, buf, sizeof(buf), MSG_DONTWAIT);
    }
    while (lfd >= 0 && now_s() < end) {
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        int c = accept(lfd, NULL, NULL);
        if (c < 0)
            continue;
        char buf[4096];
        struct pollfd q = {.fd = c, .events = POLLIN};
        if (poll(&q, 1, 200) > 0)
            (void)!read(c, buf, sizeof(buf));
        close(c);
    }
    _exit(0);
}

static void restart(lite_ctx_t *ctx, int rank, int victim)
{
    bool udp = !strcmp(mp_transport(), "quic");
    const char *pb = getenv(udp ? "LITETX_QUIC_PORT_BASE" : "LITETX_TCP_PORT"),
               *bud = getenv("LITETX_RECONNECT_TIMEOUT_MS"), *idle = getenv("LITETX_QUIC_IDLE_MS");
    CHECK(pb && bud, "needs the port base and LITETX_RECONNECT_TIMEOUT_MS");
    CHECK(!udp || idle, "needs LITETX_QUIC_IDLE_MS on quic");
    /* quic notices the break by its idle timeout (the stand-in answers nothing) */
    double budget = atoi(bud) / 1000.0 + (udp ? atoi(idle) / 1000.0 : 0);
    int other = 1 - rank;
    static uint8_t big[1 << 20], small[64];
    lite_request_t *r1, *r2;
    CHECK_RC(ctx, lite_barrier(ctx, TMO));
    if (rank == victim) {
        pid_t me = getpid();
        if (fork() == 0)
            stand_in(atoi(pb) + victim, budget + 1.5, me, udp);
        /* ops of the survivor's still pending here: gone with the process */
        _exit(0);
    }
    CHECK_RC(ctx, lite_irecv(ctx, other, 7, small, sizeof(small), &r1));
    CHECK_RC(ctx, lite_isend(ctx, other, 7, big, sizeof(big), &r2));
    double t0 = now_s();
    /* Notice the break; the redials and probes then meet a live listener that is not the old
     * process. */
    lite_peer_stats_t st = {.struct_size = sizeof(st)};
    for (int i = 0; i < 10000 && st.breaks == 0; i++) {
        CHECK_RC(ctx, lite_progress(ctx));
        CHECK_RC(ctx, lite_peer_query(ctx, other, &st));
        usleep(1000);
    }
    CHECK(st.breaks == 1, "the link did not break (%llu)", (unsigned long long)st.breaks);
    int rc1 = lite_wait(ctx, r1, TMO, NULL), rc2 = lite_wait(ctx, r2, TMO, NULL);
    double took = now_s() - t0;
    printf("rank %d: pending ops ended %d / %d after %.2f s (budget %.1f s): %s\n", rank, rc1, rc2,
           took, budget, lite_last_error(ctx));
    CHECK(rc1 == -LITE_ERR_PEER_LOST && rc2 == -LITE_ERR_PEER_LOST, "want PEER_LOST, got %d / %d",
          rc1, rc2);
    CHECK(took < budget + 3, "took %.1f s for a budget of %.1f s", took, budget);
    CHECK_RC(ctx, lite_peer_query(ctx, other, &st));
    CHECK(st.resumes == 0, "a link was resumed into the restarted process (%llu)",
          (unsigned long long)st.resumes);
    lite_finalize(ctx);
    exit(0);
}

/* A link that cannot be resumed (a tampered TLS record with reconnection off, a blackhole past
 * the budget): both ranks post 32 MiB of writes and ROUNDS messages each way (as wl_send does),
 * and every op must end within BOUND_S seconds (no hang): done with exact bytes, or with
 * -LITE_ERR_PEER_LOST or -LITE_ERR_PROTOCOL, at least one of them failed; a failed receive's
 * buffer, and the region the peer writes, hold only the right bytes or their initial fill (no
 * corrupted byte was placed); with TLS also zeros, where a record that failed its tag had been
 * decrypted in place and was wiped. */
#define LOST_WRITES 32 /* 1 MiB writes each way */

/* A post to a link that is lost already (a break that fails at once, as in lazy mode) fails
 * then: that op counts as failed, with no request. */
static void lost_post(lite_ctx_t *ctx, int rc, lite_request_t **rq)
{
    if (rc == -LITE_ERR_PEER_LOST) {
        *rq = NULL;
        return;
    }
    CHECK_RC(ctx, rc);
}
static void lost(lite_ctx_t *ctx, int rank, int rounds, double bound)
{
    const uint8_t fill = 0xee;
    const char *sec = getenv("LITETX_SECURITY");
    bool wiped_ok = sec && *sec && strcmp(sec, "off") != 0; /* 0 is a wiped byte too */
    int p = 1 - rank, n = rounds, failed = 0, done = 0;
    lite_request_t **rq = calloc((size_t)n * 2 + LOST_WRITES, sizeof(*rq));
    uint8_t **sb = calloc((size_t)n, sizeof(*sb)), **rb = calloc((size_t)n, sizeof(*rb));
    size_t *rlen = calloc((size_t)n, sizeof(*rlen));
    struct regions g;
    regions_open(ctx, 2, &g);
    mp_fill(g.src, REGION, rank, 0, 7);
    memset(g.dst, fill, REGION);
    CHECK_RC(ctx, lite_barrier(ctx, TMO));
    /* Writes first: their payloads are pushed without waiting for the peer, so each rank has
     * far more bytes queued than socket buffers hold, and a stalled path leaves unacknowledged
     * data on both sides (what TCP_USER_TIMEOUT detects; an idle side would wait on keepalive,
     * which a stalled proxy's kernel still answers). */
    for (int k = 0; k < LOST_WRITES; k++) {
        size_t off = (size_t)(k % 4) << 20;
        lost_post(ctx, lite_write(ctx, p, g.msrc, off, &g.descs[p], off, 1 << 20, &rq[2 * n + k]),
                  &rq[2 * n + k]);
    }
    for (int i = 0; i < n; i++) {
        uint64_t s_out = ((uint64_t)rank << 40) ^ ((uint64_t)p << 32) ^ (uint64_t)i;
        uint64_t s_in = ((uint64_t)p << 40) ^ ((uint64_t)rank << 32) ^ (uint64_t)i;
        rng_state = s_in * 0x2545F4914F6CDD1Dull + 1;
        rlen[i] = msg_size(rnd());
        rb[i] = malloc(rlen[i] + 1);
        memset(rb[i], fill, rlen[i] + 1);
        lost_post(ctx, lite_irecv(ctx, p, (uint64_t)i + 1, rb[i], rlen[i], &rq[2 * i]), &rq[2 * i]);
        rng_state = s_out * 0x2545F4914F6CDD1Dull + 1;
        size_t len = msg_size(rnd());
        sb[i] = malloc(len + 1);
        mp_fill(sb[i], len, rank, p, (uint32_t)i);
        lost_post(ctx, lite_isend(ctx, p, (uint64_t)i + 1, sb[i], len, &rq[2 * i + 1]),
                  &rq[2 * i + 1]);
    }
    double t0 = now_s();
    for (int j = 0; j < 2 * n + LOST_WRITES; j++) {
        int left = (int)((bound - (now_s() - t0)) * 1000);
        lite_status_t st;
        /* (a post the lost link refused at once has no request) */
        int rc = rq[j] ? lite_wait(ctx, rq[j], left > 1 ? left : 1, &st) : -LITE_ERR_PEER_LOST;
        CHECK(rc != -ETIMEDOUT, "op %d still pending after %.1f s: a hang", j, bound);
        CHECK(rc == 0 || rc == -LITE_ERR_PEER_LOST || rc == -LITE_ERR_PROTOCOL,
              "op %d ended %d (%s), want 0, PEER_LOST or PROTOCOL", j, rc, lite_last_error(ctx));
        if (rc) {
            if (!failed)
                printf("rank %d: first failed op ended %d after %.2f s: %s\n", rank, rc,
                       now_s() - t0, lite_last_error(ctx));
            failed++;
        } else {
            done++;
        }
        if (j % 2 || j >= 2 * n)
            continue;
        int i = j / 2;
        uint8_t *want = malloc(rlen[i] + 1);
        mp_fill(want, rlen[i], p, rank, (uint32_t)i);
        for (size_t b = 0; b < rlen[i]; b++) {
            bool ok = rc ? rb[i][b] == want[b] || rb[i][b] == fill || (wiped_ok && !rb[i][b])
                         : rb[i][b] == want[b];
            CHECK(ok, "message %d from %d (%s): byte %zu is %#x, want %#x%s", i, p,
                  rc ? "failed" : "done", b, rb[i][b], want[b],
                  rc ? (wiped_ok ? " or the fill or 0" : " or the fill") : "");
        }
        CHECK(rb[i][rlen[i]] == fill, "message %d: written past its end", i);
        free(want);
    }
    double took = now_s() - t0;
    /* the peer's writes: each byte of the region is the right one or still the fill */
    uint8_t *want = malloc(REGION);
    mp_fill(want, REGION, p, 0, 7);
    for (size_t b = 0; b < REGION; b++)
        CHECK(g.dst[b] == want[b] || g.dst[b] == fill || (wiped_ok && !g.dst[b]),
              "region byte %zu is %#x, want %#x or the fill%s", b, g.dst[b], want[b],
              wiped_ok ? " or 0" : "");
    free(want);
    printf("rank %d: %d op(s) done, %d failed, all ended in %.2f s\n", rank, done, failed, took);
    CHECK(failed > 0, "no op failed: the link was never lost");
    CHECK(took < bound, "took %.1f s (bound %.0f s)", took, bound);
    for (int i = 0; i < n; i++) {
        free(sb[i]);
        free(rb[i]);
    }
    free(sb);
    free(rb);
    free(rq);
    free(rlen);
    lite_finalize(ctx); /* the peer is lost: its result says so */
    exit(0);
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "lost")) {
        if (strcmp(mp_transport(), "tcp") != 0)
            mp_skip("reconnection is a tcp backend feature");
        lite_ctx_t *ctx = mp_init();
        CHECK(lite_world_size(ctx) == 2, "lost runs on 2 ranks");
        lost(ctx, lite_rank(ctx), atoi(argv[2]), atof(argv[3]));
    }
    if (argc == 3 && !strcmp(argv[1], "restart")) {
        if (strcmp(mp_transport(), "tcp") != 0 && strcmp(mp_transport(), "quic") != 0)
            mp_skip("reconnection is a tcp and quic backend feature");
        lite_ctx_t *ctx = mp_init();
        restart(ctx, lite_rank(ctx), atoi(argv[2]));
    }
    if (argc < 5) {
        fprintf(stderr, "usage: %s WORKLOAD SEED GAP NBREAKS [ROUNDS]\n", argv[0]);
        return 2;
    }
    const char *wl = argv[1];
    uint64_t seed = strtoull(argv[2], NULL, 0), gap = strtoull(argv[3], NULL, 0);
    int nbreaks = atoi(argv[4]), rounds = argc > 5 ? atoi(argv[5]) : 40;
    const char *r = getenv("LITETX_RANK");
    int rank = r ? atoi(r) : 0;
    /* rdma resumes too: its breaks come from LITETX_RDMA_TEST_QP_ERROR (the Soft-RoCE VM suite) */
    if (strcmp(mp_transport(), "tcp") != 0 && strcmp(mp_transport(), "quic") != 0 &&
        strcmp(mp_transport(), "rdma") != 0)
        mp_skip("reconnection is a tcp, quic and rdma backend feature");
    set_breaks(rank, seed, gap, nbreaks);
    double t0 = now_s();
    lite_ctx_t *ctx = mp_init();
    int world = lite_world_size(ctx);
    rng_state = seed + (uint64_t)rank * 77 + 1;
    bool all = !strcmp(wl, "mixed");
    if (all || !strcmp(wl, "send"))
        wl_send(ctx, rank, world, rounds, seed);
    if (all || !strcmp(wl, "write"))
        wl_write(ctx, rank, world, rounds, 0);
    if (all || !strcmp(wl, "write_imm"))
        wl_write(ctx, rank, world, rounds, 1);
    if (all || !strcmp(wl, "paged"))
        wl_write(ctx, rank, world, rounds / 4 + 1, 2);
    if (all || !strcmp(wl, "scatter"))
        wl_write(ctx, rank, world, rounds, 3);
    if (all || !strcmp(wl, "read"))
        wl_read(ctx, rank, world, rounds / 4 + 1);
    if (all || !strcmp(wl, "coll"))
        wl_coll(ctx, rank, world, rounds / 8 + 1);
    CHECK_RC(ctx, lite_barrier(ctx, TMO));
    double took = now_s() - t0;
    /* every break was resumed, and with breaks asked for some did happen */
    uint64_t breaks = 0, resumes = 0;
    for (int p = 0; p < world; p++) {
        lite_peer_stats_t st = {.struct_size = sizeof(st)};
        CHECK_RC(ctx, lite_peer_query(ctx, p, &st));
        breaks += st.breaks;
        resumes += st.resumes;
    }
    printf("rank %d: %llu break(s), %llu resumed\n", rank, (unsigned long long)breaks,
           (unsigned long long)resumes);
    CHECK(resumes == breaks, "%llu breaks but %llu resumes", (unsigned long long)breaks,
          (unsigned long long)resumes);
    if (nbreaks > 0 && world == 2)
        CHECK(breaks > 0, "no connection broke: the test exercised nothing");
    /* a break made from outside (a proxy's tampering or blackhole) must have happened */
    const char *mb = getenv("RECONNECT_MIN_BREAKS");
    if (mb)
        CHECK(breaks >= strtoull(mb, NULL, 10), "%llu break(s), want at least %s",
              (unsigned long long)breaks, mb);
    printf("rank %d: %s done in %.2f s\n", rank, wl, took);
    CHECK(took < DEADLINE, "took %.1f s (deadline %.0f s)", took, DEADLINE);
    CHECK_RC(ctx, lite_finalize(ctx));
    return 0;
}
