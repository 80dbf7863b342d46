/*
 * litetx.h - the public C API of liblitetx.
 *
 * liblitetx moves the traffic of LLM clusters (KV-cache transfer, MoE dispatch/combine, RL weight
 * updates and the collectives around them) over one API, whatever the network underneath: TCP
 * (the default everywhere), RDMA verbs, EFA/libfabric, QUIC or NCCL, as compiled in.
 *
 * CONVENTIONS
 *   - Every call returns 0 (or a documented non-negative value) on success and a negative code on
 *     failure: -errno (e.g. -EINVAL, -ETIMEDOUT) or one of the LITE_ERR_* library codes below.
 *     lite_strerror() names any code; lite_last_error() gives the context's detail string (which
 *     peer, which operation, what happened).
 *   - Handles are opaque. Public structs are versioned: initialise them with the matching
 *     lite_*_default() call, then set the fields you need, so later library versions can grow
 *     them without breaking your binary.
 *   - Timeouts are in milliseconds: LITE_TIMEOUT_INFINITE (-1) waits forever, 0 polls once.
 *   - A context is used by one thread at a time (the caller serialises); progress is made by the
 *     calls that test or wait, so a rank that never calls into the library makes no progress.
 *
 * QUICK TOUR
 *     lite_config_t cfg = lite_config_default();   // rank/world/root from the environment
 *     lite_ctx_t *ctx;
 *     int rc = lite_init(&cfg, &ctx);
 *     if (rc) { fprintf(stderr, "%s\n", lite_strerror(rc)); return 1; }
 *     if (lite_rank(ctx) == 0) rc = lite_send(ctx, 1, tag, buf, len, 5000);
 *     else                     rc = lite_recv(ctx, 0, tag, buf, len, NULL, 5000);
 *     lite_finalize(ctx);
 */
#ifndef LITETX_LITETX_H
#define LITETX_LITETX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(LITE_BUILDING_LIBRARY)
#define LITE_API __attribute__((visibility("default")))
#else
#define LITE_API
#endif

#define LITE_VERSION_MAJOR 0
#define LITE_VERSION_MINOR 1
#define LITE_VERSION_PATCH 0

/** The library's version as a string ("0.1.0"), for logs and bug reports. */
LITE_API const char *lite_version(void);

/* ---------------------------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------------------------- */

/*
 * Library error codes, returned negated like errno values. They sit above LITE_ERR_BASE so they
 * never collide with an errno. Common errno values used by the library:
 *   -EINVAL     bad argument or configuration value
 *   -ETIMEDOUT  a deadline passed (the operation is still pending where said so)
 *   -EAGAIN     no resource right now, retry later (non-blocking calls only)
 *   -ENOSYS     the selected transport does not implement this operation
 *   -ENODEV     the transport is not usable on this host
 *   -ENOMEM     out of memory
 *   -ESHUTDOWN  the peer finalized (closed in order); -LITE_ERR_PEER_LOST when it vanished
 */
enum lite_errc {
    LITE_ERR_BASE = 1000,
    LITE_ERR_PEER_LOST = 1001,     /* a peer's connection broke or the peer exited */
    LITE_ERR_PROTOCOL = 1002,      /* a peer sent bytes that are not a valid frame */
    LITE_ERR_TRUNCATED = 1003,     /* a message was longer than the receive buffer */
    LITE_ERR_CANCELLED = 1004,     /* the operation was cancelled by the caller */
    LITE_ERR_REMOTE = 1005,        /* the remote side refused the operation */
    LITE_ERR_TAG_ORDER = 1006,     /* tags to one peer must strictly increase */
    LITE_ERR_CONFIG = 1007,        /* invalid configuration (detail names the key) */
    LITE_ERR_NO_TRANSPORT = 1008,  /* the requested transport is not compiled in or not usable */
    LITE_ERR_REMOTE_KEY = 1009,    /* target: no live region with that key (stale or forged) */
    LITE_ERR_REMOTE_BOUNDS = 1010, /* target: the range is outside the registered region */
    LITE_ERR_REMOTE_ACCESS = 1011  /* target: the region does not grant that right */
};

/** A static string naming any return code (0, -errno or -LITE_ERR_*). Never NULL. */
LITE_API const char *lite_strerror(int code);

/* ---------------------------------------------------------------------------------------------
 * Configuration and context
 * ------------------------------------------------------------------------------------------- */

#define LITE_CONFIG_VERSION   1
#define LITE_TIMEOUT_INFINITE (-1)

/** Log verbosity, for lite_config_t.log_level and LITETX_LOG_LEVEL. */
enum lite_log_level {
    LITE_LOG_UNSET = -1,
    LITE_LOG_ERROR = 0,
    LITE_LOG_WARN = 1,
    LITE_LOG_INFO = 2,
    LITE_LOG_DEBUG = 3
};

