/*
 * efa_cq.c - completion queues: read every rail's CQ (FI_CQ_FORMAT_DATA), hand each completion
 * to its op by the context's kind, turn remote CQ data into the core's imm_arrived, and turn
 * error completions (fi_cq_readerr) into the core's typed errors. lite_efa_err() is the one place
 * where libfabric's codes become liblitetx's.
 */
#include <stddef.h>
#include <string.h>

#include "efa.h"

#define CQ_BATCH  16
#define CQ_ROUNDS 8 /* batches per rail per poll: progress returns even under a flood */

int lite_efa_err(int fi_code)
{
    int c = fi_code < 0 ? -fi_code : fi_code;
    if (c == 0)
        return 0;
    if (lite_efa_err_is_conn(c))
        return -LITE_ERR_PEER_LOST;
    switch (c) {
    case FI_EAGAIN:
        return -EAGAIN;
    case FI_ENOMEM:
        return -ENOMEM;
    case FI_ECANCELED:
        return -LITE_ERR_CANCELLED;
    case FI_ETIMEDOUT:
        return -ETIMEDOUT;
    case FI_ETRUNC:
    case FI_ETOOSMALL:
        return -LITE_ERR_TRUNCATED;
    case FI_EKEYREJECTED:
    case FI_ENOKEY:
        return -LITE_ERR_REMOTE_KEY;
    case FI_EACCES:
    case FI_EPERM:
        return -LITE_ERR_REMOTE_ACCESS;
    case FI_ENOSYS:
    case FI_EOPNOTSUPP:
        return -ENOSYS;
    case FI_ENODATA:
        return -ENODEV;
    case FI_EINVAL:
    case FI_EBADFLAGS:
        return -EINVAL;
    case FI_EIO:
    case FI_EREMOTEIO:
        /* The provider says the remote side failed the op (EFA: unreachable or refusing). */
        return -LITE_ERR_REMOTE;
    default:
        return c < FI_ERRNO_OFFSET ? -c : -LITE_ERR_REMOTE;
    }
}

bool lite_efa_err_is_conn(int fi_code)
{
    int c = fi_code < 0 ? -fi_code : fi_code;
    switch (c) {
    case FI_ECONNREFUSED:
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
    case FI_EHOSTUNREACH:
    case FI_ENETUNREACH:
    case FI_ENETDOWN:
    case EPIPE: /* libfabric has no FI_EPIPE; its codes below 256 are errno values */
    case FI_EHOSTDOWN:
    case FI_ESHUTDOWN:
        return true;
    default:
        return false;
    }
}

int lite_efa_loss_code(const struct lite_transport *t, int code)
{
    return code == -LITE_ERR_CANCELLED && !t->closing ? -LITE_ERR_PEER_LOST : code;
}

/* The rank behind a source address (FI_SOURCE), or -1. */
static int rank_of(struct lite_transport *t, uint32_t rail, fi_addr_t a)
{
    if (a == FI_ADDR_NOTAVAIL)
        return -1;
    if (t->av_is_rank)
        return a < (fi_addr_t)t->world ? (int)a : -1;
    for (int p = 0; p < t->world; p++)
        if (t->rail[rail].addr[p] == a)
            return p;
    return -1;
}

static void on_imm(struct lite_transport *t, uint32_t rail, uint64_t data, fi_addr_t src)
{
    int peer = -1;
    uint32_t count = 1;
    if (t->imm_mode == IMM_CQDATA64) {
        uint64_t r = data >> 32 & ((1ull << (LITE_EFA_CQ_COUNT_SHIFT - 32)) - 1);
        peer = r >= 1 && r <= (uint64_t)t->world ? (int)r - 1 : -1;
        count = (uint32_t)(data >> LITE_EFA_CQ_COUNT_SHIFT) + 1;
    } else {
        peer = rank_of(t, rail, src);
    }
    if (peer < 0) {
        /* The data is in place (the provider checked the key): count it, but say so. */
        LITE_ERROR("%s rank %d: a write with immediate %#x arrived from an unknown sender", EFA_LOG,
                   t->rank, (uint32_t)data);
        peer = t->rank;
    }
    for (uint32_t i = 0; i < count; i++)
        t->up->imm_arrived(t->core, peer, (uint32_t)data);
    t->events += (int)count;
    t->imm_seen = true;
}

static void dispatch(struct lite_transport *t, uint32_t rail, const struct fi_cq_data_entry *e,
                     fi_addr_t src)
{
    if ((e->flags & FI_REMOTE_CQ_DATA) && (e->flags & (FI_REMOTE_WRITE | FI_RMA)))
        on_imm(t, rail, e->data, src);
    /* A peer's write is no op of ours (remote CQ data never consumes a posted receive here),
     * and its op_context is not ours to read: libfabric 1.17's shm leaves junk there (0x1,
     * after some 20 000 1 MiB writes with an immediate), which crashed the target. */
    if (e->flags & (FI_REMOTE_WRITE | FI_REMOTE_READ))
        return;
    struct efa_ctx *c = e->op_context;
    if (!c)
        return;
    switch (c->kind) {
    case CTX_RX:
        lite_efa_rx_done(t, (struct efa_rxbuf *)c, e->len);
        break;
    case CTX_TX:
        lite_efa_tx_done(t, (struct efa_tx *)c, false, 0);
        break;
    case CTX_TXBIG:
        lite_efa_tx_done(t, (struct efa_tx *)((char *)c - offsetof(struct efa_tx, big_c)), true, 0);
        break;
    case CTX_BIGRX:
        lite_efa_bigrx_done(t, (struct efa_bigrx *)c, 0, e->len);
        break;
    case CTX_PIECE:
        t->rail[rail].out--;
        lite_efa_piece_done(t, (struct efa_piece *)c, 0);
        break;
    case CTX_DCFLUSH:
        t->rail[rail].out--;
        lite_efa_dc_flush_done(t, c, 0);
        break;
    default:
        LITE_ERROR("%s rank %d: completion with an unknown context", EFA_LOG, t->rank);
        break;
    }
}

