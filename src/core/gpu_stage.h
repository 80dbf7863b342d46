/*
 * gpu_stage.h - device buffers on the message and collective paths, staged through pinned host
 * bounce buffers (docs/GPU.md). Not installed.
 *
 * Point-to-point calls and collectives recognise a device pointer by a pointer query
 * (lite_gpu_ptr_kind) and move its bytes through page-locked host memory: a send copies the
 * buffer to the host before it goes out, a receive lands in host memory and is copied to the
 * device before the call (or the request) completes. Allreduce runs segment by segment with two
 * bounce slots, so the copies of one segment overlap the network and the reduction of the
 * other; the result is byte-identical to the host-buffer collective (the reduction is
 * elementwise, so segmenting changes no bit). Copies run on a library stream per device,
 * ordered after nothing of the caller's: the caller synchronises its own stream before it
 * calls (docs/GPU.md, "Streams").
 */
#ifndef LITE_GPU_STAGE_H
#define LITE_GPU_STAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct lite_ctx;
struct lite_request;

/* true when p is device memory that the core must stage (never for NULL or LITE_IN_PLACE). */
bool lite_stage_is_dev(const void *p);
/* lite_stage_is_dev, for a message of ctx: false when its backend takes device buffers
 * (LITE_CAP_DEVICE_MSG). */
bool lite_stage_msg_dev(const struct lite_ctx *ctx, const void *p);

/* ---- the pipeline, independent of CUDA (unit-tested with host memory) ---- */

/* LITETX_GPU_STAGE_CHUNK in bytes (default 4 MiB), read once by lite_init: a bad value is
 * recorded for lite_env_error() and the default returned. */
size_t lite_stage_chunk_env(void);
/* A segment of at most chunk_bytes: a whole number of elements of esize bytes, at least one. */
size_t lite_stage_chunk(size_t chunk_bytes, size_t esize);
/* Number of segments of `count` elements in segments of seg_elems (0 for count 0). */
size_t lite_stage_nseg(size_t count, size_t seg_elems);

/*
 * How a pipeline moves bytes. fetch/put are asynchronous copies (source or destination device
 * memory) into or out of bounce slot `slot` (0 or 1); fetch_wait(slot) blocks until the last
 * fetch into that slot has landed; drain waits for every put. All return 0 or a negative code.
 * Fetches and puts run in the order they are issued (one stream).
 */
struct lite_stage_io {
    int (*fetch)(void *arg, int slot, void *dst, const void *src, size_t n);
    int (*fetch_wait)(void *arg, int slot);
    int (*put)(void *arg, int slot, void *dst, const void *src, size_t n);
    int (*drain)(void *arg);
    void *arg;
};

/* The host work on one segment: elements [first, first + n) now in `host` (the bounce slot). */
typedef int (*lite_stage_work_fn)(void *arg, void *host, size_t first, size_t n);

/*
 * Run `work` over `count` elements of esize bytes: segment k is fetched from src + k*seg into
 * slot k%2 while segment k-1 is worked on, then put to dst + k*seg. slots[0..1] hold seg_elems
 * elements each. Returns 0 or the first error (later segments are not started; puts already
 * issued are drained).
 */
int lite_stage_pipeline(const struct lite_stage_io *io, void *const slots[2], void *dst,
                        const void *src, size_t count, size_t esize, size_t seg_elems,
                        lite_stage_work_fn work, void *warg);

/* ---- bounce buffers ---- */

/* Page-locked host memory of at least n bytes (from a small process-wide cache). */
int lite_stage_get(size_t n, void **out);
void lite_stage_put(void *p);

/* ---- the entry points of the public calls (dispatch.c) ---- */

int lite_stage_send(struct lite_ctx *ctx, int peer, uint64_t tag, const void *buf, size_t len,
                    int timeout_ms);
int lite_stage_recv(struct lite_ctx *ctx, int peer, uint64_t tag, void *buf, size_t len,
                    size_t *received, int timeout_ms);
int lite_stage_isend(struct lite_ctx *ctx, int peer, uint64_t tag, const void *buf, size_t len,
                     struct lite_request **req);
int lite_stage_irecv(struct lite_ctx *ctx, int peer, uint64_t tag, void *buf, size_t len,
                     struct lite_request **req);
/* A staged request ends (lite_request_release/free): a completed receive's bytes go to the
 * device, and the bounce buffer is returned. */
void lite_stage_req_end(struct lite_request *r);

/* A staged non-blocking collective's request ends (coll_engine.c): on success its result goes
 * to the caller's buffer and the bounce buffers are returned; after an error they are kept. */
void lite_stage_coll_end(struct lite_request *r, int err);
int lite_stage_iallreduce(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf, size_t count,
                          int dtype, int op, struct lite_request **req);
int lite_stage_ireduce_scatter(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf,
                               size_t recvcount, int dtype, int op, struct lite_request **req);
int lite_stage_ibcast(struct lite_ctx *ctx, void *buf, size_t count, int dtype, int root,
                      struct lite_request **req);
int lite_stage_iallgather(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf, size_t count,
                          int dtype, struct lite_request **req);
int lite_stage_ialltoall(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf, size_t count,
                         int dtype, struct lite_request **req);
int lite_stage_ialltoallv(struct lite_ctx *ctx, const void *sendbuf, const size_t *sendcounts,
                          const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                          const size_t *rdispls, int dtype, struct lite_request **req);

/* Collectives over device buffers (either buffer on the device; the other may be host). */
bool lite_stage_coll_dev(const void *sendbuf, const void *recvbuf);
int lite_stage_allreduce(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf, size_t count,
                         int dtype, int op, int timeout_ms);
int lite_stage_reduce_scatter(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf,
                              size_t recvcount, int dtype, int op, int timeout_ms);
int lite_stage_bcast(struct lite_ctx *ctx, void *buf, size_t count, int dtype, int root,
                     int timeout_ms);
int lite_stage_allgather(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf, size_t count,
                         int dtype, int timeout_ms);
int lite_stage_alltoall(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf, size_t count,
                        int dtype, int timeout_ms);
int lite_stage_alltoallv(struct lite_ctx *ctx, const void *sendbuf, const size_t *sendcounts,
                         const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                         const size_t *rdispls, int dtype, int timeout_ms);

#endif /* LITE_GPU_STAGE_H */