/*
 * lite_config_t - how to start a context.
 *
 * Every field starts "unset" in lite_config_default(); an unset field is taken from, in order of
 * precedence (first found wins):
 *   1. this struct (a field the caller set),
 *   2. the LITETX_* environment variables (LITETX_RANK, LITETX_WORLD_SIZE, LITETX_ROOT,
 *      LITETX_TRANSPORT, LITETX_LOG_LEVEL, LITETX_INIT_TIMEOUT_MS, LITETX_OP_TIMEOUT_MS,
 *      LITETX_CREDITS, LITETX_RNDV_THRESHOLD, LITETX_SECURITY, LITETX_SECURITY_CERT,
 *      LITETX_SECURITY_KEY, LITETX_SECURITY_CA, LITETX_SECURITY_PSK),
 *   3. the variables launchers set, innermost first: Open MPI (OMPI_COMM_WORLD_RANK/SIZE),
 *      torchrun (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT), Slurm (SLURM_PROCID/SLURM_NTASKS),
 *   4. the JSON file named by config_file or LITETX_CONFIG,
 *   5. built-in defaults (rank 0 of 1, root 127.0.0.1:29500, transport "auto", log level warn).
 * docs/CONFIG.md lists every key. Invalid values are refused with -LITE_ERR_CONFIG and a detail
 * (lite_init_error()) that names the key.
 */
typedef struct lite_config {
    uint32_t version;        /* LITE_CONFIG_VERSION; set by lite_config_default() */
    uint32_t struct_size;    /* sizeof(lite_config_t); set by lite_config_default() */
    int rank;                /* this process's rank, 0..world_size-1; -1 = unset */
    int world_size;          /* number of ranks, >= 1; -1 = unset */
    const char *root;        /* "host:port" where rank 0 listens for the bootstrap; NULL = unset */
    const char *transport;   /* "auto" or a transport name ("tcp", ...); NULL = unset */
    int log_level;           /* enum lite_log_level; LITE_LOG_UNSET = unset */
    int init_timeout_ms;     /* deadline for lite_init()'s rendezvous; -2 = unset */
    int op_timeout_ms;       /* default deadline of blocking calls given LITE_TIMEOUT_DEFAULT */
    const char *config_file; /* JSON file; NULL = LITETX_CONFIG or none */
    /* Added after the first layout; a caller built against a shorter struct gets them unset. */
    int credits;        /* eager messages a peer may have outstanding here; -1 = unset (64) */
    int rndv_threshold; /* messages of this many bytes or more use rendezvous; -1 = unset */
    /* Security, for every connection of the context (docs/CONFIG.md, "Security"); NULL = unset.
     * Transport-neutral: a transport that cannot encrypt refuses to start when it is on.
     * "{rank}" in a path stands for this rank (one setting for every rank of a job). */
    const char *security;      /* "off" (default), "ca" or "psk" */
    const char *security_cert; /* ca: this rank's certificate (PEM), naming litetx-rank-<rank> */
    const char *security_key;  /* ca: its private key (PEM) */
    const char *security_ca;   /* ca: the CA certificate(s) (PEM) every rank's must chain to */
    const char *security_psk;  /* psk: a file holding the job's pre-shared key in hex */
    /* A broken connection to a live peer is resumed for up to this long (ms), with every
     * operation delivered exactly once; past it the peer is -LITE_ERR_PEER_LOST. 0: a break is
     * final. -1 = unset (10000). Backends that cannot resume ignore it (docs/TCP.md). */
    int reconnect_timeout_ms;
    /* Room to grow: lite_config_default() returns the struct by value, so its size must never
     * change (a program built against an older header would be written past its copy). New
     * fields take the place of reserved ones; lite_config_default() zeroes them. */
    void *reserved[18];
} lite_config_t;

/* sizeof(lite_config_t) on 64-bit targets, fixed for the life of the ABI. */
#define LITE_CONFIG_SIZE 256

/* Pass as a timeout to use the context's op_timeout_ms. */
#define LITE_TIMEOUT_DEFAULT (-2)

/** A config with every field unset (see lite_config_t for where unset fields come from). */
LITE_API lite_config_t lite_config_default(void);

typedef struct lite_ctx lite_ctx_t;

/*
 * lite_init - start a context: resolve the config, open the transport, meet the other ranks.
 *
 * Rank 0 listens at the root address; the others connect (retrying until init_timeout_ms).
 * Every rank's transport address is exchanged, the transport connects all pairs, and a barrier
 * ends the call. On failure *out is NULL and a detail is available from lite_init_error().
 * Returns 0, -LITE_ERR_CONFIG, -LITE_ERR_NO_TRANSPORT, -ETIMEDOUT (detail names the missing
 * rank), -LITE_ERR_PEER_LOST, ...
 */
