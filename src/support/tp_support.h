/*
 * tp_support.h - what a transport backend may use of the core besides include/litetx/transport.h:
 * little-endian field access, the clock and deadlines, the configuration the core resolved
 * (lite_tp_env), logging through the core's sink, the stream frame codec (tcp, quic) and socket
 * helpers. A backend includes this and transport.h, never the core's private lite_int.h. Not
 * installed.
 */
#ifndef LITE_TP_SUPPORT_H
#define LITE_TP_SUPPORT_H

#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "litetx/litetx.h"
#include "litetx/transport.h"

/* Little-endian field access for the wire formats (frames, descriptors, headers). memcpy of a
 * converted value compiles to one move; a byte loop stays a loop at -O2 (~50 instructions per
 * 64-bit field, measured on the EFA message path). */
static inline void lite_put16(uint8_t *p, uint16_t v)
{
    v = htole16(v);
    memcpy(p, &v, sizeof(v));
}

static inline void lite_put32(uint8_t *p, uint32_t v)
{
    v = htole32(v);
    memcpy(p, &v, sizeof(v));
}

static inline void lite_put64(uint8_t *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, sizeof(v));
}

static inline uint16_t lite_get16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof(v));
    return le16toh(v);
}

static inline uint32_t lite_get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return le32toh(v);
}

static inline uint64_t lite_get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return le64toh(v);
}

/* ---- time (util.c) ---- */
int64_t lite_now_ns(void); /* CLOCK_MONOTONIC */
#ifndef LITE_IN_BACKEND
/* A strict integer variable of the environment: an integer in lo..hi, else dflt (unset or
 * empty), or dflt with the variable recorded as invalid (anything else: "12x", "0x1", out of
 * range), which makes lite_init fail naming it. The core reads its table's variables with
 * lite_tun_long (tunables.h: range from the table); backends get theirs from lite_tp_env
 * (below): compiled with LITE_IN_BACKEND, they do not see this. */
long lite_env_long(const char *name, long lo, long hi, long dflt);
#endif
/* Make room for `more` file descriptors beyond those open now: raises the soft RLIMIT_NOFILE
 * towards the hard one when needed. 0, or -EMFILE with the limit and the count needed in why. */
int lite_fd_reserve(long more, char *why, size_t why_len);
/* Deadline for a timeout in ms (LITE_TIMEOUT_INFINITE -> INT64_MAX). */
int64_t lite_deadline_ns(int timeout_ms);
/* Milliseconds left until deadline, clamped to [0, cap_ms]. */
int lite_ms_left(int64_t deadline_ns, int cap_ms);

/* ---- configuration: the values the core resolved (lite_tp_env.get, transport.h) ---- */
/* The number of variable `name` (INT, SIZE, BOOL; an ENUM's index) when set, else dflt. For
 * open, where lite_init has already refused an invalid value. */
static inline int64_t lite_tp_num(const struct lite_tp_env *env, const char *name, int64_t dflt)
{
    struct lite_tun_val v;
    return env && env->get && env->get(env, name, &v) == 1 ? v.num : dflt;
}
/* The text of variable `name` when set, else NULL; valid until open (or probe) returns. */
static inline const char *lite_tp_str(const struct lite_tp_env *env, const char *name)
{
    struct lite_tun_val v;
    return env && env->get && env->get(env, name, &v) == 1 ? v.str : NULL;
}

/* ---- logging ---- */
/* Cold: logging is for what goes wrong (and debugging); hot paths are laid out without it. The
 * level is the calling thread's: the context's that runs the backend. */
#ifdef LITE_IN_BACKEND
/* A backend's lines go to the sink the core handed it (lite_tp_env.log; tp_log.c): a backend
 * calls lite_tp_env_attach(env) at the start of probe and open. Before any attach (a unit test
 * calling a backend's function directly) warnings and errors go to stderr. */
void lite_tp_env_attach(const struct lite_tp_env *env);
void lite_tp_log(int level, const char *fmt, ...) __attribute__((cold, format(printf, 2, 3)));
#define LITE_LOG_FN lite_tp_log
#else
/* The core's own (log.c). */
void lite_log(int level, const char *fmt, ...) __attribute__((cold, format(printf, 2, 3)));
#define LITE_LOG_FN lite_log
#endif
#define LITE_ERROR(...) LITE_LOG_FN(LITE_LOG_ERROR, __VA_ARGS__)
#define LITE_WARN(...)  LITE_LOG_FN(LITE_LOG_WARN, __VA_ARGS__)
#define LITE_INFO(...)  LITE_LOG_FN(LITE_LOG_INFO, __VA_ARGS__)
#define LITE_DEBUG(...) LITE_LOG_FN(LITE_LOG_DEBUG, __VA_ARGS__)

/* ---- wire frames for stream transports (wire.c) ---- */
#define LITE_WIRE_MAGIC   0x4c54u /* "LT" */
#define LITE_WIRE_VERSION 2
#define LITE_WIRE_HDR_LEN 48

