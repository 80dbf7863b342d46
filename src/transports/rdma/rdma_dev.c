/*
 * rdma_dev.c - is there an RDMA device here (probe), and which ports become rails: every active
 * port ("auto") or the list in LITETX_RDMA_DEVICES ("mlx5_0,mlx5_1:2"; a name may repeat to
 * get several rails on one port). On RoCE each rail's GID is chosen by lite_rdma_gid_choose()
 * from the port's GID table, the GID types and the bootstrap interface.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transports/rdma/rdma_int.h"

static const char *state_name(enum ibv_port_state s)
{
    return s == IBV_PORT_ACTIVE ? "active" : s == IBV_PORT_DOWN ? "down" : "not active";
}

int lite_rdma_probe(const struct lite_tp_env *env, char *why, size_t why_len)
{
    lite_tp_env_attach(env);
    int n = 0;
    errno = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list) {
        if (errno == ENOSYS || errno == 0)
            lite_fmt(why, why_len,
                     "no RDMA support in this kernel (libibverbs: no "
                     "/sys/class/infiniband)");
        else
            lite_fmt(why, why_len, "libibverbs cannot list RDMA devices: %s", strerror(errno));
        return -ENODEV;
    }
    if (n == 0) {
        ibv_free_device_list(list);
        lite_fmt(why, why_len, "no RDMA device on this host (libibverbs found none)");
        return -ENODEV;
    }
    char seen[192] = "";
    size_t used = 0;
    bool active = false;
    for (int i = 0; i < n && !active; i++) {
        struct ibv_context *ctx = ibv_open_device(list[i]);
        struct ibv_device_attr da;
        if (!ctx || ibv_query_device(ctx, &da) != 0) {
            used += (size_t)snprintf(seen + used, used < sizeof(seen) ? sizeof(seen) - used : 0,
                                     "%s%s cannot be opened", used ? ", " : "",
                                     ibv_get_device_name(list[i]));
            if (ctx)
                ibv_close_device(ctx);
            continue;
        }
        for (uint8_t p = 1; p <= da.phys_port_cnt && !active; p++) {
            struct ibv_port_attr pa;
            if (ibv_query_port(ctx, p, &pa) != 0)
                continue;
            active = pa.state == IBV_PORT_ACTIVE;
            if (!active && used < sizeof(seen))
                used += (size_t)snprintf(seen + used, sizeof(seen) - used, "%s%s:%u %s",
                                         used ? ", " : "", ibv_get_device_name(list[i]), p,
                                         state_name(pa.state));
        }
        ibv_close_device(ctx);
    }
    ibv_free_device_list(list);
    if (!active) {
        lite_fmt(why, why_len, "RDMA devices found but no port is active (%s)", seen);
        return -ENODEV;
    }
    return 0;
}

/* The interface that has address `host` ("" when none: e.g. a name, or not local). */
static void netdev_of(const char *host, char *out, size_t len)
{
    out[0] = 0;
    uint8_t want[16];
    if (lite_rdma_gid_from_ip(host, want) != 0)
        return;
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0)
        return;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr)
            continue;
        uint8_t g[16] = {0};
        if (i->ifa_addr->sa_family == AF_INET) {
            g[10] = g[11] = 0xff;
            memcpy(g + 12, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, 4);
        } else if (i->ifa_addr->sa_family == AF_INET6) {
            memcpy(g, &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, 16);
        } else {
            continue;
        }
        if (memcmp(g, want, 16) == 0) {
            lite_fmt(out, len, "%s", i->ifa_name);
            break;
        }
    }
    freeifaddrs(ifs);
}

/* The GID override for rail `i`: LITETX_RDMA_GID_INDEX="3" (every rail) or "3,1" (per rail). */
static int gid_override(const struct lite_transport *t, uint32_t i, int *out, char *why,
                        size_t why_len)
{
    const char *v = lite_tp_str(t->env, "LITETX_RDMA_GID_INDEX");
    *out = -1;
    if (!v || !*v)
        return 0;
    const char *p = v;
    long x = -1;
    for (uint32_t k = 0; k <= i; k++) {
        char *end;
        x = strtol(p, &end, 10);
        if (end == p || x < 0 || x > 65535 || (*end && *end != ',')) {
            lite_fmt(why, why_len,
                     "LITETX_RDMA_GID_INDEX=\"%s\": must be a GID index or a "
                     "comma-separated list of them, one per rail",
                     v);
            return -LITE_ERR_CONFIG;
        }
        if (*end != ',')
            break; /* the last value applies to the remaining rails */
        p = end + 1;
    }
    *out = (int)x;
    return 0;
}

