/*
 * ctx.h - the context and request structures shared by context.c, p2p.c and the collectives.
 */
#ifndef LITE_CTX_H
#define LITE_CTX_H

#include "config.h"
#include "lite_int.h"

enum lite_req_kind { LITE_REQ_SEND = 1, LITE_REQ_RECV = 2, LITE_REQ_RMA = 3, LITE_REQ_COLL = 4 };
enum lite_req_state {
    LITE_REQ_POSTED = 1, /* receive: waiting for a match; send: handed to the backend */
    LITE_REQ_ACTIVE = 2, /* receive: the payload is arriving into buf */
    LITE_REQ_DONE = 3
};

struct lite_unexp;
struct lite_emu_op;

struct lite_request {
    uint8_t kind;
    uint8_t state;
    uint8_t channel;
    bool truncated;
    int peer;
    int error;
    uint64_t tag;
    void *buf;
    size_t len;                    /* buffer size */
    size_t bytes;                  /* bytes moved */
    uint32_t pending_ops;          /* backend ops still to complete (batches have several) */
    struct lite_unexp *waiting_on; /* receive matched to an unexpected message still arriving */
    struct lite_request *next;     /* the one list the request is on (posted, send queue, ...) */
    struct lite_rndv *rndv;        /* rendezvous state (large messages), else NULL */
    void *coll;                    /* LITE_REQ_COLL: the collective (coll_engine.c) */
    struct lite_emu_op *emu;       /* internal message of an emulated one-sided op (rma_emu.c) */
    void *stage;     /* a device buffer's pinned bounce buffer (gpu_stage.c), else NULL */
    void *stage_dst; /* a staged receive: the device buffer its bytes go to at completion */
    /* Every request allocated and not yet freed, cached ones included: lite_finalize frees
     * those the user never waited for too. Last, so a reused request keeps them (p2p.c). */
    struct lite_request *all_prev, *all_next;
};

/* A message that arrived before its receive was posted. */
struct lite_unexp {
    uint64_t tag;
    uint8_t channel;
    bool complete;
    bool rts;        /* a rendezvous announcement: no data here, `len` is the message length */
    uint64_t rts_id; /* the sender's id for it */
    size_t len;
    void *data;
    struct lite_request *claimed; /* a receive posted while the payload was still arriving */
    struct lite_unexp *next;
};

/* Per-peer matching state. */
struct lite_peer {
    bool lost;
    int lost_code;
    char lost_why[128];
    bool sent_any[LITE_CHAN_COUNT];
    bool rcvd_any[LITE_CHAN_COUNT];
    uint64_t last_sent_tag[LITE_CHAN_COUNT];
    uint64_t last_rcvd_tag[LITE_CHAN_COUNT];
    struct lite_request *posted[LITE_CHAN_COUNT]; /* FIFO of posted receives */
    struct lite_unexp *unexp[LITE_CHAN_COUNT];    /* FIFO of unexpected messages */
    void *rx_token;                               /* the message being received, if any */

    /* flow control and rendezvous (flow.c) */
    uint32_t credits;        /* eager slots this rank may still fill at the peer */
    uint32_t credits_owed;   /* slots freed here, not yet returned to the peer */
    uint32_t rx_outstanding; /* credit-consuming messages received and not yet credited back */
    struct lite_request *sendq, *sendq_tail; /* sends waiting for credit, in posting order */
    struct lite_request *rndv_send;          /* sends waiting for the receiver's CTS */
    struct lite_request *rndv_recv;          /* receives waiting for the sender's FIN */
    struct lite_request *rtr_wait;           /* collective sends waiting for the receiver's RTR */
    struct lite_rtr *rtr_ready;              /* RTRs that arrived before their send was posted */
    uint32_t nrtr;
    uint64_t rndv_next_id;
    uint64_t ctrl_seq;          /* tags of control messages to the peer */
    struct lite_msg_hdr rx_hdr; /* header of the RTS / control message arriving */
    uint8_t rx_small[160];      /* its payload */

