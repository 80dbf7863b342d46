/*
 * rma_emu.c - one-sided ops carried as control messages, for backends that move messages only
 * (no rma_post or mr_reg, or no LITE_CAP_WRITE: QUIC streams, NCCL send/recv, the loop backend),
 * and reads or writes with immediate for backends that lack just those capability bits.
 *
 * An op is a small header message on LITE_CHAN_CTRL, followed for a write (and for a read's
 * answer) by one DATA message whose payload is exactly the bytes. A backend delivers a peer's
 * messages in posting order, so the DATA that follows a header is that op's: the target checks
 * the header against its live registration (lite_mr_target: key, bounds, access, as for a
 * native backend's emulation), holds the region, and returns the region's address as the DATA's
 * destination, so the bytes land in place with no copy in between (recv_begin), or with the one
 * copy out of the backend's buffer (recv_msg). A refused op's DATA is discarded. The immediate
 * is counted only once the DATA is in place, then the target answers:
 *
 *   WRITE (40 B)  u64 id | u64 core key | u64 offset | u64 len | u32 imm | u32 flags
 *   READ  (32 B)  u64 id | u64 core key | u64 offset | u64 len
 *   ACK   (16 B)  u64 id | i64 status                  (a write: 0 or -LITE_ERR_REMOTE_*)
 *   RESP  (24 B)  u64 id | i64 status | u64 len         (a read; DATA of len bytes follows)
 *   DATA  (len)   the bytes announced by the WRITE or RESP just before
 *
 * A write asks for no ACK (F_NOACK) when the core learns of its delivery otherwise (it set
 * LITE_RMA_F_LOCAL_DONE: the rendezvous FIN or a batch's last page follows it on the same ordered
 * channel); its refusal is then kept for the next ACK (F_STICKY) or dropped. Messages to a peer
 * are ordered, so the emulation provides LITE_CAP_ORDERED_WRITE_MSG, and a refusal is an answer,
 * not a broken connection (LITE_CAP_REVOCABLE_RMA): the rendezvous of large messages runs over it
 * unchanged (RTS, CTS, WRITE + DATA, FIN), placing the payload straight into the receive buffer.
 * Answers come back in request order, so the initiator keeps a FIFO per peer and an answer must
 * name its head. Every field of every message is checked; anything out of place fails the peer
 * with -LITE_ERR_PROTOCOL, and no byte is written anywhere but into a live registered region (or,
 * for a read's answer, into the initiator's own local range of exactly the length it asked).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "credits.h"
#include "immcounter.h"
#include "mr.h"
#include "request.h"
#include "rma_emu.h"

enum {
    CT_WRITE = LITE_CTRL_EMU_FIRST,
    CT_READ = LITE_CTRL_EMU_FIRST + 1,
    CT_ACK = LITE_CTRL_EMU_FIRST + 2,
    CT_RESP = LITE_CTRL_EMU_FIRST + 3,
    CT_DATA = LITE_CTRL_EMU_FIRST + 4,
};
_Static_assert(CT_DATA == LITE_CTRL_EMU_LAST, "the control types match.c hands over");

#define WRITE_LEN 40
#define READ_LEN  32
#define ACK_LEN   16
#define RESP_LEN  24

#define F_IMM    0x1u /* count `imm` once the data is in place */
#define F_NOACK  0x2u /* no ACK: the initiator learns of the delivery otherwise */
#define F_STICKY 0x4u /* with F_NOACK: a refusal goes with the next ACK */

enum { OP_WRITE = 1, OP_READ = 2, OP_SERVE = 3, OP_NOTE = 4 };

/* One emulated op, or an answer the target sends. */
struct lite_emu_op {
    uint8_t kind; /* OP_*: WRITE, READ (initiator); SERVE (a read's data going out), NOTE */
    int peer;
    int status;  /* first error seen */
    int pending; /* events before it ends: messages in flight, the answer, the post's hold */
    uint64_t id, len;
    void *op;                                /* WRITE, READ: the core's op, told with send_done */
    uint8_t *local;                          /* READ: where the data goes */
    void *token;                             /* SERVE: the region, held until its data has left */
    struct lite_emu_op *next;                /* the peer's FIFO of ops awaiting an answer */
    struct lite_emu_op *all_prev, *all_next; /* ctx->emu_all */
    uint8_t msg[WRITE_LEN];                  /* the header's payload, live until it has left */
};