LITE_API int lite_init(const lite_config_t *cfg, lite_ctx_t **out);

/*
 * lite_finalize - a barrier (bounded by op_timeout_ms, skipped when a peer is already lost),
 * then every resource is released: registrations, the transport, and every request, including
 * those the caller never waited for (their handles are invalid afterwards). Operations still in
 * flight end with the context; buffers must stay valid until this returns. NULL-safe.
 */
LITE_API int lite_finalize(lite_ctx_t *ctx);

/** The detail string of the last failed lite_init() in this thread ("" if none). */
LITE_API const char *lite_init_error(void);

LITE_API int lite_rank(const lite_ctx_t *ctx);
LITE_API int lite_world_size(const lite_ctx_t *ctx);
/** The name of the transport in use ("tcp", ...). */
LITE_API const char *lite_transport_name(const lite_ctx_t *ctx);

/** The context's last error detail (which peer, which op, why); "" if none. */
LITE_API const char *lite_last_error(const lite_ctx_t *ctx);

/** What happened to the connection to one peer (lite_peer_query). */
typedef struct lite_peer_stats {
    uint32_t struct_size; /* the caller sets sizeof(lite_peer_stats_t) */
    uint32_t reserved0;
    uint64_t breaks;  /* connections to the peer that broke while it was alive (tcp) */
    uint64_t resumes; /* ... and were resumed, nothing lost or repeated (reconnect_timeout_ms) */
    uint64_t reserved[5];
} lite_peer_stats_t;

/*
 * lite_peer_query - counters of this rank's link to `peer` (all zero on backends that do not
 * resume connections). Set out->struct_size first. Errors: -EINVAL (bad peer, NULL, or a
 * struct_size smaller than the first version's).
 */
LITE_API int lite_peer_query(const lite_ctx_t *ctx, int peer, lite_peer_stats_t *out);

/* ---------------------------------------------------------------------------------------------
 * Tags
 *
 * A tag is 64 bits: step (24) | layer (16) | level (8) | seq (16), most significant first, so
 * that tags compare in (step, layer, level, seq) order. Tags sent to one peer must strictly
 * increase; a receive matches exactly its tag.
 * ------------------------------------------------------------------------------------------- */

#define LITE_TAG_STEP_BITS  24
#define LITE_TAG_LAYER_BITS 16
#define LITE_TAG_LEVEL_BITS 8
#define LITE_TAG_SEQ_BITS   16

typedef struct lite_tag_parts {
    uint32_t step;  /* < 2^24: training/inference step */
    uint32_t layer; /* < 2^16: model layer */
    uint32_t level; /* < 2^8: routing level (e.g. 0 = intra-node, 1 = inter-node) */
    uint32_t seq;   /* < 2^16: sequence within (step, layer, level) */
} lite_tag_parts_t;

/** Compose a tag; -EINVAL if a part does not fit its field. */
LITE_API int lite_tag_compose(const lite_tag_parts_t *parts, uint64_t *tag);
/** Split a tag into its parts (always succeeds for a non-NULL output). */
LITE_API int lite_tag_split(uint64_t tag, lite_tag_parts_t *parts);

/** A pending operation; finished and released by lite_test() / lite_wait(). */
typedef struct lite_request lite_request_t;

/* ---------------------------------------------------------------------------------------------
 * Memory kinds
 * ------------------------------------------------------------------------------------------- */

/*
 * Where a buffer lives (docs/GPU.md). CUDA device memory is passed like host memory:
 *   - lite_send/lite_recv/lite_isend/lite_irecv and the collectives (lite_allreduce & co.,
 *     blocking and not) recognise a device pointer themselves (a CUDA pointer query; a process
 *     that never loaded the CUDA driver has only host memory and pays nothing) and move it
 *     through pinned host memory (unless the transport takes device buffers itself): the results
 *     are the bytes of the same call on host buffers. A non-blocking collective writes a device
 *     result when its request completes.
 *   - One-sided ops take the kind of their registration: lite_mr_reg(..., LITE_MEM_CUDA, ...)
 *     needs a transport with LITE_CAP_DEVICE_MEM (efa with FI_HMEM, rdma with dmabuf), else
 *     -ENOSYS; without a usable CUDA driver it fails with -ENOSYS/-ENODEV saying why, and with
 *     -EINVAL when the address is not device memory.
 *   - Streams: the library copies on a stream of its own, ordered after none of the caller's:
 *     synchronise the stream that produced a buffer before passing it. When a blocking call
 *     returns or a request completes, device receive buffers hold their data. A device send
 *     buffer may be reused when lite_send returns or lite_isend's request completes (a
 *     transport that takes device buffers itself, nccl, reads it until then; where the
 *     library stages it, it is already copied when lite_isend returns).
 */
