/*
 * rdma_cm.c - queue pairs connected through the RDMA connection manager (librdmacm), the
 * optional path of LITETX_RDMA_CM=1 (docs/RDMA.md, "Connection set-up").
 *
 * Every QP of a pair (msg, and out/in per rail) is one CM connection made with the QP as an
 * "external" QP: the CM resolves the address and the route, picks the source GID, the path MTU
 * and the starting PSNs (rdma_init_qp_attr), and this file applies those attributes to the QP
 * the backend made itself; the rest of the backend does not change. The attributes (address
 * vector, MTU) are kept, so that a re-arm after a refused op re-connects the QP with what the CM
 * chose. The higher rank dials; the private data names the rank, the world, the dialled QP
 * (kind, rail) and the process's incarnation (a random id drawn at open), and the acceptor
 * answers with its own: a peer whose incarnation changes between its connections is refused.
 *
 * The event channel is non-blocking and driven from progress (epoll). Once connected, a
 * DISCONNECTED event is a peer whose process closed its connections (died, or finalized after
 * its BYE).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <unistd.h>

#include "transports/rdma/rdma_int.h"

#define CM_MAGIC    0x4d43444cu /* "LDCM" */
#define CM_VERSION  1
#define CM_PRIV_LEN 28
#define CM_TIMEOUT  5000 /* ms, address and route resolution */

/* Private data: u32 magic | u8 version | u8 kind | u8 rail | u8 0 | u32 rank | u32 world |
 * u64 incarnation | u32 0. */
static void priv_put(struct lite_transport *t, uint8_t *p, int kind, uint32_t rail)
{
    memset(p, 0, CM_PRIV_LEN);
    lite_put32(p, CM_MAGIC);
    p[4] = CM_VERSION;
    p[5] = (uint8_t)kind;
    p[6] = (uint8_t)rail;
    lite_put32(p + 8, (uint32_t)t->rank);
    lite_put32(p + 12, (uint32_t)t->world);
    lite_put64(p + 16, t->incarnation);
}

struct cm_priv {
    int kind;
    uint32_t rail, rank, world;
    uint64_t incarnation;
};

static int priv_get(const void *data, uint8_t len, struct cm_priv *o)
{
    const uint8_t *p = data;
    if (!p || len < CM_PRIV_LEN || lite_get32(p) != CM_MAGIC || p[4] != CM_VERSION)
        return -LITE_ERR_PROTOCOL;
    o->kind = p[5];
    o->rail = p[6];
    o->rank = lite_get32(p + 8);
    o->world = lite_get32(p + 12);
    o->incarnation = lite_get64(p + 16);
    return 0;
}