    /* emulated one-sided ops (rma_emu.c) */
    struct lite_emu_op *emu_wait, *emu_wait_tail; /* initiator: ops awaiting the answer, in order */
    uint64_t emu_next_id;                         /* initiator: ids of ops to the peer */
    struct lite_emu_rx {                          /* target/initiator: the data message due next */
        uint8_t kind;                             /* 0 none, else the control type announcing it */
        int status;                               /* 0, or why the data is discarded */
        uint32_t flags, imm;
        uint64_t id, len;
        void *addr;             /* where the data goes (NULL: discard) */
        void *token;            /* write: the region held until the data is in */
        struct lite_emu_op *op; /* read: the initiator's op */
    } emu_rx;
    int emu_sticky; /* target: a refused unacknowledged write, told with the next answer */

    /* a failure the backend reported outside progress (lite_peer_fail_deferred) */
    bool fail_due;
    int fail_code;
    char fail_why[128];
};

/* A registered region. */
struct lite_mr {
    void *addr;
    size_t len;
    int kind;
    unsigned access;
    uint64_t key;      /* generation << 32 | (slot + 1) */
    uint32_t inflight; /* peers' ops placing or reading data right now */
    struct lite_tp_mr_keys keys;
};

/* ImmCounter: open-addressing table of (imm -> count). */
struct lite_imm_entry {
    uint32_t imm;
    bool used;
    uint64_t count;
};
struct lite_imm_table {
    struct lite_imm_entry *e;
    uint32_t cap, used, max;
    bool overflow;
};

struct lite_ctx {
    struct lite_settings s;
    struct lite_transport_ops ops;
    struct lite_transport *tp;
    struct lite_peer *peers;
    uint64_t coll_seq;              /* collectives started so far; identical on every rank */
    uint8_t coll_sink;              /* where zero-information messages (barrier tokens) land */
    bool ready;                     /* lite_init completed */
    struct lite_request *req_cache; /* released requests kept for reuse (p2p.c) */
    struct lite_request *req_all;   /* every allocated request (lite_request.all_next) */
    int req_cached;
    int64_t spin_ns;    /* how long a wait polls before it sleeps in the backend */
    bool yield_polls;   /* more ranks on this host than CPUs: yield the CPU after each poll */
    uint8_t spin_pause; /* CPU pause hints after a poll that found nothing (lite_cpu_relax) */
    size_t stage_chunk; /* LITETX_GPU_STAGE_CHUNK: bytes per segment of a staged allreduce */
    uint16_t tp_id;     /* hash of the transport name, stamped into remote descriptors */
    struct lite_rdesc_memo *rdesc_memo; /* LITE_RDESC_MEMOS entries, allocated on first parse */
    uint32_t credits_max;               /* eager slots granted to each peer */
    size_t rndv_threshold;              /* messages of at least this many bytes go by rendezvous */
    struct lite_mr **mrs;               /* registered regions by slot */
    uint32_t *mr_gen;                   /* generation per slot, so stale keys are refused */
    uint32_t nmrs;
    bool mr_closed; /* lite_finalize deregistered them all: peers' ops are refused */
    struct lite_imm_table imm;
    uint64_t rma_last_len; /* length of the last peer write placed here (lite_imm_wait's policy) */
    /* One-sided ops the core carries as control messages because the backend lacks them
     * (LITE_EMU_* bits, fixed at init: the hot paths branch on this, never look anything up). */
    uint8_t emu;
    struct lite_emu_op *emu_all;    /* every live emulated op (freed at finalize) */
    bool fail_due;                  /* some peer has a deferred failure (lite_peer_fail_deferred) */
    bool log_counted;               /* the context's log level is counted (log.c) */
    struct lite_coll_op *coll_head; /* non-blocking collectives and zombies (coll_engine.c) */
    int coll_count;
    char last_error[512];
};

