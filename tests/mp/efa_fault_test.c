/*
 * efa_fault_test.c - the efa backend's failure paths and hostile-peer checks, run for real on
 * libfabric's tcp;ofi_rxm and shm providers (the efa_* test variants). Built only with the efa
 * backend: some modes reach into it (src/transports/efa/efa.h) to forge traffic or state.
 *
 * Run: litetx-run -n 2 --transport efa efa_fault_test MODE, MODE one of
 *   query_refused  the provider refuses, inside the post, the key confirmation (QUERY) that
 *                  rank 0's first op on a region of rank 1 sends: the op ends with
 *                  -LITE_ERR_PEER_LOST (socket-addressed providers: tcp)
 *   orphan_writes  rank 0 fails rank 1 right after posting a burst of writes to it; the
 *                  provider completes them later: every op record is released then
 *   sends_to_lost  rank 1 stops reading and exits while 512 eager messages of rank 0 are on
 *                  their way: each ends done or with -LITE_ERR_PEER_LOST (tcp cancels what was
 *                  queued on the broken connection: not -LITE_ERR_CANCELLED)
 *   big_short      rank 1 announces a large message and sends fewer bytes: rank 0's receive
 *                  fails with a protocol error instead of reporting stale bytes
 *   eager_min      LITETX_EFA_EAGER_MAX below the largest control message is a config error
 *                  naming the variable (it used to make key confirmations vanish)
 *   imm_yield      LITETX_EFA_IMM_YIELD_NS out of range or not a number is a config error
 *                  naming the variable; set to 100 us, it paces a chain of writes with an
 *                  immediate (each waits for the one before, and completes only after the
 *                  target's progress) to at least 100 us a write, and every write still
 *                  counts once with its bytes in place
 *   writer_copy    LITETX_EFA_WRITER_COPY: on by default for shm only (with 2 rails), 0 turns
 *                  it off (1 rail), a bad value is a config error naming it. On shm, 1 MiB
 *                  writes with an immediate each post one writer-copied stripe, a write whose
 *                  second stripe is under 4 KiB posts none, and every write counts once with
 *                  its bytes in place; on other providers none is writer-copied
 *   dereg_race     rank 1 withdraws regions whose keys rank 0 holds while rank 0 makes no
 *                  progress: the withdrawal waits for rank 0's word (bounded by the op
 *                  timeout: -ETIMEDOUT, the region stays registered and refuses new ops), a
 *                  write rank 0 posts with the keys it still holds lands before lite_mr_dereg
 *                  returns, and no byte lands after it (shm: half of it copied by the writer)
 *   dead_lock_holder  shm: rank 1 takes the spinlock of its own shm region (as its progress
 *                  does) and exits holding it while rank 0's send to it spins on that lock in
 *                  the provider: rank 0's watcher releases it (held 500 ms after the exit),
 *                  the send returns, and the receive from rank 1 fails with
 *                  -LITE_ERR_PEER_LOST, all within seconds
 *   core_cfg       credits and rndv_threshold set in lite_config_t (no LITETX_* variable): the
 *                  backend sizes its eager buffers from them (it read the variables itself and
 *                  ignored the struct), and 200 eager messages sent before any receive is
 *                  posted all arrive intact
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ctx.h"
#include "mp_common.h"
#include "transports/efa/efa.h"
#include "tunables.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Progress for `ms` without anything to wait for (a wait ends early when a peer is lost). */
static void idle(lite_ctx_t *ctx, int ms)
{
    int rc = lite_imm_wait(ctx, 0xDEAD0, 1, ms);
    CHECK(rc == -ETIMEDOUT || rc == -LITE_ERR_PEER_LOST, "idle wait gave %d (%s)", rc,
          lite_strerror(rc));
}

/* Register `region` for peers' writes and swap descriptors with the other rank (descs[rank]). */
static lite_mr_t *share_region(lite_ctx_t *ctx, void *region, size_t len, lite_rdesc_t descs[2])
{
    lite_mr_t *mr;
    CHECK_RC(ctx, lite_mr_reg(ctx, region, len, LITE_MEM_HOST, LITE_ACCESS_REMOTE_WRITE, &mr));
    CHECK_RC(ctx, lite_mr_exchange(ctx, mr, descs, 30000));
    return mr;
}

/* Rank 0 points its rail-0 address of rank 1 at a multicast address: the provider's next
 * connect() to it is refused at once (ENETUNREACH), inside the post, as tcp;ofi_rxm refuses a
 * post to a peer whose address cannot be reached. The setup is forged; the path is real. */
static void make_unreachable(lite_ctx_t *ctx, int peer)
{
    struct lite_transport *t = ctx->tp;
    struct efa_rail *r = &t->rail[0];
    struct sockaddr_in sa;
    CHECK(r->name_len == sizeof(sa), "rail 0's address is %zu bytes", r->name_len);
    memcpy(&sa, r->name, sizeof(sa));
    CHECK(sa.sin_family == AF_INET, "address family %d", sa.sin_family);
    sa.sin_addr.s_addr = htonl(0xE0000001); /* 224.0.0.1 */
    fi_addr_t fa = FI_ADDR_NOTAVAIL;
    CHECK(fi_av_insert(r->av, &sa, 1, &fa, 0, NULL) == 1, "fi_av_insert failed");
    r->addr[peer] = fa;
    t->av_is_rank = false;
}

