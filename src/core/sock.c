/* sock.c - small socket helpers shared by the bootstrap and the socket-based transports. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "lite_int.h"

int lite_sock_resolve(const char *host, uint16_t port, struct sockaddr_storage *ss,
                      socklen_t *sslen, char *why, size_t why_len)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    char portstr[8];
    lite_fmt(portstr, sizeof(portstr), "%u", port);
    int rc = getaddrinfo(host, portstr, &hints, &res);
    if (rc != 0 || !res) {
        lite_fmt(why, why_len, "cannot resolve %s: %s", host, gai_strerror(rc));
        return -EINVAL;
    }
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *sslen = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

int lite_sock_tcp(int family)
{
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

void lite_sock_name(const struct sockaddr_storage *ss, char *host, size_t hostlen, uint16_t *port)
{
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &a->sin6_addr, host, (socklen_t)hostlen);
        *port = ntohs(a->sin6_port);
    } else {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &a->sin_addr, host, (socklen_t)hostlen);
        *port = ntohs(a->sin_port);
    }
}

static int wait_fd(int fd, short events, int64_t deadline_ns)
{
    struct pollfd pfd = {.fd = fd, .events = events};
    for (;;) {
        int ms = lite_ms_left(deadline_ns, 1000);
        if (ms == 0 && lite_now_ns() >= deadline_ns)
            return -ETIMEDOUT;
        int n = poll(&pfd, 1, ms);
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return -errno;
    }
}

int lite_sock_connect(const struct sockaddr_storage *ss, socklen_t sslen, int64_t deadline_ns,
                      int *last_err)
{
    int delay_ms = 5;
    if (last_err)
        *last_err = 0;
    for (;;) {
        int fd = lite_sock_tcp(ss->ss_family);
        if (fd < 0)
            return fd;
        int err = connect(fd, (const struct sockaddr *)ss, sslen) == 0 ? 0 : errno;
        if (err == EINPROGRESS) {
            socklen_t el = sizeof(err);
            err = -wait_fd(fd, POLLOUT, deadline_ns);
            if (!err)
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
        }
        if (err == 0)
            return fd;
        close(fd);
        if (last_err)
            *last_err = err == ETIMEDOUT ? 0 : err; /* ETIMEDOUT here: still pending at the end */
        /* The peer's listener is up before its address is published, so a refusal means a real
         * problem or a restarting host: retry until the deadline. */
        if (lite_now_ns() + (int64_t)delay_ms * 1000000 >= deadline_ns)
            return -ETIMEDOUT;
        usleep((useconds_t)delay_ms * 1000);
        delay_ms = delay_ms < 100 ? delay_ms * 2 : 100;
    }
}

int lite_sock_read_full(int fd, void *buf, size_t len, int64_t deadline_ns)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = recv(fd, p, len, 0);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0)
            return -LITE_ERR_PEER_LOST;
        if (errno == EINTR)
            continue;
        if (errno == ECONNRESET)
            return -LITE_ERR_PEER_LOST;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        int rc = wait_fd(fd, POLLIN, deadline_ns);
        if (rc)
            return rc;
    }
    return 0;
}

int lite_sock_write_full(int fd, const void *buf, size_t len, int64_t deadline_ns)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
            return -LITE_ERR_PEER_LOST;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        int rc = wait_fd(fd, POLLOUT, deadline_ns);
        if (rc)
            return rc;
    }
    return 0;
}

void lite_sock_pack(const struct sockaddr_storage *ss, uint8_t *family,
                    uint8_t out[LITE_SOCK_PACKED])
{
    memset(out, 0, LITE_SOCK_PACKED);
    *family = (uint8_t)ss->ss_family;
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        memcpy(out, &a->sin6_port, 2);
        memcpy(out + 2, &a->sin6_addr, 16);
    } else {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        memcpy(out, &a->sin_port, 2);
        memcpy(out + 2, &a->sin_addr, 4);
    }
}

int lite_sock_unpack(uint8_t family, const uint8_t in[LITE_SOCK_PACKED],
                     struct sockaddr_storage *ss, socklen_t *sslen)
{
    memset(ss, 0, sizeof(*ss));
    if (family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
        a->sin6_family = AF_INET6;
        memcpy(&a->sin6_port, in, 2);
        memcpy(&a->sin6_addr, in + 2, 16);
        *sslen = sizeof(*a);
    } else if (family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)ss;
        a->sin_family = AF_INET;
        memcpy(&a->sin_port, in, 2);
        memcpy(&a->sin_addr, in + 2, 4);
        *sslen = sizeof(*a);
    } else {
        return -LITE_ERR_PROTOCOL;
    }
    return 0;
}

const char *lite_sock_last_err(int last_err, char *buf, size_t len)
{
    if (!last_err)
        return "";
    lite_fmt(buf, len, " (last attempt: %s)", strerror(last_err));
    return buf;
}
