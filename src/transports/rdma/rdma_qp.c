/*
 * rdma_qp.c - reliable-connected queue pairs: creation, the INIT -> RTR -> RTS walk towards the
 * peer's end, re-arming after an error (back through RESET with a new epoch and PSN), and
 * posting with a record of every send-queue entry so completions, including the implied ones of
 * unsignalled entries, can be attributed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "transports/rdma/rdma_int.h"

/* A fresh 24-bit PSN, so a re-armed or reused QP never accepts a stale packet. Private state:
 * the application's rand()/lrand48() sequences are left alone. */
static uint32_t new_psn(void)
{
    static uint64_t s;
    if (!s)
        s = (uint64_t)lite_now_ns() ^ ((uint64_t)(uintptr_t)&s << 16) ^ 0x9e3779b97f4a7c15ull;
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return (uint32_t)(s >> 20) & 0xffffff;
}

/* A new RC QP for q's kind and rail on its device; *max_inline: the inline size it got. */
static struct ibv_qp *make_qp(struct lite_transport *t, const struct lite_rdma_qp *q,
                              uint32_t *max_inline)
{
    struct lite_rdma_dev *dv = &t->devs[t->rails[q->rail].dev];
    struct ibv_qp_init_attr ia = {
        .send_cq = dv->cq,
        .recv_cq = dv->cq,
        .qp_type = IBV_QPT_RC,
        .sq_sig_all = 0,
        .cap = {.max_send_wr = q->sq_depth,
                .max_recv_wr = q->rq_depth,
                .max_send_sge = 1,
                .max_recv_sge = 1,
                .max_inline_data = q->kind == QP_IN ? 0 : RDMA_INLINE},
    };
    struct ibv_qp *qp = ibv_create_qp(dv->pd, &ia);
    if (!qp && ia.cap.max_inline_data) {
        /* some devices have no inline data: go without */
        ia.cap.max_inline_data = 0;
        qp = ibv_create_qp(dv->pd, &ia);
    }
    if (qp)
        *max_inline = ia.cap.max_inline_data;
    return qp;
}

int lite_rdma_qp_create(struct lite_transport *t, struct lite_rdma_conn *c, int kind, uint32_t rail,
                        struct lite_rdma_qp **out)
{
    struct lite_rdma_rail *rl = &t->rails[rail];
    struct lite_rdma_qp *q = calloc(1, sizeof(*q));
    if (!q)
        return -ENOMEM;
    q->conn = c;
    q->kind = (uint8_t)kind;
    q->rail = (uint8_t)rail;
    q->psn = new_psn();
    q->sq_depth = kind == QP_MSG ? c->tx_depth : kind == QP_OUT ? t->sq_depth : 1;
    q->rq_depth = kind == QP_MSG ? c->rx_depth : kind == QP_IN ? c->imm_depth : 1;
    q->rec = calloc(q->sq_depth, sizeof(*q->rec));
    if (!q->rec) {
        free(q);
        return -ENOMEM;
    }
    q->qp = make_qp(t, q, &q->max_inline);
    if (!q->qp) {
        int rc = lite_rdma_errno(errno);
        LITE_ERROR("rdma rank %d: cannot create a queue pair on %s for rank %d: %s", t->rank,
                   rl->name, c->peer, strerror(-rc));
        free(q->rec);
        free(q);
        return rc;
    }
    if (t->nqps == t->qps_cap) {
        uint32_t n = t->qps_cap ? t->qps_cap * 2 : 64;
        struct lite_rdma_qp **a = realloc(t->qps, n * sizeof(*a));
        if (!a) {
            ibv_destroy_qp(q->qp);
            free(q->rec);
            free(q);
            return -ENOMEM;
        }
        t->qps = a;
        t->qps_cap = n;
    }
    q->idx = t->nqps;
    t->qps[t->nqps++] = q;
    int rc = lite_rdma_qp_reset(t, q);
    if (rc)
        return rc; /* the QP stays in t->qps and is destroyed at close */
    *out = q;
    return 0;
}

