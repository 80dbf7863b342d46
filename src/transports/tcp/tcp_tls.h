/*
 * tcp_tls.h - TLS 1.3 for the tcp backend (OpenSSL 3), behind a small interface so that tcp.c
 * keeps one code path with a branch where bytes enter or leave a socket.
 */
#ifndef LITE_TCP_TLS_H
#define LITE_TCP_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "litetx/transport.h"

struct tcp_tls; /* the context: credentials, protocol settings */

/* 0, or a negative code with a reason (OpenSSL's) in why. */
int tcp_tls_open(const struct lite_security *sec, struct tcp_tls **out, char *why, size_t len);
void tcp_tls_close(struct tcp_tls *tls);

/* A session on connected socket fd, as client (the side that dialled) or server. NULL: no memory.
 */
void *tcp_tls_new(struct tcp_tls *tls, int fd, bool client);
void tcp_tls_free(void *ssl);

/* One step of the handshake: 1 done, 0 not yet (*want_write: wait for the socket to take
 * bytes, else for bytes to come), or a negative code with why. */
int tcp_tls_handshake(void *ssl, bool *want_write, char *why, size_t len);

/* The rank the peer's certificate names (ca mode), -1 for none (psk mode: no certificate). */
int tcp_tls_peer_rank(void *ssl);

/* Like recv/send: bytes moved (> 0), 0 at the end of the stream (read), or -1 with errno:
 * EAGAIN (*want_write: the session needs the socket writable first), EPROTO (a TLS error, its
 * text from tcp_tls_error), or the socket's errno. */
ssize_t tcp_tls_read(void *ssl, void *buf, size_t len, bool *want_write);
ssize_t tcp_tls_write(void *ssl, const void *buf, size_t len, bool *want_read);
/* tcp_tls_write of iov[0..cnt) as one stream (records span the pieces); a retry after EAGAIN
 * starts with the same bytes. */
ssize_t tcp_tls_writev(void *ssl, const struct iovec *iov, int cnt, bool *want_read);
/* Decrypted or received bytes wait inside the session (epoll cannot see them). */
bool tcp_tls_pending(void *ssl);
/* close_notify after what was written (lite_tls_close_notify), best effort. */
void tcp_tls_close_notify(void *ssl);
/* The read failed because the stream ended without close_notify (lite_tls_truncated). */
bool tcp_tls_truncated(void *ssl);
/* The last TLS error of this thread, as text. */
const char *tcp_tls_error(void);

#endif
