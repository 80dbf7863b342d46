/*
 * efa.h - internal declarations of the EFA backend (libfabric FI_EP_RDM), shared by its files:
 *
 *   efa.c       the ops table: probe, open/close, address blob, connect_all, progress
 *   efa_cfg.c   environment, provider lookup (fi_getinfo hints), probe
 *   efa_rail.c  one fabric/domain/endpoint/CQ/AV per rail
 *   efa_mr.c    memory registration honouring the provider's mr_mode bits, FI_HMEM_CUDA
 *   efa_msg.c   messages: eager receive pool, send slots, ordering, large payloads, control
 *   efa_rma.c   one-sided ops: remote key confirmation, striping over rails, immediates
 *   efa_cq.c    completion queues, error completions, the fi-error -> lite-code translation
 *   efa_peer.c  peer liveness (keepalive, probes, pidfd) and failure handling
 */
#ifndef LITE_EFA_H
#define LITE_EFA_H

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>

#include "efa_plan.h"
#include "tp_support.h"

#define EFA_LOG "efa"

/* ---- configuration (efa_cfg.c) ---- */

/* Smallest eager payload: every control message must fit one eager buffer (the second HELLO's
 * flush targets: LITE_EFA_FLUSH_LEN(8) = 136 bytes; QREPLY: 96). */
#define LITE_EFA_EAGER_MIN 256

struct efa_cfg {
    char provider[64];    /* as fi_getinfo wants it, e.g. "tcp;ofi_rxm" */
    uint32_t rails;       /* rails asked for (LITETX_EFA_RAILS) */
    size_t eager_max;     /* largest payload sent inline in an eager buffer */
    uint32_t credits;     /* eager buffers to pre-post per peer (the core's credits) */
    uint64_t stripe_min;  /* writes of at least 2x this are striped over the rails */
    int keepalive_ms;     /* 0 = off */
    int peer_timeout_ms;  /* posts stuck this long, with no other liveness evidence: lost */
    int imm;              /* 0 = the best the provider offers, else a forced enum efa_imm_mode */
    bool no_wait_fd;      /* CQs without wait objects: poll, with short naps when idle */
    bool hmem;            /* ask for FI_HMEM (device memory); costs host-memory speed on shm */
    bool dc_batch;        /* one acknowledgement for a run of writes (LITETX_EFA_DC_BATCH) */
    int64_t imm_yield_ns; /* CQs left unread this long after writes arrived (..._IMM_YIELD_NS) */
    bool writer_copy;     /* shm: the writer copies one stripe of a large write itself */
    bool shm_clean;       /* shm: remove dead processes' regions at open (..._SHM_CLEAN) */
};

extern const struct lite_tunable lite_efa_tunables[]; /* efa_cfg.c */
/* The backend's settings: its LITETX_EFA_* variables from env (what the core resolved: probe's
 * or open's; NULL: every default), and the core's credits and rendezvous threshold from prm
 * (NULL in probe: defaults). */
int lite_efa_cfg_read(struct efa_cfg *cfg, const struct lite_tp_env *env,
                      const struct lite_transport_params *prm, char *why, size_t why_len);
/* The hints every lookup uses (caller frees with fi_freeinfo). */
struct fi_info *lite_efa_hints(const struct efa_cfg *cfg, bool order_saw, bool want_hmem,
                               bool want_source);
/* fi_getinfo for the configured provider; node = bind address for socket-addressed providers. */
int lite_efa_getinfo(const struct efa_cfg *cfg, const char *bind_host, struct fi_info **out,
                     char *why, size_t why_len);
/* Is this provider's address a socket address (tcp, sockets)? Then a connect() probes it. */
bool lite_efa_sockaddr_format(uint32_t addr_format);
/* Remove the shm provider's regions in dir (/dev/shm) of this user's processes that no longer
 * exist (efa_shm.c). Returns how many. */
int lite_efa_shm_clean(const char *dir);

/* ---- contexts ---- */