enum lite_wire_type {
    LITE_WIRE_HELLO = 1,     /* first frame on a connection: tag = sender's rank */
    LITE_WIRE_MSG = 2,       /* a message: channel, tag, flags, credits, then len bytes */
    LITE_WIRE_BYE = 3,       /* the sender is closing in order; nothing follows */
    LITE_WIRE_WRITE = 4,     /* one-sided write: tag = op id, key, offset, imm, len bytes */
    LITE_WIRE_READ_REQ = 5,  /* one-sided read request: tag = op id, key, offset, len wanted */
    LITE_WIRE_RMA_ACK = 6,   /* write done (status) */
    LITE_WIRE_READ_RESP = 7, /* read data: tag = op id, status, len bytes (0 on error) */
    /* Ordering across a peer's two streams: frames after it wait until the sender's other
     * stream has delivered `tag` frames (see the TCP transport's bulk connections). */
    LITE_WIRE_FENCE = 8,
};

#define LITE_WIRE_F_IMM    0x01 /* WRITE carries an immediate */
#define LITE_WIRE_F_NOACK  0x02 /* WRITE wants no RMA_ACK (the initiator learns otherwise) */
#define LITE_WIRE_F_STICKY 0x04 /* with NOACK: a refusal goes with the next RMA_ACK */
#define LITE_WIRE_F_BULK   0x08 /* HELLO: this connection carries the sender's bulk payloads */

/*
 * Wire header, 48 bytes, little-endian:
 *   u16 magic | u8 version | u8 type | u8 channel | u8 flags | u16 credits
 *   u64 tag   (MSG: the tag; one-sided frames: the initiator's op id)
 *   u64 len   (payload bytes that follow; READ_REQ: the length wanted, no payload)
 *   u64 key | u64 offset   (one-sided frames: the target region and offset)
 *   u32 imm | i32 status   (WRITE: immediate; ACK / READ_RESP: 0 or a negative code)
 */
struct lite_wire_hdr {
    uint8_t type;
    uint8_t channel;
    uint8_t flags;
    uint16_t credits;
    uint64_t tag;
    uint64_t len;
    uint64_t key;
    uint64_t offset;
    uint32_t imm;
    int32_t status;
};

void lite_wire_encode(const struct lite_wire_hdr *h, uint8_t out[LITE_WIRE_HDR_LEN]);
/* Decode and validate; -LITE_ERR_PROTOCOL with a reason for anything malformed. max_len bounds
 * the payload length a receiver accepts. */
int lite_wire_decode(const uint8_t in[LITE_WIRE_HDR_LEN], uint64_t max_len, struct lite_wire_hdr *h,
                     const char **why);
/* Payload bytes that follow a decoded header. */
static inline uint64_t lite_wire_payload(const struct lite_wire_hdr *h)
{
    return h->type == LITE_WIRE_READ_REQ ? 0 : h->len;
}

/* ---- sockets (sock.c) ---- */
/* Resolve host:port to a socket address (numeric or by name); -EINVAL with why on failure. */
int lite_sock_resolve(const char *host, uint16_t port, struct sockaddr_storage *ss,
                      socklen_t *sslen, char *why, size_t why_len);
/* A non-blocking, close-on-exec TCP socket of `family` with TCP_NODELAY set. */
int lite_sock_tcp(int family);
/* Numeric host and port of a socket address. */
void lite_sock_name(const struct sockaddr_storage *ss, char *host, size_t hostlen, uint16_t *port);
/* A socket address as bytes for address blobs: family (AF_INET / AF_INET6) in *family, then
 * out[0..1] the port (network order) and out[2..17] the address (IPv4 in the first 4 bytes). */
#define LITE_SOCK_PACKED 18
void lite_sock_pack(const struct sockaddr_storage *ss, uint8_t *family,
                    uint8_t out[LITE_SOCK_PACKED]);
/* The reverse; -LITE_ERR_PROTOCOL for an unknown family (bytes off the network). */
int lite_sock_unpack(uint8_t family, const uint8_t in[LITE_SOCK_PACKED],
                     struct sockaddr_storage *ss, socklen_t *sslen);
/* A connected socket (lite_sock_tcp) to ss, retrying with a backoff (5 ms doubling to 100 ms)
 * until the deadline. The fd, -ETIMEDOUT, or -errno when no socket can be made. On -ETIMEDOUT,
 * *last_err (if not NULL) is the errno of the last attempt (ECONNREFUSED: nothing listens), 0
 * if it was still pending; callers name it in their message. */
int lite_sock_connect(const struct sockaddr_storage *ss, socklen_t sslen, int64_t deadline_ns,
                      int *last_err);
/* " (last attempt: <strerror>)" for a lite_sock_connect() last_err, "" for 0. */
const char *lite_sock_last_err(int last_err, char *buf, size_t len);
/* Read or write exactly len bytes on a non-blocking socket before the deadline.
 * 0, -ETIMEDOUT, -LITE_ERR_PEER_LOST (EOF or reset) or -errno. */
int lite_sock_read_full(int fd, void *buf, size_t len, int64_t deadline_ns);
int lite_sock_write_full(int fd, const void *buf, size_t len, int64_t deadline_ns);

/* ---- utilities ---- */
/* Write a formatted message into buf (never overflows, always terminated). */
void lite_fmt(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif /* LITE_TP_SUPPORT_H */
