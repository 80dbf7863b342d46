/*
 * ring_demo - the first program to run: every rank passes a 1 MiB message to the next rank in a
 * ring, checks what it received from the previous one, and rank 0 prints one line per rank.
 *
 *   litetx-run -n 4 build/examples/ring_demo
 *
 * Each message carries a pattern derived from its sender's rank, so a line "ok" means the bytes
 * went from rank r-1 to rank r intact; the checksum column lets you compare by eye.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <litetx/litetx.h>

#define MSG_BYTES (1u << 20)

static uint8_t pattern(int rank, size_t i)
{
    return (uint8_t)((i * 131u) ^ (unsigned)(rank * 29 + 7));
}

static uint32_t checksum(const uint8_t *p, size_t n)
{
    uint32_t a = 1, b = 0; /* Adler-32 */
    for (size_t i = 0; i < n; i++) {
        a = (a + p[i]) % 65521u;
        b = (b + a) % 65521u;
    }
    return (b << 16) | a;
}

struct report {
    int32_t rank, from, ok;
    uint32_t checksum;
    double usec;
};

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int main(void)
{
    lite_config_t cfg = lite_config_default();
    lite_ctx_t *ctx;
    int rc = lite_init(&cfg, &ctx);
    if (rc) {
        fprintf(stderr, "ring_demo: lite_init: %s: %s\n", lite_strerror(rc), lite_init_error());
        return 1;
    }
    int me = lite_rank(ctx), n = lite_world_size(ctx);
    int next = (me + 1) % n, prev = (me + n - 1) % n;
    uint8_t *out = malloc(MSG_BYTES), *in = malloc(MSG_BYTES);
    if (!out || !in)
        return 1;
    for (size_t i = 0; i < MSG_BYTES; i++)
        out[i] = pattern(me, i);

    /* Tags only need to increase per peer; 1 = the ring message, 2 = the report to rank 0. */
    double t0 = now_us();
    lite_request_t *s, *r;
    lite_status_t st;
    rc = lite_irecv(ctx, prev, 1, in, MSG_BYTES, &r);
    if (!rc)
        rc = lite_isend(ctx, next, 1, out, MSG_BYTES, &s);
    if (!rc)
        rc = lite_wait(ctx, r, 10000, &st);
    if (!rc)
        rc = lite_wait(ctx, s, 10000, NULL);
    if (rc) {
        fprintf(stderr, "rank %d: ring step failed: %s (%s)\n", me, lite_strerror(rc),
                lite_last_error(ctx));
        lite_finalize(ctx);
        return 1;
    }
    struct report rep = {.rank = me,
                         .from = prev,
                         .ok = 1,
                         .checksum = checksum(in, MSG_BYTES),
                         .usec = now_us() - t0};
    for (size_t i = 0; i < MSG_BYTES && rep.ok; i++)
        rep.ok = in[i] == pattern(prev, i);
    rep.ok = rep.ok && st.bytes == MSG_BYTES;

    int failures = 0;
    if (me == 0) {
        printf("liblitetx %s ring demo: %d ranks, transport %s, %u-byte messages\n", lite_version(),
               n, lite_transport_name(ctx), MSG_BYTES);
        printf("%-6s %-6s %-10s %-12s %s\n", "rank", "from", "checksum", "time (us)", "data");
        for (int i = 0; i < n; i++) {
            struct report x = rep;
            if (i != 0 && (rc = lite_recv(ctx, i, 2, &x, sizeof(x), NULL, 10000)) != 0) {
                printf("%-6d no report: %s\n", i, lite_strerror(rc));
                failures++;
                continue;
            }
            printf("%-6d %-6d %08x   %-12.0f %s\n", x.rank, x.from, x.checksum, x.usec,
                   x.ok ? "ok" : "CORRUPT");
            failures += !x.ok;
        }
        printf("%s\n", failures ? "RING FAILED" : "all ranks received intact data");
    } else {
        rc = lite_send(ctx, 0, 2, &rep, sizeof(rep), 10000);
        failures = rc != 0;
    }
    free(out);
    free(in);
    lite_finalize(ctx);
    return failures ? 1 : 0;
}
