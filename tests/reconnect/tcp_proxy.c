/*
 * tcp_proxy.c - a TCP proxy between the ranks of a tcp job, for tests (tls.tamper.*,
 * reconnect.blackhole.*).
 *
 * Rank r listens on 127.0.0.1:P+r (LITETX_TCP_PORT=P) and advertises A+r
 * (LITETX_TCP_ADVERTISE_BASE=A); this proxy listens on A+r and forwards each accepted
 * connection's byte stream, both ways, to P+r, keeping half-closes. On command it
 *   -f R:K:N  flips (xor 0xff) the byte at offset N of the client-to-rank direction of the K-th
 *             connection (from 1) accepted on rank R's port;
 *   -b B:MS   once B bytes were forwarded in all, stops forwarding for MS ms (MS < 0: until it
 *             exits): nothing is read, written, accepted or closed, so no reset reaches anyone
 *             (the kernel still completes handshakes into the listen backlog);
 *   -t S      exits after S seconds (or at SIGTERM), printing its counters:
 *             "proxy: accepted=.. forwarded=.. flipped=.. blackholes=.. blackhole_ms=.."
 *
 *   tcp_proxy -n RANKS -p P -a A [-f R:K:N] [-b B:MS] [-t S]
 */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
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

#define MAX_RANKS 16
#define MAX_CONNS 256
#define BUF       65536

struct dir {
    int from, to; /* indexes into the pair's fds: 0 client, 1 rank */
    uint8_t buf[BUF];
    size_t off, len; /* pending bytes buf[off..len) */
    uint64_t total;  /* bytes read so far in this direction */
    int eof;         /* the source ended: shut the destination's write side once drained */
    int shut;
    int64_t flip_at; /* offset to flip, or -1 */
};

struct pair {
    int fd[2];
    int rank, nth;
    struct dir d[2]; /* d[0]: client -> rank, d[1]: rank -> client */
};