int lite_rdma_qp_renew(struct lite_transport *t, struct lite_rdma_qp *q)
{
    uint32_t max_inline;
    struct ibv_qp *qp = make_qp(t, q, &max_inline);
    if (qp && max_inline >= q->max_inline) {
        ibv_destroy_qp(q->qp);
        q->qp = qp;
    } else if (qp) {
        ibv_destroy_qp(qp); /* less inline room than the records assume: keep the old one */
    }
    return lite_rdma_qp_reset(t, q);
}

void lite_rdma_qp_destroy(struct lite_transport *t, struct lite_rdma_qp *q)
{
    if (!q)
        return;
    if (q->qp)
        ibv_destroy_qp(q->qp);
    t->qps[q->idx] = NULL;
    free(q->rec);
    free(q);
}

static int modify(struct lite_transport *t, struct lite_rdma_qp *q, struct ibv_qp_attr *a, int mask,
                  const char *step)
{
    int err = ibv_modify_qp(q->qp, a, mask);
    if (err) {
        int rc = lite_rdma_errno(err);
        struct ibv_qp_attr qa;
        struct ibv_qp_init_attr ia;
        int st = ibv_query_qp(q->qp, &qa, IBV_QP_STATE, &ia) == 0 ? (int)qa.qp_state : -1;
        LITE_ERROR("rdma rank %d: %s queue pair to rank %d (rail %u, state %d): %s failed: %s",
                   t->rank,
                   q->kind == QP_MSG   ? "message"
                   : q->kind == QP_OUT ? "out"
                                       : "in",
                   q->conn->peer, q->rail, st, step, strerror(-rc));
        return rc;
    }
    return 0;
}

int lite_rdma_qp_reset(struct lite_transport *t, struct lite_rdma_qp *q)
{
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_RESET};
    int rc = modify(t, q, &a, IBV_QP_STATE, "RESET");
    if (rc)
        return rc;
    q->epoch++;
    q->psn = new_psn();
    q->sq_head = q->sq_tail = 0;
    memset(q->rec, 0, q->sq_depth * sizeof(*q->rec));
    /* What the peer may do on this QP: write the mailbox (msg), write/read our regions (in). */
    unsigned acc = q->kind == QP_MSG  ? IBV_ACCESS_REMOTE_WRITE
                   : q->kind == QP_IN ? IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ
                                      : 0;
    a = (struct ibv_qp_attr){.qp_state = IBV_QPS_INIT,
                             .pkey_index = 0,
                             .port_num = t->rails[q->rail].port,
                             .qp_access_flags = acc};
    return modify(t, q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
                  "INIT");
}

void lite_rdma_qp_ep(struct lite_transport *t, const struct lite_rdma_qp *q,
                     struct lite_rdma_ep *ep)
{
    const struct lite_rdma_rail *rl = &t->rails[q->rail];
    ep->qpn = q->qp->qp_num;
    ep->psn = q->psn;
    ep->lid = rl->lid;
    memcpy(ep->gid, rl->gid, 16);
    ep->mtu = rl->mtu;
}