/* Open (or find) a device by name; its index in t->devs. */
static int dev_open(struct lite_transport *t, struct ibv_device *d, char *why, size_t why_len)
{
    const char *name = ibv_get_device_name(d);
    for (int i = 0; i < t->ndevs; i++)
        if (strcmp(t->devs[i].name, name) == 0)
            return i;
    if (t->ndevs == LITE_MAX_RAILS) {
        lite_fmt(why, why_len, "more than %d RDMA devices", LITE_MAX_RAILS);
        return -E2BIG;
    }
    struct lite_rdma_dev *dv = &t->devs[t->ndevs];
    memset(dv, 0, sizeof(*dv));
    lite_fmt(dv->name, sizeof(dv->name), "%s", name);
    struct ibv_device_attr da;
    dv->ctx = ibv_open_device(d);
    if (!dv->ctx || ibv_query_device(dv->ctx, &da) != 0) {
        int rc = lite_rdma_errno(errno);
        lite_fmt(why, why_len, "cannot open RDMA device %s: %s", name, strerror(-rc));
        if (dv->ctx)
            ibv_close_device(dv->ctx);
        dv->ctx = NULL;
        return rc;
    }
    dv->max_cqe = da.max_cqe;
    dv->max_rd_atom =
        da.max_qp_rd_atom < da.max_qp_init_rd_atom ? da.max_qp_rd_atom : da.max_qp_init_rd_atom;
    dv->pd = ibv_alloc_pd(dv->ctx);
    dv->ch = dv->pd ? ibv_create_comp_channel(dv->ctx) : NULL;
    if (!dv->pd || !dv->ch) {
        int rc = lite_rdma_errno(errno);
        lite_fmt(why, why_len, "RDMA device %s: cannot allocate a %s: %s", name,
                 dv->pd ? "completion channel" : "protection domain", strerror(-rc));
        if (dv->pd)
            ibv_dealloc_pd(dv->pd);
        ibv_close_device(dv->ctx);
        dv->ctx = NULL;
        return rc;
    }
    /* progress() reads events without blocking and sleeps in epoll instead */
    fcntl(dv->ch->fd, F_SETFL, fcntl(dv->ch->fd, F_GETFL) | O_NONBLOCK);
    return t->ndevs++;
}

/*
 * Make port `port` of device index `di` rail number t->nrails, choosing its GID. Returns 0, or
 * a negative code with the reason (a port that cannot be used).
 */
