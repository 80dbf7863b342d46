/*
 * rdma_int.h - the RDMA backend's internal structures, shared by its files:
 *   rdma.c       ops table, open/close, connect_all, progress (completion dispatch), peer loss
 *   rdma_dev.c   probe, device/port discovery, rails, GID choice glue
 *   rdma_qp.c    queue pairs: creation, state transitions, re-arming, posting, wr_id encoding
 *   rdma_conn.c  the per-pair TCP side channel: handshake, re-arm requests, BYE, liveness
 *   rdma_cm.c    QPs connected through librdmacm (LITETX_RDMA_CM=1, optional)
 *   rdma_link.c  a broken link re-established and resumed (numbered SENDs, replay)
 *   rdma_msg.c   messages: SENDs into pre-posted receives, fragments, receive windows
 *   rdma_rma.c   one-sided ops: WRITE, WRITE_WITH_IMM, READ, striping, error recovery
 *   rdma_mr.c    registrations: regions, send-buffer lookup and registration, dmabuf
 *   rdma_err.c   the one translation from verbs status codes to liblitetx codes
 *
 * Per peer there are, on every rail r (a device port): an "out" RC QP on which this rank posts
 * its one-sided ops, and an "in" RC QP that only answers the peer's (and receives its
 * immediates); plus one "msg" RC QP on rail 0 for messages and receive-window reports. A
 * one-sided op the target refuses breaks only the out/in pair it used, which both sides re-arm
 * over the side channel; messages never see it.
 */
#ifndef LITE_RDMA_INT_H
#define LITE_RDMA_INT_H

#include <infiniband/verbs.h>

#include "tp_support.h"
#include "transports/rdma/rdma_logic.h"

/* ---- tunables (environment; docs/RDMA.md) ---- */
#define RDMA_TX_DEPTH    32            /* LITETX_RDMA_TX_DEPTH: SENDs in flight per peer */
#define RDMA_SQ_DEPTH    128           /* LITETX_RDMA_SQ_DEPTH: one-sided WRs in flight per rail */
#define RDMA_IMM_DEPTH   128           /* LITETX_RDMA_IMM_DEPTH: immediates in flight per rail */
#define RDMA_STRIPE_MIN  (256u << 10)  /* LITETX_RDMA_STRIPE_MIN: smallest stripe per rail */
#define RDMA_MAX_SLOT    (64u << 10)   /* largest default receive slot payload */
#define RDMA_MIN_SLOT    1024          /* smallest default slot payload, however many peers */
#define RDMA_SLOT_BUDGET (64ull << 20) /* default slot memory per rank, all peers together */
#define RDMA_POST_BUDGET (256u << 10)  /* LITETX_RDMA_POST_BUDGET */
#define RDMA_INLINE      128           /* inline data requested per WR */
#define RDMA_MAX_RD_ATOM 16
#define RDMA_CLOSE_MS    5000

/* ---- devices and rails ---- */

struct lite_rdma_dev {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_comp_channel *ch;
    struct ibv_cq *cq;
    bool armed; /* a completion event was requested */
    int max_cqe;
    int max_rd_atom;
    char name[64];
};

struct lite_rdma_rail {
    int dev; /* index into tp->devs */
    uint8_t port;
    uint8_t link_layer; /* IBV_LINK_LAYER_* */
    uint16_t lid;
    uint32_t gid_index;
    uint8_t gid[16];
    uint8_t mtu;      /* enum ibv_mtu (active) */
    uint32_t max_msg; /* largest message of the port */
    char name[80];    /* "rxe0:1 gid 1 ::ffff:192.0.2.1" for logs */
};

/* ---- queue pairs ---- */

enum { QP_MSG = 0, QP_OUT = 1, QP_IN = 2 };

/* What a work request was (the type field of its wr_id). */
enum {
    WR_RECV_MSG = 1, /* receive slot on a msg QP */
    WR_RECV_IMM = 2, /* zero-length receive on an in QP (for immediates) */
    WR_SEND = 3,     /* message fragment */
    WR_CREDIT = 4,   /* receive-window report (RDMA write to the peer's mailbox) */
    WR_FENCE = 5,    /* signalled empty write at close, to learn that everything left */
    WR_RMA = 6,      /* a piece of a one-sided op */
};

