/*
 * transport.h - the contract between liblitetx's core and its transport backends.
 *
 * This header is for backend authors. Applications use litetx.h only. What a backend may use of
 * the core besides this header is in src/support/ (tp_support.h, gpu.h, tls.h); backends are
 * compiled without src/core on the include path (never the core's lite_int.h).
 *
 * A backend moves bytes and reports completions; the core owns every semantic promise (tag
 * matching, ordering, credits, ImmCounter, determinism, error reporting). A backend fills a
 * `struct lite_transport_ops`, lists it in the ordered table of src/core/registry.c, and leaves
 * any op it lacks NULL. docs/BACKENDS.md walks through writing one (the loop backend).
 *
 * REQUIRED AND OPTIONAL OPS
 *   Required: open, close, addr_get, connect_all, msg_send, progress. Everything else is
 *   optional, and the core takes another way when it is NULL:
 *   - mr_reg, mr_dereg, rma_post (or no LITE_CAP_WRITE): the core carries every one-sided op
 *     (write, write with immediate, read, paged and scatter batches) as control messages
 *     through msg_send, checks them at the target against the live registration, and runs
 *     the rendezvous of large messages over that emulation (src/core/rma_emu.c). Without
 *     LITE_CAP_WRITE_IMM or LITE_CAP_READ, just those ops are emulated.
 *   - msg_inject: msg_send.
 *   - probe: the backend is always usable.
 *   Ops that stay NULL otherwise are replaced with defaults returning -ENOSYS, and the caller gets
 *   "operation X is not supported by transport Y".
 *
 * THREADING AND PROGRESS
 *   Every op is called from the thread that owns the context; ops never block except `connect`
 *   (bounded by its deadline) and `progress` (bounded by its timeout). Several contexts (and so
 *   several instances of a backend) may live in one process, each driven by its own thread: a
 *   backend keeps its state in its instance, and whatever it shares process-wide it locks.
 *   Incoming messages are reported only from inside `progress`; send_done may also be called
 *   from inside `msg_send` or `rma_post` when the op is over at once. All go through
 *   `struct lite_core_upcalls`. While the application waits in the library, the core calls
 *   progress back to back: polls (timeout 0), then calls that may sleep up to 100 ms, from which
 *   the backend must return early when something arrives. Between the application's calls into
 *   the library there may be any gap: a backend whose peers need answers sooner (keepalives)
 *   runs its own thread for them and reports through progress.
 *
 * FAILURES
 *   peer_failed may be reported from inside any op: progress, msg_send, rma_post, mr_dereg. The
 *   core never acts on it at once (it may be half-way through building the op's state): it
 *   notes the failure and handles it when the backend's progress call returns, or at the next
 *   progress (or lite_finalize) when it was reported outside progress. A backend needs no
 *   deferral of its own; tcp defers only a break it may resume, which is no failure. An
 *   op that was accepted (returned 0) still ends with send_done, with an error.
 *
 * ORDER
 *   Messages posted with `msg_send` to one peer must be delivered to the core (recv_begin or
 *   recv_msg) in posting order, on all channels together. That is the only ordering a backend
 *   promises; the core's emulated one-sided ops rely on it.
 *
 * CONFIGURATION AND LOGGING
 *   A backend never reads the environment: it lists its LITETX_* variables, typed, in
 *   `tunables`; lite_init reads and checks them once and hands the values over through
 *   struct lite_tp_env (its `get`), in `probe` and as params->env in `open`. The core's own
 *   settings (credits, rndv_threshold, timeouts, security) come in the params. Log lines go
 *   through the same struct's sink (`log`, `log_level`); tp_support.h's LITE_ERROR ..
 *   LITE_DEBUG route there once the backend has called lite_tp_env_attach(env).
 */
#ifndef LITETX_TRANSPORT_H
#define LITETX_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "litetx.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LITE_TRANSPORT_ABI_VERSION 3