static void query_refused(void)
{
    /* No keepalive may reach the bad address first: the op under test is the one that does. */
    setenv("LITETX_EFA_KEEPALIVE_MS", "0", 1);
    lite_ctx_t *ctx = mp_init();
    int me = lite_rank(ctx);
    CHECK(lite_world_size(ctx) == 2, "needs 2 ranks");
    struct lite_transport *t = ctx->tp;
    if (!lite_efa_sockaddr_format(t->rail[0].info->addr_format))
        mp_skip("the provider's addresses are not socket addresses (nothing refuses a connect)");
    enum { LEN = 4096 };
    uint8_t *region = calloc(1, LEN);
    CHECK(region, "oom");
    lite_rdesc_t descs[2];
    lite_mr_t *mr = share_region(ctx, region, LEN, descs);
    CHECK_RC(ctx, lite_barrier(ctx, 30000));
    if (me == 1) {
        idle(ctx, 3000); /* rank 0 gives up on this rank; then gone */
        _exit(0);
    }
    make_unreachable(ctx, 1);
    /* The first op on rank 1's region asks rank 1 to confirm the key: that message's post is
     * refused and rank 1 is lost inside lite_write. */
    lite_request_t *r;
    double t0 = now_s();
    int rc = lite_write(ctx, 1, mr, 0, &descs[1], 0, 64, &r);
    if (rc == 0)
        rc = lite_wait(ctx, r, 10000, NULL);
    double took = now_s() - t0;
    CHECK(rc == -LITE_ERR_PEER_LOST, "write to the unreachable rank ended %d (%s) after %.1f s", rc,
          lite_strerror(rc), took);
    CHECK_RC(ctx, lite_mr_dereg(ctx, mr));
    free(region);
    printf("rank 0: write to an unreachable rank ended with PEER_LOST in %.3f s\n", took);
    CHECK_RC(ctx, lite_finalize(ctx));
}

/* Rank 0 fails rank 1 itself (as after a malformed message) right after posting a burst of
 * writes to it; the provider then completes them, successfully. Every op record must be
 * released as its writes come back, not wait for an acknowledgement that no one asks for. */
static void orphan_writes(void)
{
    lite_ctx_t *ctx = mp_init();
    int me = lite_rank(ctx);
    CHECK(lite_world_size(ctx) == 2, "needs 2 ranks");
    enum { BURST = 8, WLEN = 64 };
    uint8_t *region = calloc(BURST, WLEN);
    CHECK(region, "oom");
    lite_rdesc_t descs[2];
    lite_mr_t *mr = share_region(ctx, region, BURST * WLEN, descs);
    CHECK_RC(ctx, lite_barrier(ctx, 30000));
    if (me == 1) {
        idle(ctx, 3000); /* acknowledges rank 0's writes meanwhile; then gone */
        _exit(0);
    }
    lite_request_t *w[BURST];
    /* A first burst confirms the key and connects every rail. */
    for (int i = 0; i < BURST; i++)
        CHECK_RC(ctx, lite_write(ctx, 1, mr, (size_t)i * WLEN, &descs[1], (size_t)i * WLEN, WLEN,
                                 &w[i]));
    for (int i = 0; i < BURST; i++)
        CHECK_RC(ctx, lite_wait(ctx, w[i], 30000, NULL));
    for (int i = 0; i < BURST; i++)
        CHECK_RC(ctx, lite_write(ctx, 1, mr, (size_t)i * WLEN, &descs[1], (size_t)i * WLEN, WLEN,
                                 &w[i]));
    struct lite_transport *t = ctx->tp;
    lite_efa_peer_fail(t, 1, -LITE_ERR_PROTOCOL, "failed on purpose by the test");
    for (int i = 0; i < BURST; i++) {
        int rc = lite_wait(ctx, w[i], 10000, NULL);
        CHECK(rc == -LITE_ERR_PROTOCOL, "write %d ended %d (%s)", i, rc, lite_strerror(rc));
    }
    struct efa_peer *p = &t->peers[1];
    double until = now_s() + 5;
    while (p->rma && now_s() < until)
        lite_progress(ctx);
    CHECK(p->rma == NULL, "one-sided op records of the failed rank are still held");
    for (uint32_t r = 0; r < LITE_MAX_RAILS; r++)
        CHECK(p->dc[r].wait == NULL, "writes wait on rail %u for an acknowledgement", r);
    CHECK_RC(ctx, lite_mr_dereg(ctx, mr));
    free(region);
    printf("rank 0: writes to a failed rank released\n");
    CHECK_RC(ctx, lite_finalize(ctx));
}