/* Every operation handed to libfabric carries one of these first, so a completion's
 * op_context leads back to it (FI_CONTEXT/FI_CONTEXT2 providers keep their state in `fi`). */
enum efa_ctx_kind {
    CTX_RX = 1,      /* eager receive buffer */
    CTX_TX = 2,      /* a message (header + inline payload) */
    CTX_TXBIG = 3,   /* the tagged payload of a BIG message */
    CTX_BIGRX = 4,   /* tagged receive of a BIG payload */
    CTX_PIECE = 5,   /* one stripe of a one-sided op */
    CTX_DCFLUSH = 6, /* a 0-byte write that confirms the batched writes before it (efa_rma.c) */
};

struct efa_ctx {
    struct fi_context2 fi;
    uint8_t kind;
};

/* ---- rails (efa_rail.c) ---- */

struct efa_rail {
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_ep *ep;
    int wait_fd; /* -1: this CQ cannot be slept on */
    uint8_t name[256];
    size_t name_len;
    fi_addr_t *addr; /* by rank */
    uint32_t out;    /* this side's one-sided posts (stripes, flushes) whose completion is due */
};

/* ---- memory registration (efa_mr.c) ---- */

struct efa_mr {
    struct efa_mr *hnext; /* table by core key */
    uint64_t core_key;
    void *addr;
    size_t len;
    unsigned access; /* LITE_TP_ACCESS_* */
    int kind;        /* enum lite_mem_kind */
    uint32_t nrails;
    struct fid_mr *mr[LITE_MAX_RAILS];
    void *desc[LITE_MAX_RAILS];
    uint64_t rkey[LITE_MAX_RAILS];
    uint8_t *told; /* bitmap by rank: peers that were sent this region's keys */
    /* Being withdrawn (lite_efa_mr_dereg): queries are refused, and the peers still set in
     * `told` were sent INVAL and have not yet answered that their ops into it are over. */
    bool dying;
};

#define EFA_MR_BUCKETS 256

/* ---- messages (efa_msg.c) ---- */

struct efa_rxbuf {
    struct efa_ctx c;
    struct efa_rxbuf *next; /* held (out of order) list, or the repost retry list */
    uint8_t *buf;
    size_t got;
    struct lite_efa_hdr h;
};

struct efa_tx {
    struct efa_ctx c;
    struct efa_ctx big_c;         /* CTX_TXBIG: the tagged payload's completion */
    struct efa_tx *next;          /* peer queue (not yet posted) or free list */
    struct efa_tx *inext, *iprev; /* peer's in-flight list */
    void *op;                     /* the core's op; NULL for internal messages */
    int peer;
    uint8_t type;
    uint8_t parts; /* completions still due */
    int status;    /* first error of its parts */
    bool hdr_posted;
    bool big_posted;
    bool orphan; /* the peer failed: the core was told; only the provider owes us */
    bool inflight;
    uint8_t *buf; /* slot: header + inline payload */
    void *desc;   /* slot memory descriptor (FI_MR_LOCAL) */
    size_t len;
    const void *big; /* BIG: payload, sent tagged */
    uint64_t big_len, big_tag;
    struct fid_mr *big_mr; /* BIG payload registered on the fly (FI_MR_LOCAL) */
};

struct efa_bigrx {
    struct efa_ctx c;
    int peer;
    void *token;
    void *dst;
    uint64_t len, tag;
    void *desc;
    struct fid_mr *mr;
    bool posted;
    bool discard;
    bool orphan;
    uint8_t scratch[8]; /* discard target: the provider truncates into it */
};

/* ---- one-sided (efa_rma.c) ---- */

enum { RMA_WAIT_KEY = 1, RMA_DATA = 2, RMA_WAIT_ACK = 3 };