static void dispatch_err(struct lite_transport *t, uint32_t rail)
{
    struct fi_cq_err_entry e;
    memset(&e, 0, sizeof(e));
    if (fi_cq_readerr(t->rail[rail].cq, &e, 0) != 1)
        return;
    int code = lite_efa_err(e.err);
    struct efa_ctx *c = e.op_context;
    if (!c || !t->closing || e.err != FI_ECANCELED)
        LITE_DEBUG("%s rank %d rail %u: error completion: %s (%s)", EFA_LOG, t->rank, rail,
                   fi_strerror(e.err),
                   fi_cq_strerror(t->rail[rail].cq, e.prov_errno, e.err_data, NULL, 0));
    if (!c || (e.flags & (FI_REMOTE_WRITE | FI_REMOTE_READ)))
        return; /* a peer's op that failed here: not ours (see dispatch); the peer is told */
    switch (c->kind) {
    case CTX_RX: {
        /* A receive buffer failed (cancelled at close, or a message too long for it, which
         * no peer of ours sends): nothing to deliver; keep the pool whole. */
        struct efa_rxbuf *b = (struct efa_rxbuf *)c;
        if (!t->closing) {
            LITE_WARN("%s rank %d: a receive failed: %s", EFA_LOG, t->rank, fi_strerror(e.err));
            lite_efa_rx_repost(t, b);
        }
        break;
    }
    case CTX_TX:
        lite_efa_tx_done(t, (struct efa_tx *)c, false, code);
        break;
    case CTX_TXBIG:
        lite_efa_tx_done(t, (struct efa_tx *)((char *)c - offsetof(struct efa_tx, big_c)), true,
                         code);
        break;
    case CTX_BIGRX: {
        struct efa_bigrx *g = (struct efa_bigrx *)c;
        /* A discarded payload is truncated into scratch on purpose. */
        lite_efa_bigrx_done(t, g, g->discard && e.err == FI_ETRUNC ? 0 : code, e.len);
        break;
    }
    case CTX_PIECE:
        t->rail[rail].out--;
        lite_efa_piece_done(t, (struct efa_piece *)c, code);
        break;
    case CTX_DCFLUSH:
        t->rail[rail].out--;
        lite_efa_dc_flush_done(t, c, code);
        break;
    default:
        break;
    }
}

/* With writer copy, rails past 0 carry only the second stripes of large writes and reads,
 * which the initiator copies inside its post: a peer's need nothing from this side's progress
 * but the draining of their command slots. So such a rail is read when this side has posts on
 * it whose completions are due, and otherwise every QUIET_POLLS-th poll: one provider progress
 * call (endpoint lock, two queues) less per poll on the message path. */
#define QUIET_POLLS 16

/* A rail past 0 with nothing due from this side's progress (see above). */
static bool rail_idle(const struct lite_transport *t, uint32_t r)
{
    return r > 0 && t->writer_copy && t->rail[r].out == 0;
}

static bool rail_quiet(const struct lite_transport *t, uint32_t r)
{
    return rail_idle(t, r) && t->polls % QUIET_POLLS != 0;
}

/* Read one rail's CQ: up to CQ_ROUNDS batches, each completion handed to its op. */
static inline int cq_read(struct lite_transport *t, uint32_t r)
{
    int n = 0;
    struct fi_cq_data_entry e[CQ_BATCH];
    fi_addr_t src[CQ_BATCH];
    bool from = t->imm_mode == IMM_CQDATA32;
    for (int round = 0; round < CQ_ROUNDS; round++) {
        ssize_t got = from ? fi_cq_readfrom(t->rail[r].cq, e, CQ_BATCH, src)
                           : fi_cq_read(t->rail[r].cq, e, CQ_BATCH);
        if (got > 0) {
            for (ssize_t i = 0; i < got; i++)
                dispatch(t, r, &e[i], from ? src[i] : FI_ADDR_NOTAVAIL);
            n += (int)got;
            if (got < CQ_BATCH)
                break;
        } else if (got == -FI_EAVAIL) {
            dispatch_err(t, r);
            n++;
        } else {
            if (got != -FI_EAGAIN)
                LITE_ERROR("%s rank %d: fi_cq_read on rail %u failed: %s", EFA_LOG, t->rank, r,
                           fi_strerror((int)-got));
            break;
        }
    }
    return n;
}

bool lite_efa_later_rails_idle(const struct lite_transport *t)
{
    for (uint32_t r = 1; r < t->nrails; r++)
        if (!rail_idle(t, r))
            return false;
    return true;
}

/* Rail 0 read up to `polls` times while it has nothing, with none of a progress round's
 * bookkeeping between the reads: what a waiting core repeats. */
int lite_efa_cq_spin(struct lite_transport *t, int polls)
{
    for (int i = 0; i < polls; i++) {
        int n = cq_read(t, 0);
        if (n)
            return n;
    }
    return 0;
}

int lite_efa_cq_poll(struct lite_transport *t)
{
    t->polls++;
    int n = cq_read(t, 0);
    for (uint32_t r = 1; r < t->nrails; r++)
        if (!rail_quiet(t, r))
            n += cq_read(t, r);
    return n;
}
