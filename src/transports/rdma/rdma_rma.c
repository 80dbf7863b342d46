/*
 * rdma_rma.c - one-sided ops on the out QPs: RDMA WRITE, WRITE_WITH_IMM and READ.
 *
 * An op is cut into pieces by lite_rdma_stripe_plan(): a large one is striped over the rails,
 * a small one goes whole to the next rail in turn. Each piece is a signalled WR; the op
 * completes when all are done. An immediate must be counted exactly once and only when all of
 * the op's bytes are in place, and writes on different QPs are not ordered, so:
 *   - one piece: the piece itself is the WRITE_WITH_IMM;
 *   - several pieces: plain WRITEs, then, once every piece has completed (the target has the
 *     data), one zero-length WRITE_WITH_IMM.
 * Every WRITE_WITH_IMM takes one receive at the target's in QP (struct lite_rdma_window).
 *
 * A target that refuses an op (key, bounds, rights) answers with a NAK that puts both QPs of
 * that rail in the error state. The initiator then asks the target over the side channel why
 * it refused and to re-arm its end (rdma_conn.c), re-arms its own, reposts the ops that were
 * behind the refused one, and completes the refused op with the target's reason.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "transports/rdma/rdma_int.h"

static void op_unlink(struct lite_rdma_conn *c, struct lite_rdma_op *o)
{
    if (o->prev)
        o->prev->next = o->next;
    else if (c->live == o)
        c->live = o->next;
    if (o->next)
        o->next->prev = o->prev;
    o->next = o->prev = NULL;
}

static void wait_remove(struct lite_rdma_conn *c, struct lite_rdma_op *o)
{
    struct lite_rdma_op **pp = &c->wait, *last = NULL;
    while (*pp && *pp != o) {
        last = *pp;
        pp = &(*pp)->wnext;
    }
    if (!*pp)
        return;
    *pp = o->wnext;
    if (c->wait_tail == o)
        c->wait_tail = last;
    o->wnext = NULL;
}

static bool waiting(const struct lite_rdma_conn *c, const struct lite_rdma_op *o)
{
    return c->wait_tail == o || o->wnext != NULL;
}

static void op_finish(struct lite_transport *t, struct lite_rdma_op *o)
{
    struct lite_rdma_conn *c = o->conn;
    if (waiting(c, o))
        wait_remove(c, o);
    op_unlink(c, o);
    lite_rdma_mr_release(t, o->tmp);
    void *op = o->op;
    int status = o->status;
    free(o);
    t->up->send_done(t->core, op, status);
}

static enum ibv_wr_opcode piece_opcode(const struct lite_rdma_op *o, uint32_t piece)
{
    if (piece == RDMA_IMM_PIECE)
        return IBV_WR_RDMA_WRITE_WITH_IMM;
    if (o->kind == LITE_RMA_READ)
        return IBV_WR_RDMA_READ;
    return o->has_imm && o->npieces == 1 ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
}

/* Post one piece (or the op's immediate); -EAGAIN when its rail has no room now. */
static int post_piece(struct lite_transport *t, struct lite_rdma_op *o, uint32_t piece)
{
    struct lite_rdma_conn *c = o->conn;
    uint32_t rail = piece == RDMA_IMM_PIECE ? o->piece[0].rail : o->piece[piece].rail;
    struct lite_rdma_qp *q = c->out[rail];
    if (!lite_rdma_link_ok(c) || c->rearming[rail] || lite_rdma_sq_room(q) == 0)
        return -EAGAIN;
    enum ibv_wr_opcode opc = piece_opcode(o, piece);
    bool imm = opc == IBV_WR_RDMA_WRITE_WITH_IMM;
    if (imm && lite_rdma_window_avail(&c->imm_win[rail]) == 0)
        return -EAGAIN;
    uint64_t off = piece == RDMA_IMM_PIECE ? 0 : o->piece[piece].off;
    uint64_t len = piece == RDMA_IMM_PIECE ? 0 : o->piece[piece].len;
    struct ibv_sge sge = {.addr = o->laddr + off, .length = (uint32_t)len, .lkey = o->lkey[rail]};
    struct ibv_send_wr wr = {
        .sg_list = &sge,
        .num_sge = len ? 1 : 0,
        .opcode = opc,
        .wr = {.rdma = {.remote_addr = o->raddr + off, .rkey = o->rkey[rail]}}};
    if (imm)
        wr.imm_data = htonl(o->imm);
    if (opc != IBV_WR_RDMA_READ && len && len <= q->max_inline)
        wr.send_flags = IBV_SEND_INLINE;
    int rc = lite_rdma_post_sq(t, q, &wr, WR_RMA, true, o, piece);
    if (rc == 0 && imm)
        lite_rdma_window_take(&c->imm_win[rail], 1);
    return rc;
}

