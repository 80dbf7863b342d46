/*
 * tls.h - TLS 1.3 sessions on a connected non-blocking socket (OpenSSL 3), shared by the
 * bootstrap (bootstrap.c) and the tcp backend (its tcp_tls.c wraps these). Built only with
 * LITE_HAVE_TLS; the credentials come from a checked struct lite_security (security.c).
 *
 * TLS 1.3 only, AES-GCM suites only, mutual authentication: ca mode presents a certificate that
 * chains to the configured CA (the rank it names is for the caller to check), psk mode proves
 * the job's external PSK with an ephemeral ECDHE exchange. No tickets, no resumption.
 *
 * After the handshake the record layer is the library's own (tls.c), unless kTLS has it:
 * records are sealed straight from the caller's buffers, up to LITE_TLS_TX_CHUNK bytes into one
 * buffer that the kernel gets in one send, and received records are opened into a record-sized
 * buffer, copied to the caller only once their tag checked out. A write reports bytes only once
 * their ciphertext is in the kernel, so a caller that retries with the same bytes first (a
 * moved buffer is fine) never leaves ciphertext behind unsent.
 */
#ifndef LITE_TLS_H
#define LITE_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "litetx/transport.h"

#define LITE_TLS_TX_CHUNK (256u * 1024) /* plaintext encrypted per batch of records */
/* A record with at least this much plaintext that fits the rest of a read's buffer is decrypted
 * straight into it (its tag checked before the read returns; a bad one leaves zeros there);
 * smaller ones are opened into the connection's record buffer and copied. */
#define LITE_TLS_DIRECT_MIN 4096u

struct lite_tls;      /* credentials and protocol settings (an SSL_CTX) */
struct lite_tls_conn; /* one session on one socket */

#ifdef LITE_HAVE_TLS

/* 0, or -LITE_ERR_CONFIG / -ENOMEM with a reason (OpenSSL's) in why. */
int lite_tls_open(const struct lite_security *sec, struct lite_tls **out, char *why, size_t len);
void lite_tls_close(struct lite_tls *tls);

/* A session on connected socket fd, as client (the side that dialled) or server. NULL: no
 * memory. The socket stays the caller's (closed by the caller, after lite_tls_conn_free). */
struct lite_tls_conn *lite_tls_conn_new(struct lite_tls *tls, int fd, bool client);
void lite_tls_conn_free(struct lite_tls_conn *c);

/* One non-blocking step of the handshake: 1 done (and its last flight in the kernel), 0 not yet
 * (*want_write: wait for the socket to take bytes, else for bytes to come), or negative with
 * why: -EACCES the peer or its credentials were refused (or refused ours), -LITE_ERR_PEER_LOST
 * the connection closed or failed underneath. */
int lite_tls_handshake(struct lite_tls_conn *c, bool *want_write, char *why, size_t len);

/* The rank the peer's certificate names (ca mode), -1 for none (psk mode: no certificate). */
int lite_tls_peer_rank(struct lite_tls_conn *c);

/* Like recv/send: bytes moved (> 0), 0 at the end of the stream (read: the peer's
 * close_notify), or -1 with errno: EAGAIN (*want_*: the session needs the socket the other way
 * first), EPROTO (a TLS error, its text from lite_tls_error; on the library's record layer also
 * the end of the stream without close_notify, see lite_tls_truncated), EPIPE (a write after
 * lite_tls_close_notify), or the socket's errno. A write after an EAGAIN must start with the
 * same bytes it was given before (at least as many). */
ssize_t lite_tls_read(struct lite_tls_conn *c, void *buf, size_t len, bool *want_write);
ssize_t lite_tls_write(struct lite_tls_conn *c, const void *buf, size_t len, bool *want_read);
/* lite_tls_write of the bytes of iov[0..cnt) one after another: records span the pieces. */
ssize_t lite_tls_writev(struct lite_tls_conn *c, const struct iovec *iov, int cnt, bool *want_read);
/* An orderly close: close_notify (RFC 8446 6.1) after everything written so far; nothing may be
 * written after it. Best effort: 0 sent, -EAGAIN still waiting in the session (the socket is
 * full), or a negative errno. */
int lite_tls_close_notify(struct lite_tls_conn *c);
/* The read side failed because the stream ended without the peer's close_notify: a caller that
 * knows from its own protocol that nothing was cut short may take it as the end. */
bool lite_tls_truncated(const struct lite_tls_conn *c);
/* Decrypted or received bytes wait inside the session (poll/epoll cannot see them). */
bool lite_tls_pending(struct lite_tls_conn *c);
/* The last TLS error of this thread, as text. */
const char *lite_tls_error(void);

/* Blocking forms with a deadline, for the bootstrap: 0, -ETIMEDOUT, -LITE_ERR_PEER_LOST (end of
 * stream, reset), -EPROTO (TLS error: lite_tls_error), -EACCES (handshake refused: why). */
int lite_tls_handshake_wait(struct lite_tls_conn *c, int64_t deadline_ns, char *why, size_t len);
int lite_tls_read_full(struct lite_tls_conn *c, void *buf, size_t len, int64_t deadline_ns);
int lite_tls_write_full(struct lite_tls_conn *c, const void *buf, size_t len, int64_t deadline_ns);

#else /* without OpenSSL security cannot be on (security.c refuses it): none of these is reached   \
       */
#include <errno.h>
static inline int lite_tls_open(const struct lite_security *sec, struct lite_tls **out, char *why,
                                size_t len)
{
    return -ENOTSUP;
}
static inline void lite_tls_close(struct lite_tls *tls) {}
static inline struct lite_tls_conn *lite_tls_conn_new(struct lite_tls *tls, int fd, bool client)
{
    return NULL;
}
static inline void lite_tls_conn_free(struct lite_tls_conn *c) {}
static inline int lite_tls_close_notify(struct lite_tls_conn *c)
{
    return 0;
}
static inline int lite_tls_handshake(struct lite_tls_conn *c, bool *want_write, char *why,
                                     size_t len)
{
    return -ENOTSUP;
}
static inline int lite_tls_peer_rank(struct lite_tls_conn *c)
{
    return -1;
}
static inline ssize_t lite_tls_read(struct lite_tls_conn *c, void *buf, size_t len, bool *ww)
{
    errno = ENOTSUP;
    return -1;
}
static inline const char *lite_tls_error(void)
{
    return "no TLS in this build";
}
static inline int lite_tls_handshake_wait(struct lite_tls_conn *c, int64_t deadline_ns, char *why,
                                          size_t len)
{
    return -ENOTSUP;
}
static inline int lite_tls_read_full(struct lite_tls_conn *c, void *buf, size_t len,
                                     int64_t deadline_ns)
{
    return -ENOTSUP;
}
static inline int lite_tls_write_full(struct lite_tls_conn *c, const void *buf, size_t len,
                                      int64_t deadline_ns)
{
    return -ENOTSUP;
}
#endif

#endif