static volatile sig_atomic_t stop;
static void on_term(int sig)
{
    (void)sig;
    stop = 1;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct pair *pairs[MAX_CONNS];
static int npairs;
static unsigned long long accepted, forwarded, flipped, blackholes, refused;
static int64_t bh_ms;

static void pair_close(int i)
{
    struct pair *p = pairs[i];
    close(p->fd[0]);
    close(p->fd[1]);
    free(p);
    pairs[i] = pairs[--npairs];
}

/* One step of a direction: read when its buffer is empty, write what is pending. -1: the pair
 * is over (an error, or both directions done). */
static int dir_step(struct pair *p, struct dir *d, short rev_from, short rev_to)
{
    if (d->len == d->off && !d->eof && (rev_from & (POLLIN | POLLHUP | POLLERR))) {
        ssize_t n = read(p->fd[d->from], d->buf, BUF);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return 0;
        if (n < 0)
            return -1; /* a reset: close both, the other end sees it too */
        if (n == 0) {
            d->eof = 1;
        } else {
            if (d->flip_at >= 0 && (uint64_t)d->flip_at >= d->total &&
                (uint64_t)d->flip_at < d->total + (uint64_t)n) {
                d->buf[d->flip_at - (int64_t)d->total] ^= 0xff;
                flipped++;
                printf("proxy: flipped byte %lld of connection %d to rank %d\n",
                       (long long)d->flip_at, p->nth, p->rank);
                fflush(stdout);
            }
            d->total += (uint64_t)n;
            d->off = 0;
            d->len = (size_t)n;
        }
    }
    if (d->len > d->off && (rev_to & (POLLOUT | POLLERR | POLLHUP))) {
        ssize_t n = send(p->fd[d->to], d->buf + d->off, d->len - d->off, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return 0;
        if (n < 0)
            return -1;
        d->off += (size_t)n;
        forwarded += (unsigned long long)n;
    }
    if (d->eof && d->len == d->off && !d->shut) {
        shutdown(p->fd[d->to], SHUT_WR);
        d->shut = 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int n = 0, pbase = 0, abase = 0, f_rank = -1, f_nth = 0, secs = 60;
    long long f_off = -1, bh_after = -1, bh_len = 0;
    int opt;
    while ((opt = getopt(argc, argv, "n:p:a:f:b:t:")) != -1) {
        switch (opt) {
        case 'n':
            n = atoi(optarg);
            break;
        case 'p':
            pbase = atoi(optarg);
            break;
        case 'a':
            abase = atoi(optarg);
            break;
        case 't':
            secs = atoi(optarg);
            break;
        case 'f':
            if (sscanf(optarg, "%d:%d:%lld", &f_rank, &f_nth, &f_off) != 3)
                return 2;
            break;
        case 'b':
            if (sscanf(optarg, "%lld:%lld", &bh_after, &bh_len) != 2)
                return 2;
            break;
        default:
            fprintf(stderr, "usage: %s -n RANKS -p P -a A [-f R:K:N] [-b B:MS] [-t S]\n", argv[0]);
            return 2;
        }
    }
    if (n < 1 || n > MAX_RANKS || pbase < 1 || abase < 1 || pbase + n > 65535 ||
        abase + n > 65535 || secs < 1 || secs > 600) {
        fprintf(stderr, "tcp_proxy: bad arguments\n");
        return 2;
    }
    signal(SIGTERM, on_term);
    signal(SIGINT, on_term);
    signal(SIGPIPE, SIG_IGN);
    int lfd[MAX_RANKS], per_rank[MAX_RANKS] = {0};
    for (int r = 0; r < n; r++) {
        lfd[r] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        int one = 1;
        setsockopt(lfd[r], SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons((uint16_t)(abase + r)),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (bind(lfd[r], (struct sockaddr *)&a, sizeof(a)) || listen(lfd[r], 64)) {
            fprintf(stderr, "tcp_proxy: port %d: %s\n", abase + r, strerror(errno));
            return 3;
        }
    }
    printf("proxy: ready\n");
    fflush(stdout);
    int64_t t_end = now_ms() + (int64_t)secs * 1000, bh_start = -1;
    struct pollfd pf[MAX_RANKS + 2 * MAX_CONNS];
    while (!stop && now_ms() < t_end) {
        /* The blackhole: no syscall on any socket while it lasts. */
        if (bh_start < 0 && bh_after >= 0 && forwarded >= (unsigned long long)bh_after) {
            bh_start = now_ms();
            blackholes++;
            printf("proxy: blackhole after %llu bytes, for %lld ms\n", forwarded, bh_len);
            fflush(stdout);
        }
        if (bh_start >= 0 && (bh_len < 0 || now_ms() < bh_start + bh_len)) {
            usleep(10000);
            continue;
        }
        if (bh_start >= 0 && bh_ms == 0) {
            bh_ms = now_ms() - bh_start;
            printf("proxy: forwarding again after %lld ms\n", (long long)bh_ms);
            fflush(stdout);
        }
        int k = 0;
        for (int r = 0; r < n; r++)
            pf[k++] = (struct pollfd){.fd = lfd[r], .events = npairs < MAX_CONNS ? POLLIN : 0};
        for (int i = 0; i < npairs; i++) {
            struct pair *p = pairs[i];
            for (int s = 0; s < 2; s++) {
                /* s is a socket: readable is wanted by the direction it feeds, writable by the
                 * one draining into it */
                struct dir *in = &p->d[s], *out = &p->d[1 - s];
                short ev = 0;
                if (in->len == in->off && !in->eof)
                    ev |= POLLIN;
                if (out->len > out->off)
                    ev |= POLLOUT;
                pf[k++] = (struct pollfd){.fd = p->fd[s], .events = ev};
            }
        }
        if (poll(pf, (nfds_t)k, 20) < 0 && errno != EINTR)
            break;
        /* Pairs first (their poll slots follow the listeners in order), then new ones. */
        for (int i = npairs - 1; i >= 0; i--) {
            struct pair *p = pairs[i];
            short r0 = pf[n + 2 * i].revents, r1 = pf[n + 2 * i + 1].revents;
            int bad = dir_step(p, &p->d[0], r0, r1) || dir_step(p, &p->d[1], r1, r0);
            if (bad || (p->d[0].shut && p->d[1].shut))
                pair_close(i);
        }
        for (int r = 0; r < n; r++) {
            if (!(pf[r].revents & POLLIN))
                continue;
            int c = accept4(lfd[r], NULL, NULL, SOCK_NONBLOCK);
            if (c < 0)
                continue;
            accepted++;
            per_rank[r]++;
            /* loopback: a blocking connect ends at once */
            int u = socket(AF_INET, SOCK_STREAM, 0);
            struct sockaddr_in a = {.sin_family = AF_INET,
                                    .sin_port = htons((uint16_t)(pbase + r)),
                                    .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
            if (u < 0 || connect(u, (struct sockaddr *)&a, sizeof(a)) != 0) {
                refused++;
                if (u >= 0)
                    close(u);
                close(c);
                continue;
            }
            fcntl(u, F_SETFL, fcntl(u, F_GETFL) | O_NONBLOCK);
            struct pair *p = calloc(1, sizeof(*p));
            if (!p) {
                close(u);
                close(c);
                continue;
            }
            p->fd[0] = c;
            p->fd[1] = u;
            p->rank = r;
            p->nth = per_rank[r];
            p->d[0] = (struct dir){.from = 0, .to = 1, .flip_at = -1};
            p->d[1] = (struct dir){.from = 1, .to = 0, .flip_at = -1};
            if (r == f_rank && p->nth == f_nth)
                p->d[0].flip_at = f_off;
            pairs[npairs++] = p;
        }
    }
    if (bh_start >= 0 && bh_ms == 0)
        bh_ms = now_ms() - bh_start;
    printf("proxy: accepted=%llu refused=%llu forwarded=%llu flipped=%llu blackholes=%llu "
           "blackhole_ms=%lld open=%d\n",
           accepted, refused, forwarded, flipped, blackholes, (long long)bh_ms, npairs);
    while (npairs > 0)
        pair_close(npairs - 1);
    return 0;
}