/* An IPv4-mapped or routable IPv6 GID as a socket address (RoCE v2: the interface address). */
static int gid_addr(const uint8_t gid[16], uint16_t port, struct sockaddr_storage *ss)
{
    static const uint8_t v4pre[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    memset(ss, 0, sizeof(*ss));
    if (memcmp(gid, v4pre, 12) == 0) {
        struct sockaddr_in *s = (struct sockaddr_in *)ss;
        s->sin_family = AF_INET;
        s->sin_port = htons(port);
        memcpy(&s->sin_addr, gid + 12, 4);
        return 0;
    }
    if (gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80)
        return -EINVAL; /* link-local: would need a scope */
    static const uint8_t zero[8];
    if (memcmp(gid, zero, 8) == 0)
        return -EINVAL; /* an IB GID with the default subnet prefix, not an address */
    struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;
    s->sin6_family = AF_INET6;
    s->sin6_port = htons(port);
    memcpy(&s->sin6_addr, gid, 16);
    return 0;
}

bool lite_rdma_cm_wanted(const struct lite_transport *t)
{
    return lite_tp_num(t->env, "LITETX_RDMA_CM", 0) == 1;
}

int lite_rdma_cm_open(struct lite_transport *t, char *why, size_t why_len)
{
    if (getrandom(&t->incarnation, sizeof(t->incarnation), GRND_NONBLOCK) != sizeof(t->incarnation))
        t->incarnation = (uint64_t)lite_now_ns() ^ ((uint64_t)getpid() << 32);
    for (uint32_t r = 0; r < t->nrails; r++) {
        struct sockaddr_storage ss;
        char g[64];
        if (gid_addr(t->rails[r].gid, 0, &ss) != 0) {
            lite_rdma_gid_str(t->rails[r].gid, g, sizeof(g));
            lite_fmt(why, why_len,
                     "rdma: LITETX_RDMA_CM=1 needs an IP address on every rail (RoCE v2); rail "
                     "%s has GID %s",
                     t->rails[r].name, g);
            return -LITE_ERR_CONFIG;
        }
    }
    t->cm_ch = rdma_create_event_channel();
    if (!t->cm_ch) {
        int rc = -errno;
        lite_fmt(why, why_len, "rdma: rdma_create_event_channel failed: %s (is rdma_ucm loaded?)",
                 strerror(errno));
        return rc;
    }
    int fl = fcntl(t->cm_ch->fd, F_GETFL);
    fcntl(t->cm_ch->fd, F_SETFL, fl | O_NONBLOCK);
    if (rdma_create_id(t->cm_ch, &t->cm_listen, NULL, RDMA_PS_TCP) != 0) {
        int rc = -errno;
        lite_fmt(why, why_len, "rdma: rdma_create_id failed: %s", strerror(errno));
        return rc;
    }
    /* One wildcard listener serves every rail: the private data names the QP, and the event's
     * device and port are checked against the rail's. */
    uint16_t port = 0;
    if (t->port_base)
        port = (uint16_t)(t->port_base + t->rank); /* validated by lite_rdma_sc_listen */
    struct sockaddr_storage any;
    gid_addr(t->rails[0].gid, port, &any);
    if (any.ss_family == AF_INET)
        ((struct sockaddr_in *)&any)->sin_addr.s_addr = htonl(INADDR_ANY);
    else
        memset(&((struct sockaddr_in6 *)&any)->sin6_addr, 0, 16);
    if (rdma_bind_addr(t->cm_listen, (struct sockaddr *)&any) != 0 ||
        rdma_listen(t->cm_listen, 128) != 0) {
        int rc = -errno;
        lite_fmt(why, why_len, "rdma: cannot listen with rdma_cm on port %u: %s", port,
                 strerror(errno));
        return rc;
    }
    t->cm_port = ntohs(rdma_get_src_port(t->cm_listen));
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)LITE_RDMA_EP_CM << 32};
    epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->cm_ch->fd, &ev);
    return 0;
}

/* The QP of c that a peer's `kind` QP on `rail` talks to. */
static struct lite_rdma_qp *peer_of(struct lite_rdma_conn *c, int kind, uint32_t rail)
{
    if (kind == QP_MSG)
        return rail == 0 ? c->msg : NULL;
    if (rail >= c->nrails)
        return NULL;
    return kind == QP_OUT ? c->in[rail] : kind == QP_IN ? c->out[rail] : NULL;
}

/* Apply the CM's attributes for `state` to our QP, with the backend's own policies (ACK
 * timeout, retries, read depths); the address vector and MTU are kept for re-arms. */
static int apply(struct lite_transport *t, struct lite_rdma_qp *q, struct rdma_cm_id *id,
                 enum ibv_qp_state state)
{
    struct ibv_qp_attr a;
    int mask = 0;
    memset(&a, 0, sizeof(a));
    a.qp_state = state;
    if (rdma_init_qp_attr(id, &a, &mask) != 0)
        return lite_rdma_errno(errno);
    const struct lite_rdma_dev *dv = &t->devs[t->rails[q->rail].dev];
    int rd = dv->max_rd_atom < RDMA_MAX_RD_ATOM ? dv->max_rd_atom : RDMA_MAX_RD_ATOM;
    if (rd < 1)
        rd = 1;
    if (state == IBV_QPS_RTR) {
        a.max_dest_rd_atomic = (uint8_t)(q->kind == QP_IN ? rd : 1);
        a.min_rnr_timer = 12;
        mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        q->cm_av = a.ah_attr;
        q->cm_mtu = (uint8_t)a.path_mtu;
        q->have_cm = true;
        q->remote.qpn = a.dest_qp_num;
        q->remote.psn = a.rq_psn;
        q->remote.mtu = (uint8_t)a.path_mtu;
        memcpy(q->remote.gid, a.ah_attr.grh.dgid.raw, 16);
    } else {
        a.timeout = t->timeout;
        a.retry_cnt = 7;
        a.rnr_retry = (uint8_t)t->rnr_retry;
        a.max_rd_atomic = (uint8_t)(q->kind == QP_OUT ? rd : 1);
        mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
        q->psn = a.sq_psn;
    }
    int err = ibv_modify_qp(q->qp, &a, mask);
    if (err) {
        int rc = lite_rdma_errno(err);
        LITE_ERROR("rdma rank %d: queue pair to rank %d (rail %u): %s with the CM's attributes "
                   "failed: %s",
                   t->rank, q->conn->peer, q->rail, state == IBV_QPS_RTR ? "RTR" : "RTS",
                   strerror(-rc));
        return rc;
    }
    return 0;
}

