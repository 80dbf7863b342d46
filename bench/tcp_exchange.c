/*
 * tcp_exchange - the plain-C measurement behind the TCP transport's bulk connections: two
 * processes (one per CPU) move SIZE bytes each way over loopback TCP, no library in between.
 *
 *   tcp_exchange SIZE ITERS MODE
 *
 * MODE  both      both ranks send and receive at once on one connection (the old TCP layout)
 *       oneway    both at once, each direction on its own connection (data one way per socket)
 *       pp        ping-pong on one connection: 0 sends, 1 answers with SIZE bytes
 *       pp-oneway ping-pong, each direction on its own connection
 *
 * Prints "RESULT mode=... size=... us_per_exchange=..." (the mean over ITERS after 200 warm-up
 * exchanges). Non-blocking sockets, busy loops as a polling library does; every loop ends after
 * 10 s without progress, so a lost peer ends the program instead of hanging it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_setaffinity */
#endif
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WARMUP 200

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    sched_setaffinity(0, sizeof(s), &s); /* best effort: a single-CPU host just shares */
}

/* Send len bytes on sfd (if tx) and receive len bytes on rfd (if rx), interleaved. */
static void move(int sfd, int rfd, char *sb, char *rb, size_t len, int tx, int rx)
{
    size_t s = tx ? 0 : len, r = rx ? 0 : len;
    double last = now_s();
    while (s < len || r < len) {
        ssize_t n;
        if (s < len && (n = send(sfd, sb + s, len - s, MSG_NOSIGNAL)) > 0) {
            s += (size_t)n;
            last = now_s();
        }
        if (r < len && (n = recv(rfd, rb + r, len - r, 0)) > 0) {
            r += (size_t)n;
            last = now_s();
        }
        if (now_s() - last > 10.0) {
            fprintf(stderr, "tcp_exchange: no progress for 10 s\n");
            exit(1);
        }
    }
}

static int connect_to(const struct sockaddr_in *a)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (fd < 0 || connect(fd, (const struct sockaddr *)a, sizeof(*a)) != 0) {
        perror("tcp_exchange: connect");
        exit(1);
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

static int accept_one(int ls)
{
    int fd = accept(ls, NULL, NULL), one = 1;
    if (fd < 0) {
        perror("tcp_exchange: accept");
        exit(1);
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: tcp_exchange SIZE ITERS both|oneway|pp|pp-oneway\n");
        return 2;
    }
    size_t len = strtoul(argv[1], NULL, 0);
    long iters = atol(argv[2]);
    const char *mode = argv[3];
    int two = !strcmp(mode, "oneway") || !strcmp(mode, "pp-oneway");
    int pp = !strncmp(mode, "pp", 2);
    if (!len || iters <= 0 || (!two && strcmp(mode, "both") && strcmp(mode, "pp"))) {
        fprintf(stderr, "tcp_exchange: bad arguments\n");
        return 2;
    }
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(ls, 4) != 0 ||
        getsockname(ls, (struct sockaddr *)&a, &al) != 0) {
        perror("tcp_exchange: listen");
        return 1;
    }
    pid_t child = fork();
    int me = child == 0; /* rank 1: the child, connects; rank 0: accepts */
    pin(me);
    int out, in; /* this rank's sending and receiving sockets */
    if (me) {
        out = in = connect_to(&a);
        if (two)
            in = connect_to(&a);
    } else {
        in = out = accept_one(ls);
        if (two)
            out = accept_one(ls);
    }
    fcntl(out, F_SETFL, O_NONBLOCK);
    fcntl(in, F_SETFL, O_NONBLOCK);
    char *sb = malloc(len), *rb = malloc(len);
    if (!sb || !rb)
        return 1;
    memset(sb, me + 1, len);
    double t0 = 0;
    for (long it = -WARMUP; it < iters; it++) {
        if (it == 0)
            t0 = now_s();
        if (!pp) {
            move(out, in, sb, rb, len, 1, 1);
        } else {
            move(out, in, sb, rb, len, !me, me);
            move(out, in, sb, rb, len, me, !me);
        }
    }
    double dt = now_s() - t0;
    if (me)
        return 0;
    int st = 0;
    waitpid(child, &st, 0);
    if (rb[0] != 2 || rb[len - 1] != 2) {
        fprintf(stderr, "tcp_exchange: wrong bytes received\n");
        return 1;
    }
    printf("RESULT mode=%s size=%zu iters=%ld us_per_exchange=%.1f\n", mode, len, iters,
           dt / (double)iters * 1e6);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