enum lite_mem_kind { LITE_MEM_HOST = 0, LITE_MEM_CUDA = 1 };

/* ---------------------------------------------------------------------------------------------
 * Data types and reduction operators (collectives)
 * ------------------------------------------------------------------------------------------- */

enum lite_dtype {
    LITE_F32 = 0,
    LITE_F64 = 1,
    LITE_F16 = 2,  /* IEEE binary16 */
    LITE_BF16 = 3, /* bfloat16 */
    LITE_I8 = 4,
    LITE_U8 = 5,
    LITE_I32 = 6,
    LITE_U32 = 7,
    LITE_I64 = 8,
    LITE_U64 = 9,
    LITE_DTYPE_COUNT = 10
};

enum lite_redop {
    LITE_SUM = 0,
    LITE_PROD = 1,
    LITE_MIN = 2,
    LITE_MAX = 3,
    LITE_AVG = 4, /* floating-point types only: the sum divided by the world size */
    LITE_REDOP_COUNT = 5
};

/** Size in bytes of one element of `dtype`, or 0 for an invalid dtype. */
LITE_API size_t lite_dtype_size(int dtype);

/* ---------------------------------------------------------------------------------------------
 * Point-to-point messages
 * ------------------------------------------------------------------------------------------- */

/** What a completed request did. */
typedef struct lite_status {
    int peer;     /* the peer of the operation */
    uint64_t tag; /* its tag */
    size_t bytes; /* bytes sent or received */
    int error;    /* 0, or the negative code the request ended with */
} lite_status_t;

/*
 * lite_isend / lite_irecv - start a tagged send or receive and return a request at once.
 *
 * The buffer must stay valid and untouched until the request completes. A receive matches the
 * message from `peer` with exactly `tag`; a message that arrives before its receive is posted is
 * kept (unexpected) until the receive comes. A message longer than the receive buffer fails the
 * receive with -LITE_ERR_TRUNCATED (nothing is written past the buffer). Sending to yourself is
 * allowed. Errors: -EINVAL (bad peer, NULL buffer with len > 0), -LITE_ERR_TAG_ORDER (tag not
 * greater than the previous send to that peer), -LITE_ERR_PEER_LOST.
 */
LITE_API int lite_isend(lite_ctx_t *ctx, int peer, uint64_t tag, const void *buf, size_t len,
                        lite_request_t **req);
LITE_API int lite_irecv(lite_ctx_t *ctx, int peer, uint64_t tag, void *buf, size_t len,
                        lite_request_t **req);

/*
 * lite_test - make progress and check a request without blocking.
 * Returns 1 when the request finished (it is then released; *status, if non-NULL, says how),
 * 0 when it is still pending, or a negative code when it finished with an error (released too).
 */
LITE_API int lite_test(lite_ctx_t *ctx, lite_request_t *req, lite_status_t *status);

/*
 * lite_wait - make progress until the request finishes or timeout_ms passes.
 * Returns 0 (request released), the request's negative error (released), or -ETIMEDOUT: then
 * the request is still pending and still owned by the caller (wait again or lite_cancel it).
 */
LITE_API int lite_wait(lite_ctx_t *ctx, lite_request_t *req, int timeout_ms, lite_status_t *status);

/*
 * lite_cancel - withdraw a pending receive that no message has matched yet, and release it.
 * Returns 0; -EBUSY when the request already moves data (a send, or a receive being filled):
 * wait for it instead. A finished request is simply released.
 */
LITE_API int lite_cancel(lite_ctx_t *ctx, lite_request_t *req);

/*
 * lite_send, lite_recv - blocking forms of isend+wait and irecv+wait; *received (may be NULL)
 * gets the length. When the call returns, the library no longer uses `buf`, also after a
 * timeout. On timeout_ms: a receive no message matched yet, a send still waiting for credit,
 * and a large send whose receiver has not answered are withdrawn (-ETIMEDOUT; the receiver of
 * such a send later gets -LITE_ERR_CANCELLED, and the tag counts as used). An operation already
 * moving bytes (a large message the peer has agreed to, a message half sent) is finished first,
 * bounded by op_timeout_ms and the peer's liveness, and the call returns its outcome.
 */
LITE_API int lite_send(lite_ctx_t *ctx, int peer, uint64_t tag, const void *buf, size_t len,
                       int timeout_ms);
LITE_API int lite_recv(lite_ctx_t *ctx, int peer, uint64_t tag, void *buf, size_t len,
                       size_t *received, int timeout_ms);

/** Make progress on every pending operation once, without blocking. Returns 0 or an error. */
LITE_API int lite_progress(lite_ctx_t *ctx);