/* The device and port the CM chose must be the rail's. */
static int check_rail(struct lite_transport *t, struct lite_rdma_qp *q, struct rdma_cm_id *id,
                      char *w, size_t wl)
{
    const struct lite_rdma_rail *rl = &t->rails[q->rail];
    const char *dn = id->verbs ? ibv_get_device_name(id->verbs->device) : "?";
    if (!id->verbs || strcmp(dn, t->devs[rl->dev].name) != 0 || id->port_num != rl->port) {
        lite_fmt(w, wl, "the CM routes rail %s through %s:%u", rl->name, dn, id->port_num);
        return -LITE_ERR_CONFIG;
    }
    return 0;
}

static void conn_param(struct lite_transport *t, struct lite_rdma_qp *q, uint8_t *priv,
                       struct rdma_conn_param *cp)
{
    memset(cp, 0, sizeof(*cp));
    priv_put(t, priv, q->kind, q->rail);
    cp->private_data = priv;
    cp->private_data_len = CM_PRIV_LEN;
    cp->qp_num = q->qp->qp_num;
    cp->responder_resources = 1;
    cp->initiator_depth = 1;
    cp->retry_count = 7;
    cp->rnr_retry_count = (uint8_t)t->rnr_retry;
}

static void cm_fail(struct lite_transport *t, struct lite_rdma_qp *q, int code, const char *w)
{
    struct lite_rdma_conn *c = q->conn;
    if (t->cm_connecting) {
        if (!t->cm_err) {
            t->cm_err = code;
            lite_fmt(t->cm_why, sizeof(t->cm_why), "rdma rank %d: connection to rank %d: %s",
                     t->rank, c->peer, w);
        }
        return;
    }
    char b[128];
    lite_fmt(b, sizeof(b), "rank %d: %s", c->peer, w);
    lite_rdma_conn_fail(t, c, c->bye ? -ESHUTDOWN : code, b);
}

static void on_connect_request(struct lite_transport *t, struct rdma_cm_event *ev)
{
    struct rdma_cm_id *id = ev->id;
    struct cm_priv pv;
    const char *w = "not a liblitetx connection";
    struct lite_rdma_qp *q = NULL;
    char cw[128] = "";
    if (priv_get(ev->param.conn.private_data, ev->param.conn.private_data_len, &pv) == 0) {
        struct lite_rdma_conn *c =
            pv.world == (uint32_t)t->world && pv.rank < pv.world && (int)pv.rank > t->rank
                ? &t->conns[pv.rank]
                : NULL;
        w = "from the wrong rank or world";
        if (c) {
            q = peer_of(c, pv.kind, pv.rail);
            w = "for no queue pair of ours";
            if (q && q->have_cm)
                w = "for a queue pair already connected", q = NULL;
            if (q && c->peer_incarnation && c->peer_incarnation != pv.incarnation)
                w = "from another incarnation of that rank (restarted?)", q = NULL;
        }
    }
    int rc = q ? check_rail(t, q, id, cw, sizeof(cw)) : -LITE_ERR_PROTOCOL;
    if (!rc) {
        q->conn->peer_incarnation = pv.incarnation;
        rc = apply(t, q, id, IBV_QPS_RTR);
        if (!rc)
            rc = apply(t, q, id, IBV_QPS_RTS);
        uint8_t priv[CM_PRIV_LEN];
        struct rdma_conn_param cp;
        conn_param(t, q, priv, &cp);
        if (!rc && rdma_accept(id, &cp) != 0)
            rc = lite_rdma_errno(errno);
        if (!rc) {
            id->context = q;
            q->cm_id = id;
            return;
        }
        lite_fmt(cw, sizeof(cw), "accepting failed: %s", lite_strerror(rc));
    }
    LITE_WARN("rdma rank %d: refused an rdma_cm connection: %s", t->rank, cw[0] ? cw : w);
    rdma_reject(id, NULL, 0);
    if (q && cw[0])
        cm_fail(t, q, rc, cw);
    /* the id is destroyed once its event is acknowledged (cm_service) */
    t->cm_destroy = id;
}