uint8_t lite_emu_needed(const struct lite_transport_ops *ops, uint32_t *caps_added)
{
    size_t n = ops->size;
#define HAS(f) (n >= offsetof(struct lite_transport_ops, f) + sizeof(ops->f) && ops->f)
    bool native = HAS(rma_post) && HAS(mr_reg) && HAS(mr_dereg) && (ops->caps & LITE_CAP_WRITE);
#undef HAS
    uint8_t emu = 0;
    uint32_t caps = 0;
    if (!native) {
        emu = LITE_EMU_WRITE | LITE_EMU_IMM | LITE_EMU_READ;
        caps = LITE_CAP_WRITE | LITE_CAP_WRITE_IMM | LITE_CAP_READ | LITE_CAP_EMULATED_RMA |
               LITE_CAP_ORDERED_WRITE_MSG | LITE_CAP_REVOCABLE_RMA;
    } else {
        if (!(ops->caps & LITE_CAP_WRITE_IMM))
            emu |= LITE_EMU_IMM, caps |= LITE_CAP_WRITE_IMM;
        if (!(ops->caps & LITE_CAP_READ))
            emu |= LITE_EMU_READ, caps |= LITE_CAP_READ;
    }
    *caps_added = caps;
    return emu;
}

/* ---- op records ---- */

static struct lite_emu_op *op_new(struct lite_ctx *ctx, uint8_t kind, int peer)
{
    struct lite_emu_op *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->kind = kind;
    e->peer = peer;
    e->all_next = ctx->emu_all;
    if (ctx->emu_all)
        ctx->emu_all->all_prev = e;
    ctx->emu_all = e;
    return e;
}

static void op_free(struct lite_ctx *ctx, struct lite_emu_op *e)
{
    if (e->all_prev)
        e->all_prev->all_next = e->all_next;
    else
        ctx->emu_all = e->all_next;
    if (e->all_next)
        e->all_next->all_prev = e->all_prev;
    free(e);
}

/* One event of e is over; the last ends it. */
static void op_put(struct lite_ctx *ctx, struct lite_emu_op *e)
{
    if (--e->pending > 0)
        return;
    if (e->kind == OP_WRITE || e->kind == OP_READ)
        ctx->up->send_done((struct lite_core *)ctx, e->op, e->status);
    else if (e->kind == OP_SERVE && e->token)
        lite_mr_target_done((struct lite_core *)ctx, e->token);
    op_free(ctx, e);
}

static void op_error(struct lite_emu_op *e, int status)
{
    if (status && !e->status)
        e->status = status;
}

void lite_emu_msg_done(struct lite_ctx *ctx, struct lite_emu_op *e, int status)
{
    op_error(e, status);
    op_put(ctx, e);
}

static void fifo_push(struct lite_peer *p, struct lite_emu_op *e)
{
    e->next = NULL;
    if (p->emu_wait_tail)
        p->emu_wait_tail->next = e;
    else
        p->emu_wait = e;
    p->emu_wait_tail = e;
}

static struct lite_emu_op *fifo_pop(struct lite_peer *p)
{
    struct lite_emu_op *e = p->emu_wait;
    if (e) {
        p->emu_wait = e->next;
        if (!p->emu_wait)
            p->emu_wait_tail = NULL;
        e->next = NULL;
    }
    return e;
}

/* Take e off the FIFO (a post that sent nothing; rare, so a walk). */
static void fifo_unlink(struct lite_peer *p, struct lite_emu_op *e)
{
    struct lite_emu_op *prev = NULL;
    for (struct lite_emu_op *o = p->emu_wait; o; prev = o, o = o->next) {
        if (o != e)
            continue;
        if (prev)
            prev->next = o->next;
        else
            p->emu_wait = o->next;
        if (p->emu_wait_tail == o)
            p->emu_wait_tail = prev;
        return;
    }
}

