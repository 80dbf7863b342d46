/*
 * context.c - lite_init() and lite_finalize(): resolve the config, pick and open the transport,
 * meet the other ranks through the bootstrap, connect every pair, and tear it all down again.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap.h"
#include "coll.h"
#include "context.h"
#include "credits.h"
#include "ctx.h"
#include "immcounter.h"
#include "mr.h"
#include "p2p.h"
#include "request.h"
#include "rma_emu.h"
#include "rndv.h"
#include "upcall.h"
#include "gpu_stage.h"
#include "registry.h"
#include "tp_select.h"
#include "tunables.h"

static _Thread_local char g_init_error[512];

LITE_API const char *lite_init_error(void)
{
    return g_init_error;
}

static const char *env_lookup(const char *name, void *arg)
{
    return getenv(name);
}

/* How long waits poll before sleeping in the backend: polling keeps latency low while each rank
 * has a core; sleeping keeps oversubscribed runs (more ranks than cores) moving. */
static int64_t default_spin_ns(int world_size)
{
    return (int64_t)lite_tun_long("LITETX_SPIN_US", world_size <= 2 ? 200 : 20) * 1000;
}

/* How long a spinning wait pauses after a poll that found nothing (LITETX_SPIN_PAUSE_NS), as a
 * count of CPU pause hints (lite_cpu_relax): the hint frees the core for its other hardware
 * thread, which may be running the very peer rank we wait for, and eases the poller's hold on
 * the cache lines the peer's next post needs; the price is up to that long before a message that
 * arrives meanwhile is seen. A pause takes a few ns on some CPUs and ~40 on others (~19 on the
 * AMD EPYC hosts of docs/EFA.md), so the count is timed here, at init. Off by default: where
 * the two ranks do not share a core, the reaction time costs more than the pause gives
 * (docs/CONFIG.md has the measurements). */
#define SPIN_PAUSE_NS_DEFAULT 0

static uint8_t default_spin_pause(void)
{
    long budget = lite_tun_long("LITETX_SPIN_PAUSE_NS", SPIN_PAUSE_NS_DEFAULT);
    if (budget == 0)
        return 0;
    int64_t best = INT64_MAX;
    for (int k = 0; k < 3; k++) { /* the least of three: a preempted try reads long */
        int64_t t0 = lite_now_ns();
        lite_cpu_relax(64);
        int64_t t = lite_now_ns() - t0;
        best = t < best ? t : best;
    }
    int64_t n = best > 0 ? (budget * 64 + best / 2) / best : 255;
    n = n < 1 ? 1 : n > 255 ? 255 : n;
    LITE_DEBUG("spin pause: %lld hints (~%ld ns; 64 took %lld ns)", (long long)n, budget,
               (long long)best);
    return (uint8_t)n;
}

/* Ranks on this host, from the launcher (litetx-run, Open MPI, torchrun), or 0 if unknown. */
static long local_ranks(void)
{
    const char *names[] = {"LITETX_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "LOCAL_WORLD_SIZE"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *v = getenv(names[i]);
        char *end;
        long n = v && *v ? strtol(v, &end, 10) : 0;
        if (n > 0 && *end == 0)
            return n;
    }
    return 0;
}

/* The CPUs this host gives the job: the cgroup's cpuset (a container's share), v2 or v1, else
 * the CPUs online. Not this process's affinity: launchers pin each rank to its own core
 * (mpirun --bind-to core), and one CPU per rank is not oversubscription. */
static long job_cpus(void)
{
    long n = 0;
    char line[512], path[640];
    FILE *f = fopen("/proc/self/cgroup", "r");
    while (f && n <= 0 && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "0::", 3))
            snprintf(path, sizeof(path), "/sys/fs/cgroup%s/cpuset.cpus.effective", line + 3);
        else if (strstr(line, ":cpuset:"))
            snprintf(path, sizeof(path), "/sys/fs/cgroup/cpuset%s/cpuset.effective_cpus",
                     strstr(line, ":cpuset:") + 8);
        else
            continue;
        FILE *c = fopen(path, "r");
        if (c) {
            if (fgets(line, sizeof(line), c))
                n = lite_cpulist_count(line);
            fclose(c);
        }
    }
    if (f)
        fclose(f);
    return n > 0 ? n : sysconf(_SC_NPROCESSORS_ONLN);
}

/* Whether a polling wait should yield the CPU after each poll: when this host runs more ranks
 * than it gives the job CPUs, a rank that polls takes the CPU from one that has work.
 * LITETX_YIELD=1 / 0 forces it (=1 for ranks crowded onto fewer CPUs by pinning). */
