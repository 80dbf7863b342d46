/*
 * tcp_tls.c - TLS 1.3 sessions for the tcp backend (see tcp_tls.h and docs/TCP.md, "Security"):
 * the core's sessions (src/core/tls.c, shared with the bootstrap) under the names tcp.c uses.
 * Frames leave as one stream of records (headers and payloads sealed together, straight from
 * where they lie), up to LITE_TLS_TX_CHUNK per send; a write reports bytes once their
 * ciphertext is in the kernel, and tcp.c retries with the same bytes first, as it must.
 */
#include <errno.h>
#include <stdlib.h>

#include "tp_support.h"
#include "tcp_tls.h"
#include "tls.h"

struct tcp_tls {
    struct lite_tls *core;
};

const char *tcp_tls_error(void)
{
    return lite_tls_error();
}

int tcp_tls_open(const struct lite_security *sec, struct tcp_tls **out, char *why, size_t len)
{
    struct tcp_tls *tls = calloc(1, sizeof(*tls));
    if (!tls)
        return -ENOMEM;
    int rc = lite_tls_open(sec, &tls->core, why, len);
    if (rc) {
        free(tls);
        return rc;
    }
    *out = tls;
    return 0;
}

void tcp_tls_close(struct tcp_tls *tls)
{
    if (!tls)
        return;
    lite_tls_close(tls->core);
    free(tls);
}

void *tcp_tls_new(struct tcp_tls *tls, int fd, bool client)
{
    return lite_tls_conn_new(tls->core, fd, client);
}

void tcp_tls_free(void *ssl)
{
    lite_tls_conn_free(ssl);
}

int tcp_tls_handshake(void *ssl, bool *want_write, char *why, size_t len)
{
    int rc = lite_tls_handshake(ssl, want_write, why, len);
    return rc < 0 ? -EACCES : rc; /* tcp.c: a failed handshake is a refusal, whatever the cause */
}

int tcp_tls_peer_rank(void *ssl)
{
    return lite_tls_peer_rank(ssl);
}

ssize_t tcp_tls_read(void *ssl, void *buf, size_t len, bool *want_write)
{
    return lite_tls_read(ssl, buf, len, want_write);
}

ssize_t tcp_tls_write(void *ssl, const void *buf, size_t len, bool *want_read)
{
    return lite_tls_write(ssl, buf, len, want_read);
}

ssize_t tcp_tls_writev(void *ssl, const struct iovec *iov, int cnt, bool *want_read)
{
    return lite_tls_writev(ssl, iov, cnt, want_read);
}

bool tcp_tls_pending(void *ssl)
{
    return lite_tls_pending(ssl);
}

void tcp_tls_close_notify(void *ssl)
{
    (void)lite_tls_close_notify(ssl);
}

bool tcp_tls_truncated(void *ssl)
{
    return lite_tls_truncated(ssl);
}
