/*
 * registry.c - the ordered table of compiled-in transports (selection: tp_select.c), and the
 * -ENOSYS defaults for ops a backend leaves NULL.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "registry.h"
#include "lite_int.h"

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