static bool default_yield(void)
{
    const char *v = getenv("LITETX_YIELD");
    if (v && *v)
        return lite_tun_long("LITETX_YIELD", 0) == 1; /* anything else fails lite_init */
    long local = local_ranks(), cpus = job_cpus();
    if (local > 0 && local > cpus) {
        LITE_INFO("%ld ranks on this host's %ld CPUs: polling waits yield the CPU", local, cpus);
        return true;
    }
    return false;
}

/* The bootstrap header: u8 'L' | u8 'X' | u8 version | u8 0 | u32 credits | u64 rendezvous
 * threshold. Peers that disagree on these would refuse each other's traffic later, as protocol
 * errors; here it is a configuration error that names the rank. */
void lite_boot_hdr(const struct lite_ctx *ctx, uint8_t *h)
{
    memset(h, 0, LITE_BOOT_HDR_LEN);
    h[0] = 'L';
    h[1] = 'X';
    h[2] = 1;
    lite_put32(h + 4, ctx->credits_max);
    lite_put64(h + 8, (uint64_t)ctx->rndv_threshold);
}

/* Check every rank's header against ours and leave the transport's blobs in blobs/lens. */
int lite_boot_check(const struct lite_ctx *ctx, const uint8_t *mine, void **blobs, size_t *lens,
                    char *why, size_t why_len)
{
    for (int r = 0; r < ctx->s.world_size; r++) {
        uint8_t *h = blobs[r];
        if (lens[r] < LITE_BOOT_HDR_LEN || memcmp(h, mine, 4) != 0) {
            lite_fmt(why, why_len, "rank %d published no liblitetx %s address of this version", r,
                     ctx->ops.name);
            return -LITE_ERR_PROTOCOL;
        }
        if (memcmp(h, mine, LITE_BOOT_HDR_LEN) != 0) {
            lite_fmt(why, why_len,
                     "rank %d runs credits %u and rndv_threshold %llu, this rank %u and %llu: "
                     "every rank must use the same (LITETX_CREDITS, LITETX_RNDV_THRESHOLD)",
                     r, lite_get32(h + 4), (unsigned long long)lite_get64(h + 8), ctx->credits_max,
                     (unsigned long long)ctx->rndv_threshold);
            return -LITE_ERR_CONFIG;
        }
        memmove(h, h + LITE_BOOT_HDR_LEN, lens[r] - LITE_BOOT_HDR_LEN);
        lens[r] -= LITE_BOOT_HDR_LEN;
    }
    return 0;
}

static int init_fail(struct lite_ctx *ctx, int rc, const char *why)
{
    lite_fmt(g_init_error, sizeof(g_init_error), "%s", why);
    LITE_ERROR("init failed: %s (%s)", why, lite_strerror(rc));
    lite_finalize(ctx);
    return rc;
}

