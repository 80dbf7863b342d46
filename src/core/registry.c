/*
 * registry.c - the ordered table of compiled-in transports, selection with fallback, and the
 * -ENOSYS defaults for ops a backend leaves NULL.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "registry.h"
#include "lite_int.h"
#include "tunables.h"

/* Each backend exports one ops table; the table order is the "auto" preference order. */
#ifdef LITE_HAVE_RDMA
extern const struct lite_transport_ops lite_rdma_ops;
#endif
#ifdef LITE_HAVE_EFA
extern const struct lite_transport_ops lite_efa_ops;
#endif
#ifdef LITE_HAVE_NCCL
extern const struct lite_transport_ops lite_nccl_ops;
#endif
#ifdef LITE_HAVE_QUIC
extern const struct lite_transport_ops lite_quic_ops;
#endif
#ifdef LITE_HAVE_TCP
extern const struct lite_transport_ops lite_tcp_ops;
#endif
#ifdef LITE_HAVE_LOOP
extern const struct lite_transport_ops lite_loop_ops;
#endif

static const struct lite_transport_ops *const g_table[] = {
#ifdef LITE_HAVE_RDMA
    &lite_rdma_ops,
#endif
#ifdef LITE_HAVE_EFA
    &lite_efa_ops,
#endif
#ifdef LITE_HAVE_NCCL
    /* No RDMA fabric: device buffers over NCCL (within a node, or its sockets); usable only
     * with a CUDA device and libnccl.so.2 (probe), host messages as tcp's. */
    &lite_nccl_ops,
#endif
#ifdef LITE_HAVE_TCP
    &lite_tcp_ops,
#endif
#ifdef LITE_HAVE_QUIC
    /* Encrypted and slower: only when asked for by name or nothing else works. */
    &lite_quic_ops,
#endif
#ifdef LITE_HAVE_LOOP
    &lite_loop_ops, /* LITE_CAP_NO_AUTO: by name only */
#endif
};

const struct lite_transport_ops *const *lite_registry(size_t *count)
{
    *count = LITE_ARRAY_LEN(g_table);
    return g_table;
}

static int probe_one(const struct lite_transport_ops *ops, char *why, size_t why_len)
{
    if (!ops->probe)
        return 0;
    why[0] = '\0';
    /* The backend's variables as the environment has them now (lite_init hands open its own
     * snapshot, checked; an invalid value makes the probe say so). */
    struct lite_tp_env *env = lite_tun_env_new(ops->name);
    if (!env)
        return -ENOMEM;
    int rc = ops->probe(env, why, why_len);
    lite_tun_env_free(env);
    return rc;
}

int lite_transport_select(const struct lite_transport_ops *const *table, size_t count,
                          const char *name, const struct lite_transport_ops **out, char *why,
                          size_t why_len)
{
    char reason[256];
    *out = NULL;
    if (why_len)
        why[0] = '\0';
    if (!name || strcmp(name, "auto") == 0) {
        size_t used = 0;
        for (size_t i = 0; i < count; i++) {
            if (table[i]->caps & LITE_CAP_NO_AUTO)
                continue; /* test and in-process backends: by name only */
            int rc = probe_one(table[i], reason, sizeof(reason));
            if (rc == 0) {
                *out = table[i];
                return 0; /* why: the ones passed over, for the caller to report once */
            }
            LITE_DEBUG("transport auto: %s not usable (%s)", table[i]->name,
                       reason[0] ? reason : lite_strerror(rc));
            if (used < why_len)
                used += (size_t)snprintf(why + used, why_len - used, "%s%s not usable (%s)",
                                         used ? "; " : "", table[i]->name,
                                         reason[0] ? reason : lite_strerror(rc));
        }
        char tried[512];
        lite_fmt(tried, sizeof(tried), "%s", why_len ? why : "");
        lite_fmt(why, why_len,
                 "transport auto: no compiled-in transport is usable on this host%s%s",
                 tried[0] ? ": " : "", tried);
        return -LITE_ERR_NO_TRANSPORT;
    }
    for (size_t i = 0; i < count; i++) {
        if (strcmp(table[i]->name, name) != 0)
            continue;
        int rc = probe_one(table[i], reason, sizeof(reason));
        if (rc != 0) {
            lite_fmt(why, why_len, "transport %s is not usable on this host: %s", name,
                     reason[0] ? reason : lite_strerror(rc));
            return -LITE_ERR_NO_TRANSPORT;
        }
        *out = table[i];
        return 0;
    }
    char list[128] = "";
    size_t used = 0;
    for (size_t i = 0; i < count && used < sizeof(list); i++)
        used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "",
                                 table[i]->name);
    lite_fmt(why, why_len, "transport %s is not compiled into this liblitetx (built with: %s)",
             name, count ? list : "none");
    return -LITE_ERR_NO_TRANSPORT;
}