struct efa_rma;
struct efa_piece {
    struct efa_ctx c;
    struct efa_rma *parent;
    struct efa_piece *next_retry;
    uint64_t off, len;
    void *desc;
    uint32_t rail;
    bool posted;
    bool dc;                     /* posted with FI_DELIVERY_COMPLETE */
    bool self_copy;              /* posted plain, for the provider to copy inside the post */
    uint64_t seq;                /* batched write: its number on (peer, rail); 0 otherwise */
    struct efa_piece *next_wait; /* sent, waiting for a later write's acknowledgement */
    uint32_t seg, nseg;          /* a paged batch's write: its segments (efa_batch.seg) */
    uint32_t pages;              /* ... its pages */
    uint32_t carry;              /* ... and the immediates its CQ data counts (0: no CQ data) */
};

/* Most segments one write of a paged batch carries (the provider's limits may say fewer). */
#define LITE_EFA_BATCH_IOV 16

/* Paged writes gathered into one record (efa_rma.c, PAGED BATCHES): runs of adjacent pages
 * coalesced into segments, several segments per fi_writemsg. */
struct efa_seg {
    uint8_t *local;
    uint64_t roff; /* offset in the target region */
    uint64_t len;
    uint32_t pages;
};
struct efa_batch {
    uint32_t nops, opcap, nseg, segcap, npieces, nrails;
    void **ops; /* the core's ops, completed together */
    struct efa_seg *seg;
    struct efa_piece *pieces;
};

/* Writes to one peer on one rail whose acknowledgements are batched (efa_rma.c): on a
 * provider that processes writes in order (FI_ORDER_RMA_WAW), a delivery-complete write's
 * acknowledgement says that every write posted before it is in place too. */
struct efa_dc {
    uint64_t posted;                    /* number of the last write posted */
    uint64_t confirmed;                 /* every write up to this number is in place */
    uint64_t inflight;                  /* the delivery-complete write on its way (0: none) */
    struct efa_piece *wait, *wait_tail; /* sent, not yet confirmed, in posting order */
    uint64_t faddr, fkey;               /* the peer's flush region on this rail (its HELLO) */
    struct efa_ctx flush;               /* context of the 0-byte flush write */
    uint64_t flush_seq;                 /* its number */
    int peer;
    uint32_t rail;
    bool fready;     /* faddr/fkey known: writes may share acknowledgements */
    bool flush_busy; /* the flush write is with the provider: its context is taken */
    bool flush_due;  /* the flush met -FI_EAGAIN: progress retries it */
};

struct efa_rma {
    struct efa_rma *next, *prev; /* peer's list of unfinished ops */
    struct efa_rma *next_parked; /* waiting for the key's confirmation */
    void *op;
    int peer;
    int status;
    uint8_t stage;
    bool orphan;
    bool imm_after; /* send the immediate as a message once the data is in place */
    bool inval;     /* the target withdrew the region: stripes not yet posted fail */
    struct lite_tp_rma r;
    uint64_t raddr; /* target address of byte 0 as the provider wants it */
    uint64_t rkey[LITE_MAX_RAILS];
    uint32_t npieces, left;
    uint32_t ack_id;
    struct efa_piece piece[LITE_MAX_RAILS];
    struct fid_mr *fly[LITE_MAX_RAILS]; /* local buffer registered on the fly (FI_MR_LOCAL) */
    struct efa_batch *batch;            /* paged writes of several core ops (op is NULL) */
    uint32_t imm_count;                 /* immediates the IMM message counts (imm_after) */
};

/* What a target confirmed about one of its regions (initiator side cache). */
enum { QENT_PENDING = 1, QENT_VALID = 2 };
struct efa_qent {
    struct efa_qent *next;
    uint64_t key;
    uint8_t state;
    uint64_t base, len;
    uint32_t access, nrails;
    uint64_t rkey[LITE_MAX_RAILS];
    struct efa_rma *parked, *parked_tail;
};
#define EFA_QBUCKETS 64

/* A region the target withdraws while ops of this side into it are still under way. */
struct efa_inval {
    struct efa_inval *next;
    uint64_t key;
};

/* ---- peers ---- */