/* ---------------------------------------------------------------------------------------------
 * Memory registration and one-sided operations
 *
 * A region is registered once (lite_mr_reg) and described to peers by a remote descriptor
 * (lite_rdesc_t): a compact, versioned, self-contained blob (base address, length, rights, keys
 * per rail, owner rank, transport) that an application can ship through any channel or
 * exchange with lite_mr_exchange(). One-sided writes place bytes in a peer's region without
 * the peer posting anything; a write with an immediate then increments the target's counter
 * for that 32-bit value (ImmCounter), which the target waits on with lite_imm_wait(). No order
 * between separate writes is promised: a transfer cut into many writes is complete exactly when
 * its count is reached.
 *
 * Every one-sided op is checked twice: locally against the descriptor (-EINVAL, -ERANGE,
 * -EACCES), and at the target against its live registration. A refusal at the target completes
 * the initiator's request with -LITE_ERR_REMOTE_KEY, -LITE_ERR_REMOTE_BOUNDS or
 * -LITE_ERR_REMOTE_ACCESS, and not a byte of the target's memory is touched.
 * ------------------------------------------------------------------------------------------- */

typedef struct lite_mr lite_mr_t;

/** Access rights of a registered region, as seen by peers. Local use is always allowed. */
enum lite_access {
    LITE_ACCESS_REMOTE_WRITE = 1u << 0,
    LITE_ACCESS_REMOTE_READ = 1u << 1,
};

#define LITE_RDESC_VERSION 1
#define LITE_RDESC_SIZE    128

/** A remote descriptor: plain bytes, safe to copy, send and store. */
typedef struct lite_rdesc {
    uint8_t bytes[LITE_RDESC_SIZE];
} lite_rdesc_t;

/*
 * lite_mr_reg - register [addr, addr + len) of memory kind `kind` (enum lite_mem_kind) with
 * rights `access` (enum lite_access bits) for peers. len must be at least 1.
 * Errors: -EINVAL (NULL addr, len 0, unknown bits), -ENOSYS (the transport cannot register this
 * memory kind), -ENOMEM.
 */
LITE_API int lite_mr_reg(lite_ctx_t *ctx, void *addr, size_t len, int kind, unsigned access,
                         lite_mr_t **mr);

/*
 * lite_mr_dereg - withdraw a registration. Ops of peers that are placing data in the region
 * finish first, and peers that place data natively (efa) confirm that theirs are over; later
 * ops using its descriptor are refused. Once it returns 0 no byte of any peer's op lands in the
 * region. Bounded by the op timeout: -ETIMEDOUT when a peer still uses the region or has not
 * confirmed (one that makes no progress meanwhile); the region then stays registered, peers'
 * new ops on it are refused, and the caller calls again before freeing the memory. NULL-safe.
 */
LITE_API int lite_mr_dereg(lite_ctx_t *ctx, lite_mr_t *mr);

/** The region's remote descriptor. */
LITE_API int lite_mr_desc(lite_ctx_t *ctx, const lite_mr_t *mr, lite_rdesc_t *desc);

/** Collective: every rank passes its region (or NULL) and gets all ranks' descriptors in
 *  descs[0 .. world_size) (an all-zero descriptor for a rank that passed NULL). */
LITE_API int lite_mr_exchange(lite_ctx_t *ctx, const lite_mr_t *mr, lite_rdesc_t *descs,
                              int timeout_ms);

/*
 * lite_write / lite_write_imm / lite_read - one-sided ops between local region `local` at
 * local_off and peer's region `remote` at remote_off, `len` bytes (0 allowed). A write's request
 * completes when the data is in place at the peer (and its immediate counted); a read's when the
 * data is in place here. The local range must stay untouched until then.
 * Errors at posting: -EINVAL (descriptor not from `peer`, of another transport, malformed),
 * -ERANGE (out of the local or remote region), -EACCES (the descriptor lacks the right),
 * -ENOSYS, -LITE_ERR_PEER_LOST. At completion: -LITE_ERR_REMOTE_* (refused by the target).
 */
LITE_API int lite_write(lite_ctx_t *ctx, int peer, lite_mr_t *local, size_t local_off,
                        const lite_rdesc_t *remote, size_t remote_off, size_t len,
                        lite_request_t **req);
LITE_API int lite_write_imm(lite_ctx_t *ctx, int peer, lite_mr_t *local, size_t local_off,
                            const lite_rdesc_t *remote, size_t remote_off, size_t len, uint32_t imm,
                            lite_request_t **req);
LITE_API int lite_read(lite_ctx_t *ctx, int peer, lite_mr_t *local, size_t local_off,
                       const lite_rdesc_t *remote, size_t remote_off, size_t len,
                       lite_request_t **req);