/* Record the detail of a failure and return code (for `return lite_fail(ctx, rc, ...)`). Cold:
 * the compiler lays the hot paths out (and saves registers) as if failures never happen. */
int lite_fail(struct lite_ctx *ctx, int code, const char *fmt, ...)
    __attribute__((cold, format(printf, 3, 4)));

/* Internal posting with an explicit channel (collectives use LITE_CHAN_COLL). */
int lite_post_send(struct lite_ctx *ctx, uint8_t chan, int peer, uint64_t tag, const void *buf,
                   size_t len, struct lite_request **out);
int lite_post_recv(struct lite_ctx *ctx, uint8_t chan, int peer, uint64_t tag, void *buf,
                   size_t len, struct lite_request **out);
/* Wait for every request in reqs[0..n) (NULL entries skipped) until the deadline; each finished
 * request is released and its slot set to NULL. Returns 0 or the first error. */
int lite_wait_all(struct lite_ctx *ctx, struct lite_request **reqs, int n, int64_t deadline_ns);
/* Release a finished (or never posted) request; NULL-safe. The context keeps a few for reuse. */
void lite_request_release(struct lite_ctx *ctx, struct lite_request *req);
/* A zeroed request of the context (NULL when out of memory), and its end. */
struct lite_request *lite_request_alloc(struct lite_ctx *ctx);
void lite_request_free(struct lite_ctx *ctx, struct lite_request *r);
/* Take a receive off its peer's posted list, if it is still there (no other effect). */
void lite_request_unpost(struct lite_ctx *ctx, struct lite_request *r);

/* The upcalls the core gives every backend. */
extern const struct lite_core_upcalls lite_core_upcalls;

/* Tear down matching state (frees unexpected messages, fails posted requests). */
void lite_p2p_fini(struct lite_ctx *ctx);

/* A wait loop's step: make progress once, sleeping in the backend up to sleep_ms; with sleep_ms
 * 0, a poll that finds nothing ends with the spin pause. >= 0 or a negative code. */
int lite_progress_once(struct lite_ctx *ctx, int sleep_ms);
/* One poll without the pause (lite_test, lite_progress: the user's loop decides). */
int lite_progress_poll(struct lite_ctx *ctx);
/* Finish a request (status 0 or negative). */
void lite_request_finish(struct lite_request *r, int error);
struct lite_request *lite_request_new(struct lite_ctx *ctx, uint8_t kind, uint8_t chan, int peer,
                                      uint64_t tag, void *buf, size_t len);
/* True when some peer has been lost (waits that depend on all peers then fail). */
bool lite_any_peer_lost(const struct lite_ctx *ctx);
/* The first lost peer (-1: none), and in out "rank N is lost (cause)" with how many more are,
 * for the details of waits that depend on every peer. */
int lite_lost_peers(const struct lite_ctx *ctx, char *out, size_t len);

/* Flow control and rendezvous (flow.c). */
#define LITE_MSGF_RTS 0x01 /* msg flags: a rendezvous announcement (payload: len, id) */
int lite_flow_init(struct lite_ctx *ctx, char *why, size_t why_len);
/* Submit a send to another rank: eager or rendezvous, now or when credit returns. */
int lite_flow_send(struct lite_ctx *ctx, struct lite_request *r);
/* Send a small eager message with the backend's msg_inject, its bytes gone on return: 0, or
 * -EAGAIN when that cannot be done now (no msg_inject, no credit, sends queued, too long, the
 * backend busy) and the message must go through lite_flow_send; other codes are failures. */
int lite_flow_inject(struct lite_ctx *ctx, uint8_t chan, int peer, uint64_t tag, const void *buf,
                     size_t len);
/* Receiver side of an arriving user/collective message: apply piggy-backed credits, check the
 * peer keeps within its credits and the eager size. */