int lite_rdma_rma_post_piece(struct lite_transport *t, struct lite_rdma_op *o, uint32_t piece)
{
    return post_piece(t, o, piece);
}

bool lite_rdma_rma_is_imm(const struct lite_rdma_op *o, uint32_t piece)
{
    return piece_opcode(o, piece) == IBV_WR_RDMA_WRITE_WITH_IMM;
}

/* Post what the op still has to post; 0 when nothing is left, -EAGAIN when it must wait. */
static int op_advance(struct lite_transport *t, struct lite_rdma_op *o)
{
    while (o->next_piece < o->npieces) {
        int rc = post_piece(t, o, o->next_piece);
        if (rc)
            return rc;
        o->next_piece++;
    }
    /* the immediate of a multi-piece write, once all pieces are done */
    if (o->has_imm && o->npieces > 1 && !o->imm_posted && o->status == 0 && o->left == 1) {
        int rc = post_piece(t, o, RDMA_IMM_PIECE);
        if (rc)
            return rc;
        o->imm_posted = true;
    }
    return 0;
}

static bool replay_left(const struct lite_rdma_conn *c)
{
    for (uint32_t r = 0; r < c->nrails; r++)
        if (c->rma_replay[r].next < c->rma_replay[r].n)
            return true;
    return false;
}

static void wait_append(struct lite_rdma_conn *c, struct lite_rdma_op *o)
{
    if (waiting(c, o))
        return;
    o->wnext = NULL;
    if (c->wait_tail)
        c->wait_tail->wnext = o;
    else
        c->wait = o;
    c->wait_tail = o;
}

/* A post failed for a reason other than room: the connection is unusable. */
static void post_failed(struct lite_transport *t, struct lite_rdma_conn *c, int rc)
{
    char w[96];
    lite_fmt(w, sizeof(w), "posting a one-sided op to rank %d failed: %s", c->peer, strerror(-rc));
    lite_rdma_link_break(t, c, w);
}

int lite_rdma_rma_post(struct lite_transport *t, const struct lite_tp_rma *r, void *op)
{
    if (r->peer < 0 || r->peer >= t->world || r->peer == t->rank)
        return -EINVAL;
    struct lite_rdma_conn *c = &t->conns[r->peer];
    if (c->state == CONN_DEAD || c->state == CONN_NONE)
        return -LITE_ERR_PEER_LOST;
    uint32_t nr = r->nrails < c->nrails ? r->nrails : c->nrails;
    if (nr == 0)
        return -EINVAL;
    /* The descriptor's rkeys must carry the tag of its core key. */
    uint32_t tag = lite_rdma_key_tag(r->remote_core_key);
    for (uint32_t i = 0; i < nr; i++)
        if ((uint32_t)(r->rkey[i] >> 32) != tag) {
            LITE_INFO("rdma rank %d: descriptor of rank %d: key and rkey of rail %u do not "
                      "belong together; op refused",
                      t->rank, r->peer, i);
            lite_rdma_later(t, op, -LITE_ERR_REMOTE_KEY);
            return 0;
        }
    bool imm = r->kind == LITE_RMA_WRITE && r->has_imm;
    if (r->len == 0 && !imm) {
        lite_rdma_later(t, op, 0); /* nothing to move */
        return 0;
    }
    uint64_t max_piece = UINT64_MAX;
    for (uint32_t i = 0; i < nr; i++)
        if (t->rails[i].max_msg && t->rails[i].max_msg < max_piece)
            max_piece = t->rails[i].max_msg;
    uint32_t first = c->rr++ % nr;
    size_t n = lite_rdma_stripe_plan(r->len, nr, first, t->stripe_min, 4096, max_piece, NULL, 0);
    struct lite_rdma_op *o = calloc(1, sizeof(*o) + n * sizeof(o->piece[0]));
    if (!o)
        return -ENOMEM;
    lite_rdma_stripe_plan(r->len, nr, first, t->stripe_min, 4096, max_piece, o->piece, n);
    o->npieces = (uint32_t)n;
    o->conn = c;
    o->op = op;
    o->kind = r->kind;
    o->has_imm = imm;
    o->imm = r->imm;
    o->laddr = (uintptr_t)r->local;
    o->raddr = r->remote_addr + r->remote_offset;
    for (uint32_t i = 0; i < nr; i++)
        o->rkey[i] = (uint32_t)r->rkey[i];
    int rc;
    if (r->local_handle) {
        struct lite_rdma_mr *m = r->local_handle;
        for (uint32_t i = 0; i < nr; i++)
            o->lkey[i] = m->mr[t->rails[i].dev]->lkey;
    } else if ((rc = lite_rdma_mr_local(t, r->local, r->len, o->lkey, &o->tmp)) != 0) {
        free(o);
        return rc;
    }
    o->left = o->npieces + (imm && o->npieces > 1);
    o->next = c->live;
    if (c->live)
        c->live->prev = o;
    c->live = o;
    rc = c->wait || !lite_rdma_link_ok(c) || replay_left(c) ? -EAGAIN : op_advance(t, o);
    if (rc == -EAGAIN) {
        wait_append(c, o);
    } else if (rc) {
        if (o->next_piece == 0) {
            op_unlink(c, o);
            lite_rdma_mr_release(t, o->tmp);
            free(o);
            return rc;
        }
        post_failed(t, c, rc);
    }
    return 0;
}

