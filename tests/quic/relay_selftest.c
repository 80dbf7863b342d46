/*
 * relay_selftest.c - checks tests/quic/relay on its own: two UDP sockets play ranks 0 and 1
 * (bound to P and P+1, sending to the relay's A+1 and A), a few thousand numbered datagrams go
 * through the relay under each impairment, and what arrives must match both the impairment and
 * the relay's own counters. Without impairment every datagram arrives once, in order, intact,
 * from the address the relay stands in for.
 *
 *   relay_selftest RELAY_BINARY
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define COUNT  3000
#define WINDOW 32

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "relay_selftest: %s:%d: check failed: %s: ", __FILE__, __LINE__,       \
                    #cond);                                                                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

struct counters {
    unsigned long long seen, forwarded, dropped, burst_dropped, reordered, duplicated, corrupted,
        blackholed, strays, send_errors;
};

struct result {
    int got;          /* datagrams received */
    int distinct;     /* distinct sequence numbers received */
    int dups;         /* received more than once */
    int out_of_order; /* arrived after a higher number */
    int bad;          /* content does not match its sequence number */
    int wrong_src;    /* not from the relay's stand-in address */
    int answered;     /* the answer the other way came back from rank 1's stand-in address */
};

static const char *relay_bin;

static int udp_bind(int port)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    CHECK(fd >= 0, "socket: %s", strerror(errno));
    int sz = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static uint8_t pat(uint32_t seq, size_t i)
{
    return (uint8_t)((seq * 2654435761u) >> 13 ^ (uint32_t)i * 31u);
}

static size_t dgram_len(uint32_t seq)
{
    return 64 + (seq * 7919u) % 1400;
}

/* Starts the relay with the given impairment arguments; returns its pid, its stdout as *out. */
static pid_t start_relay(int pbase, int abase, char *const extra[], FILE **out)
{
    int p[2];
    CHECK(pipe(p) == 0, "pipe");
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        char ps[16], as[16];
        snprintf(ps, sizeof ps, "%d", pbase);
        snprintf(as, sizeof as, "%d", abase);
        char *argv[32] = {(char *)relay_bin, "-n", "2", "-p", ps, "-a", as, "-t", "60", "-s", "7"};
        int n = 11;
        for (int i = 0; extra[i] && n < 31; i++)
            argv[n++] = extra[i];
        argv[n] = NULL;
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        execv(relay_bin, argv);
        _exit(127);
    }
    close(p[1]);
    *out = fdopen(p[0], "r");
    char line[512];
    CHECK(fgets(line, sizeof line, *out) && strstr(line, "relay: ready"), "relay did not start");
    return pid;
}

static void stop_relay(pid_t pid, FILE *out, struct counters *c)
{
    kill(pid, SIGTERM);
    char line[1024] = "";
    CHECK(fgets(line, sizeof line, out), "no counters from the relay");
    int n = sscanf(line,
                   "relay: seen=%llu forwarded=%llu dropped=%llu burst_dropped=%llu reordered=%llu "
                   "duplicated=%llu corrupted=%llu blackholed=%llu strays=%llu send_errors=%llu",
                   &c->seen, &c->forwarded, &c->dropped, &c->burst_dropped, &c->reordered,
                   &c->duplicated, &c->corrupted, &c->blackholed, &c->strays, &c->send_errors);
    CHECK(n == 10, "unreadable counters: %s", line);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "relay exit status %d", st);
    fclose(out);
    printf("  %s", line);
}

/* Receives until quiet for quiet_ms; tallies into r and seen[]. */
static void drain(int fd, int abase_src, struct result *r, unsigned char *seen, uint32_t *maxseq,
                  int quiet_ms)
{
    static uint8_t buf[65536];
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, quiet_ms) <= 0)
            return;
        for (;;) {
            struct sockaddr_in from;
            socklen_t fl = sizeof from;
            ssize_t len = recvfrom(fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
            if (len < 0)
                break;
            r->got++;
            if (ntohs(from.sin_port) != abase_src)
                r->wrong_src++;
            uint32_t seq;
            if (len < 4) {
                r->bad++;
                continue;
            }
            memcpy(&seq, buf, 4);
            int ok = seq < COUNT && (size_t)len == dgram_len(seq);
            for (size_t i = 4; ok && i < (size_t)len; i++)
                ok = buf[i] == pat(seq, i);
            if (!ok) {
                r->bad++;
                continue;
            }
            if (seen[seq]++)
                r->dups++;
            else
                r->distinct++;
            if (*maxseq != UINT32_MAX && seq < *maxseq)
                r->out_of_order++;
            if (*maxseq == UINT32_MAX || seq > *maxseq)
                *maxseq = seq;
        }
    }
}