/* Flags of the batch forms. */
#define LITE_WRITE_WITH_IMM 1u /* count `imm` at the target once per page / entry */

/*
 * lite_write_paged - the KV-cache shape: npages pages of page_size bytes, page src_pages[i] of
 * `local` to page dst_pages[i] of `remote` at `peer`. With LITE_WRITE_WITH_IMM, the target
 * counts `imm` once per page (so it waits for npages). One request for the whole batch.
 */
LITE_API int lite_write_paged(lite_ctx_t *ctx, int peer, lite_mr_t *local,
                              const uint32_t *src_pages, const lite_rdesc_t *remote,
                              const uint32_t *dst_pages, size_t npages, size_t page_size,
                              uint32_t imm, unsigned flags, lite_request_t **req);

/* One destination of a scatter. */
typedef struct lite_scatter_entry {
    int peer;
    size_t local_off;
    const lite_rdesc_t *remote;
    size_t remote_off;
    size_t len;
    uint32_t imm; /* counted at that peer when flags has LITE_WRITE_WITH_IMM */
    unsigned flags;
} lite_scatter_entry_t;

/*
 * lite_write_scatter - the MoE-dispatch / weight-broadcast shape: n writes from one local region
 * to many peers and offsets, each with its own optional immediate. One request for all.
 * Entries whose peer is this rank are copied locally (and counted locally).
 */
LITE_API int lite_write_scatter(lite_ctx_t *ctx, lite_mr_t *local,
                                const lite_scatter_entry_t *entries, size_t n,
                                lite_request_t **req);

/*
 * ImmCounter. Each rank keeps a counter per immediate value, incremented when a write with that
 * immediate has placed its data here (arrivals before any wait are kept: "banked").
 *
 * lite_imm_wait - wait until the counter for imm reaches `expected`, then subtract `expected`
 *   (consume). -ETIMEDOUT when the deadline passes (nothing consumed); -LITE_ERR_PEER_LOST when
 *   a peer is lost while the count is short.
 * lite_imm_peek - the current count (0 if none).
 * lite_imm_reset - set the count for imm to 0.
 * At most LITETX_IMM_COUNTERS (default 65536) distinct immediates are tracked at once (counters
 * at 0 are recycled); an arrival beyond that fails the context's waits with -ENOSPC.
 */
LITE_API int lite_imm_wait(lite_ctx_t *ctx, uint32_t imm, uint64_t expected, int timeout_ms);
LITE_API int lite_imm_peek(lite_ctx_t *ctx, uint32_t imm, uint64_t *count);
LITE_API int lite_imm_reset(lite_ctx_t *ctx, uint32_t imm);

/* ---------------------------------------------------------------------------------------------
 * Collectives
 * ------------------------------------------------------------------------------------------- */

/** Synchronise all ranks: returns once every rank has entered the barrier. */
LITE_API int lite_barrier(lite_ctx_t *ctx, int timeout_ms);