static void sends_to_lost(void)
{
    /* More credits than by default, and eager buffers no larger than the messages: enough
     * bytes in flight to fill loopback's socket buffers while nobody reads. */
    setenv("LITETX_CREDITS", "512", 1);
    setenv("LITETX_EFA_EAGER_MAX", "16384", 1);
    lite_ctx_t *ctx = mp_init();
    int me = lite_rank(ctx);
    CHECK(lite_world_size(ctx) == 2, "needs 2 ranks");
    CHECK_RC(ctx, lite_barrier(ctx, 30000));
    if (me == 1) {
        usleep(1500000); /* no progress: rank 0's messages pile up in its provider */
        _exit(0);        /* with unread bytes: the connection is reset */
    }
    /* Eager for the core and for tcp;ofi_rxm too (below its 16 KiB eager limit: a send completes
     * once it is in the socket, and what is still queued behind a full socket is cancelled when
     * the connection breaks). 6 MiB in all is more than loopback's socket buffers hold while
     * nobody reads (~4 MiB were seen to fit). */
    enum { SENDS = 512, LEN = 12 << 10 };
    uint8_t *buf = malloc(LEN);
    CHECK(buf, "oom");
    memset(buf, 0x5A, LEN);
    lite_request_t *s[SENDS];
    for (int i = 0; i < SENDS; i++)
        CHECK_RC(ctx, lite_isend(ctx, 1, 100 + (uint64_t)i, buf, LEN, &s[i]));
    int done = 0;
    double t0 = now_s();
    for (int i = 0; i < SENDS; i++) {
        int rc = lite_wait(ctx, s[i], 20000, NULL);
        CHECK(rc == 0 || rc == -LITE_ERR_PEER_LOST, "send %d to the lost rank ended %d (%s)", i, rc,
              lite_strerror(rc));
        done += rc == 0;
    }
    double took = now_s() - t0;
    CHECK(took < 15.0, "the sends took %.1f s to end", took);
    free(buf);
    printf("rank 0: of %d sends to the lost rank %d done, %d lost, all ended in %.3f s\n", SENDS,
           done, SENDS - done, took);
    CHECK_RC(ctx, lite_finalize(ctx));
}

/* Rank 1 plays a broken peer from inside its own backend: a BIG header announcing ANNOUNCED
 * bytes, in sequence, then a tagged payload of SHORT bytes. */
enum { ANNOUNCED = 128 << 10, SHORT = 64, BIG_TAG = 7 };

static void forge_short_big(lite_ctx_t *ctx)
{
    struct lite_transport *t = ctx->tp;
    struct efa_peer *p = &t->peers[0];
    CHECK(ANNOUNCED > t->cfg.eager_max, "eager_max %zu: the message would not be BIG",
          t->cfg.eager_max);
    struct lite_efa_hdr h = {.type = LITE_EFA_T_BIG,
                             .channel = LITE_CHAN_USER,
                             .src = 1,
                             .seq = p->tx_seq++,
                             .tag = BIG_TAG,
                             .len = ANNOUNCED};
    uint8_t hb[LITE_EFA_BIG_HDR_LEN], pl[SHORT];
    CHECK(lite_efa_hdr_encode(&h, hb) == sizeof(hb), "a BIG header is %d bytes",
          LITE_EFA_BIG_HDR_LEN);
    memset(pl, 0xAB, sizeof(pl));
    fi_addr_t a = t->rail[0].addr[0];
    ssize_t rc;
    double until = now_s() + 10;
    while ((rc = fi_inject(t->rail[0].ep, hb, sizeof(hb), a)) == -FI_EAGAIN && now_s() < until)
        lite_progress(ctx);
    CHECK(rc == 0, "forged header: %s", fi_strerror((int)-rc));
    while ((rc = fi_tinject(t->rail[0].ep, pl, sizeof(pl), a, (uint64_t)1 << 32 | h.seq)) ==
               -FI_EAGAIN &&
           now_s() < until)
        lite_progress(ctx);
    CHECK(rc == 0, "forged payload: %s", fi_strerror((int)-rc));
}

static void big_short(void)
{
    /* Messages up to 1 MiB are eager for the core, so ANNOUNCED is a legal BIG message. */
    setenv("LITETX_RNDV_THRESHOLD", "1048576", 1);
    lite_ctx_t *ctx = mp_init();
    int me = lite_rank(ctx);
    CHECK(lite_world_size(ctx) == 2, "needs 2 ranks");
    uint8_t *buf = malloc(ANNOUNCED);
    CHECK(buf, "oom");
    memset(buf, 0xEE, ANNOUNCED);
    lite_request_t *r = NULL;
    if (me == 0)
        CHECK_RC(ctx, lite_irecv(ctx, 1, BIG_TAG, buf, ANNOUNCED, &r));
    CHECK_RC(ctx, lite_barrier(ctx, 30000));
    if (me == 1) {
        forge_short_big(ctx);
        idle(ctx, 2000); /* long enough for rank 0 to judge; then gone */
        _exit(0);
    }
    lite_status_t st;
    memset(&st, 0, sizeof(st));
    int rc = lite_wait(ctx, r, 10000, &st);
    CHECK(rc != 0, "a %d-byte payload announced as %d bytes was accepted (%zu bytes reported)",
          SHORT, ANNOUNCED, st.bytes);
    CHECK(rc == -LITE_ERR_PROTOCOL, "the short large message ended %d (%s), not a protocol error",
          rc, lite_strerror(rc));
    free(buf);
    printf("rank 0: short large message refused: %s\n", lite_strerror(rc));
    CHECK_RC(ctx, lite_finalize(ctx));
}