/* COUNT datagrams from "rank 0" to "rank 1" through the relay, in windows of WINDOW. */
static void run_case(const char *name, char *const extra[], struct result *r, struct counters *c)
{
    int pbase = 0, abase = 0, s0 = -1, s1 = -1;
    /* Ports from the pid; another test may hold them, so try a few. */
    for (int tries = 0; tries < 20 && s1 < 0; tries++) {
        pbase =
            20000 +
            (int)((getpid() * 131u + (unsigned)tries * 977u + (unsigned)time(NULL)) % 20000u) * 2;
        if (pbase > 60000)
            pbase -= 30000;
        abase = pbase + 2;
        if (s0 >= 0)
            close(s0);
        s0 = udp_bind(pbase);
        s1 = s0 >= 0 ? udp_bind(pbase + 1) : -1;
    }
    CHECK(s0 >= 0 && s1 >= 0, "no free ports");
    printf("case %s\n", name);
    FILE *out;
    pid_t pid = start_relay(pbase, abase, extra, &out);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(abase + 1)};
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    static uint8_t buf[2048];
    static unsigned char seen[COUNT];
    memset(seen, 0, sizeof seen);
    memset(r, 0, sizeof *r);
    uint32_t maxseq = UINT32_MAX;
    for (uint32_t seq = 0; seq < COUNT; seq++) {
        size_t len = dgram_len(seq);
        memcpy(buf, &seq, 4);
        for (size_t i = 4; i < len; i++)
            buf[i] = pat(seq, i);
        CHECK(sendto(s0, buf, len, 0, (struct sockaddr *)&to, sizeof to) == (ssize_t)len,
              "sendto: %s", strerror(errno));
        if (seq % WINDOW == WINDOW - 1)
            drain(s1, abase + 0, r, seen, &maxseq, 2);
    }
    drain(s1, abase + 0, r, seen, &maxseq, 100);
    /* One answer back the other way: it must come from rank 1's stand-in address. */
    struct sockaddr_in back = {.sin_family = AF_INET, .sin_port = htons(abase)};
    back.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(sendto(s1, "pong", 4, 0, (struct sockaddr *)&back, sizeof back) == 4, "sendto back");
    struct pollfd p = {.fd = s0, .events = POLLIN};
    if (poll(&p, 1, 500) == 1) {
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        char b[8];
        r->answered = recvfrom(s0, b, sizeof b, 0, (struct sockaddr *)&from, &fl) == 4 &&
                      ntohs(from.sin_port) == abase + 1;
    }
    stop_relay(pid, out, c);
    printf("  got=%d distinct=%d dups=%d out_of_order=%d bad=%d wrong_src=%d answered=%d\n", r->got,
           r->distinct, r->dups, r->out_of_order, r->bad, r->wrong_src, r->answered);
    CHECK(r->wrong_src == 0, "datagrams from the wrong address");
    CHECK(c->strays == 0 && c->send_errors == 0, "strays or send errors");
    CHECK(c->seen == COUNT + 1u, "relay saw %llu of %d", c->seen, COUNT + 1);
    close(s0);
    close(s1);
}

int main(int argc, char **argv)
{
    CHECK(argc == 2, "usage: relay_selftest RELAY_BINARY");
    relay_bin = argv[1];
    signal(SIGPIPE, SIG_IGN);
    struct result r;
    struct counters c;

    run_case("clean", (char *[]){NULL}, &r, &c);
    CHECK(r.got == COUNT && r.distinct == COUNT && r.dups == 0 && r.out_of_order == 0 && r.bad == 0,
          "a clean relay lost, repeated, reordered or damaged datagrams");
    CHECK(c.forwarded == COUNT + 1u && c.dropped + c.reordered + c.duplicated + c.corrupted == 0,
          "clean counters");
    CHECK(r.answered, "the answer did not come back from rank 1's stand-in address");

    run_case("drop5", (char *[]){"-d", "5", NULL}, &r, &c);
    CHECK(c.dropped > COUNT / 100 && c.dropped < COUNT / 10, "5%% drop dropped %llu", c.dropped);
    CHECK(r.distinct == COUNT - (int)c.dropped && r.dups == 0 && r.bad == 0,
          "received %d, expected %d", r.distinct, COUNT - (int)c.dropped);

    run_case("burst", (char *[]){"-b", "10@0.5", NULL}, &r, &c);
    CHECK(c.burst_dropped >= 10 && r.distinct == COUNT - (int)c.burst_dropped,
          "burst dropped %llu, received %d", c.burst_dropped, r.distinct);

    run_case("reorder", (char *[]){"-r", "3@5", NULL}, &r, &c);
    CHECK(c.reordered > 0 && r.out_of_order > 0 && r.distinct == COUNT && r.dups == 0,
          "reordered %llu, seen out of order %d, received %d", c.reordered, r.out_of_order,
          r.distinct);

    run_case("dup", (char *[]){"-u", "5", NULL}, &r, &c);
    CHECK(c.duplicated > 0 && r.dups == (int)c.duplicated && r.distinct == COUNT,
          "duplicated %llu, received twice %d", c.duplicated, r.dups);

    run_case("corrupt", (char *[]){"-c", "5", NULL}, &r, &c);
    CHECK(c.corrupted > 0 && r.bad == (int)c.corrupted && r.distinct == COUNT - (int)c.corrupted,
          "corrupted %llu, received damaged %d", c.corrupted, r.bad);

    run_case("skip", (char *[]){"-w", "1000", "-d", "100", NULL}, &r, &c);
    CHECK(r.distinct == 1000 && c.dropped == COUNT - 1000u, "skip: received %d", r.distinct);

    run_case("last", (char *[]){"-l", "1000", "-d", "100", NULL}, &r, &c);
    CHECK(r.distinct == COUNT - 1000 && c.dropped == 1001u, "last: received %d", r.distinct);

    /* A blackhole from the start, for ever: nothing passes, every datagram is counted. */
    run_case("blackhole", (char *[]){"-k", "0@0", NULL}, &r, &c);
    CHECK(r.got == 0 && c.blackholed == COUNT + 1u && !r.answered, "blackhole passed %d", r.got);

    /* The same seed makes the same choices. */
    struct counters c2;
    run_case("drop5 again", (char *[]){"-d", "5", NULL}, &r, &c2);
    run_case("drop5 again", (char *[]){"-d", "5", NULL}, &r, &c);
    CHECK(c.dropped == c2.dropped, "same seed, %llu then %llu drops", c2.dropped, c.dropped);
    printf("relay_selftest: ok\n");
    return 0;
}