struct efa_peer {
    bool dead; /* the pair is broken: nothing more is posted */
    /* shm: the watcher thread saw the process exit (efa_peer.c). Beside `dead`: a post reads
     * both, and the thread writes it once. */
    atomic_bool gone;
    bool lost;      /* the core was told the peer is gone (dead, or it said BYE) */
    uint8_t hellos; /* HELLOs received (connect_all: 1 = connected, 2 = warmed up) */
    bool hello_sent;
    bool bye_rcvd;
    int64_t probe_started;
    uint32_t nrails; /* rails usable with this peer: min(ours, theirs) */
    uint32_t tx_seq, rx_seq;
    struct efa_tx *txq, *txq_tail;    /* messages not yet posted, in order */
    struct efa_tx *inflight;          /* posted, completion due */
    struct efa_rxbuf *held;           /* arrived ahead of their turn, sorted by seq */
    struct efa_bigrx *bigrx;          /* a BIG payload being received: later messages wait */
    struct efa_rma *rma;              /* unfinished one-sided ops */
    struct efa_dc dc[LITE_MAX_RAILS]; /* batched write acknowledgements per rail */
    struct efa_qent *qcache[EFA_QBUCKETS];
    struct efa_inval *inval_due; /* INVALs to answer once this side's ops into them are over */
    uint32_t next_ack_id;
    /* Stripes refused with -FI_EAGAIN (or behind one that was), in posting order: only the
     * head is retried, so a pass costs what it posts, not what waits (tens of thousands of
     * page writes may wait here). */
    struct efa_piece *rq, *rq_tail;
    uint32_t rma_queued; /* pieces in rq */
    int rq_next;         /* next peer in t->rq_peers' list, -1 at its end */
    bool rq_listed;      /* in that list */
    bool cma_off;        /* pulled pages: copying into this process failed once, not tried again */
    bool self_ok;        /* ... and succeeded once (a later failure is the peer's, not CMA's) */
    /* liveness (efa_peer.c) */
    int64_t last_tx_ns;
    bool ka_out;
    int64_t stuck_since;
    int64_t next_probe_ns;
    int probe_fd;
    int pidfd;
    uint32_t pid;
    void *region[LITE_MAX_RAILS]; /* shm: the first page of each rail's region, for its lock */
    struct sockaddr_storage sa;
    socklen_t salen;
};

/* ---- the instance ---- */

/* IMM_CQDATA64: the top byte of the CQ data is the number of immediates the write counts, less
 * one (a paged batch's write covers several pages; 0 for every other write). */
#define LITE_EFA_CQ_COUNT_SHIFT 56
#define LITE_EFA_CQ_COUNT_MAX   256

enum efa_imm_mode {
    IMM_CQDATA64 = 1, /* CQ data = imm | (rank + 1) << 32 | (count - 1) << 56 */
    IMM_CQDATA32 = 2, /* CQ data = imm; the sender from FI_SOURCE (fi_cq_readfrom) */
    IMM_MSG = 3,      /* no usable remote CQ data: write, then an IMM message */
};

struct efa_txchunk {
    struct efa_txchunk *next;
    uint8_t *mem;
    struct efa_mr *mr;
    struct efa_tx *slots;
};