/* wr_id: qp index (24 bits) | epoch (8) | type (4) | slot or record (28). */
static inline uint64_t rdma_wrid(uint32_t qpi, uint16_t epoch, unsigned type, uint32_t slot)
{
    return (uint64_t)qpi << 40 | (uint64_t)(epoch & 0xff) << 32 | (uint64_t)(type & 0xf) << 28 |
           (slot & 0x0fffffffu);
}
#define WRID_QP(w)    ((uint32_t)((w) >> 40))
#define WRID_EPOCH(w) ((uint16_t)(((w) >> 32) & 0xff))
#define WRID_TYPE(w)  ((unsigned)(((w) >> 28) & 0xf))
#define WRID_SLOT(w)  ((uint32_t)((w)&0x0fffffffu))

struct lite_rdma_op;

/* What a send-queue entry was, by its position (seq % sq_depth). */
struct lite_rdma_sqrec {
    uint8_t type;
    bool signaled;
    struct lite_rdma_op *op; /* WR_RMA */
    uint32_t piece;          /* WR_RMA: piece index, or RDMA_IMM_PIECE */
    uint32_t len;            /* WR_SEND: the frame's bytes (header included) */
    uint64_t seq;            /* WR_SEND: the frame's number on the link */
};
#define RDMA_IMM_PIECE UINT32_MAX

/* The peer's end of a QP (from the handshake), kept to re-arm. */
struct lite_rdma_ep {
    uint32_t qpn;
    uint32_t psn;
    uint16_t lid;
    uint8_t gid[16];
    uint8_t mtu;
};

struct lite_rdma_conn;
struct rdma_cm_id;
struct rdma_event_channel;

struct lite_rdma_qp {
    struct ibv_qp *qp;
    struct lite_rdma_conn *conn;
    uint32_t idx; /* index in tp->qps, carried in every wr_id */
    uint8_t kind; /* QP_MSG / QP_OUT / QP_IN */
    uint8_t rail;
    uint16_t epoch;  /* bumped at every re-arm; completions of an older epoch are ignored */
    bool link_reset; /* the last reset was a link's break (rdma_link.c), not a re-arm */
    uint32_t psn;    /* this end's starting PSN */
    uint32_t max_inline;
    uint32_t sq_depth;
    uint64_t sq_head, sq_tail; /* WRs posted / known complete (monotonic) */
    struct lite_rdma_sqrec *rec;
    uint32_t rq_depth;
    struct lite_rdma_ep remote;
    /* connected through rdma_cm (rdma_cm.c): its id, and the address vector and path MTU the
     * CM chose, which a re-arm reuses */
    struct rdma_cm_id *cm_id;
    bool have_cm, cm_up;
    uint8_t cm_mtu;
    struct ibv_ah_attr cm_av;
};

/* ---- messages ---- */

/* A message waiting for room (receive window or send queue) at the peer, in posting order. */
struct lite_rdma_pend {
    struct lite_rdma_pend *next;
    struct lite_msg_hdr hdr;
    const uint8_t *payload;
    uint64_t done; /* payload bytes already posted */
    bool started;  /* the FIRST fragment is posted */
    void *op;
};

/* ---- one-sided ops ---- */

struct lite_rdma_mr;

struct lite_rdma_op {
    struct lite_rdma_op *next, *prev; /* conn's live list */
    struct lite_rdma_op *wnext;       /* conn's list of ops waiting for room */
    struct lite_rdma_conn *conn;
    void *op; /* the core's */
    int kind; /* LITE_RMA_WRITE / LITE_RMA_READ */
    bool has_imm;
    bool imm_posted;
    uint32_t imm;
    int status;
    uint64_t laddr, raddr;
    uint32_t lkey[LITE_MAX_RAILS];
    uint32_t rkey[LITE_MAX_RAILS];
    struct lite_rdma_mr *tmp; /* a registration made for this op (rendezvous send buffers) */
    uint32_t npieces;
    uint32_t next_piece; /* pieces posted so far (in order) */
    uint32_t left;       /* pieces (and the immediate) not complete yet */
    struct lite_rdma_piece piece[];
};

