/*
 * efa_cfg.c - the EFA backend's settings (environment) and the provider lookup: the fi_getinfo
 * hints that say what the backend needs (RDM endpoints, messages, tagged messages, RMA with
 * remote CQ data, send-after-send order) and what it copes with (every mr_mode bit below, the
 * FI_CONTEXT/FI_CONTEXT2 modes).
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "efa.h"

#define DEFAULT_PROVIDER "efa"
#define DEFAULT_EAGER    (64 * 1024)
#define DEFAULT_STRIPE   (256 * 1024)

/* A variable's value as the core resolved and checked it (type and range: the table below),
 * else def. In probe an invalid value comes back as -LITE_ERR_CONFIG with the core's message. */
static int env_u64(const struct lite_tp_env *env, const char *name, uint64_t def, uint64_t *out,
                   char *why, size_t why_len)
{
    struct lite_tun_val v;
    *out = def;
    int rc = env && env->get ? env->get(env, name, &v) : 0;
    if (rc == -LITE_ERR_CONFIG) {
        lite_fmt(why, why_len, "%s", v.str);
        return rc;
    }
    if (rc == 1)
        *out = (uint64_t)v.num;
    return 0;
}

static int provider_from_env(const struct lite_tp_env *env, struct efa_cfg *cfg, char *why,
                             size_t why_len)
{
    const char *v = lite_tp_str(env, "LITETX_EFA_PROVIDER");
    if (!v || !*v)
        v = DEFAULT_PROVIDER;
    if (lite_efa_provider_name(v, cfg->provider, sizeof(cfg->provider)) != 0) {
        lite_fmt(why, why_len, "LITETX_EFA_PROVIDER=\"%s\": not a libfabric provider name", v);
        return -LITE_ERR_CONFIG;
    }
    return 0;
}

int lite_efa_cfg_read(struct efa_cfg *cfg, const struct lite_tp_env *env,
                      const struct lite_transport_params *prm, char *why, size_t why_len)
{
    memset(cfg, 0, sizeof(*cfg));
    int rc = provider_from_env(env, cfg, why, why_len);
    /* Zero so that a failed read (rc set) never leaves one read uninitialised below. */
    uint64_t rails = 0, eager = 0, credits = 0, rndv = DEFAULT_EAGER, stripe = 0, ka = 0, pto = 0,
             poll = 0, hmem = 0, dcb = 0, yield = 0, wcopy = 0, imm = 0, clean = 1;
    /* The core sends eagerly below its rendezvous threshold; buffers need not be larger. The
     * core resolved it and the credits (struct, JSON file, environment) and hands them in; a
     * probe, which has no params, sizes nothing and takes the defaults. */
    if (prm && prm->rndv_threshold)
        rndv = prm->rndv_threshold;
    credits = prm && prm->credits ? prm->credits : 64;
    /* shm copies a write on one CPU: the target's, inside its progress. A plain write on a
     * domain without RMA ordering is copied by the writer instead, inside its post ("fast
     * RMA"), so a large write cut in two, one stripe copied by each side, moves on both CPUs at
     * once (docs/EFA.md, Writer copy). The two stripes need two rails: each side holds the
     * target endpoint's lock while it copies. */
    const bool shm = strcmp(cfg->provider, "shm") == 0;
    if (!rc)
        rc = env_u64(env, "LITETX_EFA_WRITER_COPY", shm, &wcopy, why, why_len);
    if (!rc)
        rc = env_u64(env, "LITETX_EFA_RAILS", shm && wcopy ? 2 : 1, &rails, why, why_len);
    /* Control messages travel in eager buffers too (a key confirmation's reply is 96 bytes with
     * 8 rails): below LITE_EFA_EAGER_MIN one could not be sent and its peer would wait for
     * ever. A small rendezvous threshold only lowers the default to that floor. */
    uint64_t eager_def = rndv < DEFAULT_EAGER ? rndv : DEFAULT_EAGER;
    if (eager_def < LITE_EFA_EAGER_MIN)
        eager_def = LITE_EFA_EAGER_MIN;
    if (!rc)
        rc = env_u64(env, "LITETX_EFA_EAGER_MAX", eager_def, &eager, why, why_len);
    if (!rc)
        rc = env_u64(env, "LITETX_EFA_STRIPE_MIN", DEFAULT_STRIPE, &stripe, why, why_len);
    if (!rc)
        rc = env_u64(env, "LITETX_EFA_KEEPALIVE_MS", 1000, &ka, why, why_len);
    if (!rc)
        rc = env_u64(env, "LITETX_EFA_PEER_TIMEOUT_MS", 30000, &pto, why, why_len);
    /* LITETX_EFA_IMM: how the immediate travels (the index of auto, cq64, cq32, msg: enum
     * efa_imm_mode). auto = the best the provider offers; the others force a path (cq32 is for
     * providers with 4 bytes of CQ data; forcing it tests it). */
    if (!rc)
        rc = env_u64(env, "LITETX_EFA_IMM", 0, &imm, why, why_len);
    if (!rc)
        /* Poll by default (CQs without wait objects: the fastest path of every provider; over
         * tcp;ofi_rxm a wait object puts the tcp provider in its epoll mode, ~1.4 us more per
         * message). An idle wait polls 20 ms before it naps (efa_open), which keeps large
         * transfers moving (docs/EFA.md, Progress). */
        rc = env_u64(env, "LITETX_EFA_POLL", 1, &poll, why, why_len);
    /* Device memory by default only where GPUs are the point (the efa provider): shm's FI_HMEM
     * variant gives up its fast host-memory paths (inject, CMA). */
    if (!rc)
        rc =
            env_u64(env, "LITETX_EFA_HMEM", strcmp(cfg->provider, "efa") == 0, &hmem, why, why_len);
    /* One acknowledgement for a run of writes: by default where a delivery-complete write costs
     * an acknowledgement message of its own (tcp: ~25 % of 64 KiB write bandwidth); shm above
     * 4 KiB completes a write after the target's copy whatever the flag (docs/EFA.md). */
    if (!rc)
        rc = env_u64(env, "LITETX_EFA_DC_BATCH", strcmp(cfg->provider, "tcp;ofi_rxm") == 0, &dcb,
                     why, why_len);
    /* shm's target copies each write inside its progress, holding the lock the writer's next
     * post needs: a target that polls again at once takes the writes one per lock round trip.
     * Leaving its CQs alone a moment after writes arrived lets the writer queue several
     * (docs/EFA.md, Progress: 64 KiB writes went from ~0.87x of fabtests to ~0.96x). */
    if (!rc)
        rc = env_u64(env, "LITETX_EFA_IMM_YIELD_NS", shm ? 500 : 0, &yield, why, why_len);
    if (!rc)
        rc = env_u64(env, "LITETX_EFA_SHM_CLEAN", 1, &clean, why, why_len);
    if (rc)
        return rc;
    cfg->rails = (uint32_t)rails;
    cfg->eager_max = (size_t)eager;
    cfg->credits = (uint32_t)credits;
    cfg->stripe_min = stripe;
    cfg->keepalive_ms = (int)ka;
    cfg->peer_timeout_ms = (int)pto;
    cfg->no_wait_fd = poll != 0;
    cfg->hmem = hmem != 0;
    cfg->dc_batch = dcb != 0;
    cfg->imm_yield_ns = (int64_t)yield;
    cfg->writer_copy = shm && wcopy != 0;
    cfg->imm = (int)imm;
    cfg->shm_clean = clean != 0;
    return 0;
}

