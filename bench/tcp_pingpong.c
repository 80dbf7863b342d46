/*
 * tcp_pingpong - the plain-C TCP baseline that liblitetx's TCP transport is judged against: no
 * library, blocking sockets, TCP_NODELAY, write/read loops. Loopback use only.
 *
 *   tcp_pingpong server PORT SIZE ITERS [spin]       echo SIZE-byte messages until the client
 * closes tcp_pingpong client HOST PORT SIZE ITERS [spin]  ITERS timed round trips (after a warm-up)
 *   tcp_pingpong stream-server PORT SIZE ITERS    read ITERS messages of SIZE, then a 1-byte ack
 *   tcp_pingpong stream-client HOST PORT SIZE ITERS
 *
 * "spin" (give it to both sides) busy-polls reads with MSG_DONTWAIT instead of sleeping in read():
 * the lower bound for a library that polls before sleeping, as liblitetx does by default.
 *
 * The client prints one line "RESULT key=value ..." (rtt_p50_us, oneway_us, ... or MBps). Every
 * socket has 10 s send/receive timeouts and the server waits at most 30 s for its client, so a
 * lost peer ends the program instead of hanging it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define IO_TIMEOUT_S      10
#define ACCEPT_TIMEOUT_MS 30000
#define CONNECT_RETRY_S   10.0

static int g_spin; /* busy-poll reads instead of blocking in read() */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void fail(const char *what)
{
    fprintf(stderr, "tcp_pingpong: %s: %s\n", what, strerror(errno));
    exit(1);
}

static long parse_num(const char *s, const char *what, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "tcp_pingpong: %s must be in [%ld, %ld], got \"%s\"\n", what, lo, hi, s);
        exit(2);
    }
    return v;
}

static void sock_setup(int fd)
{
    int one = 1;
    struct timeval tv = {.tv_sec = IO_TIMEOUT_S};
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* Writes all n bytes; exits on error or timeout. */
static void write_full(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            fail("write");
        p += w;
        n -= (size_t)w;
    }
}

/* 1 when n bytes were read, 0 on a clean end of stream before the first byte; exits otherwise. */
static int read_full(int fd, void *buf, size_t n)
{
    char *p = buf;
    size_t got = 0;
    double give_up = 0;
    while (got < n) {
        ssize_t r = g_spin ? recv(fd, p + got, n - got, MSG_DONTWAIT) : read(fd, p + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && g_spin && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            /* Polling: bound the wait like SO_RCVTIMEO bounds a blocking read. */
            double t = now_s();
            if (give_up == 0)
                give_up = t + IO_TIMEOUT_S;
            if (t < give_up)
                continue;
            errno = ETIMEDOUT;
        }
        if (r == 0 && got == 0)
            return 0;
        if (r == 0) {
            errno = EPIPE;
            fail("read (peer closed mid-message)");
        }
        if (r < 0)
            fail("read");
        got += (size_t)r;
    }
    return 1;
}

static int serve_one(int port)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (ls < 0)
        fail("socket");
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(ls, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(ls, 1) != 0)
        fail("bind/listen on 127.0.0.1");
    struct pollfd pfd = {.fd = ls, .events = POLLIN};
    int n = poll(&pfd, 1, ACCEPT_TIMEOUT_MS);
    if (n <= 0) {
        errno = n == 0 ? ETIMEDOUT : errno;
        fail("waiting for the client");
    }
    int fd = accept(ls, NULL, NULL);
    if (fd < 0)
        fail("accept");
    close(ls);
    sock_setup(fd);
    return fd;
}

static int connect_to(const char *host, int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
        fprintf(stderr, "tcp_pingpong: %s is not an IPv4 address\n", host);
        exit(2);
    }
    /* The server may still be starting: retry refusals for a while. */
    double give_up = now_s() + CONNECT_RETRY_S;
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0)
            fail("socket");
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
            sock_setup(fd);
            return fd;
        }
        close(fd);
        if (now_s() > give_up)
            fail("connect");
        usleep(10000);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile (pct in 1..100); integer math, so no libm is needed. */