static void eager_min(void)
{
    /* With 5 rails a key confirmation's reply is 72 bytes: more than 64 would allow. */
    setenv("LITETX_EFA_EAGER_MAX", "64", 1);
    setenv("LITETX_EFA_RAILS", "5", 1);
    lite_config_t cfg = lite_config_default();
    lite_ctx_t *ctx = NULL;
    int rc = lite_init(&cfg, &ctx);
    if (rc != 0) {
        const char *why = lite_init_error();
        CHECK(strstr(why, "LITETX_EFA_EAGER_MAX"),
              "init failed (%s) without naming the setting: %s", lite_strerror(rc), why);
        printf("refused as it should be: %s\n", why);
        return;
    }
    /* Accepted: then a key confirmation must still work (it did not: its reply was dropped). */
    mp_rank = lite_rank(ctx);
    int me = mp_rank;
    uint8_t *region = calloc(1, 4096);
    CHECK(region, "oom");
    lite_rdesc_t descs[2];
    lite_mr_t *mr = share_region(ctx, region, 4096, descs);
    lite_request_t *r;
    CHECK_RC(ctx, lite_write(ctx, 1 - me, mr, 0, &descs[1 - me], 0, 64, &r));
    CHECK_RC(ctx, lite_wait(ctx, r, 5000, NULL));
    CHECK(0, "LITETX_EFA_EAGER_MAX=64 was accepted");
}

/* A region of `len` bytes, shared like share_region: rank 0's holds byte i = i * mul + add (the
 * source), the other rank's zeros (the target); both ranks have it when this returns. */
static lite_mr_t *pattern_region(lite_ctx_t *ctx, size_t len, unsigned mul, unsigned add,
                                 uint8_t **region, lite_rdesc_t descs[2])
{
    uint8_t *r = malloc(len);
    CHECK(r, "oom");
    for (size_t i = 0; i < len; i++)
        r[i] = lite_rank(ctx) == 0 ? (uint8_t)(i * mul + add) : 0;
    lite_mr_t *mr = share_region(ctx, r, len, descs);
    CHECK_RC(ctx, lite_barrier(ctx, 30000));
    *region = r;
    return mr;
}

/* lite_efa_cfg_read over the environment as the core resolves it now (what lite_init hands the
 * backend). */
static int cfg_read_env(struct efa_cfg *cfg, char *why, size_t len)
{
    struct lite_tp_env *env = lite_tun_env_new("efa");
    int rc = env ? lite_efa_cfg_read(cfg, env, NULL, why, len) : -ENOMEM;
    lite_tun_env_free(env);
    return rc;
}

/* Each value of `var` in bad[] is a config error whose message names `var`. */
static void expect_config_errors(const char *var, const char *const *bad, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct efa_cfg cfg;
        char why[256] = "";
        setenv(var, bad[i], 1);
        int rc = cfg_read_env(&cfg, why, sizeof(why));
        CHECK(rc == -LITE_ERR_CONFIG, "%s=%s gave %d, not a config error", var, bad[i], rc);
        CHECK(strstr(why, var), "the error does not name the setting: %s", why);
    }
}

/* The target leaves its CQs unread for LITETX_EFA_IMM_YIELD_NS after writes with an
 * immediate arrived (efa.c, cq_poll_paced). */
static void imm_yield(void)
{
    /* The documented defaults: on for shm (its target copies under the writer's lock), off
     * elsewhere. */
    const char *prov = getenv("LITETX_EFA_PROVIDER");
    char saved[64];
    snprintf(saved, sizeof(saved), "%s", prov ? prov : "");
    static const struct {
        const char *prov;
        int64_t ns;
    } defaults[] = {{"shm", 500}, {"tcp", 0}, {"efa", 0}};
    for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++) {
        struct efa_cfg cfg;
        char why[256] = "";
        setenv("LITETX_EFA_PROVIDER", defaults[i].prov, 1);
        int rc = cfg_read_env(&cfg, why, sizeof(why));
        CHECK(rc == 0, "provider %s: config refused (%d): %s", defaults[i].prov, rc, why);
        CHECK(cfg.imm_yield_ns == defaults[i].ns, "provider %s: yield %lld ns by default, not %lld",
              defaults[i].prov, (long long)cfg.imm_yield_ns, (long long)defaults[i].ns);
    }
    if (saved[0])
        setenv("LITETX_EFA_PROVIDER", saved, 1);
    else
        unsetenv("LITETX_EFA_PROVIDER");
    static const char *const bad[] = {"100001", "-1", "fast", "5e2"};
    expect_config_errors("LITETX_EFA_IMM_YIELD_NS", bad, sizeof(bad) / sizeof(bad[0]));
    enum { N = 200, LEN = 65536, YIELD_US = 100 };
    char v[16];
    snprintf(v, sizeof(v), "%d", YIELD_US * 1000);
    setenv("LITETX_EFA_IMM_YIELD_NS", v, 1);
    lite_ctx_t *ctx = mp_init();
    int me = lite_rank(ctx);
    CHECK(lite_world_size(ctx) == 2, "needs 2 ranks");
    CHECK(ctx->tp->cfg.imm_yield_ns == YIELD_US * 1000, "the setting read back as %lld ns",
          (long long)ctx->tp->cfg.imm_yield_ns);
    uint8_t *region;
    lite_rdesc_t descs[2];
    lite_mr_t *mr = pattern_region(ctx, LEN, 7, 1, &region, descs);
    if (me == 0) {
        /* A 64 KiB write completes once its data is in place, which takes the target's
         * progress on both providers (shm copies it there, tcp;ofi_rxm acknowledges it). */
        double t0 = now_s();
        for (int i = 0; i < N; i++) {
            lite_request_t *r;
            CHECK_RC(ctx, lite_write_imm(ctx, 1, mr, 0, &descs[1], 0, LEN, 0x5E1D, &r));
            CHECK_RC(ctx, lite_wait(ctx, r, 30000, NULL));
        }
        double took = now_s() - t0;
        CHECK(took >= (N - 1) * YIELD_US * 1e-6, "%d chained writes took %.1f ms: not paced", N,
              took * 1e3);
        printf("rank 0: %d chained 64 KiB writes with an immediate took %.1f ms (>= %.1f)\n", N,
               took * 1e3, (N - 1) * YIELD_US * 1e-3);
    } else {
        CHECK_RC(ctx, lite_imm_wait(ctx, 0x5E1D, N, 60000));
        uint64_t left = 99;
        CHECK_RC(ctx, lite_imm_peek(ctx, 0x5E1D, &left));
        CHECK(left == 0, "%llu immediates more than writes", (unsigned long long)left);
        for (size_t i = 0; i < LEN; i++)
            CHECK(region[i] == (uint8_t)(i * 7 + 1), "byte %zu is %u", i, region[i]);
    }
    CHECK_RC(ctx, lite_barrier(ctx, 30000));
    CHECK_RC(ctx, lite_mr_dereg(ctx, mr));
    free(region);
    CHECK_RC(ctx, lite_finalize(ctx));
}