/* ---- registrations ---- */

struct lite_rdma_mr {
    struct lite_rdma_mr *next, *prev; /* tp's list of live registrations */
    uint8_t *addr;
    size_t len;
    unsigned access; /* enum lite_transport_access */
    uint64_t core_key;
    bool temp;      /* made by the backend for a send buffer, not by lite_mr_reg */
    uint32_t users; /* temp: ops using it now */
    uint64_t stamp; /* temp: last use, for the cache's LRU */
    int dmabuf_fd;
    struct ibv_mr *mr[LITE_MAX_RAILS]; /* per device (tp->devs index) */
};

/* ---- per peer ---- */

/* BROKEN: this side's QPs are reset after a break, waiting for the peer's RESUME; READY: both
 * sides' QPs are connected again, waiting for the peer's RESUMED before posting (rdma_link.c). */
enum { CONN_NONE = 0, CONN_UP = 1, CONN_DEAD = 2, CONN_BROKEN = 3, CONN_READY = 4 };

/* A SEND frame posted before a break and not applied by the peer: posted again, in order. */
struct lite_rdma_frame_copy {
    struct lite_rdma_frame_copy *next;
    uint64_t seq;
    uint32_t len;
    uint8_t b[];
};

/* The one-sided WRs of a rail that were in flight at a break, in posting order. */
struct lite_rdma_replay {
    struct lite_rdma_sqrec *rec;
    uint32_t n, next;
};

/* Words in a peer's mailbox row: its message window, then one per rail for its immediates. */
#define LITE_RDMA_MBOX_ROW (1 + LITE_MAX_RAILS)

struct lite_rdma_conn {
    int peer;
    uint8_t state;
    bool bye;   /* the peer announced an orderly close */
    int fd;     /* side channel (TCP) */
    bool hello; /* handshake done */
    uint32_t nrails;
    struct lite_rdma_qp *msg;
    struct lite_rdma_qp *out[LITE_MAX_RAILS], *in[LITE_MAX_RAILS];

    /* message slots: rx_depth receive slots, then tx_depth send slots, one registration */
    uint8_t *slots;
    struct ibv_mr *slots_mr;
    uint32_t slot_bytes, rx_depth, tx_depth, imm_depth;
    uint32_t peer_slot_bytes; /* the peer's receive slot size: what a SEND may carry */

    struct lite_rdma_window msg_win;                 /* the peer's message receives */
    struct lite_rdma_window imm_win[LITE_MAX_RAILS]; /* the peer's immediate receives */
    struct lite_rdma_rxacct msg_rx, imm_rx[LITE_MAX_RAILS];
    bool report_due;    /* a window report waits for send-queue room */
    uint64_t peer_mbox; /* our row in the peer's mailbox array, and its own key */
    uint32_t peer_mbox_rkey;
    /* The peer's row in ours, registered alone: a peer's key reaches its own row and nothing
     * else, so no rank can overwrite what another reports (one registration for the whole
     * array let any peer write every row). */
    struct ibv_mr *mbox_mr;

    struct lite_rdma_pend *pend, *pend_tail;
    /* the message arriving */
    bool rx_active;
    uint8_t *rx_dst;
    uint64_t rx_left;
    void *rx_token;

    struct lite_rdma_op *live;             /* ops in flight */
    struct lite_rdma_op *wait, *wait_tail; /* ops waiting for room, in order */
    uint32_t rr;                           /* next rail for an unstriped op */

