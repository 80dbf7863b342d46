/*
 * ctx.h - the context and request structures shared by context.c, p2p.c and the collectives.
 */
#ifndef LITE_CTX_H
#define LITE_CTX_H

#include "lite_int.h"

enum lite_req_kind { LITE_REQ_SEND = 1, LITE_REQ_RECV = 2 };
enum lite_req_state {
    LITE_REQ_POSTED = 1, /* receive: waiting for a match; send: handed to the backend */
    LITE_REQ_ACTIVE = 2, /* receive: the payload is arriving into buf */
    LITE_REQ_DONE = 3
};

struct lite_unexp;

struct lite_request {
    uint8_t kind;
    uint8_t state;
    uint8_t channel;
    bool truncated;
    int peer;
    int error;
    uint64_t tag;
    void *buf;
    size_t len;   /* buffer size */
    size_t bytes; /* bytes moved */
    struct lite_unexp *waiting_on; /* receive matched to an unexpected message still arriving */
    struct lite_request *next;     /* posted-receive list */
};

/* A message that arrived before its receive was posted. */
struct lite_unexp {
    uint64_t tag;
    uint8_t channel;
    bool complete;
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
};

struct lite_ctx {
    struct lite_settings s;
    struct lite_transport_ops ops;
    struct lite_transport *tp;
    struct lite_peer *peers;
    uint64_t coll_seq; /* collectives started so far; identical on every rank */
    uint8_t coll_sink; /* where zero-information messages (barrier tokens) land */
    int64_t spin_ns;   /* how long a wait polls before it sleeps in the backend */
    char last_error[512];
};

/* Record the detail of a failure and return code (for `return lite_fail(ctx, rc, ...)`). */
int lite_fail(struct lite_ctx *ctx, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Internal posting with an explicit channel (collectives use LITE_CHAN_COLL). */
int lite_post_send(struct lite_ctx *ctx, uint8_t chan, int peer, uint64_t tag, const void *buf,
                   size_t len, struct lite_request **out);
int lite_post_recv(struct lite_ctx *ctx, uint8_t chan, int peer, uint64_t tag, void *buf,
                   size_t len, struct lite_request **out);
/* Wait for every request in reqs[0..n) (NULL entries skipped) until the deadline; each finished
 * request is released and its slot set to NULL. Returns 0 or the first error. */
int lite_wait_all(struct lite_ctx *ctx, struct lite_request **reqs, int n, int64_t deadline_ns);
void lite_request_release(struct lite_request *req);

/* The upcalls the core gives every backend. */
extern const struct lite_core_upcalls lite_core_upcalls;

/* Tear down matching state (frees unexpected messages, fails posted requests). */
void lite_p2p_fini(struct lite_ctx *ctx);

#endif /* LITE_CTX_H */