int lite_flow_admit(struct lite_ctx *ctx, int peer, const struct lite_msg_hdr *hdr);
/* A credit-consuming message no longer occupies memory here. */
void lite_flow_freed(struct lite_ctx *ctx, int peer);
/* A receive matched a rendezvous announcement of `len` bytes, sender id `id`. */
void lite_flow_rts_matched(struct lite_ctx *ctx, struct lite_request *r, uint64_t len, uint64_t id);
/* Receiver-initiated rendezvous for collective receives (see flow.c): announce a posted
 * receive's buffer (true when it did), withdraw the announcement, and the sender side's
 * parked sends (waiting for an announcement) and their withdrawal. */
bool lite_flow_rtr_post(struct lite_ctx *ctx, struct lite_request *r);
void lite_flow_rtr_withdraw(struct lite_ctx *ctx, struct lite_request *r);
bool lite_flow_send_parked(const struct lite_request *r);
void lite_flow_send_unpark(struct lite_ctx *ctx, struct lite_request *r);
/* Control messages (channel LITE_CHAN_CTRL). */
int lite_flow_ctrl_begin(struct lite_ctx *ctx, int peer, const struct lite_msg_hdr *hdr,
                         void **dst);
int lite_flow_ctrl_end(struct lite_ctx *ctx, int peer);
/* A backend completion for a request in a rendezvous stage: true when flow.c took it. */
bool lite_flow_send_done(struct lite_ctx *ctx, struct lite_request *r, int status);
void lite_flow_peer_failed(struct lite_ctx *ctx, int peer, int code);
/* A blocking call's timeout: 0 when r no longer uses the caller's buffer (r is no longer the
 * caller's), -EBUSY when bytes are moving. */
int lite_flow_abandon(struct lite_ctx *ctx, struct lite_request *r);
/* Refuse a peer's rendezvous announcement that nothing will receive (flow.c). */
void lite_flow_rts_refuse(struct lite_ctx *ctx, int peer, uint64_t len, uint64_t id);
/* Drop complete unexpected collective messages with tags below `below` (p2p.c). */
void lite_p2p_purge_coll(struct lite_ctx *ctx, uint64_t below);
/* A wait is about to sleep: return owed credits to peers left without any. */
void lite_flow_idle(struct lite_ctx *ctx);
void lite_flow_fini(struct lite_ctx *ctx);

/* Deferred failures: a backend's peer_failed outside progress, or the core's own (an op's
 * second message could not be posted after its first left), handled when progress returns. */
void lite_peer_fail_deferred(struct lite_ctx *ctx, int peer, int code, const char *why);
void lite_peer_fail_run(struct lite_ctx *ctx);

/* The header each rank puts before its transport's blob in the bootstrap (context.c), and the
 * check of every rank's against this rank's: blobs[r]/lens[r] are left holding the transport's
 * blob alone. -LITE_ERR_PROTOCOL or -LITE_ERR_CONFIG naming the rank (tests/fuzz). */
void lite_boot_hdr(const struct lite_ctx *ctx, uint8_t *h);
int lite_boot_check(const struct lite_ctx *ctx, const uint8_t *mine, void **blobs, size_t *lens,
                    char *why, size_t why_len);

/* Control message types (channel LITE_CHAN_CTRL, carried in lite_msg_hdr.flags). flow.c owns
 * 1..15, rma_emu.c 16..31. */
enum { LITE_CTRL_CTS = 1, LITE_CTRL_FIN = 2, LITE_CTRL_CREDIT = 3, LITE_CTRL_RTR = 4 };
#define LITE_CTRL_EMU_FIRST 16
#define LITE_CTRL_EMU_LAST  20
/* A control message to `peer` through an internal request (released when the backend is done
 * with it; `emu` then hears of it): 0 or the code msg_send returned. */
int lite_flow_ctrl_send(struct lite_ctx *ctx, int peer, uint8_t type, const void *payload,
                        size_t len, struct lite_emu_op *emu);