LITE_API int lite_init(const lite_config_t *cfg, lite_ctx_t **out)
{
    char why[512] = "";
    g_init_error[0] = 0;
    if (!out) {
        lite_fmt(g_init_error, sizeof(g_init_error), "lite_init: NULL output pointer");
        return -EINVAL;
    }
    *out = NULL;
    struct lite_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx)
        return -ENOMEM;
    /* The modules above that lower ones reach through the context (ctx.h). */
    ctx->up = &lite_core_upcalls;
    ctx->peer_fail_run = lite_peer_fail_run;
    ctx->stage_end = lite_stage_req_end;
    ctx->stage_coll_end = lite_stage_coll_end;
    lite_env_error_reset();
    int rc = lite_settings_resolve(cfg, env_lookup, NULL, &ctx->s, why, sizeof(why));
    if (rc) {
        free(ctx);
        lite_fmt(g_init_error, sizeof(g_init_error), "%s", why);
        LITE_ERROR("invalid configuration: %s", why);
        return rc;
    }
    lite_log_set_level(ctx->s.log_level);
    lite_log_ctx_add(ctx->s.log_level, 1);
    ctx->log_counted = true;
    /* A misspelt variable is silently ignored otherwise; every rank normally has the same
     * environment, so rank 0 says it for the job. */
    if (ctx->s.rank == 0)
        lite_tunables_warn_unknown(environ, 0);
    ctx->spin_ns = default_spin_ns(ctx->s.world_size);
    ctx->yield_polls = default_yield();
    ctx->spin_pause = default_spin_pause();
    lite_imm_setup(ctx);
    ctx->stage_chunk = lite_stage_chunk_env();
    /* A tuning variable that does not parse fails the start, as a bad key does (one policy for
     * every LITETX_* variable); the backend's are checked before it opens. */
    if (lite_env_error()[0])
        return init_fail(ctx, -LITE_ERR_CONFIG, lite_env_error());
    /* Every core variable against its type and range (tunables.c), the ones above included. */
    struct lite_tp_env *env = lite_tun_env_new(NULL);
    if (!env)
        return init_fail(ctx, -ENOMEM, "out of memory");
    if (lite_tun_env_error(env)) {
        lite_fmt(why, sizeof(why), "%s", lite_tun_env_error(env));
        lite_tun_env_free(env);
        return init_fail(ctx, -LITE_ERR_CONFIG, why);
    }
    lite_tun_env_free(env);
    ctx->peers = calloc((size_t)ctx->s.world_size, sizeof(struct lite_peer));
    if (!ctx->peers)
        return init_fail(ctx, -ENOMEM, "out of memory");
    rc = lite_credit_init(ctx, why, sizeof(why));
    if (rc)
        return init_fail(ctx, rc, why);

    size_t count;
    const struct lite_transport_ops *const *table = lite_registry(&count);
    const struct lite_transport_ops *chosen;
    /* Security on: only a transport that encrypts, never a plaintext fallback. */
    static const char *const sec_need[] = {"", "security is ca: every connection encrypted",
                                           "security is psk: every connection encrypted"};
    rc = lite_transport_select_caps(table, count, ctx->s.transport,
                                    ctx->s.sec.mode ? LITE_CAP_ENCRYPTED : 0,
                                    sec_need[ctx->s.sec.mode], &chosen, why, sizeof(why));
    if (rc)
        return init_fail(ctx, rc, why);
    /* A fallback of auto is said loudly once per job, not by every rank. */
    if (why[0]) {
        if (ctx->s.rank == 0)
            LITE_WARN("transport auto: using %s: %s", chosen->name, why);
        else
            LITE_INFO("transport auto: using %s: %s", chosen->name, why);
    }
    rc = lite_transport_fill(chosen, &ctx->ops);
    if (rc)
        return init_fail(ctx, rc, "transport table has a wrong ABI version");
    /* One-sided ops the backend lacks are carried as messages by the core (rma_emu.c); the
     * core then has the capabilities its emulation provides. */
    uint32_t emu_caps;
    struct lite_transport_ops view = ctx->ops;
    /* Tests and comparisons: the core's emulation even where the backend has one-sided ops. */
    if (lite_tun_long("LITETX_TEST_CORE_RMA", 0) == 1)
        view.rma_post = NULL;
    ctx->emu = lite_emu_needed(&view, &emu_caps);
    ctx->ops.caps |= emu_caps;
    LITE_INFO("rank %d/%d: transport %s%s", ctx->s.rank, ctx->s.world_size, ctx->ops.name,
              ctx->emu ? " (one-sided ops emulated by the core)" : "");
    /* A threshold nobody configured is the backend's measured preference, if it states one. */
    if (ctx->s.rndv_default && ctx->ops.rndv_threshold_pref > 0 &&
        ctx->ops.rndv_threshold_pref <= INT_MAX) {
        ctx->s.rndv_threshold = (int)ctx->ops.rndv_threshold_pref;
        ctx->rndv_threshold = ctx->ops.rndv_threshold_pref;
    }
    LITE_INFO("rank %d: rendezvous from %zu bytes (%s)", ctx->s.rank, ctx->rndv_threshold,
              ctx->s.rndv_default
                  ? (ctx->ops.rndv_threshold_pref ? "the backend's preference" : "the default")
                  : "configured");

    /* The chosen backend's variables, read and checked once, before anyone waits on this rank;
     * the backend gets them from this snapshot (params.env), never from the environment. */
    env = lite_tun_env_new(chosen->name);
    if (!env)
        return init_fail(ctx, -ENOMEM, "out of memory");
    if (lite_tun_env_error(env)) {
        lite_fmt(why, sizeof(why), "%s", lite_tun_env_error(env));
        lite_tun_env_free(env);
        return init_fail(ctx, -LITE_ERR_CONFIG, why);
    }

    int64_t deadline = lite_deadline_ns(ctx->s.init_timeout_ms);
    struct lite_bootstrap *bs = NULL;
    rc = lite_bootstrap_connect(&ctx->s, deadline, &bs, why, sizeof(why));
    if (rc) {
        lite_tun_env_free(env);
        return init_fail(ctx, rc, why);
    }

    char host[LITE_HOST_MAX];
    lite_bootstrap_local_host(bs, host, sizeof(host));
    struct lite_transport_params params = {
        .size = sizeof(params),
        .rank = ctx->s.rank,
        .world_size = ctx->s.world_size,
        .bind_host = host,
        .core = (struct lite_core *)ctx,
        .up = &lite_core_upcalls,
        .log_level = ctx->s.log_level,
        .credits = ctx->credits_max,
        .rndv_threshold = ctx->rndv_threshold,
        .crowded = ctx->yield_polls,
        .security = &ctx->s.sec,
        .reconnect_timeout_ms = ctx->s.reconnect_timeout_ms,
        .op_timeout_ms = ctx->s.op_timeout_ms,
        .env = env,
    };
    rc = ctx->ops.open(&params, &ctx->tp);
    lite_tun_env_free(env); /* the backend kept what it needs */
    if (rc) {
        lite_bootstrap_close(bs);
        lite_fmt(why, sizeof(why), "transport %s failed to open: %s", ctx->ops.name,
                 lite_strerror(rc));
        return init_fail(ctx, rc, why);
    }
    if (lite_env_error()[0]) {
        lite_bootstrap_close(bs);
        return init_fail(ctx, -LITE_ERR_CONFIG, lite_env_error());
    }

    uint8_t blob[LITE_BOOT_BLOB_MAX];
    size_t blob_len = LITE_TRANSPORT_ADDR_MAX;
    void **blobs = NULL;
    size_t *lens = NULL;
    lite_boot_hdr(ctx, blob);
    rc = ctx->ops.addr_get(ctx->tp, blob + LITE_BOOT_HDR_LEN, &blob_len);
    if (rc)
        lite_fmt(why, sizeof(why), "transport %s: no local address: %s", ctx->ops.name,
                 lite_strerror(rc));
    if (!rc)
        rc = lite_bootstrap_allgather(bs, blob, LITE_BOOT_HDR_LEN + blob_len, deadline, &blobs,
                                      &lens, why, sizeof(why));
    if (!rc) {
        rc = lite_boot_check(ctx, blob, blobs, lens, why, sizeof(why));
        if (!rc)
            rc = ctx->ops.connect_all(ctx->tp, (const void *const *)blobs, lens, deadline, why,
                                      sizeof(why));
        lite_bootstrap_free_blobs(blobs, lens, ctx->s.world_size);
    }
    if (!rc)
        rc = lite_bootstrap_barrier(bs, deadline, why, sizeof(why));
    lite_bootstrap_close(bs);
    if (rc)
        return init_fail(ctx, rc, why);
    ctx->ready = true;
    *out = ctx;
    return 0;
}