int lite_rdma_rma_flush(struct lite_transport *t, struct lite_rdma_conn *c)
{
    int n = 0;
    /* the WRs in flight at a break, on each rail in their order, before anything new */
    for (uint32_t r = 0; r < c->nrails && lite_rdma_link_ok(c); r++) {
        struct lite_rdma_replay *rp = &c->rma_replay[r];
        while (rp->next < rp->n && lite_rdma_link_ok(c)) {
            int rc = post_piece(t, rp->rec[rp->next].op, rp->rec[rp->next].piece);
            if (rc == -EAGAIN)
                break;
            if (rc) {
                post_failed(t, c, rc);
                return n;
            }
            rp->next++;
            n++;
        }
        if (rp->next == rp->n && rp->rec) {
            free(rp->rec);
            *rp = (struct lite_rdma_replay){0};
        }
    }
    if (replay_left(c))
        return n;
    while (c->wait && lite_rdma_link_ok(c)) {
        struct lite_rdma_op *o = c->wait;
        int rc = op_advance(t, o);
        if (rc == -EAGAIN)
            break;
        if (rc) {
            post_failed(t, c, rc);
            break;
        }
        c->wait = o->wnext;
        if (!c->wait)
            c->wait_tail = NULL;
        o->wnext = NULL;
        n++;
    }
    return n;
}

/*
 * The target refused the WR at `slot` (everything behind it on this QP was flushed unexecuted).
 * Keep what is behind it to post again, reset our end (new PSN), and ask the peer to judge the
 * refusal and re-arm its end; lite_rdma_rma_rearmed() continues when it answers.
 */
static void refused(struct lite_transport *t, struct lite_rdma_qp *q, uint32_t slot, int code,
                    enum ibv_wc_status st)
{
    struct lite_rdma_conn *c = q->conn;
    uint32_t rail = q->rail;
    struct lite_rdma_op *o = q->rec[slot].op;
    uint32_t piece = q->rec[slot].piece;
    uint64_t off = piece == RDMA_IMM_PIECE ? 0 : o->piece[piece].off;
    uint64_t len = piece == RDMA_IMM_PIECE ? 0 : o->piece[piece].len;
    uint32_t n = (uint32_t)(q->sq_head - q->sq_tail);
    free(c->again[rail]);
    c->again[rail] = calloc(n ? n : 1, sizeof(struct lite_rdma_sqrec));
    if (!c->again[rail]) {
        lite_rdma_conn_fail(t, c, -ENOMEM, "out of memory while re-arming");
        return;
    }
    for (uint32_t i = 0; i < n; i++)
        c->again[rail][i] = q->rec[(q->sq_tail + i) % q->sq_depth];
    c->nagain[rail] = n;
    c->rearming[rail] = true;
    c->rearm_op[rail] = o;
    /* Our own buffer was at fault (a local key or range): the target has nothing to judge,
     * but both ends are re-armed all the same (the QP is in error), and the op keeps our code. */
    c->rearm_local[rail] = st == IBV_WC_LOC_PROT_ERR || st == IBV_WC_LOC_ACCESS_ERR ||
                           st == IBV_WC_LOC_LEN_ERR || st == IBV_WC_MW_BIND_ERR;
    o->status = code;
    LITE_INFO("rdma rank %d: one-sided op to rank %d refused (%s); re-arming rail %u", t->rank,
              c->peer, ibv_wc_status_str(st), rail);
    if (lite_rdma_qp_reset(t, q) != 0 ||
        lite_rdma_sc_rearm(t, c, rail, o->kind, o->rkey[rail], o->raddr + off, len) != 0)
        lite_rdma_conn_fail(t, c, -LITE_ERR_PEER_LOST, "cannot re-arm a queue pair");
}

