/*
 * relay.c - a bounded UDP relay with seeded, deterministic impairments, put between the ranks of
 * a job on loopback (the quic backend's lossy-path tests).
 *
 * Topology: N ranks bind 127.0.0.1:P+r (LITETX_QUIC_PORT_BASE=P) and advertise 127.0.0.1:A+r
 * (LITETX_QUIC_ADVERTISE_BASE=A). The relay binds A+r for every r. A datagram that reaches A+r
 * from P+j (rank j to rank r) is passed on to P+r from the relay's socket A+j, so rank r sees it
 * come from the address it knows rank j by, and its answer takes the same path back.
 * Datagrams from any other address are counted as strays and dropped.
 *
 *   relay -n RANKS -p P -a A [-t SECONDS] [-s SEED] [-w SKIP] [-l LAST] [-d PCT] [-b N@PCT] [-r
 * K@PCT]
 *         [-u PCT] [-c PCT] [-k MS[@AT_MS]] [-o STATS_FILE]
 *
 *   -d PCT     drop each datagram with probability PCT %
 *   -b N@PCT   with probability PCT %, drop this datagram and the next N-1 of its flow
 *   -r K@PCT   with probability PCT %, hold a datagram back and send it after the next K of its
 *              flow (or after 20 ms without K more, so a flow's last datagram is late, not lost)
 *   -u PCT     send the datagram twice
 *   -c PCT     flip one byte (random position past the first 24 bytes when the datagram is longer,
 *              so the packet's payload, not its header, is hit) before sending
 *   -k MS[@AT] blackhole: forward nothing for MS ms (0: for ever), starting AT ms after the relay
 *              started, or on SIGUSR1 when no @AT is given
 *   -w SKIP    leave each flow's first SKIP datagrams alone (a handshake without impairment)
 *   -l LAST    impair only each flow's first LAST datagrams (loss during the handshake only)
 *   -t SECONDS exit after this long (default 60); SIGTERM or SIGINT exit at once
 *   -o FILE    also write the counters there at exit
 *
 * A flow is a (source rank, destination rank) pair; each has its own random stream derived from
 * the seed, so the decisions for a flow depend only on the seed and that flow's datagram count.
 * At exit the relay prints one line of counters ("relay: forwarded=... dropped=..."), which the
 * tests read to check the impairments happened. It prints "relay: ready" once its sockets are
 * bound.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#define MAX_RANKS    16
#define MAX_DGRAM    65536
#define HOLD_MAX_MS  20
#define CORRUPT_SKIP 24

struct held {
    uint8_t *buf;
    size_t len;
    int left;       /* datagrams of the flow still to pass before it is sent */
    int passed;     /* how many did pass it */
    uint64_t since; /* ms when it was held */
};

struct flow {
    uint64_t rng;
    uint64_t count; /* datagrams seen */
    int burst_left; /* datagrams still to drop in the current burst */
    struct held hold;
};

static struct {
    int n, port_base, adv_base;
    double drop, burst_pct, reorder_pct, dup, corrupt;
    int burst_len, reorder_k;
    long bh_ms, bh_at;   /* blackhole length (0: for ever) and start (-1: on SIGUSR1) */
    uint64_t skip, last; /* impaired: datagrams skip+1 .. last of each flow (last 0: no end) */
    int fds[MAX_RANKS];
    struct flow flows[MAX_RANKS][MAX_RANKS];
    uint64_t t0;
    /* counters */
    unsigned long long seen, forwarded, dropped, burst_dropped, reordered, duplicated, corrupted,
        blackholed, strays, send_errors;
} R;

static volatile sig_atomic_t stop_flag, usr1_flag;

static void on_signal(int sig)
{
    if (sig == SIGUSR1)
        usr1_flag = 1;
    else
        stop_flag = 1;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* splitmix64: small, seedable, good enough for coin flips */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int coin(struct flow *f, double pct)
{
    /* drawn even when pct is 0: see relay_one */
    return (double)(rng_next(&f->rng) >> 11) * (1.0 / 9007199254740992.0) * 100.0 < pct;
}

static void die(const char *what)
{
    fprintf(stderr, "relay: %s: %s\n", what, strerror(errno));
    exit(2);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: relay -n RANKS -p PORT_BASE -a ADVERTISE_BASE [-t SECONDS] [-s SEED] "
            "[-w SKIP] [-l LAST] [-d PCT] [-b N@PCT] [-r K@PCT] [-u PCT] [-c PCT] [-k MS[@AT_MS]] "
            "[-o FILE]\n");
    exit(2);
}

static double parse_pct(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (*end || v < 0 || v > 100)
        usage();
    return v;
}

/* "N@PCT" */
static void parse_count_pct(const char *s, int *n, double *pct)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*end != '@' || v < 1 || v > 1000000)
        usage();
    *n = (int)v;
    *pct = parse_pct(end + 1);
}

