/*
 * badinput_spray.c - sprays hostile datagrams at the UDP ports of a job's ranks (127.0.0.1:P+r)
 * while the job runs (tests/quic/badinput.sh): the ranks must drop them, say so at warn, and
 * carry on.
 *
 *   badinput_spray -p PORT_BASE -n RANKS -k KIND -t SECONDS [-s SEED] [-r PER_10MS]
 *
 * KIND:
 *   garbage   random bytes, 0 .. 1500 long, and a few of 65507 (the largest UDP payload)
 *   initial   QUIC v1 Initial packets cut short: a valid long header whose Length field claims
 *             1200 bytes, truncated at every point of the header and payload, plus full-size
 *             Initials whose payload is noise (the Initial keys derive from the DCID, so the
 *             receiver gets as far as the AEAD), and unknown versions
 *   reset     a stateless-reset storm: short-header packets of 21 .. 100 bytes whose last 16 bytes
 *             are a random token
 *   mixed     all three in turn
 * Runs for SECONDS or until SIGTERM; prints "spray: sent=N" at exit.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_flag;
static void on_term(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static uint64_t rng;
static uint64_t rnd(void)
{
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void fill_rnd(uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)rnd();
}

static size_t make_garbage(uint8_t *b, unsigned k)
{
    size_t len = k % 97 == 0 ? 65507 : (size_t)(rnd() % 1501);
    fill_rnd(b, len);
    return len;
}

/* A QUIC v1 Initial header (RFC 9000 17.2.2) with Length 1200, cut at `cut` bytes when nonzero. */
static size_t make_initial(uint8_t *b, unsigned k)
{
    size_t o = 0;
    b[o++] = 0xC3; /* long header, fixed bit, Initial, 4-byte packet number */
    uint32_t version = k % 11 == 0 ? 0x1A2A3A4Au : 1u; /* now and then an unknown version */
    b[o++] = (uint8_t)(version >> 24), b[o++] = (uint8_t)(version >> 16);
    b[o++] = (uint8_t)(version >> 8), b[o++] = (uint8_t)version;
    b[o++] = 8; /* DCID length */
    fill_rnd(b + o, 8), o += 8;
    b[o++] = 8; /* SCID length */
    fill_rnd(b + o, 8), o += 8;
    b[o++] = 0;                  /* token length */
    b[o++] = 0x40 | (1200 >> 8); /* Length: 2-byte varint, 1200 */
    b[o++] = 1200 & 0xFF;
    fill_rnd(b + o, 1200), o += 1200; /* packet number and payload: noise */
    if (k % 4 == 0)
        return o;                         /* full size: reaches the AEAD */
    return 1 + (size_t)(rnd() % (o - 1)); /* cut anywhere */
}

/* A stateless reset (RFC 9000 10.3): 0b01 then unpredictable bits, the last 16 bytes a token. */
static size_t make_reset(uint8_t *b, unsigned k)
{
    (void)k;
    size_t len = 21 + (size_t)(rnd() % 80);
    fill_rnd(b, len);
    b[0] = (uint8_t)(0x40 | (b[0] & 0x3F));
    return len;
}

int main(int argc, char **argv)
{
    int pbase = -1, n = 0, seconds = 5, per = 100;
    const char *kind = "mixed";
    rng = 42;
    int opt;
    while ((opt = getopt(argc, argv, "p:n:k:t:s:r:")) != -1) {
        switch (opt) {
        case 'p':
            pbase = atoi(optarg);
            break;
        case 'n':
            n = atoi(optarg);
            break;
        case 'k':
            kind = optarg;
            break;
        case 't':
            seconds = atoi(optarg);
            break;
        case 's':
            rng = strtoull(optarg, NULL, 0);
            break;
        case 'r':
            per = atoi(optarg);
            break;
        default:
            return 2;
        }
    }
    int k_garbage = !strcmp(kind, "garbage"), k_initial = !strcmp(kind, "initial"),
        k_reset = !strcmp(kind, "reset"), k_mixed = !strcmp(kind, "mixed");
    if (pbase < 1 || n < 1 || n > 64 || seconds < 1 || seconds > 600 || per < 1 || per > 10000 ||
        !(k_garbage || k_initial || k_reset || k_mixed)) {
        fprintf(stderr,
                "usage: badinput_spray -p PORT_BASE -n RANKS -k garbage|initial|reset|mixed "
                "-t SECONDS [-s SEED] [-r PER_10MS]\n");
        return 2;
    }
    struct sigaction sa = {.sa_handler = on_term};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) {
        perror("socket");
        return 2;
    }
    static uint8_t buf[65536];
    unsigned long long sent = 0, refused = 0;
    struct timespec t0, now, pause = {0, 10 * 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned k = 0; !stop_flag; k++) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec >= seconds)
            break;
        /* `per` datagrams, then 10 ms: a bounded rate that still keeps the ranks busy */
        for (int i = 0; i < per; i++) {
            unsigned j = k * (unsigned)per + (unsigned)i;
            int which = k_mixed ? (int)(j % 3) : k_garbage ? 0 : k_initial ? 1 : 2;
            size_t len = which == 0   ? make_garbage(buf, j)
                         : which == 1 ? make_initial(buf, j)
                                      : make_reset(buf, j);
            struct sockaddr_in to = {.sin_family = AF_INET,
                                     .sin_port = htons((uint16_t)(pbase + (int)(j % (unsigned)n)))};
            to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            if (sendto(fd, buf, len, 0, (struct sockaddr *)&to, sizeof to) >= 0)
                sent++;
            else
                refused++; /* ECONNREFUSED: that rank's port is not bound (yet, or any more) */
        }
        nanosleep(&pause, NULL);
    }
    printf("spray: sent=%llu refused=%llu\n", sent, refused);
    close(fd);
    return 0;
}