void lite_rdma_rma_done(struct lite_transport *t, struct lite_rdma_qp *q, uint32_t slot,
                        enum ibv_wc_status st)
{
    struct lite_rdma_conn *c = q->conn;
    struct lite_rdma_sqrec *rec = &q->rec[slot];
    struct lite_rdma_op *o = rec->op;
    if (st == IBV_WC_WR_FLUSH_ERR) {
        /* Behind a refused WR: reposted when the pair is re-armed. With no re-arm going on,
         * the QP went into the error state by itself (seen on Soft-RoCE shortly after a
         * re-connection, with no error completion before): a break, or the op never ends. */
        if (!c->rearming[q->rail])
            lite_rdma_link_break(t, c, "a one-sided WR was flushed: its queue pair failed");
        return;
    }
    bool fatal;
    int code = lite_rdma_wc_code(st, &fatal);
    if (code && fatal) {
        char w[128];
        lite_fmt(w, sizeof(w), "one-sided op to rank %d failed: %s", c->peer,
                 ibv_wc_status_str(st));
        lite_rdma_link_break(t, c, w);
        return;
    }
    if (code) {
        if (c->brk || c->state != CONN_UP)
            return; /* the link is being re-established: the WR is posted again */
        refused(t, q, slot, code, st);
        return;
    }
    lite_rdma_sq_retire(q, slot);
    if (lite_rdma_rma_is_imm(o, rec->piece))
        c->imm_done[q->rail]++;
    if (rec->piece == RDMA_IMM_PIECE)
        o->imm_posted = true;
    o->left--;
    if (o->left == 0) {
        op_finish(t, o);
        return;
    }
    if (o->has_imm && o->npieces > 1 && o->left == 1 && !o->imm_posted && o->status == 0 &&
        o->next_piece == o->npieces) {
        /* all bytes are in place: now the immediate */
        int rc = post_piece(t, o, RDMA_IMM_PIECE);
        if (rc == 0)
            o->imm_posted = true;
        else if (rc == -EAGAIN)
            wait_append(c, o);
        else
            post_failed(t, c, rc);
    }
}

void lite_rdma_rma_piece_done(struct lite_transport *t, struct lite_rdma_op *o, uint32_t piece)
{
    if (piece == RDMA_IMM_PIECE)
        o->imm_posted = true;
    if (--o->left == 0) {
        op_finish(t, o);
        return;
    }
    /* every byte of a striped write is in place: its immediate goes from the next flush */
    if (o->has_imm && o->npieces > 1 && o->left == 1 && !o->imm_posted && o->status == 0 &&
        o->next_piece == o->npieces)
        wait_append(o->conn, o);
}

/* The refused op gives up what it has not done (it completes with the target's reason). */
static void op_abandon(struct lite_rdma_op *o)
{
    o->left -= o->npieces - o->next_piece;
    o->next_piece = o->npieces;
    if (o->has_imm && o->npieces > 1 && !o->imm_posted) {
        o->imm_posted = true;
        o->left--;
    }
}

void lite_rdma_rma_rearmed(struct lite_transport *t, struct lite_rdma_conn *c, uint32_t rail,
                           const struct lite_rdma_ep *in_ep, int code)
{
    struct lite_rdma_qp *q = c->out[rail];
    struct lite_rdma_op *failed = c->rearm_op[rail];
    struct lite_rdma_sqrec *again = c->again[rail];
    uint32_t n = c->nagain[rail];
    c->again[rail] = NULL;
    c->nagain[rail] = 0;
    if (lite_rdma_qp_connect(t, q, in_ep) != 0) {
        free(again);
        lite_rdma_conn_fail(t, c, -LITE_ERR_PEER_LOST, "re-arming a queue pair failed");
        return;
    }
    lite_rdma_window_init(&c->imm_win[rail], c->imm_win[rail].depth);
    c->rearming[rail] = false;
    c->rearm_op[rail] = NULL;
    /* the refused op: its WR and whatever else of it was queued on this rail end here */
    if (failed) {
        if (!c->rearm_local[rail])
            failed->status = code;
        op_abandon(failed);
    }
    for (uint32_t i = 0; i < n; i++) {
        struct lite_rdma_op *o = again[i].op;
        if (!o)
            continue;
        if (o == failed) {
            o->left--;
            continue;
        }
        int rc = post_piece(t, o, again[i].piece);
        if (rc) {
            free(again);
            post_failed(t, c, rc == -EAGAIN ? -ENOSPC : rc);
            return;
        }
    }
    free(again);
    if (failed && failed->left == 0)
        op_finish(t, failed);
    lite_rdma_rma_flush(t, c);
}

void lite_rdma_rma_fail(struct lite_transport *t, struct lite_rdma_conn *c, int code)
{
    c->wait = c->wait_tail = NULL;
    for (uint32_t r = 0; r < LITE_MAX_RAILS; r++) {
        free(c->rma_replay[r].rec);
        c->rma_replay[r] = (struct lite_rdma_replay){0};
    }
    while (c->live) {
        struct lite_rdma_op *o = c->live;
        o->wnext = NULL;
        o->status = code;
        op_finish(t, o);
    }
}