/* Capability bits a backend declares; the core branches on these, never on a backend's name. */
enum lite_transport_cap {
    LITE_CAP_WRITE = 1u << 0,     /* one-sided write */
    LITE_CAP_WRITE_IMM = 1u << 1, /* one-sided write with a 32-bit immediate */
    LITE_CAP_READ = 1u << 2,      /* one-sided read */
    /* 1u << 3: unused (was a "native tagged messaging" bit that nothing read) */
    LITE_CAP_DEVICE_MEM = 1u << 4, /* GPU memory can be registered and moved */
    LITE_CAP_ENCRYPTED = 1u << 5,  /* can encrypt and authenticate (lite_security) */
    /* Several NICs/rails per process. Informational: litetx-info prints it, the core does not
     * branch on it (a registration's keys carry the rails). */
    LITE_CAP_MULTI_RAIL = 1u << 6,
    /* One-sided ops are emulated (over a stream, or by the core): their bytes are copied by
     * this rank's CPU, so lite_imm_wait stops spinning while large writes arrive. */
    LITE_CAP_EMULATED_RMA = 1u << 7,
    /* A message posted to a peer after a write to it is delivered only once the write's data is
     * in place there (one ordered stream per peer). The rendezvous then sends its FIN right
     * behind the write instead of a round trip later. */
    LITE_CAP_ORDERED_WRITE_MSG = 1u << 8,
    /* A write into a region the target has deregistered is refused cleanly (an error for that
     * write only; the connection lives on). Collectives then let receivers announce their
     * buffers before the sender asks (receiver-initiated rendezvous, no RTS/CTS round trip). */
    LITE_CAP_REVOCABLE_RMA = 1u << 9,
    /* Never picked by transport "auto", only by its name (the loop backend: ranks must be
     * threads of one process). */
    LITE_CAP_NO_AUTO = 1u << 10,
    /* The message path takes device (CUDA) buffers as they are (msg_send's source, the
     * destination the core returns from recv_begin): the core then passes the device buffers of
     * lite_send/lite_recv & co. through instead of staging them in host memory. */
    LITE_CAP_DEVICE_MSG = 1u << 11,
};

/* Largest address blob a backend may publish for the bootstrap exchange. */
#define LITE_TRANSPORT_ADDR_MAX 256

/* The kinds of message the core sends through `msg_send` (the backend passes them through). */
enum lite_msg_channel {
    LITE_CHAN_USER = 0, /* lite_isend / lite_irecv */
    LITE_CHAN_COLL = 1, /* collectives (internal tag space) */
    LITE_CHAN_CTRL = 2, /* core control traffic (barrier at finalize, credits, ...) */
    LITE_CHAN_COUNT = 3
};

/* What the core says about one message; the backend carries it to the peer unchanged. */
struct lite_msg_hdr {
    uint64_t tag;
    uint64_t len;     /* payload bytes that follow */
    uint8_t channel;  /* enum lite_msg_channel */
    uint8_t flags;    /* core protocol bits (rendezvous); carried unchanged */
    uint16_t credits; /* flow-control credits returned to the receiver; carried unchanged */
};

/* Most rails (NICs) one registration can span. */
#define LITE_MAX_RAILS 8

/* Access rights of a registered region (lite_mr_reg's `access`). */
enum lite_transport_access {
    LITE_TP_ACCESS_REMOTE_WRITE = 1u << 0,
    LITE_TP_ACCESS_REMOTE_READ = 1u << 1,
};

/* A region the core registers with the backend (mr_reg). */
struct lite_tp_mr {
    void *addr;
    size_t len;
    int mem_kind;      /* enum lite_mem_kind */
    unsigned access;   /* enum lite_transport_access bits */
    uint64_t core_key; /* the core's key: emulated one-sided ops name the region by it */
};

/* What mr_reg returns: the backend's handle and the keys a peer needs to reach the region. */
struct lite_tp_mr_keys {
    void *handle;    /* passed back in one-sided ops on this region and to mr_dereg */
    uint32_t nrails; /* 0 for emulated one-sided ops (the core key is used instead) */
    uint64_t rkey[LITE_MAX_RAILS];
};

enum lite_rma_kind { LITE_RMA_WRITE = 1, LITE_RMA_READ = 2 };

