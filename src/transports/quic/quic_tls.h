/*
 * quic_tls.h - TLS 1.3 for the quic backend (GnuTLS, through ngtcp2's crypto helper): the
 * credentials of a backend instance and the session of each connection.
 */
#ifndef LITE_QUIC_TLS_H
#define LITE_QUIC_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include <gnutls/gnutls.h>

#include "litetx/transport.h"

#define QUIC_ALPN "litetx"

struct quic_tls;

/* Credentials for `sec` (off: an ephemeral self-signed certificate naming `rank`). 0, or a
 * negative code with the reason in why. */
int quic_tls_open(const struct lite_security *sec, int rank, struct quic_tls **out, char *why,
                  size_t len);
void quic_tls_close(struct quic_tls *tls);

/* A session for one connection. `conn_ref` is the ngtcp2_crypto_conn_ref the crypto helper
 * finds the connection by. In ca mode the peer's certificate must chain to the CA; the rank
 * it names is the caller's to check (quic_tls_peer_rank). NULL on failure (why says which step). */
gnutls_session_t quic_tls_session(struct quic_tls *tls, bool server, int expect_rank,
                                  void *conn_ref, char *why, size_t len);

/* The rank the peer's certificate names as litetx-rank-<n> (a DNS SAN or, without one, the CN),
 * -1 for none or two different ones. Only meaningful in ca mode. */
int quic_tls_peer_rank(gnutls_session_t s);
/* The handshake negotiated ALPN "litetx". */
bool quic_tls_alpn_ok(gnutls_session_t s);
/* Why the peer's certificate was refused ("" when it was not checked or passed). */
void quic_tls_verify_text(gnutls_session_t s, char *out, size_t len);

#endif