/* shm's writer copy (efa_rma.c): one stripe of a large write copied by the writer itself. */
static void writer_copy(void)
{
    /* The defaults, read with the variant's provider and rails put aside. */
    const char *prov = getenv("LITETX_EFA_PROVIDER"), *rails = getenv("LITETX_EFA_RAILS");
    char saved[64], saved_rails[16];
    snprintf(saved, sizeof(saved), "%s", prov ? prov : "");
    snprintf(saved_rails, sizeof(saved_rails), "%s", rails ? rails : "");
    unsetenv("LITETX_EFA_RAILS");
    static const struct {
        const char *prov, *value;
        bool on;
        uint32_t rails;
    } cases[] = {{"shm", NULL, true, 2},
                 {"shm", "0", false, 1},
                 {"tcp", NULL, false, 1},
                 {"tcp", "1", false, 1},
                 {"efa", NULL, false, 1}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct efa_cfg cfg;
        char why[256] = "";
        setenv("LITETX_EFA_PROVIDER", cases[i].prov, 1);
        if (cases[i].value)
            setenv("LITETX_EFA_WRITER_COPY", cases[i].value, 1);
        else
            unsetenv("LITETX_EFA_WRITER_COPY");
        int rc = cfg_read_env(&cfg, why, sizeof(why));
        CHECK(rc == 0, "provider %s: config refused (%d): %s", cases[i].prov, rc, why);
        CHECK(cfg.writer_copy == cases[i].on && cfg.rails == cases[i].rails,
              "provider %s, LITETX_EFA_WRITER_COPY=%s: writer copy %d with %u rails, not %d / %u",
              cases[i].prov, cases[i].value ? cases[i].value : "(unset)", cfg.writer_copy,
              cfg.rails, cases[i].on, cases[i].rails);
    }
    static const char *const bad[] = {"2", "yes", "-1"};
    expect_config_errors("LITETX_EFA_WRITER_COPY", bad, sizeof(bad) / sizeof(bad[0]));
    unsetenv("LITETX_EFA_WRITER_COPY");
    if (saved[0])
        setenv("LITETX_EFA_PROVIDER", saved, 1);
    else
        unsetenv("LITETX_EFA_PROVIDER");
    if (saved_rails[0])
        setenv("LITETX_EFA_RAILS", saved_rails, 1);

    /* The variant's own settings from here: 1 MiB writes are two stripes of 512 KiB (the
     * default LITETX_EFA_STRIPE_MIN); with a 4 KiB stripe minimum, 8193 bytes are 8192 + 1. */
    enum { N = 40, BIG = 1 << 20, ODD = 8193 };
    lite_ctx_t *ctx = mp_init();
    int me = lite_rank(ctx);
    CHECK(lite_world_size(ctx) == 2, "needs 2 ranks");
    struct lite_transport *t = ctx->tp;
    bool shm = !strcmp(t->cfg.provider, "shm");
    CHECK(t->writer_copy == (shm && t->nrails >= 2 && t->cfg.writer_copy),
          "provider %s with %u rails: writer copy %d", t->cfg.provider, t->nrails, t->writer_copy);
    uint8_t *region;
    lite_rdesc_t descs[2];
    lite_mr_t *mr = pattern_region(ctx, BIG, 13, 5, &region, descs);
    if (me == 0) {
        lite_request_t *win[N];
        for (int i = 0; i < N; i++)
            CHECK_RC(ctx, lite_write_imm(ctx, 1, mr, 0, &descs[1], 0, BIG, 0xC0B1, &win[i]));
        for (int i = 0; i < N; i++)
            CHECK_RC(ctx, lite_wait(ctx, win[i], 30000, NULL));
        uint64_t want = t->writer_copy ? N : 0;
        CHECK(t->self_copied == want, "%d writes of 1 MiB: %llu writer-copied stripes, not %llu", N,
              (unsigned long long)t->self_copied, (unsigned long long)want);
        /* A second stripe under 4 KiB would complete before its data is in place: not plain. */
        uint64_t before = t->self_copied, stripe_min = t->cfg.stripe_min;
        t->cfg.stripe_min = 4096;
        lite_request_t *r;
        CHECK_RC(ctx, lite_write_imm(ctx, 1, mr, 0, &descs[1], BIG - ODD, ODD, 0xC0B2, &r));
        CHECK_RC(ctx, lite_wait(ctx, r, 30000, NULL));
        t->cfg.stripe_min = stripe_min;
        CHECK(t->self_copied == before, "an 8193-byte write posted its 1-byte stripe plain");
        printf("rank 0: provider %s, %u rails: %llu writer-copied stripes\n", t->cfg.provider,
               t->nrails, (unsigned long long)t->self_copied);
    } else {
        CHECK_RC(ctx, lite_imm_wait(ctx, 0xC0B1, N, 60000));
        CHECK_RC(ctx, lite_imm_wait(ctx, 0xC0B2, 1, 60000));
        uint64_t left = 99;
        CHECK_RC(ctx, lite_imm_peek(ctx, 0xC0B1, &left));
        CHECK(left == 0, "%llu immediates more than writes", (unsigned long long)left);
        for (size_t i = 0; i < BIG; i++) {
            /* the last 8193 bytes are the source's first 8193 (the 8193-byte write, last) */
            size_t from = i < BIG - ODD ? i : i - (BIG - ODD);
            uint8_t want = (uint8_t)(from * 13 + 5);
            CHECK(region[i] == want, "byte %zu is %u, not %u", i, region[i], want);
        }
    }
    /* Read before the barrier: rank 0 may post its batch while this side is still in it. */
    uint64_t pulled = t->pulled_pages;
    CHECK_RC(ctx, lite_barrier(ctx, 30000));

    /* Paged batches: with writer copy the writer copies half of the pages itself and the target
     * reads the rest out of it (PULL), and the target still counts every page exactly, in a
     * short batch and in a longer one. Page i goes to page NP - 1 - i. */
    enum { PG = 1024, NP = 600 };
    static const uint32_t batches[] = {64, NP};
    for (size_t b = 0; b < sizeof(batches) / sizeof(batches[0]); b++) {
        uint32_t np = batches[b], imm = 0xC0C0 + (uint32_t)b;
        if (me == 0) {
            uint32_t src[NP], dst[NP];
            for (uint32_t i = 0; i < np; i++) {
                src[i] = i;
                dst[i] = np - 1 - i;
            }
            uint64_t before = t->self_pages;
            lite_request_t *r;
            CHECK_RC(ctx, lite_write_paged(ctx, 1, mr, src, &descs[1], dst, np, PG, imm,
                                           LITE_WRITE_WITH_IMM, &r));
            CHECK_RC(ctx, lite_wait(ctx, r, 30000, NULL));
            CHECK((t->self_pages > before) == t->writer_copy,
                  "a paged batch of %u pages: %llu pages copied by the writer (writer copy %d)", np,
                  (unsigned long long)(t->self_pages - before), t->writer_copy);
        } else {
            CHECK_RC(ctx, lite_imm_wait(ctx, imm, np, 60000));
            /* With writer copy the rest of the pages are read out of the writer by this side. */
            CHECK((t->pulled_pages > pulled) == t->writer_copy,
                  "a paged batch of %u pages: %llu pages pulled by the target (writer copy %d)", np,
                  (unsigned long long)(t->pulled_pages - pulled), t->writer_copy);
            pulled = t->pulled_pages;
            uint64_t left = 99;
            CHECK_RC(ctx, lite_imm_peek(ctx, imm, &left));
            CHECK(left == 0, "%llu immediates more than the %u pages", (unsigned long long)left,
                  np);
            for (size_t i = 0; i < (size_t)np * PG; i++) {
                size_t from = (np - 1 - i / PG) * PG + i % PG;
                uint8_t want = (uint8_t)(from * 13 + 5);
                CHECK(region[i] == want, "batch of %u pages: byte %zu is %u, not %u", np, i,
                      region[i], want);
            }
        }
        CHECK_RC(ctx, lite_barrier(ctx, 30000));
    }
    CHECK_RC(ctx, lite_mr_dereg(ctx, mr));
    free(region);
    CHECK_RC(ctx, lite_finalize(ctx));
}