/*
 * Hints and promises the core attaches to one one-sided op (lite_tp_rma.flags). Each bit says
 * whether a backend MUST honour it or MAY ignore it; ignoring a "may" bit costs speed only.
 *
 *   bit                        backend   what it means
 *   LITE_RMA_F_TRUSTED         may       the target itself sent this address and key for this
 *                                        very op (a rendezvous CTS): a backend that confirms keys
 *                                        with the target before first use may skip that round
 *                                        trip. Never set on descriptors from the application.
 *   LITE_RMA_F_MORE            may       more ops follow at once (a batch, as libfabric's
 *                                        FI_MORE): the backend may hold this one and send it
 *                                        with the next; the last op of a batch lacks the bit.
 *   LITE_RMA_F_LOCAL_DONE      may       complete the write once `local` may be reused rather
 *                                        than once the data is in place: the core learns of the
 *                                        delivery otherwise (the rendezvous FIN queued behind it
 *                                        on a LITE_CAP_ORDERED_WRITE_MSG transport). Ignoring it
 *                                        completes later, which is always correct.
 *   LITE_RMA_F_REFUSAL_TO_NEXT must      with LITE_RMA_F_LOCAL_DONE honoured: a refusal of this
 *                                        write at the target is reported with the next
 *                                        acknowledged write to the same peer (a batch's last op)
 *                                        instead of being dropped.
 */
enum lite_tp_rma_flag {
    LITE_RMA_F_TRUSTED = 1u << 0,
    LITE_RMA_F_MORE = 1u << 1,
    LITE_RMA_F_LOCAL_DONE = 1u << 2,
    LITE_RMA_F_REFUSAL_TO_NEXT = 1u << 3,
};

/* One one-sided operation, fully resolved by the core (bounds already checked locally). */
struct lite_tp_rma {
    int kind;           /* enum lite_rma_kind */
    int peer;           /* never this rank: the core does local ones itself */
    void *local;        /* local address (inside a registered region) */
    void *local_handle; /* mr_reg handle of the local region */
    size_t len;
    uint64_t remote_addr;     /* the remote region's base address ... */
    uint64_t remote_offset;   /* ... and the offset in it */
    uint64_t remote_core_key; /* the remote core's key (emulated transports) */
    uint32_t nrails;
    uint64_t rkey[LITE_MAX_RAILS];
    bool has_imm; /* write only: count `imm` at the target after the data is in place */
    uint32_t imm;
    uint32_t flags; /* enum lite_tp_rma_flag bits */
};

struct lite_core;      /* the core's side of a backend instance (opaque to backends) */
struct lite_transport; /* a backend instance (opaque to the core) */

/* How a backend reports to the core: from inside `progress`, except send_done and peer_failed,
 * which may also come from inside the op that posted (see FAILURES above). */
struct lite_core_upcalls {
    size_t size;
    /*
     * A message header arrived from `peer` (*hdr need live only during the call). The core
     * returns in *dst where the backend must place exactly hdr->len payload bytes and an opaque
     * *token for recv_end; the bytes may be placed in pieces, as they come. *dst == NULL with
     * hdr->len > 0 means "read and discard the payload" (e.g. a receive that was too short).
     * A negative return means the message is refused: the backend drops the connection to that
     * peer and reports peer_failed.
     */
    int (*recv_begin)(struct lite_core *core, int peer, const struct lite_msg_hdr *hdr, void **dst,
                      void **token);
    /* All hdr->len bytes of the message are in place. */
    void (*recv_end)(struct lite_core *core, int peer, void *token);
    /*
     * A whole message whose hdr->len payload bytes the backend holds at `payload` (a receive
     * buffer): the same as recv_begin, the copy and recv_end, in one call and without a token,
     * so the usual small message costs one upcall. Returns as recv_begin does. Backends that
     * take messages in pieces (a byte stream, fragments) use recv_begin and recv_end instead.
     */
    int (*recv_msg)(struct lite_core *core, int peer, const struct lite_msg_hdr *hdr,
                    const void *payload);
    /* A msg_send finished: 0 when the buffer may be reused, or a negative code. */
    void (*send_done)(struct lite_core *core, void *op, int status);
    /* A peer is unusable from now on (connection lost, protocol error, ...). Deferred by the
     * core until progress returns (FAILURES above). `why` is a short human-readable cause; status
     * is -ESHUTDOWN when the peer closed in order (it finalized), -LITE_ERR_PEER_LOST when it
     * vanished, or the code of what went wrong. Called at most once per peer; every msg_send and
     * rma_post still outstanding to that peer is completed with an error through send_done. */
    void (*peer_failed)(struct lite_core *core, int peer, int status, const char *why);