/*
 * The collectives below are DETERMINISTIC: for every element, the order in which the ranks'
 * contributions are combined is the canonical order
 *
 *     r = x[0];  r = r OP x[1];  r = r OP x[2];  ...  r = r OP x[n-1]     (n = world size)
 *
 * (a left fold in rank order, each step rounded as described in docs/REDUCTION.md: f16/bf16 are
 * combined in f32 and rounded back to nearest-even after every step; AVG is that SUM divided by
 * n once at the end). It depends on the world size alone: not on the transport, the message size,
 * the chunk size, the algorithm, the arrival timing or the schedule, and every rank receives the
 * same bytes. docs/DETERMINISM.md states the contract and why each algorithm keeps it.
 *
 * COMMON RULES
 *   - Every rank of the context must call the same collectives in the same order (blocking and
 *     non-blocking alike), with the same count, dtype, op and root. With the argument check on
 *     (the default; LITETX_COLL_CHECK=0 turns it off) every rank first sends every other rank a
 *     40-byte header of its arguments (for small collectives it rides in front of the data), and
 *     a call whose arguments differ from another rank's fails with -EINVAL and a detail naming
 *     the rank and both argument lists, instead of corrupting data or hanging. A rank whose
 *     collective fails (a difference it saw, an invalid argument of its own, a lost peer) tells
 *     the others, which fail at once with a detail naming it rather than at their deadline. So a
 *     difference in count, dtype, op, root, algorithm or collective fails every rank; an
 *     alltoallv count disagreement fails the two ranks concerned and the others complete.
 *     Skipping a collective on one rank ends in -ETIMEDOUT.
 *   - Counts are in elements of `dtype` (enum lite_dtype). Data movement (bcast, allgather,
 *     alltoall, alltoallv) accepts every dtype; the reductions accept every (dtype, op) of enum
 *     lite_redop except LITE_AVG on integer types (-EINVAL).
 *   - A count of 0 is valid (buffers may then be NULL) and still synchronises the argument check.
 *   - Buffers are host memory. A receive buffer must not overlap a send buffer except in the
 *     in-place forms described per call (-EINVAL otherwise).
 *   - timeout_ms bounds the whole call (LITE_TIMEOUT_DEFAULT = the context's op_timeout_ms,
 *     LITE_TIMEOUT_INFINITE = no bound). On -ETIMEDOUT or a lost peer, transfers that were in
 *     flight may still read or write the buffers until the peer is lost or the context is
 *     finalized: keep them allocated, or finalize.
 *   - Errors: -EINVAL (bad argument, or arguments that differ across ranks), -ETIMEDOUT,
 *     -LITE_ERR_PEER_LOST, -ENOMEM, and the transport's errors; lite_last_error() names the
 *     collective, its sequence number and cause.
 *
 * ALGORITHMS AND CONFIGURATION (read from the environment once, by lite_init, and changed for
 * one context by lite_coll_set below; must be equal on every rank, which the argument check
 * verifies):
 *   LITETX_COLL_ALGO=auto|direct|rsag|pipe   force an algorithm where the collective has it
 *                                            (direct: all; rsag: allreduce; pipe: bcast)
 *   LITETX_COLL_CHUNK=<bytes>[k|m|g]         pipeline chunk per peer (default: by world size)
 *   LITETX_COLL_CHECK=1|0                    exchange and verify argument headers
 *   Whatever they say, results are byte-identical.
 *
 * NON-BLOCKING FORMS (lite_i*) start the collective and return a request at once; complete it with
 * lite_test or lite_wait (lite_status_t.bytes = bytes written to this rank's receive buffer, peer
 * = -1). Buffers must stay untouched until then. The collectives of a context run one after
 * another in call order (a non-blocking one starts when those called before it have finished);
 * they progress whenever this context tests or waits on any collective request or runs a blocking
 * collective, so several may be outstanding and waited in any order, and they overlap with
 * computation and point-to-point traffic. lite_cancel returns -EBUSY for a started collective.
 */

/* Collective algorithms (lite_coll_opts_t.algo). A collective that lacks the forced algorithm
 * keeps its automatic choice. */
enum lite_coll_algo {
    LITE_COLL_ALGO_AUTO = 0,   /* chosen from the size and the world size */
    LITE_COLL_ALGO_DIRECT = 1, /* every collective: every rank exchanges with every rank at once */
    LITE_COLL_ALGO_RSAG = 2,   /* allreduce: reduce-scatter, then allgather, in chunks */
    LITE_COLL_ALGO_PIPE = 3,   /* bcast: chunks pipelined along the chain root, root+1, ... */
};

/* A context's collective options. Fixed size: grown only into reserved[], which must be zero. */
typedef struct lite_coll_opts {
    uint32_t struct_size; /* sizeof(lite_coll_opts_t); set by lite_coll_opts_default() */
    int32_t algo;         /* enum lite_coll_algo */
    uint64_t chunk;       /* pipeline chunk per peer in bytes, 1 .. 2^40; 0 = by world size */
    int32_t check;        /* 1: exchange and verify argument headers (default); 0: do not */
    uint32_t reserved0;
    uint64_t reserved[5];
} lite_coll_opts_t;

/** The library's defaults (auto, chunk by world size, check on), not the environment's. */
LITE_API lite_coll_opts_t lite_coll_opts_default(void);

/*
 * lite_coll_get - the context's collective options: those lite_init read from LITETX_COLL_ALGO,
 * LITETX_COLL_CHUNK and LITETX_COLL_CHECK, or the last lite_coll_set. opts->struct_size must be
 * set (lite_coll_opts_default). Errors: -EINVAL (NULL, or a wrong struct_size).
 */
LITE_API int lite_coll_get(const lite_ctx_t *ctx, lite_coll_opts_t *opts);

/*
 * lite_coll_set - replace the context's collective options for the collectives called after it
 * (those already started keep theirs). Local: no message is sent, so every rank must make the
 * same change at the same point of its sequence of collectives. Errors: -EINVAL (NULL, a wrong
 * struct_size, an unknown algo, a chunk above 2^40, check other than 0 or 1, nonzero reserved);
 * the options are then unchanged.
 */
LITE_API int lite_coll_set(lite_ctx_t *ctx, const lite_coll_opts_t *opts);

/* Pass as sendbuf for an in-place allreduce, allgather or reduce_scatter (see each call). */
#define LITE_IN_PLACE ((const void *)(uintptr_t)1)