static int write_and_wait(lite_ctx_t *ctx, lite_mr_t *mr, const lite_rdesc_t *to, size_t len,
                          int *rc)
{
    lite_request_t *r;
    *rc = lite_write(ctx, 1, mr, 0, to, 0, len, &r);
    if (*rc == 0)
        *rc = lite_wait(ctx, r, 30000, NULL);
    return *rc;
}

/* Rank 1 withdraws regions (efa_mr.c) whose keys rank 0, the writer, learned and still holds. */
static void dereg_race(void)
{
    setenv("LITETX_OP_TIMEOUT_MS", "1000", 1); /* bounds lite_mr_dereg */
    /* SETTLE_MS: rank 1 withdraws that long after a barrier, so rank 0 is in its nap by then
     * and not still in the barrier's progress, where it would answer INVAL at once (a 2-rank
     * barrier lets one side leave before the other has seen its message). */
    enum { BIG = 16 << 20, NAP_MS = 500, SETTLE_MS = 100 };
    lite_ctx_t *ctx = mp_init();
    int me = lite_rank(ctx);
    CHECK(lite_world_size(ctx) == 2, "needs 2 ranks");
    int rc;
    uint8_t *src; /* rank 0: the pattern; rank 1: phase 1's region */
    lite_rdesc_t d1[2], d2[2];
    lite_mr_t *mr1 = pattern_region(ctx, BIG, 11, 3, &src, d1);
    uint8_t *region2 = calloc(1, BIG);
    CHECK(region2, "oom");
    lite_mr_t *mr2 = share_region(ctx, region2, BIG, d2);
    if (me == 0) {
        /* Learn both regions' keys. */
        CHECK_RC(ctx, write_and_wait(ctx, mr1, &d1[1], BIG, &rc));
        CHECK_RC(ctx, write_and_wait(ctx, mr1, &d2[1], BIG, &rc));
    }
    CHECK_RC(ctx, lite_barrier(ctx, 30000));

    /* Phase 1: rank 0 makes no progress for longer than rank 1's op timeout. */
    if (me == 0) {
        usleep(2500 * 1000);
    } else {
        usleep(SETTLE_MS * 1000);
        double t0 = now_s();
        rc = lite_mr_dereg(ctx, mr1);
        double took = now_s() - t0;
        CHECK(rc == -ETIMEDOUT, "withdrawal without the writer's word gave %d (%s) in %.2f s", rc,
              lite_strerror(rc), took);
        CHECK(strstr(lite_last_error(ctx), "call again"), "detail: %s", lite_last_error(ctx));
        lite_rdesc_t still;
        CHECK_RC(ctx, lite_mr_desc(ctx, mr1, &still));
        printf("rank 1: withdrawal timed out after %.2f s, region still registered\n", took);
    }
    CHECK_RC(ctx, lite_barrier(ctx, 30000)); /* rank 0's progress answers meanwhile */
    if (me == 0) {
        /* The region whose withdrawal timed out refuses new ops. */
        write_and_wait(ctx, mr1, &d1[1], 64, &rc);
        CHECK(rc == -LITE_ERR_REMOTE_KEY, "write into a withdrawn region: %d (%s)", rc,
              lite_strerror(rc));
    } else {
        CHECK_RC(ctx, lite_mr_dereg(ctx, mr1)); /* called again: rank 0 has answered */
    }
    CHECK_RC(ctx, lite_barrier(ctx, 30000));

    /* Phase 2: rank 0 posts a write with the keys it holds, before its progress sees that the
     * region is being withdrawn. */
    if (me == 0) {
        usleep(NAP_MS * 1000);
        CHECK_RC(ctx, write_and_wait(ctx, mr1, &d2[1], BIG, &rc));
        write_and_wait(ctx, mr1, &d2[1], BIG, &rc);
        CHECK(rc == -LITE_ERR_REMOTE_KEY, "write after the withdrawal: %d (%s)", rc,
              lite_strerror(rc));
    } else {
        usleep(SETTLE_MS * 1000);
        double t0 = now_s();
        CHECK_RC(ctx, lite_mr_dereg(ctx, mr2));
        double took = now_s() - t0;
        /* Not before rank 0 woke up and made progress. */
        CHECK(took > NAP_MS / 3000.0, "withdrawal returned after %.3f s, before the writer's word",
              took);
        memset(region2, 0xEE, BIG);
        printf("rank 1: withdrawal took %.3f s (the writer slept %d ms)\n", took, NAP_MS);
    }
    CHECK_RC(ctx, lite_barrier(ctx, 30000));
    if (me == 1)
        for (size_t i = 0; i < BIG; i++)
            CHECK(region2[i] == 0xEE, "byte %zu is %#x: written after lite_mr_dereg returned", i,
                  region2[i]);
    if (me == 0) {
        CHECK_RC(ctx, lite_mr_dereg(ctx, mr1));
        CHECK_RC(ctx, lite_mr_dereg(ctx, mr2));
    }
    CHECK_RC(ctx, lite_finalize(ctx));
    free(src);
    free(region2);
}