struct fi_info *lite_efa_hints(const struct efa_cfg *cfg, bool order_saw, bool want_hmem,
                               bool want_source)
{
    struct fi_info *h = fi_allocinfo();
    if (!h)
        return NULL;
    h->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_READ | FI_WRITE | FI_SEND | FI_RECV |
              FI_REMOTE_READ | FI_REMOTE_WRITE;
    if (want_hmem)
        h->caps |= FI_HMEM;
    if (want_source)
        h->caps |= FI_SOURCE;
    /* Every op context starts with a struct fi_context2. */
    h->mode = FI_CONTEXT | FI_CONTEXT2;
    h->ep_attr->type = FI_EP_RDM;
    /* Messages to a peer must be delivered in posting order (the sequence numbers in the header
     * only restore completion order). Any write order turns off shm's writer-side copy (its
     * "fast RMA"), so that lookup never asks for one. */
    uint64_t order = FI_ORDER_SAS | (order_saw && !cfg->writer_copy ? FI_ORDER_SAW : 0);
    h->tx_attr->msg_order = order;
    h->rx_attr->msg_order = order;
    h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
                              FI_MR_ENDPOINT | (want_hmem ? FI_MR_HMEM : 0);
    h->domain_attr->threading = FI_THREAD_DOMAIN;
    h->domain_attr->resource_mgmt = FI_RM_ENABLED;
    h->domain_attr->av_type = FI_AV_TABLE;
    h->fabric_attr->prov_name = strdup(cfg->provider);
    if (!h->fabric_attr->prov_name) {
        fi_freeinfo(h);
        return NULL;
    }
    return h;
}

bool lite_efa_sockaddr_format(uint32_t f)
{
    return f == FI_SOCKADDR || f == FI_SOCKADDR_IN || f == FI_SOCKADDR_IN6;
}

/* One lookup with the given hint variant; node != NULL binds a socket-addressed provider. */
static int lookup(const struct efa_cfg *cfg, const char *node, bool saw, bool hmem, bool source,
                  struct fi_info **out)
{
    struct fi_info *hints = lite_efa_hints(cfg, saw, hmem, source);
    if (!hints)
        return -FI_ENOMEM;
    int rc = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), node, NULL,
                        node ? FI_SOURCE : 0, hints, out);
    fi_freeinfo(hints);
    return rc;
}