/* ---- initiator ---- */

int lite_emu_post(struct lite_ctx *ctx, const struct lite_tp_rma *rma, void *op)
{
    struct lite_peer *p = &ctx->peers[rma->peer];
    if (p->lost)
        return p->lost_code;
    bool read = rma->kind == LITE_RMA_READ;
    struct lite_emu_op *e = op_new(ctx, read ? OP_READ : OP_WRITE, rma->peer);
    if (!e)
        return -ENOMEM;
    e->op = op;
    e->len = rma->len;
    e->local = rma->local;
    e->id = ++p->emu_next_id;
    bool answer = read || !(rma->flags & LITE_RMA_F_LOCAL_DONE);
    bool data = !read && rma->len > 0;
    uint32_t flags = (rma->has_imm ? F_IMM : 0) | (answer ? 0 : F_NOACK) |
                     (!answer && (rma->flags & LITE_RMA_F_REFUSAL_TO_NEXT) ? F_STICKY : 0);
    lite_put64(e->msg, e->id);
    lite_put64(e->msg + 8, rma->remote_core_key);
    lite_put64(e->msg + 16, rma->remote_offset);
    lite_put64(e->msg + 24, rma->len);
    if (!read) {
        lite_put32(e->msg + 32, rma->imm);
        lite_put32(e->msg + 36, flags);
    }
    /* Held by the post itself (+1): a backend may finish the messages inside msg_send. */
    e->pending = 1 + 1 + data + answer;
    if (answer)
        fifo_push(p, e);
    int rc = lite_ctrl_send_emu(ctx, rma->peer, read ? CT_READ : CT_WRITE, e->msg,
                                read ? READ_LEN : WRITE_LEN, e);
    if (rc) {
        if (answer)
            fifo_unlink(p, e);
        op_free(ctx, e);
        return rc;
    }
    if (data) {
        rc = lite_ctrl_send_emu(ctx, rma->peer, CT_DATA, rma->local, rma->len, e);
        if (rc) {
            /* The header left alone: the target waits for data that will never come, so the
             * pair cannot go on. The op ends with the peer (its answer never comes). */
            op_error(e, rc);
            e->pending--;
            lite_peer_fail_deferred(ctx, rma->peer, rc,
                                    "the data of a one-sided write could not be posted");
        }
    }
    op_put(ctx, e);
    return 0;
}

/* ---- target ---- */

/* A fire-and-forget answer (ACK) whose payload lives in its own record. */
static void send_ack(struct lite_ctx *ctx, int peer, uint64_t id, int status)
{
    struct lite_emu_op *e = op_new(ctx, OP_NOTE, peer);
    if (!e) {
        lite_peer_fail_deferred(ctx, peer, -ENOMEM, "out of memory for a one-sided answer");
        return;
    }
    lite_put64(e->msg, id);
    lite_put64(e->msg + 8, (uint64_t)(int64_t)status);
    e->pending = 1;
    if (lite_ctrl_send_emu(ctx, peer, CT_ACK, e->msg, ACK_LEN, e))
        op_free(ctx, e); /* the peer is failing: the backend reports it */
}

/* A write's data is in place (or was discarded: status): count, release, answer. */
static void write_done(struct lite_ctx *ctx, int peer, const struct lite_emu_rx *x)
{
    struct lite_peer *p = &ctx->peers[peer];
    int st = x->status;
    if (!st) {
        if (x->flags & F_IMM)
            lite_imm_arrived((struct lite_core *)ctx, peer, x->imm);
        lite_mr_target_done((struct lite_core *)ctx, x->token);
    }
    if (!(x->flags & F_NOACK)) {
        if (p->emu_sticky) {
            st = st ? st : p->emu_sticky;
            p->emu_sticky = 0;
        }
        send_ack(ctx, peer, x->id, st);
    } else if (st && (x->flags & F_STICKY) && !p->emu_sticky) {
        p->emu_sticky = st;
    }
}