/* This rank's own rail-0 shm region's lock (the backend maps peers' regions the same way,
 * efa_peer.c): NULL when the region's layout is not one the backend knows. */
static pthread_spinlock_t *own_region_lock(struct lite_transport *t)
{
    char name[300];
    size_t len = t->rail[0].name_len;
    if (!len || len >= sizeof(name))
        return NULL;
    memcpy(name, t->rail[0].name, len);
    name[len] = 0;
    const char *s = strstr(name, "://");
    int fd = shm_open(s ? s + 3 : name, O_RDWR, 0);
    if (fd < 0)
        return NULL;
    uint8_t *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return NULL;
    if (m[0] < 3 || m[0] > 5) /* struct smr_region versions 3-5: the lock at 24 bytes */
        return NULL;
    return (pthread_spinlock_t *)(m + 24);
}

static void dead_lock_holder(void)
{
    lite_ctx_t *ctx = mp_init();
    int me = lite_rank(ctx);
    CHECK(lite_world_size(ctx) == 2, "needs 2 ranks");
    struct lite_transport *t = ctx->tp;
    if (strcmp(t->cfg.provider, "shm") != 0)
        mp_skip("shm only (its regions' spinlocks)");
    /* Both ranks run the same libfabric: both know its region layout, or neither does. */
    if (!t->peers[1 - me].region[0])
        mp_skip("this libfabric's shm region layout is not one the backend knows");
    pthread_spinlock_t *lock = me == 1 ? own_region_lock(t) : NULL;
    CHECK(me == 0 || lock, "rank 1 cannot map its own region");
    CHECK_RC(ctx, lite_barrier(ctx, 30000));
    if (me == 1) {
        /* Taken as its own progress takes it; rank 0's next post to it spins from then on. */
        pthread_spin_lock(lock);
        usleep(300000);
        _exit(0); /* holding it, as a process killed in the middle of its progress */
    }
    usleep(100000);
    uint8_t b[64] = {0};
    double t0 = now_s();
    /* Spins in the provider until the watcher releases the lock (0.5 s after rank 1's exit). */
    int rc = lite_send(ctx, 1, 1, b, 8, 20000);
    double took = now_s() - t0;
    CHECK(rc == 0 || rc == -LITE_ERR_PEER_LOST, "send to the dying rank gave %d (%s)", rc,
          lite_strerror(rc));
    CHECK(took < 8.0, "the send returned after %.1f s", took);
    rc = lite_recv(ctx, 1, 1, b, sizeof(b), NULL, 20000);
    CHECK(rc == -LITE_ERR_PEER_LOST, "receive from the dead rank gave %d (%s): %s", rc,
          lite_strerror(rc), lite_last_error(ctx));
    CHECK(now_s() - t0 < 8.0, "the loss took %.1f s", now_s() - t0);
    printf("rank 0: the send returned after %.3f s; %s\n", took, lite_last_error(ctx));
    lite_finalize(ctx);
}