    /* side channel frame being read */
    uint8_t sc[1024];
    size_t sc_len;
    /* re-arm in progress per rail (initiator side): the op that failed, and the send-queue
     * entries behind it, to post again once the peer has re-armed its end */
    struct lite_rdma_op *rearm_op[LITE_MAX_RAILS];
    bool rearm_local[LITE_MAX_RAILS]; /* ...and it failed on our side: keep our reason */
    bool rearming[LITE_MAX_RAILS];
    struct lite_rdma_sqrec *again[LITE_MAX_RAILS];
    uint32_t nagain[LITE_MAX_RAILS];
    char desc[32];
    uint64_t peer_incarnation; /* rdma_cm: from its private data (0: not yet known) */

    /* the link across breaks (rdma_link.c) */
    bool brk;                          /* a break was seen: handled by the next progress */
    char brk_why[128];                 /* ...and why */
    uint32_t link_epoch;               /* breaks both sides agreed on */
    uint64_t tx_seq;                   /* SEND frames numbered so far (the next frame's number) */
    uint64_t rx_applied;               /* the peer's SEND frames applied here */
    uint64_t imm_done[LITE_MAX_RAILS]; /* our immediates on out[r] known complete */
    uint64_t imm_applied[LITE_MAX_RAILS]; /* the peer's immediates counted here, per rail */
    struct lite_rdma_frame_copy *replay;  /* frames to post again, before c->pend */
    struct lite_rdma_replay rma_replay[LITE_MAX_RAILS];
    int64_t down_ns, resume_deadline;
    uint32_t attempts;
    uint64_t breaks, resumes;
};

/* A one-sided op that finished at post time (refused locally, or nothing to move): completed
 * from the next progress, since rma_post itself must not call send_done. */
struct lite_rdma_later {
    struct lite_rdma_later *next;
    void *op;
    int status;
};

struct lite_transport {
    int rank, world;
    /* The core's resolved variables: set during rdma_open only (lite_tp_env.get is valid
     * then), NULL after; what is needed later is kept in fields. */
    const struct lite_tp_env *env;
    long port_base; /* LITETX_RDMA_PORT (0: any free port) */
    struct lite_core *core;
    const struct lite_core_upcalls *up;
    int ndevs;
    struct lite_rdma_dev devs[LITE_MAX_RAILS];
    uint32_t nrails;
    struct lite_rdma_rail rails[LITE_MAX_RAILS];

    struct lite_rdma_conn *conns; /* by rank */
    struct lite_rdma_qp **qps;    /* by index (wr_id) */
    uint32_t nqps, qps_cap;

    /* mailboxes the peers write: [peer][0] message window, [peer][1 + r] immediates rail r;
     * each row is registered for its peer alone (lite_rdma_conn.mbox_mr) */
    volatile uint64_t *mbox;

    struct lite_rdma_mr *mrs; /* live registrations */
    uint32_t reg_cache;       /* LITETX_RDMA_REG_CACHE: temp registrations kept */
    uint32_t ncached;
    uint64_t stamp;

    struct lite_rdma_later *later;
    int64_t events_at; /* when the side channels were last looked at */

    /* message bytes a progress call (and the sends between two) may still post: bounds the
     * time one call spends copying and posting (LITETX_RDMA_POST_BUDGET) */
    uint64_t budget;
    /* settings */
    uint64_t post_budget;
    uint32_t credits, slot_payload, tx_depth, sq_depth, imm_depth;
    uint64_t stripe_min;
    int rnr_retry;
    uint8_t timeout;

    int listen_fd;
    struct sockaddr_storage addr;
    socklen_t addr_len;
    int epfd;
    bool closing;

    /* for tests: after this many SENDs, force the message QP they went on into the error state
     * (LITETX_RDMA_TEST_QP_ERROR; 0: never) */
    uint32_t test_qp_error;
    uint32_t test_qp_errors; /* ...this many times, every test_qp_error SENDs (default 1) */
    uint64_t sends;
    bool test_no_resume; /* LITETX_RDMA_TEST_RESUME=0: never answer a re-establishment */
    int reconnect_ms;    /* lite_config_t.reconnect_timeout_ms (0: a break is final) */
    bool link_work;      /* a link is broken or being re-established (rdma_link.c) */
    int64_t active_ns;   /* the last progress call that did something */
    int64_t stall_ns;    /* the last stall report */