    /*
     * For backends that emulate one-sided ops themselves (tcp); a backend without rma_post
     * leaves that to the core and never calls these.
     * Emulated one-sided ops, target side: `peer` wants to write (or read) `len` bytes at
     * `offset` of the region with `core_key`. The core checks key, bounds and access rights and
     * returns the address in *addr, or a negative code (-LITE_ERR_REMOTE family: the backend
     * must then discard the payload and report the code to the initiator). On success the region
     * stays registered until rma_target_done(token).
     */
    int (*rma_target)(struct lite_core *core, int peer, uint64_t core_key, uint64_t offset,
                      uint64_t len, unsigned access, void **addr, void **token);
    void (*rma_target_done)(struct lite_core *core, void *token);
    /* A write with immediate from `peer` is in place at this rank (native or emulated). */
    void (*imm_arrived)(struct lite_core *core, int peer, uint32_t imm);
};

/* Security modes (lite_config_t.security). */
enum lite_sec_mode { LITE_SEC_OFF = 0, LITE_SEC_CA = 1, LITE_SEC_PSK = 2 };

#define LITE_SEC_PATH_MAX 1024
#define LITE_SEC_PSK_MAX  64
/* Certificates name their rank as "litetx-rank-<rank>" (subject CN or a DNS SAN). */
#define LITE_SEC_RANK_PREFIX "litetx-rank-"

/* What the core resolved and checked (files exist, parse, key matches, dates, chain). */
struct lite_security {
    int mode;                      /* enum lite_sec_mode */
    char cert[LITE_SEC_PATH_MAX];  /* ca: this rank's certificate chain (PEM) */
    char key[LITE_SEC_PATH_MAX];   /* ca: its private key (PEM) */
    char ca[LITE_SEC_PATH_MAX];    /* ca: the trusted CA certificate(s) (PEM) */
    uint8_t psk[LITE_SEC_PSK_MAX]; /* psk: the job's key */
    size_t psk_len;
};

/* What `open` receives. */
struct lite_transport_params {
    size_t size;
    int rank;
    int world_size;
    const char *bind_host; /* interface address to listen on (from the root address) */
    struct lite_core *core;
    const struct lite_core_upcalls *up;
    int log_level;
    /* Flow control the core will respect: at most `credits` credit-consuming messages
     * outstanding per peer (plus control messages, which take none), each eager one smaller
     * than `rndv_threshold` bytes of payload. Size receive resources from these. */
    uint32_t credits;
    size_t rndv_threshold;
    /* This host runs more ranks than it gives the job CPUs (or LITETX_YIELD=1): ranks take
     * turns on the CPUs rather than run at the same time. */
    bool crowded;
    /* The context's security, checked by the core at lite_init (never NULL when the struct is
     * this long). With mode != LITE_SEC_OFF the core opens only a backend with
     * LITE_CAP_ENCRYPTED, which must then encrypt and mutually authenticate every connection
     * and bind each peer's claimed rank to its credentials. */
    const struct lite_security *security;
    /* lite_config_t.op_timeout_ms (<= 0: none): the bound for a backend's own waits that no peer
     * message ends (a GPU kernel waiting for its partner), after which it gives up the op. */
    int op_timeout_ms;
    /* lite_config_t.reconnect_timeout_ms: how long a backend that resumes broken connections
     * tries before the peer is lost (0: a break is final). */
    int reconnect_timeout_ms;
    /* The resolved configuration (get, during open only) and the log sink. */
    const struct lite_tp_env *env;
};

/* What a variable's value must look like; lite_init checks it (a value that does not fit fails
 * it with -LITE_ERR_CONFIG naming the variable). An empty value counts as unset. */
enum lite_tunable_type {
    LITE_TUN_STRING = 0, /* any text: the owner checks what more it needs (lists, names) */
    LITE_TUN_INT = 1,    /* a decimal integer (optional sign) in [lo, hi] */
    LITE_TUN_SIZE = 2,   /* a count or byte size: decimal digits only, in [lo, hi] */
    LITE_TUN_BOOL = 3,   /* 0 or 1 */
    LITE_TUN_ENUM = 4,   /* one of the words of `values`; its index is the number */
};

