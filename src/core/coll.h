/*
 * coll.h - shared pieces of the collectives: tags, the algorithm selection (coll_algo.c) and the
 * round engine every collective runs on (coll_engine.c). Not installed.
 *
 * A collective is a small state machine (struct lite_coll_op) that advances in rounds: starting
 * round r posts sends and receives on the collective channel and does local work (copies, folds);
 * each posted request carries the round before which it must be complete ("due"), so a round
 * starts as soon as exactly what it needs has arrived. Blocking calls start an op and drive it to
 * the end; non-blocking ones hand it to the caller inside a lite_request (kind LITE_REQ_COLL) that
 * lite_test/lite_wait drive through lite_coll_test/lite_coll_wait.
 *
 * Determinism does not live in the engine: it lives in the algorithms, which fold the ranks'
 * contributions to every element in the canonical order (docs/DETERMINISM.md).
 */
#ifndef LITE_COLL_H
#define LITE_COLL_H

#include "ctx.h"
#include "request.h"

/* Collective tags: the collective's sequence number (identical on every rank, since all ranks
 * start collectives in the same order) in the high bits, the step within it in the low 24, so
 * tags on the collective channel strictly increase per peer. */
static inline uint64_t lite_coll_tag(uint64_t seq, uint32_t step)
{
    return (seq << 24) | (step & 0xffffffu);
}

#define LITE_COLL_STEP_MAX 0xffffffu

/* ---- which collective, which algorithm (coll_algo.c: pure functions, unit-tested) ---- */

enum lite_coll_kind {
    LITE_COLL_BARRIER = 1,
    LITE_COLL_BCAST = 2,
    LITE_COLL_ALLGATHER = 3,
    LITE_COLL_REDUCE_SCATTER = 4,
    LITE_COLL_ALLREDUCE = 5,
    LITE_COLL_ALLTOALL = 6,
    LITE_COLL_ALLTOALLV = 7,
    LITE_COLL_KIND_COUNT = 8
};

/* enum lite_coll_algo (LITE_COLL_ALGO_AUTO, _DIRECT, _RSAG, _PIPE) is public: litetx.h. */

/* struct lite_coll_cfg, its parser lite_coll_cfg_parse and LITE_COLL_ALGO_COUNT: coll_cfg.h. */

/* What a collective does: the algorithm and the pipeline chunk in elements (>= 1). */
struct lite_coll_plan {
    int algo;
    size_t chunk_elems;
};

/* Defaults of the selection function (measured on loopback TCP, docs/PERFORMANCE.md,
 * "Collectives"). Direct allreduce messages stay below the core's default rendezvous threshold (64
 * KiB), whose handshake costs more than the second round of rsag. The automatic chunk keeps the
 * scratch memory of a reduction (2 x (n-1) chunks) near LITE_COLL_SCRATCH: large chunks amortise
 * the per-message handshake, and the scratch does not grow with the world size. */
#define LITE_COLL_SMALL_ALLREDUCE (32 * 1024)       /* bytes: direct up to this, rsag above */
#define LITE_COLL_PIPE_BCAST      (1024 * 1024)     /* bytes: pipe above this when world >= 4 */
#define LITE_COLL_SCRATCH         (8 * 1024 * 1024) /* bytes of chunk slots per reduction */
#define LITE_COLL_CHUNK_MIN       (256 * 1024)      /* automatic chunk: at least this */
#define LITE_COLL_CHUNK_DEFAULT   (512 * 1024)      /* bytes per chunk for bcast pipe */
#define LITE_COLL_EAGER           (64 * 1024)       /* first data round need not wait for check */

/* The automatic reduction chunk for a world size: LITE_COLL_SCRATCH / (2 (n-1)), at least
 * LITE_COLL_CHUNK_MIN. */
size_t lite_coll_auto_chunk(int world);

/*
 * The selection function: a pure function of (kind, world size, count, element size, config),
 * so every rank that was given the same arguments and configuration picks the same plan. A
 * forced algorithm the collective does not have falls back to the collective's automatic
 * choice. The chunk is rounded down to whole elements and raised so that no collective needs
 * more than 2^20 chunks (the step field of a tag is 24 bits).
 */
void lite_coll_select(int kind, int world, size_t count, size_t esz,
                      const struct lite_coll_cfg *cfg, struct lite_coll_plan *out);

const char *lite_coll_kind_name(int kind);
const char *lite_coll_dtype_name(int dtype);
const char *lite_coll_op_name(int op);