struct lite_transport {
    int rank, world;
    struct lite_core *core;
    const struct lite_core_upcalls *up;
    struct efa_cfg cfg;
    uint32_t nrails;
    struct efa_rail rail[LITE_MAX_RAILS];
    uint64_t mr_mode;
    size_t inject_size;
    bool mr_local;  /* FI_MR_LOCAL: local buffers need a descriptor */
    bool virt_addr; /* FI_MR_VIRT_ADDR: remote addresses are virtual, else region offsets */
    bool prov_key;  /* FI_MR_PROV_KEY */
    bool mr_endpoint;
    bool hmem; /* the provider registers device memory */
    int imm_mode;
    bool use_wait;        /* sleep on the CQs' wait fds */
    int64_t idle_spin_ns; /* a waiting progress call polls this long after the last event */
    bool sock_probe;      /* peers' rail-0 names are socket addresses: connect() tells if alive */
    bool pid_watch;       /* shared memory: every peer is on this host; watch its pid */
    uint64_t next_key;
    struct efa_peer *peers;
    /* eager receive pool (rail 0) */
    uint8_t *rx_mem;
    struct efa_mr *rx_mr;
    struct efa_rxbuf *rxbufs;
    uint32_t nrx;
    size_t rx_size;
    struct efa_rxbuf *rx_retry; /* buffers to repost (handled, or refused with -FI_EAGAIN) */
    /* send slots */
    struct efa_tx *tx_free;
    struct efa_txchunk *chunks;
    size_t tx_size;
    /* peers whose stripes wait for the provider (efa_peer.rq), linked by rq_next; -1: none */
    int rq_peers;
    struct efa_rma *batch_open; /* paged writes being gathered (efa_rma.c) */
    uint32_t iov_max;           /* segments per write: the provider's iov and rma_iov limits */
    /* the region peers' batched-acknowledgement flushes write 0 bytes to (efa_rma.c) */
    uint8_t *flush_mem;
    struct efa_mr *flush_mr;
    /* one-sided ops finished inside rma_post, reported from the next progress */
    struct efa_rma *rma_later;
    struct efa_rma *rma_free; /* released op records kept for reuse (efa_rma.c) */
    int rma_nfree;
    bool rma_waw;     /* the provider places a peer's writes in order (FI_ORDER_RMA_WAW) */
    bool dc_batch;    /* write acknowledgements batched (cfg.dc_batch and rma_waw) */
    bool writer_copy; /* cfg.writer_copy, and the domain copies plain writes in the post (efa.c) */
    uint32_t polls;   /* CQ polls so far (efa_cq.c: quiet rails) */
    uint64_t self_copied;   /* writer-copied stripes posted (efa_fault_test reads it) */
    uint64_t self_pages;    /* pages of paged batches this side copied itself (the same) */
    uint64_t pulled_pages;  /* pages peers' PULLs listed that this side copied (the same) */
    uint8_t *pull_buf;      /* a PULL being packed (efa_rma.c) */
    struct iovec *pull_iov; /* a PULL being copied: local then remote iovecs */
    bool dc_retry;          /* a flush write waits for the provider (efa_dc.flush_due) */
    bool av_is_rank;        /* fi_addr == rank on every rail (FI_AV_TABLE in rank order) */
    /* registered regions by core key */
    struct efa_mr *mrtab[EFA_MR_BUCKETS];
    uint32_t rma_rr;    /* rail of the next unstriped op */
    bool flush_pending; /* a post met -FI_EAGAIN: some peer's queue waits */
    bool closing;
    bool in_progress; /* inside progress, connect_all or close (mr_dereg's -EAGAIN rule) */
    bool gone_due;    /* a post saw a peer's `gone`: the next progress fails it */
    int64_t next_tick_ns;
    int64_t clock_ns;    /* lite_efa_clock() when progress last read it (posts stamp with it) */
    uint32_t polls_left; /* polls until progress reads the clock again */
    bool imm_seen;       /* the last CQ read counted writes that arrived (remote CQ data) */
    int64_t yield_until; /* lite_now_ns() before which the CQs are not read (cfg.imm_yield_ns) */
    int epfd;
    int64_t nap_ns; /* next idle nap without a wait fd: doubles while idle, reset by events */
    int events;     /* upcalls made during this progress call */
    /* Extra rail-0 reads a polling progress call makes before it returns empty (see
     * efa_progress): set from the cost of an empty read, timed by the first calls (spin_tries). */
    int spin_polls;
    int spin_tries;          /* timings left to take; 0: spin_polls is set */
    int64_t spin_read_ns;    /* least cost of an empty read seen while timing */
    struct efa_watch *watch; /* shm: the thread that watches the peers' processes (efa_peer.c) */
    bool watch_tried;        /* watch_start ran (the thread may have failed to start) */
};