static int blackhole_active(uint64_t now)
{
    static uint64_t started; /* 0: not started */
    if (!started) {
        if (R.bh_at >= 0 && R.bh_ms >= 0 && now - R.t0 >= (uint64_t)R.bh_at)
            started = now;
        else if (R.bh_at < 0 && usr1_flag)
            started = now;
        if (started)
            fprintf(stderr, "relay: blackhole on at %llu ms\n", (unsigned long long)(now - R.t0));
    }
    if (!started)
        return 0;
    if (R.bh_ms == 0)
        return 1;
    if (now - started < (uint64_t)R.bh_ms)
        return 1;
    return 0;
}

static void send_to(int src, int dst, const uint8_t *buf, size_t len)
{
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(R.port_base + dst)};
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    /* Bounded retries: a full send buffer is a loss like any other, only counted apart. */
    for (int tries = 0; tries < 100; tries++) {
        if (sendto(R.fds[src], buf, len, 0, (struct sockaddr *)&to, sizeof to) >= 0) {
            R.forwarded++;
            return;
        }
        if (errno != EAGAIN && errno != ENOBUFS && errno != EINTR)
            break;
        struct pollfd p = {.fd = R.fds[src], .events = POLLOUT};
        poll(&p, 1, 1);
    }
    R.send_errors++;
}

static void release_held(int src, int dst)
{
    struct held *h = &R.flows[src][dst].hold;
    if (!h->buf)
        return;
    if (h->passed > 0)
        R.reordered++;
    send_to(src, dst, h->buf, h->len);
    free(h->buf);
    h->buf = NULL;
}

/* One datagram from rank src to rank dst. */
static void relay_one(int src, int dst, uint8_t *buf, size_t len, uint64_t now)
{
    struct flow *f = &R.flows[src][dst];
    R.seen++;
    f->count++;
    if (blackhole_active(now)) {
        R.blackholed++;
        return;
    }
    int impair = f->count > R.skip && (!R.last || f->count <= R.last);
    /* Every coin is thrown for every datagram, impaired or not, so one impairment's choice does
     * not shift the others' random streams. */
    int c_drop = coin(f, R.drop), c_burst = coin(f, R.burst_pct),
        c_reorder = coin(f, R.reorder_pct), c_dup = coin(f, R.dup), c_corrupt = coin(f, R.corrupt);
    uint64_t r_pos = rng_next(&f->rng), r_xor = rng_next(&f->rng);
    if (!impair) {
        send_to(src, dst, buf, len);
        return;
    }
    if (f->burst_left > 0) {
        f->burst_left--;
        R.burst_dropped++;
        goto passed;
    }
    if (c_burst) {
        f->burst_left = R.burst_len - 1;
        R.burst_dropped++;
        goto passed;
    }
    if (c_drop) {
        R.dropped++;
        goto passed;
    }
    if (c_corrupt && len > 0) {
        size_t from = len > CORRUPT_SKIP ? CORRUPT_SKIP : 0;
        size_t pos = from + (size_t)(r_pos % (len - from));
        buf[pos] ^= (uint8_t)(1 + r_xor % 255); /* never 0: the byte changes */
        R.corrupted++;
    }
    if (c_reorder && !f->hold.buf) {
        f->hold.buf = malloc(len);
        if (!f->hold.buf)
            die("malloc");
        memcpy(f->hold.buf, buf, len);
        f->hold.len = len;
        f->hold.left = R.reorder_k;
        f->hold.passed = 0;
        f->hold.since = now;
        return;
    }
    send_to(src, dst, buf, len);
    if (c_dup) {
        send_to(src, dst, buf, len);
        R.duplicated++;
    }
passed:
    if (f->hold.buf) {
        f->hold.passed++;
        if (--f->hold.left <= 0)
            release_held(src, dst);
    }
}

static void print_counters(FILE *out)
{
    fprintf(out,
            "relay: seen=%llu forwarded=%llu dropped=%llu burst_dropped=%llu reordered=%llu "
            "duplicated=%llu corrupted=%llu blackholed=%llu strays=%llu send_errors=%llu\n",
            R.seen, R.forwarded, R.dropped, R.burst_dropped, R.reordered, R.duplicated, R.corrupted,
            R.blackholed, R.strays, R.send_errors);
    fflush(out);
}