/* The argument header every rank sends every other rank first (when the check is on). */
#define LITE_COLL_HDR_LEN 40
struct lite_coll_hdr {
    uint8_t kind, dtype, redop, algo;
    int32_t root;
    uint64_t chunk; /* chunk in elements */
    uint64_t count;
    uint64_t pair; /* alltoallv: elements the sender sends to the receiver */
};
void lite_coll_hdr_encode(const struct lite_coll_hdr *h, uint8_t out[LITE_COLL_HDR_LEN]);
/* -LITE_ERR_PROTOCOL when the bytes are not a header of this version. */
int lite_coll_hdr_decode(const uint8_t in[LITE_COLL_HDR_LEN], struct lite_coll_hdr *h);
/* Describe h as "allreduce(count=.., dtype=.., ...)" for error details. */
void lite_coll_hdr_describe(const struct lite_coll_hdr *h, char *buf, size_t len);

/* Block b of count elements split over n ranks: the first count % n blocks get one more. */
static inline size_t lite_coll_block_lo(size_t count, int n, int b)
{
    size_t base = count / (size_t)n, rem = count % (size_t)n;
    return (size_t)b * base + ((size_t)b < rem ? (size_t)b : rem);
}
static inline size_t lite_coll_block_len(size_t count, int n, int b)
{
    return count / (size_t)n + ((size_t)b < count % (size_t)n ? 1 : 0);
}

/* ---- the round engine (coll_engine.c) ---- */

struct lite_coll_op;
typedef int (*lite_coll_round_fn)(struct lite_coll_op *op, uint32_t round);

/* What a pending request is for. Side requests (guards, notices) do not keep an op alive: they
 * are withdrawn when everything else is done. */
enum lite_coll_role {
    LITE_COLL_DATA = 0,   /* the algorithm's transfer */
    LITE_COLL_HDR = 1,    /* a separate argument header (step 0) */
    LITE_COLL_PIGGY = 2,  /* [header | data]: the first message from a peer in piggy mode */
    LITE_COLL_GUARD = 3,  /* piggy mode: step 0 from a peer, which arrives only if it disagrees */
    LITE_COLL_NOTICE = 4, /* step LITE_COLL_STEP_MAX: the peer gave up on this collective */
};

struct lite_coll_pend {
    struct lite_request *r;
    uint32_t due;  /* round that may start only once this request is done */
    uint32_t step; /* for error details */
    size_t expect; /* receive: the exact byte count the message must have */
    uint8_t role;  /* enum lite_coll_role */
    void *copy_to; /* LITE_COLL_PIGGY: where the data after the header goes once checked */
};

struct lite_coll_op {
    struct lite_ctx *ctx;
    struct lite_coll_op *next; /* registry of non-blocking ops */
    int kind;
    uint64_t seq;
    int n, me;
    struct lite_coll_plan plan;
    bool check;
    bool eager;    /* the first data round need not wait for the header check (small data) */
    bool piggy;    /* every pair's first message is data at step 1 (set by the collective; kept
                    * only when eager): the header rides in front of it */
    bool notified; /* this rank told its peers it gave up */
    int nside;     /* pending side requests (guards, notices) */
    uint8_t *piggy_done; /* n bytes: bit 0 header sent to peer, bit 1 header expected from */
    uint8_t **stage;     /* 2n staging buffers of piggy-backed messages (tx then rx) */
    uint8_t *notice_rx;  /* n x 8 bytes */
    uint8_t notice_tx[8];
    char detail[256]; /* the error detail, kept for the request's test/wait */

    /* arguments */
    const uint8_t *sbuf;
    uint8_t *rbuf;
    size_t count;
    int dtype, redop, root;
    size_t esz;
    bool inplace;
    size_t *v; /* alltoallv: scounts, sdispls, rcounts, rdispls (4 x n, copied) */

    /* engine */
    lite_coll_round_fn round_fn;
    uint32_t round, nrounds;
    struct lite_coll_pend *pend;
    int npend, cap;
    uint8_t *hdr_tx; /* n x LITE_COLL_HDR_LEN: what this rank sends each peer */
    uint8_t *hdr_rx; /* n x LITE_COLL_HDR_LEN: what each peer sent */
    int error;
    int soft_error; /* a pairwise disagreement (alltoallv): reported when the op ends */
    bool *disputed; /* n flags: peers whose arguments disagree with ours (soft errors) */
    bool started;   /* posted its first messages (ops start in sequence order, see engine) */
    bool done, zombie, registered;
    size_t bytes_out; /* for lite_status_t.bytes */

    /* algorithm state */
    size_t nchunks;
    uint8_t *tmp;
    size_t slot_bytes;
};

/* Prepare op for `kind` on ctx (takes the sequence number, selects the plan from the config for
 * count elements of esz bytes). Returns 0 or an error with the detail set. */
int lite_coll_op_init(struct lite_coll_op *op, struct lite_ctx *ctx, int kind, size_t count,
                      int dtype, size_t esz);
