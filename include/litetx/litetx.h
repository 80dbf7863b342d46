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
 */
enum lite_errc {
    LITE_ERR_BASE = 1000,
    LITE_ERR_PEER_LOST = 1001,   /* a peer's connection broke or the peer exited */
    LITE_ERR_PROTOCOL = 1002,    /* a peer sent bytes that are not a valid frame */
    LITE_ERR_TRUNCATED = 1003,   /* a message was longer than the receive buffer */
    LITE_ERR_CANCELLED = 1004,   /* the operation was cancelled by the caller */
    LITE_ERR_REMOTE = 1005,      /* the remote side refused the operation */
    LITE_ERR_TAG_ORDER = 1006,   /* tags to one peer must strictly increase */
    LITE_ERR_CONFIG = 1007,      /* invalid configuration (detail names the key) */
    LITE_ERR_NO_TRANSPORT = 1008 /* the requested transport is not compiled in or not usable */
};

/** A static string naming any return code (0, -errno or -LITE_ERR_*). Never NULL. */
LITE_API const char *lite_strerror(int code);

/* ---------------------------------------------------------------------------------------------
 * Configuration and context
 * ------------------------------------------------------------------------------------------- */

#define LITE_CONFIG_VERSION 1
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
 *      LITETX_TRANSPORT, LITETX_LOG_LEVEL, LITETX_INIT_TIMEOUT_MS, LITETX_OP_TIMEOUT_MS),
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
} lite_config_t;

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

/** Finalize: a barrier (bounded by op_timeout_ms), then every resource is released. NULL-safe. */
LITE_API int lite_finalize(lite_ctx_t *ctx);

/** The detail string of the last failed lite_init() in this thread ("" if none). */
LITE_API const char *lite_init_error(void);

LITE_API int lite_rank(const lite_ctx_t *ctx);
LITE_API int lite_world_size(const lite_ctx_t *ctx);
/** The name of the transport in use ("tcp", ...). */
LITE_API const char *lite_transport_name(const lite_ctx_t *ctx);

/** The context's last error detail (which peer, which op, why); "" if none. */
LITE_API const char *lite_last_error(const lite_ctx_t *ctx);

/* ---------------------------------------------------------------------------------------------
 * Tags
 *
 * A tag is 64 bits: step (24) | layer (16) | level (8) | seq (16), most significant first, so
 * that tags compare in (step, layer, level, seq) order. Tags sent to one peer must strictly
 * increase; a receive matches exactly its tag.
 * ------------------------------------------------------------------------------------------- */

#define LITE_TAG_STEP_BITS 24
#define LITE_TAG_LAYER_BITS 16
#define LITE_TAG_LEVEL_BITS 8
#define LITE_TAG_SEQ_BITS 16

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

/* ---------------------------------------------------------------------------------------------
 * Memory kinds
 * ------------------------------------------------------------------------------------------- */

/** Where a buffer lives. Host memory works on every transport; device memory needs a transport
 *  with the LITE_CAP_DEVICE_MEM capability, otherwise calls fail with -ENOSYS. */
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

typedef struct lite_request lite_request_t;

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

/** Blocking forms of isend+wait and irecv+wait. *received (may be NULL) gets the length. */
LITE_API int lite_send(lite_ctx_t *ctx, int peer, uint64_t tag, const void *buf, size_t len,
                       int timeout_ms);
LITE_API int lite_recv(lite_ctx_t *ctx, int peer, uint64_t tag, void *buf, size_t len,
                       size_t *received, int timeout_ms);

/** Make progress on every pending operation once, without blocking. Returns 0 or an error. */
LITE_API int lite_progress(lite_ctx_t *ctx);

/** Synchronise all ranks. */
LITE_API int lite_barrier(lite_ctx_t *ctx, int timeout_ms);

#ifdef __cplusplus
}
#endif
#endif /* LITETX_LITETX_H */