int main(int argc, char **argv)
{
    long seconds = 60;
    uint64_t seed = 1;
    const char *stats_path = NULL;
    R.n = 0;
    R.port_base = R.adv_base = -1;
    R.bh_ms = -1;
    R.bh_at = -1;
    int opt;
    while ((opt = getopt(argc, argv, "n:p:a:t:s:w:l:d:b:r:u:c:k:o:")) != -1) {
        switch (opt) {
        case 'n':
            R.n = atoi(optarg);
            break;
        case 'p':
            R.port_base = atoi(optarg);
            break;
        case 'a':
            R.adv_base = atoi(optarg);
            break;
        case 't':
            seconds = atol(optarg);
            break;
        case 's':
            seed = strtoull(optarg, NULL, 0);
            break;
        case 'w':
            R.skip = strtoull(optarg, NULL, 0);
            break;
        case 'l':
            R.last = strtoull(optarg, NULL, 0);
            break;
        case 'd':
            R.drop = parse_pct(optarg);
            break;
        case 'b':
            parse_count_pct(optarg, &R.burst_len, &R.burst_pct);
            break;
        case 'r':
            parse_count_pct(optarg, &R.reorder_k, &R.reorder_pct);
            break;
        case 'u':
            R.dup = parse_pct(optarg);
            break;
        case 'c':
            R.corrupt = parse_pct(optarg);
            break;
        case 'k': {
            char *end;
            R.bh_ms = strtol(optarg, &end, 10);
            if (R.bh_ms < 0 || (*end && *end != '@'))
                usage();
            if (*end == '@')
                R.bh_at = strtol(end + 1, NULL, 10);
            break;
        }
        case 'o':
            stats_path = optarg;
            break;
        default:
            usage();
        }
    }
    if (R.n < 1 || R.n > MAX_RANKS || R.port_base < 1 || R.adv_base < 1 ||
        R.port_base + R.n > 65536 || R.adv_base + R.n > 65536 || seconds < 1 || seconds > 3600)
        usage();

    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);

    for (int r = 0; r < R.n; r++) {
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            die("socket");
        int sz = 8 << 20;
        /* FORCE (root) passes net.core.rmem_max; the plain call is the fallback. */
        if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz) < 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
        if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz) < 0)
            setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(R.adv_base + r)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0)
            die("bind");
        R.fds[r] = fd;
        for (int j = 0; j < R.n; j++)
            R.flows[j][r].rng = seed * 0x100000001B3ull + (uint64_t)(j * MAX_RANKS + r + 1);
    }
    R.t0 = now_ms();
    uint64_t deadline = R.t0 + (uint64_t)seconds * 1000u;
    printf("relay: ready\n");
    fflush(stdout);

    static uint8_t buf[MAX_DGRAM];
    struct pollfd pfd[MAX_RANKS];
    while (!stop_flag) {
        uint64_t now = now_ms();
        if (now >= deadline)
            break;
        /* Held datagrams whose flow went quiet: late, not lost. */
        int wait = (int)(deadline - now < 1000 ? deadline - now : 1000);
        for (int s = 0; s < R.n; s++)
            for (int d = 0; d < R.n; d++) {
                struct held *h = &R.flows[s][d].hold;
                if (!h->buf)
                    continue;
                if (now - h->since >= HOLD_MAX_MS)
                    release_held(s, d);
                else if ((int)(h->since + HOLD_MAX_MS - now) < wait)
                    wait = (int)(h->since + HOLD_MAX_MS - now);
            }
        if (R.bh_at >= 0 && R.bh_ms >= 0)
            blackhole_active(now); /* say when it starts even without traffic */
        for (int r = 0; r < R.n; r++)
            pfd[r] = (struct pollfd){.fd = R.fds[r], .events = POLLIN};
        int rc = poll(pfd, (nfds_t)R.n, wait);
        if (rc < 0 && errno != EINTR)
            die("poll");
        if (rc <= 0)
            continue;
        now = now_ms();
        for (int dst = 0; dst < R.n; dst++) {
            if (!(pfd[dst].revents & POLLIN))
                continue;
            /* Bounded drain, so one busy socket does not starve the others. */
            for (int k = 0; k < 256; k++) {
                struct sockaddr_in from;
                socklen_t fl = sizeof from;
                ssize_t len =
                    recvfrom(R.fds[dst], buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
                if (len < 0)
                    break;
                int src = (int)ntohs(from.sin_port) - R.port_base;
                if (from.sin_family != AF_INET || from.sin_addr.s_addr != htonl(INADDR_LOOPBACK) ||
                    src < 0 || src >= R.n) {
                    R.strays++;
                    continue;
                }
                relay_one(src, dst, buf, (size_t)len, now);
            }
        }
    }
    for (int s = 0; s < R.n; s++)
        for (int d = 0; d < R.n; d++)
            release_held(s, d);
    print_counters(stdout);
    if (stats_path) {
        FILE *f = fopen(stats_path, "w");
        if (f) {
            print_counters(f);
            fclose(f);
        }
    }
    for (int r = 0; r < R.n; r++)
        close(R.fds[r]);
    return 0;
}