static void on_event(struct lite_transport *t, struct rdma_cm_event *ev)
{
    if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
        on_connect_request(t, ev);
        return;
    }
    struct lite_rdma_qp *q = ev->id->context;
    if (!q || q->conn->state == CONN_DEAD)
        return;
    struct lite_rdma_conn *c = q->conn;
    char w[128];
    int rc = 0;
    switch (ev->event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
        if (rdma_resolve_route(ev->id, CM_TIMEOUT) != 0)
            rc = lite_rdma_errno(errno), lite_fmt(w, sizeof(w), "rdma_resolve_route failed");
        break;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
        rc = check_rail(t, q, ev->id, w, sizeof(w));
        uint8_t priv[CM_PRIV_LEN];
        struct rdma_conn_param cp;
        conn_param(t, q, priv, &cp);
        if (!rc && rdma_connect(ev->id, &cp) != 0)
            rc = lite_rdma_errno(errno), lite_fmt(w, sizeof(w), "rdma_connect failed");
        break;
    }
    case RDMA_CM_EVENT_CONNECT_RESPONSE: {
        struct cm_priv pv;
        if (priv_get(ev->param.conn.private_data, ev->param.conn.private_data_len, &pv) != 0 ||
            pv.rank != (uint32_t)c->peer) {
            rc = -LITE_ERR_PROTOCOL;
            lite_fmt(w, sizeof(w), "its rdma_cm answer is not a liblitetx one");
        } else if (c->peer_incarnation && c->peer_incarnation != pv.incarnation) {
            rc = -LITE_ERR_PEER_LOST;
            lite_fmt(w, sizeof(w), "another incarnation answered (restarted?)");
        } else {
            c->peer_incarnation = pv.incarnation;
            rc = apply(t, q, ev->id, IBV_QPS_RTR);
            if (!rc)
                rc = apply(t, q, ev->id, IBV_QPS_RTS);
            if (!rc && rdma_establish(ev->id) != 0)
                rc = lite_rdma_errno(errno);
            if (rc)
                lite_fmt(w, sizeof(w), "connecting the queue pair failed");
            else
                q->cm_up = true;
        }
        break;
    }
    case RDMA_CM_EVENT_ESTABLISHED:
        q->cm_up = true;
        break;
    case RDMA_CM_EVENT_DISCONNECTED:
        q->cm_up = false;
        /* a peer that finalized said BYE on the side channel first: read it */
        if (c->fd >= 0)
            lite_rdma_sc_service(t, c);
        if (c->state == CONN_DEAD)
            return;
        /* the side channel is open, so the process lives: the link is re-established (a peer
         * that is gone closes it too, and the link ends then) */
        if (!c->bye && t->reconnect_ms > 0) {
            lite_rdma_link_break(t, c, "its rdma_cm connection was closed");
            return;
        }
        rc = -LITE_ERR_PEER_LOST;
        lite_fmt(w, sizeof(w), "its rdma_cm connection was closed (process gone?)");
        break;
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_CONNECT_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_REJECTED:
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
        rc = -LITE_ERR_PEER_LOST;
        lite_fmt(w, sizeof(w), "rdma_cm: %s (status %d) on rail %s", rdma_event_str(ev->event),
                 ev->status, t->rails[q->rail].name);
        break;
    default:
        break;
    }
    if (rc)
        cm_fail(t, q, rc, w);
}