/* Emulated one-sided ops (rma_emu.c). */
#define LITE_EMU_WRITE 0x01 /* writes (and the backend's mr_reg, mr_dereg) */
#define LITE_EMU_IMM   0x02 /* writes with an immediate */
#define LITE_EMU_READ  0x04 /* reads */
/* Which ops the core emulates for the backend `ops` (the table as the backend gave it), and the
 * capability bits the core then provides on the backend's behalf. */
uint8_t lite_emu_needed(const struct lite_transport_ops *ops, uint32_t *caps_added);
/* Post a one-sided op the core emulates: as rma_post (0 and send_done(op) follows, or a code). */
int lite_emu_post(struct lite_ctx *ctx, const struct lite_tp_rma *rma, void *op);
/* rma_post, or the core's emulation where the backend lacks the op. */
static inline int lite_rma_post(struct lite_ctx *ctx, const struct lite_tp_rma *rma, void *op)
{
    if (__builtin_expect(ctx->emu != 0, 0)) {
        uint8_t need = rma->kind == LITE_RMA_READ ? LITE_EMU_READ
                       : rma->has_imm             ? LITE_EMU_IMM
                                                  : LITE_EMU_WRITE;
        if (ctx->emu & need)
            return lite_emu_post(ctx, rma, op);
    }
    return ctx->ops.rma_post(ctx->tp, rma, op);
}
int lite_emu_ctrl_begin(struct lite_ctx *ctx, int peer, const struct lite_msg_hdr *hdr, void **dst);
int lite_emu_ctrl_end(struct lite_ctx *ctx, int peer);
/* An internal message of an emulated op finished (up_send_done). */
void lite_emu_msg_done(struct lite_ctx *ctx, struct lite_emu_op *e, int status);
void lite_emu_peer_failed(struct lite_ctx *ctx, int peer, int code);
void lite_emu_fini(struct lite_ctx *ctx);

/* One-sided (mr.c, immcounter.c). */
int lite_mr_target(struct lite_core *core, int peer, uint64_t key, uint64_t offset, uint64_t len,
                   unsigned access, void **addr, void **token);
void lite_mr_target_done(struct lite_core *core, void *token);
void lite_mr_close(struct lite_ctx *ctx); /* before the transport closes */
void lite_mr_fini(struct lite_ctx *ctx);  /* after */
void lite_imm_arrived(struct lite_core *core, int peer, uint32_t imm);
void lite_imm_setup(struct lite_ctx *ctx); /* reads LITETX_IMM_COUNTERS */
void lite_imm_fini(struct lite_ctx *ctx);
/* Parse a remote descriptor for an op with `peer`: checks version, checksum, transport, owner. */
struct lite_rdesc_info {
    uint64_t addr, len, core_key;
    unsigned access;
    int kind;
    uint32_t owner;
    uint32_t nrails;
    uint64_t rkey[LITE_MAX_RAILS];
};
/* A descriptor parsed before (mr.c): the bytes parse reads (up to its checksum) and the result. */
#define LITE_RDESC_PARSED 112
#define LITE_RDESC_MEMOS  8
struct lite_rdesc_memo {
    bool valid;
    uint8_t raw[LITE_RDESC_PARSED];
    struct lite_rdesc_info info;
};
int lite_rdesc_parse(struct lite_ctx *ctx, const lite_rdesc_t *d, int peer,
                     struct lite_rdesc_info *out);

/* Collective requests (coll_engine.c): lite_test, lite_wait and lite_cancel hand requests of
 * kind LITE_REQ_COLL to these. lite_coll_fini drops a context's unfinished collectives. */
int lite_coll_test(struct lite_ctx *ctx, struct lite_request *req, lite_status_t *status);
int lite_coll_wait(struct lite_ctx *ctx, struct lite_request *req, int timeout_ms,
                   lite_status_t *status);
int lite_coll_cancel(struct lite_ctx *ctx, struct lite_request *req);
void lite_coll_fini(struct lite_ctx *ctx);

#endif /* LITE_CTX_H */