static void core_cfg(void)
{
    enum { CREDITS = 200, RNDV = 2048, LEN = 1500 };
    unsetenv("LITETX_CREDITS");
    unsetenv("LITETX_RNDV_THRESHOLD");
    unsetenv("LITETX_EFA_EAGER_MAX");
    lite_config_t cfg = lite_config_default();
    cfg.credits = CREDITS;
    cfg.rndv_threshold = RNDV;
    lite_ctx_t *ctx = NULL;
    int rc = lite_init(&cfg, &ctx);
    CHECK(rc == 0, "lite_init: %s: %s", lite_strerror(rc), lite_init_error());
    mp_rank = lite_rank(ctx);
    CHECK(lite_world_size(ctx) == 2, "needs 2 ranks");
    struct lite_transport *t = ctx->tp;
    CHECK(t->cfg.credits == CREDITS, "efa runs %u credits, the config says %d", t->cfg.credits,
          CREDITS);
    CHECK(t->cfg.eager_max == RNDV, "efa's eager_max is %zu, not the rendezvous threshold %d",
          t->cfg.eager_max, RNDV);
    size_t cap = t->rail[0].info->rx_attr->size;
    CHECK(t->nrx >= CREDITS || (cap && t->nrx + 64 >= cap),
          "%u eager buffers for %d credits (provider queue %zu)", t->nrx, CREDITS, cap);
    static uint8_t buf[CREDITS][LEN];
    if (mp_rank == 1) {
        for (uint32_t i = 0; i < CREDITS; i++) {
            mp_fill(buf[i], LEN, 1, 0, i);
            CHECK_RC(ctx, lite_send(ctx, 0, i, buf[i], LEN, 30000));
        }
    } else {
        idle(ctx, 200); /* every message is on its way or waiting here before a receive */
        for (uint32_t i = 0; i < CREDITS; i++) {
            size_t got = 0;
            CHECK_RC(ctx, lite_recv(ctx, 1, i, buf[i], LEN, &got, 30000));
            CHECK(got == LEN && mp_verify(buf[i], LEN, 1, 0, i) < 0, "message %u: %zu bytes%s", i,
                  got, got == LEN ? ", wrong content" : "");
        }
    }
    printf("rank %d: %u credits, eager_max %zu, %u eager buffers: %d messages ok\n", mp_rank,
           t->cfg.credits, t->cfg.eager_max, t->nrx, CREDITS);
    CHECK_RC(ctx, lite_barrier(ctx, 30000));
    lite_finalize(ctx);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mp_transport(), "efa") != 0)
        mp_skip("these cases are the efa backend's (LITETX_TRANSPORT=efa)");
    if (!strcmp(mode, "query_refused"))
        query_refused();
    else if (!strcmp(mode, "orphan_writes"))
        orphan_writes();
    else if (!strcmp(mode, "sends_to_lost"))
        sends_to_lost();
    else if (!strcmp(mode, "big_short"))
        big_short();
    else if (!strcmp(mode, "eager_min"))
        eager_min();
    else if (!strcmp(mode, "imm_yield"))
        imm_yield();
    else if (!strcmp(mode, "writer_copy"))
        writer_copy();
    else if (!strcmp(mode, "dereg_race"))
        dereg_race();
    else if (!strcmp(mode, "dead_lock_holder"))
        dead_lock_holder();
    else if (!strcmp(mode, "core_cfg"))
        core_cfg();
    else
        CHECK(0, "unknown mode '%s'", mode);
    return 0;
}