    /* rdma_cm (LITETX_RDMA_CM=1; rdma_cm.c) */
    bool use_cm;
    struct rdma_event_channel *cm_ch;
    struct rdma_cm_id *cm_listen;
    struct rdma_cm_id *cm_destroy; /* a refused id, destroyed once its event is acknowledged */
    uint16_t cm_port;
    uint64_t incarnation; /* drawn at open */
    bool cm_connecting;   /* inside connect_all: errors go to cm_err / cm_why */
    int cm_err;
    char cm_why[256];
};

/* ---- rdma.c ---- */
/* The peer is unusable: fail what is outstanding to it and tell the core (once). */
void lite_rdma_conn_fail(struct lite_transport *t, struct lite_rdma_conn *c, int code,
                         const char *why);
void lite_rdma_later(struct lite_transport *t, void *op, int status);
/* Complete what the CQs hold now (rdma.c). */
int lite_rdma_poll_cqs(struct lite_transport *t);
/* A variable of the backend's table as the core resolved it (range checked there), else def. */
uint32_t lite_rdma_env_u32(const struct lite_transport *t, const char *name, uint32_t def);

/* ---- rdma_dev.c ---- */
int lite_rdma_probe(const struct lite_tp_env *env, char *why, size_t why_len);
/* Open the devices and choose the rails (LITETX_RDMA_DEVICES, GIDs) for bind_host. */
int lite_rdma_rails_open(struct lite_transport *t, const char *bind_host, char *why,
                         size_t why_len);
void lite_rdma_rails_close(struct lite_transport *t);

/* ---- rdma_qp.c ---- */
int lite_rdma_qp_create(struct lite_transport *t, struct lite_rdma_conn *c, int kind, uint32_t rail,
                        struct lite_rdma_qp **out);
void lite_rdma_qp_destroy(struct lite_transport *t, struct lite_rdma_qp *q);
/* INIT -> RTR -> RTS towards `remote`. */
int lite_rdma_qp_connect(struct lite_transport *t, struct lite_rdma_qp *q,
                         const struct lite_rdma_ep *remote);
/* A new QP in place of q's (a new QP number; the old one destroyed), then as qp_reset; when
 * no new QP can be had, q's own is reset. Soft-RoCE (rxe) left some reset QPs stuck: a WR
 * posted after the re-connection never completed, not even in error. */
int lite_rdma_qp_renew(struct lite_transport *t, struct lite_rdma_qp *q);
/* Back to INIT with a fresh epoch and PSN, the send queue forgotten (re-arming). */
int lite_rdma_qp_reset(struct lite_transport *t, struct lite_rdma_qp *q);
/* This end as the peer needs it. */
void lite_rdma_qp_ep(struct lite_transport *t, const struct lite_rdma_qp *q,
                     struct lite_rdma_ep *ep);
static inline uint32_t lite_rdma_sq_room(const struct lite_rdma_qp *q)
{
    return q->sq_depth - (uint32_t)(q->sq_head - q->sq_tail);
}
/* Post one send-queue WR, recording what it is; fills wr_id and the signalled flag. */
int lite_rdma_post_sq(struct lite_transport *t, struct lite_rdma_qp *q, struct ibv_send_wr *wr,
                      uint8_t type, bool signal, struct lite_rdma_op *op, uint32_t piece);
/* Write one 8-byte word (a window report) from the next send slot of c's message QP to
 * remote_addr under the peer's mailbox key; -EAGAIN when the send queue is full. */
int lite_rdma_post_word(struct lite_transport *t, struct lite_rdma_conn *c, uint64_t remote_addr,
                        uint64_t word, uint8_t type, bool signal);
/* A signalled WR at record `slot` completed: everything up to it is done. */
void lite_rdma_sq_retire(struct lite_rdma_qp *q, uint32_t slot);
int lite_rdma_post_recv_msg(struct lite_transport *t, struct lite_rdma_conn *c, uint32_t slot);
int lite_rdma_post_recv_imm(struct lite_transport *t, struct lite_rdma_qp *q, uint32_t n);