static int bad(struct lite_ctx *ctx, int peer, const char *what)
{
    char why[128];
    lite_fmt(why, sizeof(why), "rank %d sent %s", peer, what);
    lite_fail(ctx, -LITE_ERR_PROTOCOL, "%s", why);
    /* Found only once the message is in (recv_end cannot refuse it): the peer fails when
     * progress returns. */
    lite_peer_fail_deferred(ctx, peer, -LITE_ERR_PROTOCOL, why);
    return -LITE_ERR_PROTOCOL;
}

static int write_in(struct lite_ctx *ctx, int peer, const uint8_t *m)
{
    struct lite_emu_rx x = {.kind = CT_WRITE,
                            .id = lite_get64(m),
                            .len = lite_get64(m + 24),
                            .imm = lite_get32(m + 32),
                            .flags = lite_get32(m + 36)};
    if (x.flags & ~(F_IMM | F_NOACK | F_STICKY))
        return bad(ctx, peer, "a one-sided write with unknown flags");
    x.status = lite_mr_target((struct lite_core *)ctx, peer, lite_get64(m + 8), lite_get64(m + 16),
                              x.len, LITE_ACCESS_REMOTE_WRITE, &x.addr, &x.token);
    if (x.status)
        x.addr = x.token = NULL; /* the data is discarded */
    if (x.len == 0)
        write_done(ctx, peer, &x);
    else
        ctx->peers[peer].emu_rx = x;
    return 0;
}

static int read_in(struct lite_ctx *ctx, int peer, const uint8_t *m)
{
    uint64_t id = lite_get64(m), len = lite_get64(m + 24);
    void *addr = NULL, *token = NULL;
    int st = lite_mr_target((struct lite_core *)ctx, peer, lite_get64(m + 8), lite_get64(m + 16),
                            len, LITE_ACCESS_REMOTE_READ, &addr, &token);
    struct lite_emu_op *e = op_new(ctx, OP_SERVE, peer);
    if (!e) {
        if (!st)
            lite_mr_target_done((struct lite_core *)ctx, token);
        lite_peer_fail_deferred(ctx, peer, -ENOMEM, "out of memory for a one-sided read");
        return -ENOMEM;
    }
    e->token = st ? NULL : token;
    bool data = !st && len > 0;
    lite_put64(e->msg, id);
    lite_put64(e->msg + 8, (uint64_t)(int64_t)st);
    lite_put64(e->msg + 16, st ? 0 : len);
    e->pending = 1 + 1 + data;
    if (lite_ctrl_send_emu(ctx, peer, CT_RESP, e->msg, RESP_LEN, e)) {
        e->pending -= 1 + data; /* the peer is failing: the backend reports it */
    } else if (data) {
        /* Straight from the region, held until the backend is done with the bytes. */
        int rc = lite_ctrl_send_emu(ctx, peer, CT_DATA, addr, len, e);
        if (rc) {
            e->pending--;
            lite_peer_fail_deferred(ctx, peer, rc,
                                    "the data of a one-sided read could not be "
                                    "posted");
        }
    }
    op_put(ctx, e);
    return 0;
}

/* ---- answers, at the initiator ---- */

static int answer_status(int64_t st)
{
    return st > 0 || st < -(int64_t)INT32_MAX ? 1 : (int)st; /* 1: not a status */
}

static int ack_in(struct lite_ctx *ctx, int peer, const uint8_t *m)
{
    struct lite_peer *p = &ctx->peers[peer];
    struct lite_emu_op *e = p->emu_wait;
    int st = answer_status((int64_t)lite_get64(m + 8));
    if (!e || e->kind != OP_WRITE || e->id != lite_get64(m) || st > 0)
        return bad(ctx, peer, "an answer to no one-sided write of this rank");
    fifo_pop(p);
    op_error(e, st);
    op_put(ctx, e);
    return 0;
}