/* Who reads a variable, and when. */
enum lite_tunable_scope {
    LITE_TUN_CONTEXT = 0, /* the core, once per context at lite_init */
    LITE_TUN_BACKEND = 1, /* a backend, through lite_tp_env.get in probe and open */
    LITE_TUN_PROCESS = 2, /* the core, once per process (the CUDA driver's name) */
};

/* One environment variable a backend or the core reads (docs/CONFIG.md lists them all). */
struct lite_tunable {
    const char *name;   /* "LITETX_EFA_RAILS" */
    const char *def;    /* the default, as a user reads it: "1", "auto", "min(64 KiB, rndv)" */
    const char *doc;    /* one line: what it does; "for tests: ..." for test-only hooks */
    int type;           /* enum lite_tunable_type */
    int scope;          /* enum lite_tunable_scope */
    int64_t lo, hi;     /* LITE_TUN_INT, LITE_TUN_SIZE: the accepted range */
    const char *values; /* LITE_TUN_ENUM: the accepted words, '|'-separated ("all|lazy|auto") */
};

/* A variable's value as lite_init resolved and checked it. */
struct lite_tun_val {
    int64_t num;     /* INT, SIZE, BOOL: the value; ENUM: the index of the word in `values` */
    const char *str; /* the text as set (every type); valid until open (or probe) returns */
};

/*
 * What the core hands a backend besides the upcalls: the configuration it resolved and a log
 * sink. In `probe` and in `open` (lite_transport_params.env).
 *
 * get: the value of `name`, one of the variables of this backend's `tunables` (or of the
 * core's table), read from the environment and checked against its type and range once by
 * lite_init. 1: set (*val filled); 0: unset, the backend applies its default (*val untouched);
 * -LITE_ERR_CONFIG: set but invalid (in probe only: lite_init fails before open on such a
 * value); -ENOENT: no such variable in those tables (a bug of the backend's table). Callable
 * only during probe and open: a backend keeps what it needs (strings included).
 *
 * log: the sink of every line a backend logs (the LITE_ERROR .. LITE_DEBUG macros of
 * src/support/tp_support.h route through it): the core prefixes, filters and writes it, at the
 * level of the context that calls. log_level: the most verbose level the sink writes for the
 * calling thread now (the macros test it before formatting). Both callable from any thread
 * while the library is loaded; the backend never touches the core's log state itself.
 */
struct lite_tp_env {
    size_t size;
    int (*get)(const struct lite_tp_env *env, const char *name, struct lite_tun_val *val);
    void (*log)(int level, const char *msg);
    int (*log_level)(void);
    void *core; /* the core's; for get */
};

struct lite_transport_ops {
    size_t size;          /* sizeof(struct lite_transport_ops) the backend was built with */
    uint32_t abi_version; /* LITE_TRANSPORT_ABI_VERSION */
    const char *name;     /* "tcp", "rdma", ... */
    uint32_t caps;        /* enum lite_transport_cap bits */

    /* Is this backend usable on this host? 0, -ENODEV (with a reason in why[why_len]). env
     * gives the backend's variables (a value that is invalid makes it unusable: say which). */
    int (*probe)(const struct lite_tp_env *env, char *why, size_t why_len);

    int (*open)(const struct lite_transport_params *params, struct lite_transport **out);
    void (*close)(struct lite_transport *tp);

    /* This instance's address blob (at most LITE_TRANSPORT_ADDR_MAX bytes) for the bootstrap. */
    int (*addr_get)(struct lite_transport *tp, void *blob, size_t *len);

    /*
     * Connect to every peer given all ranks' blobs (blobs[rank], lens[rank]; this rank's own entry
     * included). Blocks until all pairs are connected or `deadline_ns` (CLOCK_MONOTONIC) passes:
     * -ETIMEDOUT, with the unreachable ranks named in why[why_len]. A backend may instead
     * connect a pair lazily, on its first message (tcp beyond 64 ranks): it must then accept
     * msg_send to any peer at once and queue until the pair is up. Blobs come off the network:
     * check them before use.
     */
    int (*connect_all)(struct lite_transport *tp, const void *const *blobs, const size_t *lens,
                       int64_t deadline_ns, char *why, size_t why_len);