static double nearest_rank(const double *sorted, long n, long pct)
{
    long k = (n * pct + 99) / 100;
    k = k < 1 ? 1 : (k > n ? n : k);
    return sorted[k - 1];
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: tcp_pingpong server PORT SIZE ITERS [spin]\n"
                        "       tcp_pingpong client HOST PORT SIZE ITERS [spin]\n"
                        "       tcp_pingpong stream-server PORT SIZE ITERS\n"
                        "       tcp_pingpong stream-client HOST PORT SIZE ITERS\n");
        return 2;
    }
    const char *mode = argv[1];
    int is_client = !strcmp(mode, "client") || !strcmp(mode, "stream-client");
    int is_stream = !strncmp(mode, "stream-", 7);
    if (!is_client && strcmp(mode, "server") && strcmp(mode, "stream-server")) {
        fprintf(stderr, "tcp_pingpong: unknown mode %s\n", mode);
        return 2;
    }
    if (is_client && argc < 6) {
        fprintf(stderr, "tcp_pingpong: %s needs HOST PORT SIZE ITERS\n", mode);
        return 2;
    }
    int a0 = is_client ? 3 : 2;
    int port = (int)parse_num(argv[a0], "PORT", 1, 65535);
    size_t size = (size_t)parse_num(argv[a0 + 1], "SIZE", 1, 1L << 30);
    long iters = parse_num(argv[a0 + 2], "ITERS", 1, 100000000);
    if (argc > a0 + 3) {
        if (strcmp(argv[a0 + 3], "spin") != 0 || is_stream) {
            fprintf(stderr, "tcp_pingpong: unexpected argument %s\n", argv[a0 + 3]);
            return 2;
        }
        g_spin = 1;
    }
    char *buf = malloc(size);
    if (!buf)
        fail("malloc");
    memset(buf, 0x5a, size);

    if (!is_client) {
        int fd = serve_one(port);
        if (is_stream) {
            for (long i = 0; i < iters; i++)
                if (!read_full(fd, buf, size))
                    fail("read (client closed early)");
            write_full(fd, "k", 1);
            (void)read_full(fd, buf, 1); /* wait for the client's close */
        } else {
            /* Echo until the client closes; the count bound (warm-up included) keeps it finite. */
            for (long i = 0; i < 2 * iters + 1000 && read_full(fd, buf, size); i++)
                write_full(fd, buf, size);
        }
        close(fd);
        free(buf);
        return 0;
    }

    int fd = connect_to(argv[2], port);
    if (is_stream) {
        double t0 = now_s();
        for (long i = 0; i < iters; i++)
            write_full(fd, buf, size);
        char ack;
        if (!read_full(fd, &ack, 1))
            fail("read ack");
        double t = now_s() - t0;
        printf("RESULT mode=stream size=%zu msgs=%ld seconds=%.6f MBps=%.1f\n", size, iters, t,
               (double)size * (double)iters / t / 1e6);
    } else {
        long warm = iters / 10 < 10 ? 10 : (iters / 10 > 1000 ? 1000 : iters / 10);
        double *rtt = malloc((size_t)iters * sizeof(double));
        if (!rtt)
            fail("malloc");
        for (long i = 0; i < warm; i++) {
            write_full(fd, buf, size);
            if (!read_full(fd, buf, size))
                fail("read (server closed)");
        }
        double sum = 0;
        for (long i = 0; i < iters; i++) {
            double t0 = now_s();
            write_full(fd, buf, size);
            if (!read_full(fd, buf, size))
                fail("read (server closed)");
            rtt[i] = now_s() - t0;
            sum += rtt[i];
        }
        qsort(rtt, (size_t)iters, sizeof(double), cmp_double);
        double p50 = nearest_rank(rtt, iters, 50) * 1e6;
        printf("RESULT mode=pingpong%s size=%zu iters=%ld rtt_p50_us=%.3f rtt_p99_us=%.3f "
               "rtt_mean_us=%.3f oneway_us=%.3f\n",
               g_spin ? "-spin" : "", size, iters, p50, nearest_rank(rtt, iters, 99) * 1e6,
               sum / (double)iters * 1e6, p50 / 2);
        free(rtt);
    }
    close(fd);
    free(buf);
    return 0;
}
