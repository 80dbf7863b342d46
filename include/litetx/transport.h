/*
 * transport.h - the contract between liblitetx's core and its transport backends.
 *
 * This header is for backend authors. Applications use litetx.h only.
 *
 * A backend moves bytes and reports completions; the core owns every semantic promise (tag
 * matching, ordering, credits, ImmCounter, determinism, error reporting). A backend fills a
 * `struct lite_transport_ops`, lists it in the ordered table of src/core/registry.c, and leaves
 * any op it lacks NULL: the core replaces NULL ops with stubs that return -ENOSYS and reports
 * "operation X is not supported by transport Y" to the caller.
 *
 * THREADING AND PROGRESS
 *   Every op is called from the thread that owns the context; ops never block except `connect`
 *   (bounded by its deadline) and `progress` (bounded by its timeout). Incoming messages and
 *   failures are reported only from inside `progress`; send_done may also be called from inside
 *   `msg_send` when the bytes left at once. All go through `struct lite_core_upcalls`.
 *
 * ORDER
 *   Messages posted with `msg_send` to one peer must be delivered to the core's recv_begin in
 *   posting order. That is the only ordering a backend promises.
 */
#ifndef LITETX_TRANSPORT_H
#define LITETX_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "litetx.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LITE_TRANSPORT_ABI_VERSION 1

/* Capability bits a backend declares; the core branches on these, never on a backend's name. */
enum lite_transport_cap {
    LITE_CAP_WRITE = 1u << 0,        /* one-sided write */
    LITE_CAP_WRITE_IMM = 1u << 1,    /* one-sided write with a 32-bit immediate */
    LITE_CAP_READ = 1u << 2,         /* one-sided read */
    LITE_CAP_TAGGED = 1u << 3,       /* native tagged messaging (the core may skip its matching) */
    LITE_CAP_DEVICE_MEM = 1u << 4,   /* GPU memory can be registered and moved */
    LITE_CAP_ENCRYPTED = 1u << 5,    /* traffic is encrypted and peers authenticated */
    LITE_CAP_MULTI_RAIL = 1u << 6,   /* several NICs/rails per process */
    LITE_CAP_EMULATED_RMA = 1u << 7, /* one-sided ops are emulated over a byte stream */
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
    uint64_t len;    /* payload bytes that follow */
    uint8_t channel; /* enum lite_msg_channel */
};

struct lite_core;      /* the core's side of a backend instance (opaque to backends) */
struct lite_transport; /* a backend instance (opaque to the core) */

/* How a backend reports to the core; every upcall is made from inside `progress`. */
struct lite_core_upcalls {
    size_t size;
    /*
     * A message header arrived from `peer`. The core returns in *dst where the backend must place
     * exactly hdr->len payload bytes and an opaque *token for recv_end. *dst == NULL with
     * hdr->len > 0 means "read and discard the payload" (e.g. a receive that was too short).
     * A negative return means the message is refused: the backend drops the connection to that
     * peer and reports peer_failed.
     */
    int (*recv_begin)(struct lite_core *core, int peer, const struct lite_msg_hdr *hdr, void **dst,
                      void **token);
    /* All hdr->len bytes of the message are in place. */
    void (*recv_end)(struct lite_core *core, int peer, void *token);
    /* A msg_send finished: 0 when the buffer may be reused, or a negative code. */
    void (*send_done)(struct lite_core *core, void *op, int status);
    /* A peer is unusable from now on (connection lost, protocol error, ...). `why` is a short
     * human-readable cause. Called at most once per peer; every msg_send still outstanding to that
     * peer is completed with an error through send_done. */
    void (*peer_failed)(struct lite_core *core, int peer, int status, const char *why);
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
};

struct lite_transport_ops {
    size_t size;          /* sizeof(struct lite_transport_ops) the backend was built with */
    uint32_t abi_version; /* LITE_TRANSPORT_ABI_VERSION */
    const char *name;     /* "tcp", "rdma", ... */
    uint32_t caps;        /* enum lite_transport_cap bits */

    /* Is this backend usable on this host? 0, -ENODEV (with a reason in why[why_len]). */
    int (*probe)(char *why, size_t why_len);

    int (*open)(const struct lite_transport_params *params, struct lite_transport **out);
    void (*close)(struct lite_transport *tp);

    /* This instance's address blob (at most LITE_TRANSPORT_ADDR_MAX bytes) for the bootstrap. */
    int (*addr_get)(struct lite_transport *tp, void *blob, size_t *len);

    /*
     * Connect to every peer given all ranks' blobs (blobs[rank], lens[rank]; this rank's own entry
     * included). Blocks until all pairs are connected or `deadline_ns` (CLOCK_MONOTONIC) passes:
     * -ETIMEDOUT, with the unreachable ranks named in why[why_len].
     */
    int (*connect_all)(struct lite_transport *tp, const void *const *blobs, const size_t *lens,
                       int64_t deadline_ns, char *why, size_t why_len);

    /*
     * Post a message to `peer` (never this rank: the core loops self-sends back itself). Returns
     * 0 (send_done(op, ...) will follow) or a negative code (no send_done follows). The payload
     * must stay untouched until send_done.
     */
    int (*msg_send)(struct lite_transport *tp, int peer, const struct lite_msg_hdr *hdr,
                    const void *payload, void *op);

    /* Make progress; wait at most timeout_ms (0 = poll) for something to happen. Returns the
     * number of events handled (>= 0) or a negative code for a failure of the whole instance. */
    int (*progress)(struct lite_transport *tp, int timeout_ms);
};

#ifdef __cplusplus
}
#endif
#endif /* LITETX_TRANSPORT_H */