/* The clock of liveness bookkeeping (ticks, keepalives, stuck posts: all in milliseconds):
 * CLOCK_MONOTONIC_COARSE reads a value the kernel updates every tick, a few ns per call where
 * CLOCK_MONOTONIC costs ~45 ns in a VM (kvm-clock), and the hot paths (every poll, every post)
 * read it. Only compared with itself; deadlines use lite_now_ns(). */
static inline int64_t lite_efa_clock(void)
{
    struct timespec ts;
#ifdef CLOCK_MONOTONIC_COARSE
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
#else
    clock_gettime(CLOCK_MONOTONIC, &ts);
#endif
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* efa_rail.c */
int lite_efa_rail_open(struct lite_transport *t, uint32_t i, struct fi_info *info);
void lite_efa_rail_close(struct efa_rail *r);
int lite_efa_rail_av(struct lite_transport *t, uint32_t i, const void *name, int rank);

/* efa_mr.c */
/* Register on rails [0, nrails); core_key 0 = an internal region (not in the key table). */
int lite_efa_mr_make(struct lite_transport *t, void *addr, size_t len, int kind, unsigned access,
                     uint64_t core_key, uint32_t nrails, struct efa_mr **out);
void lite_efa_mr_free(struct lite_transport *t, struct efa_mr *m);
struct efa_mr *lite_efa_mr_find(struct lite_transport *t, uint64_t core_key);
/* Register a local buffer on one rail for one op (FI_MR_LOCAL providers); *desc for the op. */
int lite_efa_mr_fly(struct lite_transport *t, uint32_t rail, const void *addr, size_t len,
                    uint64_t access, struct fid_mr **mr, void **desc);
int lite_efa_mr_reg(struct lite_transport *t, const struct lite_tp_mr *mr,
                    struct lite_tp_mr_keys *keys);
int lite_efa_mr_dereg(struct lite_transport *t, void *handle);
/* Peer answered INVAL for the region: its ops into it are over. */
void lite_efa_mr_inval_acked(struct lite_transport *t, int peer, uint64_t core_key);
void lite_efa_mr_fini(struct lite_transport *t);

/* efa_msg.c */
int lite_efa_msg_init(struct lite_transport *t);
void lite_efa_msg_fini(struct lite_transport *t);
int lite_efa_msg_send(struct lite_transport *t, int peer, const struct lite_msg_hdr *hdr,
                      const void *payload, void *op);
/* The transport's msg_inject: a small message with fi_inject from the stack, or -EAGAIN. */
int lite_efa_msg_inject(struct lite_transport *t, int peer, const struct lite_msg_hdr *hdr,
                        const void *payload);
/* An internal message (HELLO, BYE, QUERY, ...) with a small payload copied at once. */
int lite_efa_ctl_send(struct lite_transport *t, int peer, uint8_t type, uint64_t tag,
                      const void *payload, size_t len);
/* The same for a message the peer waits for (a reply, an invalidation): if it cannot be sent,
 * the peer is failed rather than left waiting. */
void lite_efa_ctl_must(struct lite_transport *t, int peer, uint8_t type, uint64_t tag,
                       const void *payload, size_t len);
/* Post what waits in the peers' queues (after -FI_EAGAIN). Returns posts made. */
int lite_efa_msg_flush(struct lite_transport *t);
/* Repost the receive buffers whose messages were handled (or refused with -FI_EAGAIN). */
int lite_efa_rx_flush(struct lite_transport *t);
void lite_efa_rx_done(struct lite_transport *t, struct efa_rxbuf *b, size_t len);
void lite_efa_tx_done(struct lite_transport *t, struct efa_tx *x, bool big_part, int status);
/* len: the bytes the tagged receive took (a discarded payload's are not checked). */
void lite_efa_bigrx_done(struct lite_transport *t, struct efa_bigrx *b, int status, size_t len);
void lite_efa_rx_repost(struct lite_transport *t, struct efa_rxbuf *b);
/* Fail what the peer owes on the message side (efa_peer.c calls it). */
void lite_efa_msg_peer_failed(struct lite_transport *t, int peer, int code);

/* efa_rma.c */
int lite_efa_rma_post(struct lite_transport *t, const struct lite_tp_rma *r, void *op);
void lite_efa_piece_done(struct lite_transport *t, struct efa_piece *p, int status);
/* The 0-byte write that confirms batched writes completed (efa_cq.c dispatches it). */
void lite_efa_dc_flush_done(struct lite_transport *t, struct efa_ctx *c, int status);
/* This rank's flush region (open; rma_waw providers only), and its announcement to peers. */
int lite_efa_dc_init(struct lite_transport *t);
void lite_efa_dc_fini(struct lite_transport *t);
/* Pack our flush targets into out[cap] (the second HELLO); the length, 0 if it does not fit. */
size_t lite_efa_dc_hello(struct lite_transport *t, uint8_t *out, size_t cap);
/* A peer's flush targets arrived: batching towards it may start. */
void lite_efa_dc_learn(struct lite_transport *t, int peer, const struct lite_efa_flush *f);
int lite_efa_rma_flush(struct lite_transport *t);
/* Post the paged writes gathered so far (progress calls it: the batch's last op may not come). */
void lite_efa_batch_close(struct lite_transport *t, bool later);
/* Control messages of the key protocol and the immediate fallback. */
void lite_efa_rma_ctl(struct lite_transport *t, int peer, const struct lite_efa_hdr *h,
                      const uint8_t *payload, size_t len);
void lite_efa_rma_peer_failed(struct lite_transport *t, int peer, int code);
void lite_efa_qcache_fini(struct lite_transport *t);

/* efa_cq.c */
/* THE translation point from libfabric codes (positive FI_E* or negative) to lite codes. */
int lite_efa_err(int fi_code);
/* Does this error mean the peer cannot be reached any more? */
bool lite_efa_err_is_conn(int fi_code);
/* The code an op owed by a peer ends with (and the peer fails with) when the pair broke under
 * it: a cancel (tcp flushes what was on a connection that broke with FI_ECANCELED) is a lost
 * peer unless this side is closing; other codes (connection errors are already
 * -LITE_ERR_PEER_LOST) stay. */
int lite_efa_loss_code(const struct lite_transport *t, int code);
int lite_efa_cq_poll(struct lite_transport *t);
int lite_efa_cq_spin(struct lite_transport *t, int polls);
/* Rails past 0 have nothing due from this side's progress (writer copy, no posts out). */
bool lite_efa_later_rails_idle(const struct lite_transport *t);

/* efa_peer.c */
void lite_efa_peer_init(struct lite_transport *t, int peer, const struct lite_efa_blob *b);
void lite_efa_peer_fini(struct lite_transport *t, int peer);
/* The peer is unusable: complete what it owes with `code` and tell the core once. */
void lite_efa_peer_fail(struct lite_transport *t, int peer, int code, const char *why);
/* Fail the peers a post found gone (lite_efa_peer_gone); returns how many. */
int lite_efa_peer_reap(struct lite_transport *t);
/* A post to `peer` returned -FI_EAGAIN (stuck) or went through (!stuck). */
void lite_efa_peer_stuck(struct lite_transport *t, int peer, bool stuck);
/* Keepalives, probes and pid watching; run every few milliseconds from progress. */
void lite_efa_peer_tick(struct lite_transport *t);
/* Before a post: true when the watcher saw the peer's process exit (shm). Its failure is then
 * due (the next progress fails it) and nothing may be posted to it: the dead process may hold
 * the lock of its region that the provider's post would spin on. */
bool lite_efa_peer_gone_slow(struct lite_transport *t, int peer);
static inline bool lite_efa_peer_gone(struct lite_transport *t, int peer)
{
    return atomic_load_explicit(&t->peers[peer].gone, memory_order_relaxed) &&
           lite_efa_peer_gone_slow(t, peer);
}

#endif /* LITE_EFA_H */