int lite_rdma_cm_service(struct lite_transport *t)
{
    int n = 0;
    for (int i = 0; i < 64 && t->cm_ch; i++) {
        struct rdma_cm_event *ev;
        if (rdma_get_cm_event(t->cm_ch, &ev) != 0)
            break; /* EAGAIN: nothing more */
        t->cm_destroy = NULL;
        on_event(t, ev);
        rdma_ack_cm_event(ev);
        if (t->cm_destroy)
            rdma_destroy_id(t->cm_destroy);
        t->cm_destroy = NULL;
        n++;
    }
    return n;
}

static int dial(struct lite_transport *t, struct lite_rdma_qp *q, const uint8_t *peer_gid,
                uint16_t peer_port)
{
    struct sockaddr_storage src, dst;
    gid_addr(t->rails[q->rail].gid, 0, &src);
    if (gid_addr(peer_gid, peer_port, &dst) != 0 || dst.ss_family != src.ss_family)
        return -LITE_ERR_CONFIG;
    struct rdma_cm_id *id;
    if (rdma_create_id(t->cm_ch, &id, q, RDMA_PS_TCP) != 0)
        return lite_rdma_errno(errno);
    q->cm_id = id;
    if (rdma_resolve_addr(id, (struct sockaddr *)&src, (struct sockaddr *)&dst, CM_TIMEOUT) != 0)
        return lite_rdma_errno(errno);
    return 0;
}

int lite_rdma_cm_connect_all(struct lite_transport *t, const uint8_t *const *peer_gids,
                             const uint16_t *peer_ports, int64_t deadline, char *why,
                             size_t why_len)
{
    t->cm_connecting = true;
    t->cm_err = 0;
    int rc = 0;
    for (int p = 0; !rc && p < t->rank; p++) {
        struct lite_rdma_conn *c = &t->conns[p];
        rc = dial(t, c->msg, peer_gids[p], peer_ports[p]);
        for (uint32_t r = 0; !rc && r < c->nrails; r++) {
            rc = dial(t, c->out[r], peer_gids[p] + 16 * r, peer_ports[p]);
            if (!rc)
                rc = dial(t, c->in[r], peer_gids[p] + 16 * r, peer_ports[p]);
        }
        if (rc)
            lite_fmt(why, why_len, "rdma rank %d: cannot dial rank %d with rdma_cm: %s", t->rank, p,
                     lite_strerror(rc));
    }
    while (!rc) {
        int missing = 0, first = -1;
        for (int p = 0; p < t->world; p++) {
            struct lite_rdma_conn *c = &t->conns[p];
            if (p == t->rank)
                continue;
            int m = !c->msg->cm_up;
            for (uint32_t r = 0; r < c->nrails; r++)
                m += !c->out[r]->cm_up + !c->in[r]->cm_up;
            missing += m;
            if (m && first < 0)
                first = p;
        }
        if (t->cm_err) {
            rc = t->cm_err;
            lite_fmt(why, why_len, "%s", t->cm_why);
            break;
        }
        if (!missing)
            break;
        if (lite_now_ns() >= deadline) {
            lite_fmt(why, why_len,
                     "rdma rank %d: %d queue pair(s) not connected through rdma_cm in time "
                     "(first: rank %d)",
                     t->rank, missing, first);
            rc = -ETIMEDOUT;
            break;
        }
        struct pollfd pfd = {.fd = t->cm_ch->fd, .events = POLLIN};
        poll(&pfd, 1, lite_ms_left(deadline, 100));
        lite_rdma_cm_service(t);
    }
    t->cm_connecting = false;
    return rc;
}

void lite_rdma_cm_close(struct lite_transport *t)
{
    /* Destroying a connected id sends the peer a DREQ (its DISCONNECTED event). */
    for (uint32_t i = 0; i < t->nqps; i++) {
        struct lite_rdma_qp *q = t->qps[i];
        if (q && q->cm_id) {
            rdma_destroy_id(q->cm_id);
            q->cm_id = NULL;
        }
    }
    if (t->cm_listen)
        rdma_destroy_id(t->cm_listen);
    t->cm_listen = NULL;
    if (t->cm_ch) {
        if (t->epfd >= 0)
            epoll_ctl(t->epfd, EPOLL_CTL_DEL, t->cm_ch->fd, NULL);
        rdma_destroy_event_channel(t->cm_ch);
    }
    t->cm_ch = NULL;
}