/* Transports that cannot give what `need` asks are refused by name and skipped by "auto",
 * never used with the need silently dropped (security: no plaintext fallback). */
int lite_transport_select_caps(const struct lite_transport_ops *const *table, size_t count,
                               const char *name, uint32_t need, const char *need_why,
                               const struct lite_transport_ops **out, char *why, size_t why_len)
{
    if (!need)
        return lite_transport_select(table, count, name, out, why, why_len);
    *out = NULL;
    if (name && strcmp(name, "auto") != 0) {
        for (size_t i = 0; i < count; i++) {
            if (strcmp(table[i]->name, name) == 0 && (table[i]->caps & need) != need) {
                lite_fmt(why, why_len,
                         "transport %s refuses to start: %s, which it cannot do (no fallback "
                         "to plaintext)",
                         name, need_why);
                return -LITE_ERR_NO_TRANSPORT;
            }
        }
        return lite_transport_select(table, count, name, out, why, why_len);
    }
    const struct lite_transport_ops *fit[32];
    size_t n = 0;
    for (size_t i = 0; i < count && n < LITE_ARRAY_LEN(fit); i++) {
        if ((table[i]->caps & need) == need)
            fit[n++] = table[i];
        else
            LITE_INFO("transport auto: %s skipped (%s; it cannot)", table[i]->name, need_why);
    }
    if (n == 0) {
        lite_fmt(why, why_len, "transport auto: %s, and no compiled-in transport can", need_why);
        return -LITE_ERR_NO_TRANSPORT;
    }
    return lite_transport_select(fit, n, "auto", out, why, why_len);
}

/* ---- -ENOSYS defaults ---- */

static int nosys_probe(const struct lite_tp_env *env, char *why, size_t why_len)
{
    return 0;
}
static int nosys_open(const struct lite_transport_params *p, struct lite_transport **out)
{
    return -ENOSYS;
}
static void nosys_close(struct lite_transport *tp) {}
static int nosys_addr_get(struct lite_transport *tp, void *blob, size_t *len)
{
    return -ENOSYS;
}
static int nosys_connect_all(struct lite_transport *tp, const void *const *blobs,
                             const size_t *lens, int64_t deadline_ns, char *why, size_t why_len)
{
    return -ENOSYS;
}
static int nosys_msg_send(struct lite_transport *tp, int peer, const struct lite_msg_hdr *hdr,
                          const void *payload, void *op)
{
    return -ENOSYS;
}
static int nosys_progress(struct lite_transport *tp, int timeout_ms)
{
    return -ENOSYS;
}
static int nosys_mr_reg(struct lite_transport *tp, const struct lite_tp_mr *mr,
                        struct lite_tp_mr_keys *keys)
{
    return -ENOSYS;
}
static int nosys_mr_dereg(struct lite_transport *tp, void *handle)
{
    return -ENOSYS;
}
static int nosys_rma_post(struct lite_transport *tp, const struct lite_tp_rma *rma, void *op)
{
    return -ENOSYS;
}

int lite_transport_fill(const struct lite_transport_ops *ops, struct lite_transport_ops *out)
{
    if (ops->abi_version != LITE_TRANSPORT_ABI_VERSION ||
        ops->size < offsetof(struct lite_transport_ops, probe))
        return -EINVAL;
    static const struct lite_transport_ops defaults = {
        .size = sizeof(struct lite_transport_ops),
        .abi_version = LITE_TRANSPORT_ABI_VERSION,
        .probe = nosys_probe,
        .open = nosys_open,
        .close = nosys_close,
        .addr_get = nosys_addr_get,
        .connect_all = nosys_connect_all,
        .msg_send = nosys_msg_send,
        .progress = nosys_progress,
        .mr_reg = nosys_mr_reg,
        .mr_dereg = nosys_mr_dereg,
        .rma_post = nosys_rma_post,
    };
    *out = defaults;
    /* A backend built against an older, shorter table keeps the defaults for the newer ops. */
    size_t n = ops->size < sizeof(*out) ? ops->size : sizeof(*out);
    struct lite_transport_ops tmp = defaults;
    memcpy(&tmp, ops, n);
    out->name = tmp.name;
    out->caps = tmp.caps;
#define TAKE(f)                                                                                    \
    if (tmp.f)                                                                                     \
    out->f = tmp.f
    TAKE(probe);
    TAKE(open);
    TAKE(close);
    TAKE(addr_get);
    TAKE(connect_all);
    TAKE(msg_send);
    TAKE(progress);
    TAKE(mr_reg);
    TAKE(mr_dereg);
    TAKE(rma_post);
    out->msg_inject = tmp.msg_inject; /* optional: NULL stays NULL */
    out->peer_stats = tmp.peer_stats; /* optional: NULL stays NULL */
    out->tunables = tmp.tunables;
    out->rndv_threshold_pref = tmp.rndv_threshold_pref; /* optional: 0, the core's default */
#undef TAKE
    return 0;
}