LITE_API int lite_finalize(lite_ctx_t *ctx)
{
    if (!ctx)
        return 0;
    int rc = 0;
    if (ctx->tp) {
        /* Leave together, so no rank closes a connection another still reads from. Not after a
         * failed init: the others may be running, and a stray barrier token would confuse
         * their first collective. */
        if (ctx->fail_due) /* a failure a backend met inside the last post (FAILURES) */
            lite_peer_fail_run(ctx);
        if (ctx->ready && !lite_any_peer_lost(ctx))
            rc = lite_barrier(ctx, ctx->s.op_timeout_ms);
        /* A peer that finalized had completed this barrier, which needs every rank to have
         * entered it: its orderly close ends the barrier for us too. */
        if (rc == -ESHUTDOWN)
            rc = 0;
        lite_mr_close(ctx);
        ctx->ops.close(ctx->tp);
        ctx->tp = NULL;
    }
    lite_emu_fini(ctx);
    lite_mr_fini(ctx);
    lite_rndv_fini(ctx); /* before coll_fini, which frees requests rndv.c may still list */
    lite_coll_fini(ctx);
    lite_imm_fini(ctx);
    lite_p2p_fini(ctx);
    if (ctx->log_counted)
        lite_log_ctx_add(ctx->s.log_level, -1);
    free(ctx->peers);
    free(ctx);
    return rc;
}

LITE_API int lite_rank(const lite_ctx_t *ctx)
{
    return ctx ? ctx->s.rank : -EINVAL;
}

LITE_API int lite_world_size(const lite_ctx_t *ctx)
{
    return ctx ? ctx->s.world_size : -EINVAL;
}

LITE_API const char *lite_transport_name(const lite_ctx_t *ctx)
{
    return ctx ? ctx->ops.name : "";
}

LITE_API const char *lite_last_error(const lite_ctx_t *ctx)
{
    return ctx ? ctx->last_error : "";
}

LITE_API int lite_peer_query(const lite_ctx_t *ctx, int peer, lite_peer_stats_t *out)
{
    if (!ctx || !out || out->struct_size < offsetof(lite_peer_stats_t, reserved) || peer < 0 ||
        peer >= ctx->s.world_size)
        return -EINVAL;
    uint32_t size = out->struct_size < sizeof(*out) ? out->struct_size : (uint32_t)sizeof(*out);
    lite_peer_stats_t st;
    memset(&st, 0, sizeof(st));
    st.struct_size = size;
    int rc = 0;
    if (ctx->ops.peer_stats && peer != ctx->s.rank)
        rc = ctx->ops.peer_stats(ctx->tp, peer, &st.breaks, &st.resumes);
    memcpy(out, &st, size);
    return rc;
}