static int resp_in(struct lite_ctx *ctx, int peer, const uint8_t *m)
{
    struct lite_peer *p = &ctx->peers[peer];
    struct lite_emu_op *e = p->emu_wait;
    int st = answer_status((int64_t)lite_get64(m + 8));
    uint64_t len = lite_get64(m + 16);
    if (!e || e->kind != OP_READ || e->id != lite_get64(m) || st > 0 || len != (st ? 0 : e->len))
        return bad(ctx, peer, "an answer to no one-sided read of this rank");
    fifo_pop(p);
    if (st || len == 0) {
        op_error(e, st);
        op_put(ctx, e);
        return 0;
    }
    /* The data comes next, into the local range this rank asked for, of exactly that length. */
    p->emu_rx = (struct lite_emu_rx){.kind = CT_RESP, .len = len, .addr = e->local, .op = e};
    return 0;
}

/* ---- control messages (from match.c) ---- */

int lite_emu_ctrl_begin(struct lite_ctx *ctx, int peer, const struct lite_msg_hdr *hdr, void **dst)
{
    struct lite_peer *p = &ctx->peers[peer];
    const struct lite_emu_rx *x = &p->emu_rx;
    if (hdr->flags == CT_DATA) {
        if (!x->kind || hdr->len != x->len) {
            lite_fail(ctx, -LITE_ERR_PROTOCOL, "rank %d sent one-sided data nothing announced",
                      peer);
            return -LITE_ERR_PROTOCOL;
        }
        *dst = x->addr; /* NULL (refused): the backend discards the bytes */
        return 0;
    }
    size_t want = hdr->flags == CT_WRITE  ? WRITE_LEN
                  : hdr->flags == CT_READ ? READ_LEN
                  : hdr->flags == CT_ACK  ? ACK_LEN
                                          : RESP_LEN;
    if (x->kind || hdr->len != want) {
        lite_fail(ctx, -LITE_ERR_PROTOCOL, "rank %d sent a malformed one-sided message", peer);
        return -LITE_ERR_PROTOCOL;
    }
    *dst = p->rx_small;
    return 0;
}

int lite_emu_ctrl_end(struct lite_ctx *ctx, int peer)
{
    struct lite_peer *p = &ctx->peers[peer];
    const uint8_t *m = p->rx_small;
    switch (p->rx_hdr.flags) {
    case CT_WRITE:
        return write_in(ctx, peer, m);
    case CT_READ:
        return read_in(ctx, peer, m);
    case CT_ACK:
        return ack_in(ctx, peer, m);
    case CT_RESP:
        return resp_in(ctx, peer, m);
    default: { /* CT_DATA: in place */
        struct lite_emu_rx x = p->emu_rx;
        memset(&p->emu_rx, 0, sizeof(p->emu_rx));
        if (x.kind == CT_WRITE)
            write_done(ctx, peer, &x);
        else
            op_put(ctx, x.op);
        return 0;
    }
    }
}

void lite_emu_peer_failed(struct lite_ctx *ctx, int peer, int code)
{
    struct lite_peer *p = &ctx->peers[peer];
    struct lite_emu_rx x = p->emu_rx;
    memset(&p->emu_rx, 0, sizeof(p->emu_rx));
    if (x.kind == CT_WRITE && !x.status)
        lite_mr_target_done((struct lite_core *)ctx, x.token);
    if (x.kind == CT_RESP) {
        op_error(x.op, code);
        op_put(ctx, x.op);
    }
    p->emu_sticky = 0;
    /* No answer will come; their messages still end through the backend's send_done. */
    for (struct lite_emu_op *e; (e = fifo_pop(p)) != NULL;) {
        op_error(e, code);
        op_put(ctx, e);
    }
}

void lite_emu_fini(struct lite_ctx *ctx)
{
    while (ctx->emu_all)
        op_free(ctx, ctx->emu_all);
    for (int i = 0; ctx->peers && i < ctx->s.world_size; i++) {
        memset(&ctx->peers[i].emu_rx, 0, sizeof(ctx->peers[i].emu_rx));
        ctx->peers[i].emu_wait = ctx->peers[i].emu_wait_tail = NULL;
    }
}