/* ---- rdma_conn.c ---- */
int lite_rdma_sc_listen(struct lite_transport *t, const char *bind_host, char *why, size_t why_len);
/* The handshake with every peer (connect_all's body). */
int lite_rdma_sc_connect_all(struct lite_transport *t, const void *const *blobs, const size_t *lens,
                             int64_t deadline, char *why, size_t why_len);
/* Read and handle side-channel frames of c (non-blocking). */
int lite_rdma_sc_service(struct lite_transport *t, struct lite_rdma_conn *c);
int lite_rdma_sc_send(struct lite_rdma_conn *c, uint8_t type, uint8_t rail, const void *p,
                      uint16_t len);
int lite_rdma_addr_get(struct lite_transport *t, void *blob, size_t *len);
/* The out QP of rail r (already reset) had an op refused: ask the peer why, and to re-arm its
 * end of the pair; the op was `kind` on [raddr, raddr + len) with rkey. */
int lite_rdma_sc_rearm(struct lite_transport *t, struct lite_rdma_conn *c, uint32_t rail, int kind,
                       uint32_t rkey, uint64_t raddr, uint64_t len);
/* ---- rdma_cm.c (stubs without librdmacm) ---- */
#define LITE_RDMA_EP_CM 3u /* epoll tag of the CM event channel */
bool lite_rdma_cm_wanted(const struct lite_transport *t);
/* Incarnation, event channel, listener (its port goes into the bootstrap blob). */
int lite_rdma_cm_open(struct lite_transport *t, char *why, size_t why_len);
/* Connect every QP through the CM: dial the lower ranks at peer_gids[p] (16 bytes per rail,
 * RoCE v2 addresses) and peer_ports[p], accept the higher ones. */
int lite_rdma_cm_connect_all(struct lite_transport *t, const uint8_t *const *peer_gids,
                             const uint16_t *peer_ports, int64_t deadline, char *why,
                             size_t why_len);
/* Handle what the event channel holds (non-blocking). */
int lite_rdma_cm_service(struct lite_transport *t);
void lite_rdma_cm_close(struct lite_transport *t);

enum {
    SC_HELLO = 1,
    SC_HELLO_ACK = 2,
    SC_REARM = 3,
    SC_REARM_ACK = 4,
    SC_BYE = 5,
    SC_RESUME = 6,  /* link epoch, what this side applied, its reset QPs' ends */
    SC_RESUMED = 7, /* link epoch: this side's QPs are connected to the sender's */
};
/* The peer's end of c's QPs: msg, then out and in of each rail (the frame layout of HELLO). */
int lite_rdma_sc_eps_put(struct lite_transport *t, struct lite_rdma_conn *c, uint8_t *p);
/* Connect c's QPs to the ends at p (as written by the peer's lite_rdma_sc_eps_put). */
int lite_rdma_sc_eps_apply(struct lite_transport *t, struct lite_rdma_conn *c, const uint8_t *p);
#define LITE_RDMA_EP_LEN 28

/* ---- rdma_link.c ---- */
/* May the link carry new SENDs and one-sided WRs now? */
static inline bool lite_rdma_link_ok(const struct lite_rdma_conn *c)
{
    return c->state == CONN_UP && !c->brk;
}
/* A QP of c failed, or its CM connection closed, while the peer process lives: mark the link
 * broken (from anywhere, completions included); lite_rdma_link_run re-establishes it. */
void lite_rdma_link_break(struct lite_transport *t, struct lite_rdma_conn *c, const char *why);
/* Handle marked breaks and expired budgets (from progress, never inside a CQ poll). */
int lite_rdma_link_run(struct lite_transport *t);
int lite_rdma_link_frame(struct lite_transport *t, struct lite_rdma_conn *c, uint8_t type,
                         const uint8_t *p, uint16_t len);