/* The common start of every collective: allocate an op and init it, then check dtype (with
 * redop for allreduce and reduce_scatter; other kinds ignore redop). *opp is NULL only when ctx
 * is NULL or memory ran out; else the caller goes on validating while the result is 0 and ends
 * a failed op with lite_coll_abort. */
int lite_coll_op_begin(struct lite_ctx *ctx, int kind, size_t count, int dtype, int redop,
                       struct lite_coll_op **opp);
/* Post a send/receive on the collective channel at `step`, done before round `due`. */
int lite_coll_send(struct lite_coll_op *op, int peer, uint32_t step, const void *buf, size_t len,
                   uint32_t due);
int lite_coll_recv(struct lite_coll_op *op, int peer, uint32_t step, void *buf, size_t len,
                   uint32_t due);
/* Record an error on op (first one wins) with a detail prefixed by the collective's name. */
int lite_coll_fail(struct lite_coll_op *op, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Start the op (header exchange, round 0). Then either lite_coll_run (blocking: drives it to the
 * end and frees it) or lite_coll_to_request (non-blocking). */
int lite_coll_start(struct lite_coll_op *op);
int lite_coll_run(struct lite_coll_op *op, int timeout_ms);
int lite_coll_to_request(struct lite_coll_op *op, lite_request_t **req);
/* True if peer's arguments disagree with this rank's in a way only the two of them see: no
 * receive from it is posted any more. */
bool lite_coll_disputed(const struct lite_coll_op *op, int peer);
/* End an op that failed before it started (validation): its peers are told (notices), and it
 * is freed once those messages left. Returns the op's error. */
int lite_coll_abort(struct lite_coll_op *op);
/* Allocate a zeroed op; free one that never posted anything. */
struct lite_coll_op *lite_coll_op_new(void);
void lite_coll_op_free(struct lite_coll_op *op);
/* Resolve a timeout argument (LITE_TIMEOUT_DEFAULT) to milliseconds. */
int lite_coll_timeout(struct lite_ctx *ctx, int timeout_ms);

/* Public LITE_IN_PLACE as an internal test. */
static inline bool lite_coll_is_in_place(const void *p)
{
    return p == LITE_IN_PLACE;
}

/* True if [a, a+alen) and [b, b+blen) overlap (empty ranges never do). */
static inline bool lite_coll_overlap(const void *a, size_t alen, const void *b, size_t blen)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return alen && blen && x < y + blen && y < x + alen;
}

/* Collective requests (coll_engine.c): lite_test, lite_wait and lite_cancel hand requests of
 * kind LITE_REQ_COLL to these. lite_coll_fini drops a context's unfinished collectives. */
int lite_coll_test(struct lite_ctx *ctx, struct lite_request *req, lite_status_t *status);
int lite_coll_wait(struct lite_ctx *ctx, struct lite_request *req, int timeout_ms,
                   lite_status_t *status);
int lite_coll_cancel(struct lite_ctx *ctx, struct lite_request *req);
void lite_coll_fini(struct lite_ctx *ctx);

/* The collectives on host buffers (coll_bcast.c, coll_allgather.c, coll_allreduce.c,
 * coll_alltoall.c): the public calls of the same names without the "coll_" (dispatch.c), less
 * their hand-off of device buffers to gpu_stage.c, which runs these on its bounce buffers. */
int lite_coll_bcast(struct lite_ctx *ctx, void *buf, size_t count, int dtype, int root,
                    int timeout_ms);
int lite_coll_ibcast(struct lite_ctx *ctx, void *buf, size_t count, int dtype, int root,
                     struct lite_request **req);
int lite_coll_allgather(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf, size_t count,
                        int dtype, int timeout_ms);
int lite_coll_iallgather(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf, size_t count,
                         int dtype, struct lite_request **req);
int lite_coll_reduce_scatter(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf,
                             size_t recvcount, int dtype, int op, int timeout_ms);
int lite_coll_ireduce_scatter(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf,
                              size_t recvcount, int dtype, int op, struct lite_request **req);
int lite_coll_allreduce(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf, size_t count,
                        int dtype, int op, int timeout_ms);
int lite_coll_iallreduce(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf, size_t count,
                         int dtype, int op, struct lite_request **req);
int lite_coll_alltoall(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf, size_t count,
                       int dtype, int timeout_ms);
int lite_coll_ialltoall(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf, size_t count,
                        int dtype, struct lite_request **req);
int lite_coll_alltoallv(struct lite_ctx *ctx, const void *sendbuf, const size_t *sendcounts,
                        const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                        const size_t *rdispls, int dtype, int timeout_ms);
int lite_coll_ialltoallv(struct lite_ctx *ctx, const void *sendbuf, const size_t *sendcounts,
                         const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                         const size_t *rdispls, int dtype, struct lite_request **req);

#endif /* LITE_COLL_H */