int lite_efa_getinfo(const struct efa_cfg *cfg, const char *bind_host, struct fi_info **out,
                     char *why, size_t why_len)
{
#ifdef LITE_EFA_CUDA
    const bool try_hmem = cfg->hmem;
#else
    const bool try_hmem = false;
#endif
    /* Most wanted first: device memory, then without; send-after-write order, then without. */
    static const bool variants[4][2] = {{true, true}, {true, false}, {false, true}, {false, false}};
    struct fi_info *info = NULL;
    int rc = -FI_ENODATA;
    bool saw = false, hmem = false;
    for (int i = 0; i < 4 && rc; i++) {
        saw = variants[i][0];
        hmem = variants[i][1];
        if (hmem && !try_hmem)
            continue;
        rc = lookup(cfg, NULL, saw, hmem, false, &info);
    }
    if (rc) {
        lite_fmt(why, why_len,
                 "libfabric has no '%s' provider with RDM endpoints, tagged messages and RMA "
                 "(fi_getinfo: %s; `fi_info -l` lists providers, LITETX_EFA_PROVIDER picks one)",
                 cfg->provider, fi_strerror(-rc));
        return -ENODEV;
    }
    /* Two bytes of CQ data cannot carry an immediate, four cannot carry the sender too: then
     * ask for FI_SOURCE so the target learns who wrote. */
    size_t cqd = info->domain_attr->cq_data_size;
    if (cqd >= 4 && (cqd < 8 || cfg->imm == IMM_CQDATA32)) {
        struct fi_info *src = NULL;
        if (lookup(cfg, NULL, saw, hmem, true, &src) == 0) {
            fi_freeinfo(info);
            info = src;
        }
    }
    /* Socket-addressed providers: bind to the interface that reaches the root. */
    if (bind_host && *bind_host && lite_efa_sockaddr_format(info->addr_format)) {
        struct fi_info *bound = NULL;
        bool source = (info->caps & FI_SOURCE) != 0;
        if (lookup(cfg, bind_host, saw, hmem, source, &bound) == 0) {
            fi_freeinfo(info);
            info = bound;
        } else {
            LITE_WARN("%s: provider %s cannot bind %s; using its first interface", EFA_LOG,
                      cfg->provider, bind_host);
        }
    }
    if (info->domain_attr->mr_key_size > 8) {
        lite_fmt(why, why_len, "provider %s uses %zu-byte memory keys; at most 8 are supported",
                 cfg->provider, info->domain_attr->mr_key_size);
        fi_freeinfo(info);
        return -ENOTSUP;
    }
    *out = info;
    return 0;
}

/* The variables this backend reads (litetx-info --config; docs/CONFIG.md). */
#define B LITE_TUN_BACKEND
const struct lite_tunable lite_efa_tunables[] = {
    {"LITETX_EFA_PROVIDER", "efa", "libfabric provider: efa, tcp, shm or any name", LITE_TUN_STRING,
     B, 0, 0, NULL},
    {"LITETX_EFA_RAILS", "1 (2 on shm)", "rails per process", LITE_TUN_SIZE, B, 1, LITE_MAX_RAILS,
     NULL},
    {"LITETX_EFA_WRITER_COPY", "1 on shm",
     "shm: the writer copies one of a large write's two stripes", LITE_TUN_BOOL, B, 0, 1, NULL},
    {"LITETX_EFA_STRIPE_MIN", "262144", "an op of at least twice this is striped over the rails",
     LITE_TUN_SIZE, B, 4096, 1ll << 40, NULL},
    {"LITETX_EFA_EAGER_MAX", "min(65536, rndv)", "largest payload sent inline (bytes)",
     LITE_TUN_SIZE, B, LITE_EFA_EAGER_MIN, 1 << 20, NULL},
    /* the order of the words is enum efa_imm_mode's (0: auto) */
    {"LITETX_EFA_IMM", "auto", "how the immediate travels", LITE_TUN_ENUM, B, 0, 0,
     "auto|cq64|cq32|msg"},
    {"LITETX_EFA_DC_BATCH", "1 on tcp, else 0", "writes below 256 KiB share acknowledgements",
     LITE_TUN_BOOL, B, 0, 1, NULL},
    {"LITETX_EFA_IMM_YIELD_NS", "500 on shm, else 0",
     "leave the CQs unread this long after immediates", LITE_TUN_SIZE, B, 0, 100000, NULL},
    {"LITETX_EFA_POLL", "1", "1: poll, then nap; 0: poll 200 us, then sleep on wait fds",
     LITE_TUN_BOOL, B, 0, 1, NULL},
    {"LITETX_EFA_KEEPALIVE_MS", "1000", "liveness message after this much silence (0: off)",
     LITE_TUN_SIZE, B, 0, 3600000, NULL},
    {"LITETX_EFA_PEER_TIMEOUT_MS", "30000", "posts refused this long with no liveness: peer lost",
     LITE_TUN_SIZE, B, 100, 86400000, NULL},
    {"LITETX_EFA_HMEM", "1 on efa, else 0", "ask the provider for FI_HMEM", LITE_TUN_BOOL, B, 0, 1,
     NULL},
    {"LITETX_EFA_SHM_CLEAN", "1", "0: do not remove dead processes' shm regions at open",
     LITE_TUN_BOOL, B, 0, 1, NULL},
    {NULL, NULL, NULL, 0, 0, 0, 0, NULL},
};
#undef B