static int rail_add(struct lite_transport *t, int di, uint8_t port, const uint8_t *bind_gid,
                    const char *bind_netdev, char *why, size_t why_len)
{
    struct lite_rdma_dev *dv = &t->devs[di];
    struct ibv_port_attr pa;
    if (ibv_query_port(dv->ctx, port, &pa) != 0) {
        lite_fmt(why, why_len, "%s: no port %u", dv->name, port);
        return -ENODEV;
    }
    if (pa.state != IBV_PORT_ACTIVE) {
        lite_fmt(why, why_len, "%s:%u is %s", dv->name, port, state_name(pa.state));
        return -ENODEV;
    }
    struct lite_rdma_rail *r = &t->rails[t->nrails];
    memset(r, 0, sizeof(*r));
    r->dev = di;
    r->port = port;
    r->link_layer = pa.link_layer;
    r->lid = pa.lid;
    r->mtu = (uint8_t)pa.active_mtu;
    r->max_msg = pa.max_msg_sz;
    int override;
    int rc = gid_override(t, t->nrails, &override, why, why_len);
    if (rc)
        return rc;
    uint32_t tbl = pa.gid_tbl_len ? (uint32_t)pa.gid_tbl_len : 1;
    struct ibv_gid_entry *ge = calloc(tbl, sizeof(*ge));
    struct lite_rdma_gid_cand *cand = calloc(tbl, sizeof(*cand));
    size_t nc = 0;
    if (!ge || !cand) {
        free(ge);
        free(cand);
        return -ENOMEM;
    }
    /* The whole table in one call; ports other than ours are skipped below. */
    ssize_t ng = ibv_query_gid_table(dv->ctx, ge, tbl, 0);
    if (ng < 0) {
        /* older kernels: one entry at a time */
        ng = 0;
        for (uint32_t i = 0; i < tbl; i++)
            if (ibv_query_gid_ex(dv->ctx, port, i, &ge[ng], 0) == 0)
                ng++;
    }
    for (ssize_t i = 0; i < ng; i++) {
        if (ge[i].port_num != port)
            continue;
        struct lite_rdma_gid_cand *c = &cand[nc++];
        c->index = ge[i].gid_index;
        memcpy(c->gid, ge[i].gid.raw, 16);
        c->type = ge[i].gid_type == IBV_GID_TYPE_ROCE_V2   ? LITE_RDMA_GID_ROCE_V2
                  : ge[i].gid_type == IBV_GID_TYPE_ROCE_V1 ? LITE_RDMA_GID_ROCE_V1
                                                           : LITE_RDMA_GID_IB;
        char ifn[IF_NAMESIZE] = "";
        if (ge[i].ndev_ifindex && if_indextoname(ge[i].ndev_ifindex, ifn))
            lite_fmt(c->netdev, sizeof(c->netdev), "%s", ifn);
    }
    if (pa.link_layer == IBV_LINK_LAYER_INFINIBAND && override < 0) {
        /* InfiniBand routes by LID; GID 0 (the port GID) is always right */
        r->gid_index = 0;
        rc = 0;
    } else {
        char w[768];
        rc = lite_rdma_gid_choose(cand, nc, bind_gid, bind_netdev, override, &r->gid_index, w,
                                  sizeof(w));
        if (rc)
            lite_fmt(why, why_len, "%s:%u: %s", dv->name, port, w);
    }
    for (size_t i = 0; !rc && i < nc; i++)
        if (cand[i].index == r->gid_index)
            memcpy(r->gid, cand[i].gid, 16);
    if (!rc && pa.link_layer == IBV_LINK_LAYER_INFINIBAND && nc == 0) {
        union ibv_gid g;
        if (ibv_query_gid(dv->ctx, port, (int)r->gid_index, &g) == 0)
            memcpy(r->gid, g.raw, 16);
    }
    free(ge);
    free(cand);
    if (rc)
        return rc;
    char g[INET6_ADDRSTRLEN];
    lite_rdma_gid_str(r->gid, g, sizeof(g));
    lite_fmt(r->name, sizeof(r->name), "%s:%u gid %u %s", dv->name, port, r->gid_index, g);
    t->nrails++;
    return 0;
}

static struct ibv_device *find_dev(struct ibv_device **list, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(ibv_get_device_name(list[i]), name) == 0)
            return list[i];
    return NULL;
}

