/*
 * ctx.h - the context and the structures it holds (requests, peers, regions), shared by the
 * core's modules. Data only: each module declares its functions in a header of its own.
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
struct lite_rdesc_memo;

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
    void *stage;            /* a device buffer's pinned bounce buffer (gpu_stage.c), else NULL */
    void *stage_dst;        /* a staged receive: the device buffer its bytes go to at completion */
    struct lite_pipe *pipe; /* a rendezvous send of a device buffer copied chunk by chunk */
    /* Every request allocated and not yet freed, cached ones included: lite_finalize frees
     * those the user never waited for too. Last, so a reused request keeps them (request.c). */
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

    /* flow control and rendezvous (credits.c, rndv.c) */
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

/* Rendezvous state of one request (rndv.c; credits.c sends its RTS from `msg`). */
#define LITE_RNDV_MSG_MAX (8 + 8 + 8 + LITE_RDESC_SIZE) /* the longest: CTS and RTR */
struct lite_rndv {
    uint8_t stage;    /* enum below */
    uint64_t id;      /* sender: our id (in RTS); receiver: our id (in CTS) */
    uint64_t peer_id; /* the other side's id */
    lite_mr_t *mr;    /* receiver: the registration of the receive buffer */
    int status;       /* sender: status of the write, carried in FIN */
    int pending;      /* sender, ST_WRITE_FIN: write and FIN not yet complete */
    bool rts_done;    /* sender: the backend finished sending the RTS */
    bool cts_seen;    /* sender: the CTS arrived; `write` is ready */
    bool cts_ended;   /* sender: the CTS refused or was bad; done (with `status`) once the RTS is */
    bool abandoned;   /* sender: the caller gave up (lite_rndv_abandon): never read its buffer */
    struct lite_tp_rma write;
    uint8_t msg[LITE_RNDV_MSG_MAX]; /* payload of the RTS / CTS / FIN this side sends */
};
/* A rendezvous send of a device buffer (gpu_stage.c makes it): the device-to-host copies of its
 * chunks into the bounce buffer `host` run on the library stream, and the rendezvous (rndv.c)
 * writes each chunk to the receiver once its copy has landed (ev[k] recorded after chunk k). */
struct lite_gpu_event;
struct lite_pipe {
    void *host; /* the bounce buffer the send is posted with */
    size_t len, chunk, nchunk;
    size_t posted;              /* chunks whose write is posted */
    bool listed;                /* on ctx->pipe_head: chunks still to write */
    struct lite_gpu_event **ev; /* nchunk events */
    struct lite_tp_rma *w;      /* nchunk writes */
    struct lite_request *next;  /* ctx->pipe_head list */
};
/* One-sided ops the core emulates for the backend (lite_ctx.emu; rma_emu.c). */
#define LITE_EMU_WRITE 0x01 /* writes (and the backend's mr_reg, mr_dereg) */
#define LITE_EMU_IMM   0x02 /* writes with an immediate */
#define LITE_EMU_READ  0x04 /* reads */

struct lite_ctx {
    struct lite_settings s;
    struct lite_transport_ops ops;
    struct lite_transport *tp;
    struct lite_peer *peers;
    uint64_t coll_seq;              /* collectives started so far; identical on every rank */
    uint8_t coll_sink;              /* where zero-information messages (barrier tokens) land */
    bool ready;                     /* lite_init completed */
    struct lite_request *req_cache; /* released requests kept for reuse (request.c) */
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
    /* Set by lite_init (context.c): modules above that lower ones reach through a pointer, so
     * that every file dependency of the core points down (docs/HACKING.md, "Layout"). */
    const struct lite_core_upcalls *up;          /* upcall.c's table (rma_emu.c completes ops) */
    void (*peer_fail_run)(struct lite_ctx *ctx); /* upcall.c: deferred failures (progress.c) */
    void (*stage_end)(struct lite_request *r);   /* gpu_stage.c: a staged request ends */
    /* gpu_stage.c: a staged collective's request ends (coll_engine.c) */
    void (*stage_coll_end)(struct lite_request *r, int err);
    /* Rendezvous sends writing a device buffer chunk by chunk as its copies land: progress.c
     * polls them through pipe_poll (rndv.c, set when the first starts). pipe_next: the pipe
     * gpu_stage.c hands to the send it is posting (taken by lite_rndv_send). */
    struct lite_request *pipe_head;
    void (*pipe_poll)(struct lite_ctx *ctx);
    struct lite_pipe *pipe_next;
};

#endif /* LITE_CTX_H */