int lite_rdma_qp_connect(struct lite_transport *t, struct lite_rdma_qp *q,
                         const struct lite_rdma_ep *remote)
{
    const struct lite_rdma_rail *rl = &t->rails[q->rail];
    const struct lite_rdma_dev *dv = &t->devs[rl->dev];
    int rd = dv->max_rd_atom < RDMA_MAX_RD_ATOM ? dv->max_rd_atom : RDMA_MAX_RD_ATOM;
    if (rd < 1)
        rd = 1;
    q->remote = *remote;
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_RTR,
        .path_mtu = (enum ibv_mtu)(remote->mtu < rl->mtu ? remote->mtu : rl->mtu),
        .dest_qp_num = remote->qpn,
        .rq_psn = remote->psn,
        .max_dest_rd_atomic = (uint8_t)(q->kind == QP_IN ? rd : 1),
        .min_rnr_timer = 12,
        .ah_attr = {.dlid = remote->lid, .sl = 0, .port_num = rl->port},
    };
    if (q->have_cm) {
        /* connected through rdma_cm: its address vector and MTU, only the PSN is new */
        a.ah_attr = q->cm_av;
        a.path_mtu = (enum ibv_mtu)q->cm_mtu;
    } else if (rl->link_layer != IBV_LINK_LAYER_INFINIBAND || rl->gid_index != 0) {
        /* RoCE (or routed IB): address the peer by its GID from our chosen GID */
        a.ah_attr.is_global = 1;
        memcpy(a.ah_attr.grh.dgid.raw, remote->gid, 16);
        a.ah_attr.grh.sgid_index = (uint8_t)rl->gid_index;
        a.ah_attr.grh.hop_limit = 64;
    }
    int rc = modify(t, q, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
                    "RTR");
    if (rc)
        return rc;
    a = (struct ibv_qp_attr){
        .qp_state = IBV_QPS_RTS,
        .timeout = t->timeout,
        .retry_cnt = 7,
        /* Receives are always posted before a sender is told of them, so an RNR NAK is a
         * bug, and with 0 retries it shows as an error instead of a silent stall. */
        .rnr_retry = (uint8_t)t->rnr_retry,
        .sq_psn = q->psn,
        .max_rd_atomic = (uint8_t)(q->kind == QP_OUT ? rd : 1),
    };
    return modify(t, q, &a,
                  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                      IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
                  "RTS");
}

int lite_rdma_post_sq(struct lite_transport *t, struct lite_rdma_qp *q, struct ibv_send_wr *wr,
                      uint8_t type, bool signal, struct lite_rdma_op *op, uint32_t piece)
{
    if (lite_rdma_sq_room(q) == 0)
        return -EAGAIN;
    uint32_t slot = (uint32_t)(q->sq_head % q->sq_depth);
    /* A full queue must end in a signalled WR, or its entries would never be known done. */
    if (lite_rdma_sq_room(q) == 1)
        signal = true;
    struct lite_rdma_sqrec *rec = &q->rec[slot];
    rec->type = type;
    rec->signaled = signal;
    rec->op = op;
    rec->piece = piece;
    wr->wr_id = rdma_wrid(q->idx, q->epoch, type, slot);
    wr->next = NULL;
    if (signal)
        wr->send_flags |= IBV_SEND_SIGNALED;
    struct ibv_send_wr *bad = NULL;
    int err = ibv_post_send(q->qp, wr, &bad);
    if (err)
        return lite_rdma_errno(err);
    q->sq_head++;
    return 0;
}

void lite_rdma_sq_retire(struct lite_rdma_qp *q, uint32_t slot)
{
    /* Completions on one send queue come in order: every entry up to `slot` is done. */
    while (q->sq_tail < q->sq_head) {
        uint32_t s = (uint32_t)(q->sq_tail % q->sq_depth);
        q->sq_tail++;
        if (s == slot)
            break;
    }
}

int lite_rdma_post_recv_msg(struct lite_transport *t, struct lite_rdma_conn *c, uint32_t slot)
{
    struct lite_rdma_qp *q = c->msg;
    struct ibv_sge sge = {.addr = (uintptr_t)(c->slots + (size_t)slot * c->slot_bytes),
                          .length = c->slot_bytes,
                          .lkey = c->slots_mr->lkey};
    struct ibv_recv_wr wr = {
        .wr_id = rdma_wrid(q->idx, q->epoch, WR_RECV_MSG, slot), .sg_list = &sge, .num_sge = 1};
    struct ibv_recv_wr *bad;
    int err = ibv_post_recv(q->qp, &wr, &bad);
    return err ? lite_rdma_errno(err) : 0;
}

int lite_rdma_post_recv_imm(struct lite_transport *t, struct lite_rdma_qp *q, uint32_t n)
{
    /* An RDMA write with immediate consumes a receive but places no bytes through it. */
    for (uint32_t i = 0; i < n; i++) {
        struct ibv_recv_wr wr = {
            .wr_id = rdma_wrid(q->idx, q->epoch, WR_RECV_IMM, 0), .sg_list = NULL, .num_sge = 0};
        struct ibv_recv_wr *bad;
        int err = ibv_post_recv(q->qp, &wr, &bad);
        if (err)
            return lite_rdma_errno(err);
    }
    return 0;
}