int lite_rdma_rails_open(struct lite_transport *t, const char *bind_host, char *why, size_t why_len)
{
    uint8_t bind_gid[16];
    bool have_bind = lite_rdma_gid_from_ip(bind_host, bind_gid) == 0;
    char bind_netdev[IF_NAMESIZE + 1];
    netdev_of(bind_host, bind_netdev, sizeof(bind_netdev));
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list || n == 0) {
        if (list)
            ibv_free_device_list(list);
        lite_fmt(why, why_len, "no RDMA device on this host");
        return -ENODEV;
    }
    const char *spec = lite_tp_str(t->env, "LITETX_RDMA_DEVICES");
    int rc = 0;
    if (spec && *spec && strcmp(spec, "auto") != 0) {
        /* an explicit list: every entry must work */
        char buf[256];
        lite_fmt(buf, sizeof(buf), "%s", spec);
        char *save = NULL;
        for (char *tok = strtok_r(buf, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
            if (t->nrails == LITE_MAX_RAILS) {
                lite_fmt(why, why_len, "LITETX_RDMA_DEVICES=\"%s\": more than %d rails", spec,
                         LITE_MAX_RAILS);
                rc = -LITE_ERR_CONFIG;
                break;
            }
            char *colon = strchr(tok, ':');
            long port = 0;
            if (colon) {
                *colon = 0;
                char *end;
                port = strtol(colon + 1, &end, 10);
                if (*end || port < 1 || port > 255) {
                    lite_fmt(why, why_len, "LITETX_RDMA_DEVICES=\"%s\": bad port in \"%s\"", spec,
                             tok);
                    rc = -LITE_ERR_CONFIG;
                    break;
                }
            }
            struct ibv_device *d = find_dev(list, n, tok);
            if (!d) {
                char names[160] = "";
                size_t u = 0;
                for (int i = 0; i < n && u < sizeof(names); i++)
                    u += (size_t)snprintf(names + u, sizeof(names) - u, "%s%s", i ? ", " : "",
                                          ibv_get_device_name(list[i]));
                lite_fmt(why, why_len, "LITETX_RDMA_DEVICES: no device \"%s\" (devices: %s)", tok,
                         names);
                rc = -LITE_ERR_CONFIG;
                break;
            }
            int di = dev_open(t, d, why, why_len);
            if (di < 0) {
                rc = di;
                break;
            }
            if (port == 0) {
                /* the first active port */
                struct ibv_device_attr da = {0};
                if (ibv_query_device(t->devs[di].ctx, &da) != 0)
                    da.phys_port_cnt = 0; /* no port found: the error below names it */
                for (uint8_t p = 1; p <= da.phys_port_cnt && !port; p++) {
                    struct ibv_port_attr pa;
                    if (ibv_query_port(t->devs[di].ctx, p, &pa) == 0 && pa.state == IBV_PORT_ACTIVE)
                        port = p;
                }
                port = port ? port : 1;
            }
            rc = rail_add(t, di, (uint8_t)port, have_bind ? bind_gid : NULL, bind_netdev, why,
                          why_len);
        }
    } else {
        /* auto: every active port whose GID can be chosen; the bootstrap's port first */
        char skipped[512] = "";
        size_t su = 0;
        for (int i = 0; i < n && t->nrails < LITE_MAX_RAILS; i++) {
            char w[512];
            int di = dev_open(t, list[i], w, sizeof(w));
            if (di < 0) {
                LITE_INFO("rdma: skipping %s: %s", ibv_get_device_name(list[i]), w);
                continue;
            }
            struct ibv_device_attr da;
            if (ibv_query_device(t->devs[di].ctx, &da) != 0)
                continue;
            for (uint8_t p = 1; p <= da.phys_port_cnt && t->nrails < LITE_MAX_RAILS; p++) {
                int r = rail_add(t, di, p, have_bind ? bind_gid : NULL, bind_netdev, w, sizeof(w));
                if (r == -LITE_ERR_CONFIG && lite_tp_str(t->env, "LITETX_RDMA_GID_INDEX")) {
                    lite_fmt(why, why_len, "%s", w);
                    ibv_free_device_list(list);
                    return r;
                }
                if (r && su < sizeof(skipped))
                    su += (size_t)snprintf(skipped + su, sizeof(skipped) - su, "%s%s",
                                           su ? "; " : "", w);
            }
        }
        if (t->nrails == 0) {
            lite_fmt(why, why_len, "no usable RDMA port: %s", skipped[0] ? skipped : "none");
            rc = -ENODEV;
        } else if (su) {
            LITE_INFO("rdma rank %d: ports not used: %s", t->rank, skipped);
        }
        /* the rail that carries the bootstrap address goes first: it carries the messages */
        for (uint32_t i = 1; !rc && have_bind && i < t->nrails; i++)
            if (memcmp(t->rails[i].gid, bind_gid, 16) == 0) {
                struct lite_rdma_rail tmp = t->rails[0];
                t->rails[0] = t->rails[i];
                t->rails[i] = tmp;
                break;
            }
    }
    ibv_free_device_list(list);
    if (!rc) {
        char all[LITE_MAX_RAILS * 84] = "";
        size_t u = 0;
        for (uint32_t i = 0; i < t->nrails && u < sizeof(all); i++)
            u +=
                (size_t)snprintf(all + u, sizeof(all) - u, "%s%s", i ? ", " : "", t->rails[i].name);
        LITE_INFO("rdma rank %d: %u rail(s): %s", t->rank, t->nrails, all);
    }
    return rc;
}

void lite_rdma_rails_close(struct lite_transport *t)
{
    for (int i = 0; i < t->ndevs; i++) {
        struct lite_rdma_dev *dv = &t->devs[i];
        if (dv->cq)
            ibv_destroy_cq(dv->cq);
        if (dv->ch)
            ibv_destroy_comp_channel(dv->ch);
        if (dv->pd)
            ibv_dealloc_pd(dv->pd);
        if (dv->ctx)
            ibv_close_device(dv->ctx);
        memset(dv, 0, sizeof(*dv));
    }
    t->ndevs = 0;
    t->nrails = 0;
}