/*
 * lite_bcast - copy `count` elements of `dtype` from `root`'s buf into buf on every rank.
 * root must be in [0, world size). On the root buf is only read.
 */
LITE_API int lite_bcast(lite_ctx_t *ctx, void *buf, size_t count, int dtype, int root,
                        int timeout_ms);

/*
 * lite_allgather - every rank contributes `count` elements; recvbuf (world size x count elements)
 * receives rank r's contribution at element offset r * count, on every rank.
 * In place: sendbuf = LITE_IN_PLACE (or recvbuf + rank * count elements) when this rank's
 * contribution is already at its place in recvbuf.
 */
LITE_API int lite_allgather(lite_ctx_t *ctx, const void *sendbuf, void *recvbuf, size_t count,
                            int dtype, int timeout_ms);

/*
 * lite_reduce_scatter - sendbuf holds world size x recvcount elements; rank r receives in recvbuf
 * (recvcount elements) block r of the elementwise reduction of every rank's sendbuf, combined in
 * the canonical order.
 * In place: sendbuf = LITE_IN_PLACE, recvbuf holds the world size x recvcount input elements and
 * this rank's result replaces its own block (at element offset rank * recvcount); equivalently,
 * recvbuf = sendbuf + rank * recvcount elements.
 */
LITE_API int lite_reduce_scatter(lite_ctx_t *ctx, const void *sendbuf, void *recvbuf,
                                 size_t recvcount, int dtype, int op, int timeout_ms);

/*
 * lite_allreduce - recvbuf[i] = x0[i] OP x1[i] OP ... OP x(n-1)[i] (the canonical left fold,
 * xr = rank r's sendbuf) on every rank, byte-identical on every rank and on every run.
 * In place: sendbuf == recvbuf or sendbuf = LITE_IN_PLACE (the input is taken from recvbuf).
 * Small messages use `direct` (every rank sends its input to every rank and folds locally in rank
 * order: one round); large ones `rsag` (rank b folds block b of the buffer in rank order from
 * every rank's contribution, then sends the folded block to all: 2 (n-1)/n x the buffer per rank,
 * pipelined in chunks).
 */
LITE_API int lite_allreduce(lite_ctx_t *ctx, const void *sendbuf, void *recvbuf, size_t count,
                            int dtype, int op, int timeout_ms);

/*
 * lite_alltoall - sendbuf and recvbuf hold world size x count elements: block p of sendbuf goes to
 * rank p, and block p of recvbuf comes from rank p (this rank's own block is copied locally).
 * No in-place form.
 */
LITE_API int lite_alltoall(lite_ctx_t *ctx, const void *sendbuf, void *recvbuf, size_t count,
                           int dtype, int timeout_ms);

/*
 * lite_alltoallv - like lite_alltoall with per-peer counts and offsets (in elements): this rank
 * sends sendcounts[p] elements from sendbuf + sdispls[p] to rank p and receives recvcounts[p]
 * elements from rank p into recvbuf + rdispls[p]. Each array has world size entries;
 * recvcounts[p] on this rank must equal sendcounts[this rank] on rank p (checked: -EINVAL on both
 * sides). Zero counts send nothing. Receive segments must not overlap each other or sendbuf.
 * The arrays are copied: they need not outlive a non-blocking call.
 */
LITE_API int lite_alltoallv(lite_ctx_t *ctx, const void *sendbuf, const size_t *sendcounts,
                            const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                            const size_t *rdispls, int dtype, int timeout_ms);

/* Non-blocking forms of the calls above (see NON-BLOCKING FORMS). */
LITE_API int lite_ibarrier(lite_ctx_t *ctx, lite_request_t **req);
LITE_API int lite_ibcast(lite_ctx_t *ctx, void *buf, size_t count, int dtype, int root,
                         lite_request_t **req);
LITE_API int lite_iallgather(lite_ctx_t *ctx, const void *sendbuf, void *recvbuf, size_t count,
                             int dtype, lite_request_t **req);
LITE_API int lite_ireduce_scatter(lite_ctx_t *ctx, const void *sendbuf, void *recvbuf,
                                  size_t recvcount, int dtype, int op, lite_request_t **req);
LITE_API int lite_iallreduce(lite_ctx_t *ctx, const void *sendbuf, void *recvbuf, size_t count,
                             int dtype, int op, lite_request_t **req);
LITE_API int lite_ialltoall(lite_ctx_t *ctx, const void *sendbuf, void *recvbuf, size_t count,
                            int dtype, lite_request_t **req);
LITE_API int lite_ialltoallv(lite_ctx_t *ctx, const void *sendbuf, const size_t *sendcounts,
                             const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                             const size_t *rdispls, int dtype, lite_request_t **req);

#ifdef __cplusplus
}
#endif
#endif /* LITETX_LITETX_H */