    /*
     * Post a message to `peer` (never this rank: the core loops self-sends back itself). Returns
     * 0 (send_done(op, ...) will follow, possibly from inside this call) or a negative code (no
     * send_done follows). Never -EAGAIN: a backend that cannot send now queues the message
     * (the core bounds what is outstanding with its credits); a negative return is a failure
     * of the message, usually of the peer. *hdr is valid only during the call (copy what must
     * outlive it); the payload must stay untouched until send_done. A control message
     * (LITE_CHAN_CTRL) takes no credit and may be of any length: an emulated one-sided op's
     * data is one such message.
     */
    int (*msg_send)(struct lite_transport *tp, int peer, const struct lite_msg_hdr *hdr,
                    const void *payload, void *op);

    /* Make progress; wait at most timeout_ms (0 = poll) for something to happen. Returns the
     * number of events handled (>= 0) or a negative code for a failure of the whole instance.
     * A poll may look a few times before it returns nothing, for well under a microsecond: the
     * core's waits poll back to back (efa reads its CQ again where that read is cheap). */
    int (*progress)(struct lite_transport *tp, int timeout_ms);

    /* Optional (with rma_post and mr_dereg). Register a region for one-sided ops (both as a local
     * source/sink and as a remote target). Not called when the core emulates one-sided ops. */
    int (*mr_reg)(struct lite_transport *tp, const struct lite_tp_mr *mr,
                  struct lite_tp_mr_keys *keys);
    /* Withdraw a registration: 0 once no peer's op can reach the region any more. A backend
     * whose peers place data without the target's help may need their word first: it returns
     * -EAGAIN, the core makes progress and calls again with the same handle (until its op
     * timeout; a region still withdrawing when the transport closes is freed by `close`). Never
     * -EAGAIN from inside `progress` (an upcall may deregister: the core's rendezvous regions). */
    int (*mr_dereg)(struct lite_transport *tp, void *handle);

    /*
     * Optional (NULL: the core emulates one-sided ops over msg_send). Post a one-sided op. Only
     * kinds the capability bits declare are posted (no READ without LITE_CAP_READ, no immediate
     * without LITE_CAP_WRITE_IMM: the core emulates those). Returns 0 (send_done(op, status)
     * follows once the op is complete: for a write, the data is in place at the target and its
     * immediate counted; for a read, the data is in place here) or a negative code (nothing
     * follows). A target that refuses the op (bad key, out of bounds, no access) completes it with
     * the target's code.
     */
    int (*rma_post)(struct lite_transport *tp, const struct lite_tp_rma *rma, void *op);

    /*
     * Optional (libfabric's fi_inject). Send a small message whose bytes leave with the call:
     * 0 means the payload may be reused at once and no send_done follows. -EAGAIN: not now
     * (longer than this backend injects, messages to `peer` still queued, the provider busy);
     * nothing was sent and the core posts the message with msg_send instead, in order. Other
     * negative codes as msg_send's. The core uses it for small eager messages (a blocking
     * lite_send then needs no request at all), so it is on every ping-pong's path: keep it short.
     */
    int (*msg_inject)(struct lite_transport *tp, int peer, const struct lite_msg_hdr *hdr,
                      const void *payload);

    /*
     * Optional. The LITETX_* variables this backend reads, ended by an entry whose name is NULL:
     * `litetx-info --config` lists them, lite_init checks the selected backend's against their
     * type and range before open and hands them over through lite_tp_env.get (a backend never
     * reads the environment itself), and it warns about a LITETX_* variable that no compiled-in
     * backend and not the core knows (with the closest known name).
     */
    const struct lite_tunable *tunables;

    /*
     * Optional (NULL: all zero). Counters of the link to `peer` for lite_peer_query: connections
     * that broke and were resumed. 0, or -EINVAL for a bad peer.
     */
    int (*peer_stats)(struct lite_transport *tp, int peer, uint64_t *breaks, uint64_t *resumes);

    /*
     * Optional (0: the core's default, 64 KiB). The rendezvous threshold this backend is fastest
     * with, chosen by measurement: used when the configuration sets none (lite_config_t,
     * LITETX_RNDV_THRESHOLD, the JSON file), handed back in the open params like any other.
     * Messages of this many bytes or more go by rendezvous; below it they are eager, and a peer
     * may pin up to credits x this many bytes of unexpected messages here.
     */
    size_t rndv_threshold_pref;
};

#ifdef __cplusplus
}
#endif
#endif /* LITETX_TRANSPORT_H */