void lite_rdma_link_free(struct lite_rdma_conn *c);
/* Nothing happened for 5 s while ops are pending: say where each link stands (info). */
void lite_rdma_link_stall(struct lite_transport *t);

/* ---- rdma_msg.c ---- */
int lite_rdma_msg_send(struct lite_transport *t, int peer, const struct lite_msg_hdr *hdr,
                       const void *payload, void *op);
/* A receive completed on c's msg QP. */
void lite_rdma_msg_recv(struct lite_transport *t, struct lite_rdma_conn *c, uint32_t slot,
                        uint32_t len);
/* Post what waits (messages, window reports); reads the mailboxes. Returns events handled. */
int lite_rdma_msg_flush(struct lite_transport *t, struct lite_rdma_conn *c);
/* Report this side's reposted receives when due (force: whatever is unreported). */
void lite_rdma_report(struct lite_transport *t, struct lite_rdma_conn *c, bool force);
void lite_rdma_msg_fail(struct lite_transport *t, struct lite_rdma_conn *c, int code);

/* ---- rdma_rma.c ---- */
int lite_rdma_rma_post(struct lite_transport *t, const struct lite_tp_rma *r, void *op);
/* A WR_RMA completion (status from the work completion, already translated). */
void lite_rdma_rma_done(struct lite_transport *t, struct lite_rdma_qp *q, uint32_t slot,
                        enum ibv_wc_status st);
/* Post ops that wait for room on c. */
int lite_rdma_rma_flush(struct lite_transport *t, struct lite_rdma_conn *c);
/* Post one piece of o (or its immediate) on its rail; -EAGAIN when there is no room now. */
int lite_rdma_rma_post_piece(struct lite_transport *t, struct lite_rdma_op *o, uint32_t piece);
/* A piece done without a completion (it was applied before a break): count it. */
void lite_rdma_rma_piece_done(struct lite_transport *t, struct lite_rdma_op *o, uint32_t piece);
bool lite_rdma_rma_is_imm(const struct lite_rdma_op *o, uint32_t piece);
/* The peer answered a re-arm of rail r: reconnect, repost, finish the failed op with `code`. */
void lite_rdma_rma_rearmed(struct lite_transport *t, struct lite_rdma_conn *c, uint32_t rail,
                           const struct lite_rdma_ep *in_ep, int code);
void lite_rdma_rma_fail(struct lite_transport *t, struct lite_rdma_conn *c, int code);
/* Tag binding the core key into the 64-bit rkey of a descriptor. */
static inline uint32_t lite_rdma_key_tag(uint64_t core_key)
{
    uint32_t x = (uint32_t)core_key ^ (uint32_t)(core_key >> 32) ^ 0x9e3779b9u;
    x ^= x >> 16;
    x *= 0x7feb352du;
    return x ^ (x >> 15);
}

/* ---- rdma_mr.c ---- */
int lite_rdma_mr_reg(struct lite_transport *t, const struct lite_tp_mr *mr,
                     struct lite_tp_mr_keys *keys);
int lite_rdma_mr_dereg(struct lite_transport *t, void *handle);
/* Local keys for [addr, addr + len): from a live registration, else a temporary one (*tmp). */
int lite_rdma_mr_local(struct lite_transport *t, void *addr, size_t len, uint32_t *lkeys,
                       struct lite_rdma_mr **tmp);
void lite_rdma_mr_release(struct lite_transport *t, struct lite_rdma_mr *tmp);
/* Why would this rank refuse an op with (rkey, addr, len, need) on device `dev`? */
int lite_rdma_mr_diagnose(struct lite_transport *t, int dev, uint32_t rkey, uint64_t addr,
                          uint64_t len, unsigned need);
void lite_rdma_mr_fini(struct lite_transport *t);

/* ---- rdma_err.c ---- */
/* Work-completion status -> liblitetx code. *fatal: the peer is lost (vs. the op refused). */
int lite_rdma_wc_code(enum ibv_wc_status st, bool *fatal);
/* errno from a verbs call -> a negative code. */
int lite_rdma_errno(int err);

#endif /* LITE_RDMA_INT_H */
