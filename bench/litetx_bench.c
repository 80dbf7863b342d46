/*
 * litetx_bench - perftest-style benchmarks of liblitetx, one program for every mode:
 *
 *   litetx-run -n 2 litetx_bench MODE [options]
 *
 * Modes live in the table `modes[]` ({name, function, help, default sizes, ranks needed}). A mode
 * function runs every size of b->sizes and reports through report_series(), which prints nothing
 * but returns the median and writes the per-rep and median CSV rows; the mode prints its own table
 * line on rank 0. Helpers every mode can use:
 *   - tag_tx()/tag_rx(): per-peer, per-direction 64-bit counters, so tags strictly increase as
 *     the library demands (both sides call them in the same order),
 *   - plan_sync(): rank 0 decides (iteration counts from a timed warm-up) and tells the others,
 *     so every rank runs the same number of operations,
 *   - pattern_fill()/pattern_check(): the first and the last transfer of each size carry a
 *     pattern that depends on tag and size, so corruption and stale data are caught.
 * Every wait is bounded by --timeout and every loop by a count, so a broken library fails the
 * run instead of hanging it.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <litetx/litetx.h>

#include "bench_cuda.h"

#define MAX_SIZES  64
#define MAX_REPS   1000
#define PLAN_WORDS 4
#define PLAN_MAGIC 0x6c74786265ull /* "ltxbe": a plan message that is anything else is a bug */

struct opts {
    const char *mode;
    size_t sizes[MAX_SIZES];
    int nsizes;      /* 0 = the mode's default range */
    long iters;      /* timed iterations per rep; 0 = from the time budget */
    long warmup;     /* warm-up iterations per size; 0 = by size */
    long max_iters;  /* cap on time-derived iterations per rep */
    double secs;     /* time budget per size, all reps together */
    int reps;        /* repetitions of each size */
    int window;      /* bw: sends in flight */
    int timeout_ms;  /* bound of every single wait */
    const char *csv; /* CSV output file, or NULL */
    bool cuda;       /* --mem cuda: messages from and into device memory */
};

struct bench {
    lite_ctx_t *lc;
    int rank, world;
    const char *transport;
    struct opts o;
    uint64_t *tx_tag, *rx_tag; /* last tag used per peer, per direction */
    FILE *csv;
    uint8_t *sbuf, *rbuf; /* host: patterns are made and checked here */
    uint8_t *sx, *rx;     /* what messages are sent from / received into: sbuf/rbuf, or device
                           * buffers with --mem cuda */
    size_t buf_len;
};

struct mode {
    const char *name;
    int (*fn)(struct bench *b);
    const char *help;
    size_t def_min, def_max;
    int min_ranks;
};

/* ---- small helpers ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(struct bench *b, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "litetx_bench rank %d: ", b ? b->rank : -1);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    exit(1);
}

/* Any negative return is fatal: a benchmark that carries on after an error measures nothing. */
#define CHECK(b, call)                                                                             \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ < 0)                                                                               \
            die((b), "%s:%d: %s: %s (%s)", __FILE__, __LINE__, #call, lite_strerror(rc_),          \
                lite_last_error((b)->lc));                                                         \
    } while (0)

static uint64_t tag_tx(struct bench *b, int peer)
{
    return ++b->tx_tag[peer];
}

static uint64_t tag_rx(struct bench *b, int peer)
{
    return ++b->rx_tag[peer];
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile (0..1) of v[0..n-1] by the nearest-rank method; sorts v. */
static double quantile(double *v, size_t n, double q)
{
    if (n == 0)
        return NAN;
    qsort(v, n, sizeof(*v), cmp_double);
    size_t k = (size_t)ceil(q * (double)n);
    k = k < 1 ? 1 : (k > n ? n : k);
    return v[k - 1];
}

/* Median without disturbing the caller's order (reps are reported in run order). */
static double median_of(const double *v, int n, double *lo, double *hi)
{
    double tmp[MAX_REPS];
    memcpy(tmp, v, (size_t)n * sizeof(*v));
    qsort(tmp, (size_t)n, sizeof(*tmp), cmp_double);
    if (lo)
        *lo = tmp[0];
    if (hi)
        *hi = tmp[n - 1];
    return n % 2 ? tmp[n / 2] : 0.5 * (tmp[n / 2 - 1] + tmp[n / 2]);
}

static long clampl(long v, long lo, long hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

/* ---- data pattern ---- */

static uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static uint64_t pattern_seed(uint64_t tag, size_t size)
{
    return mix64(tag * 0x100000001B3ull ^ (uint64_t)size);
}

/* Word k holds a value that depends on the seed and on k, so shifted, stale or zeroed data fails;
 * cheap enough (one multiply per word) to fill 64 MiB in a few milliseconds. */
static uint64_t pattern_word(uint64_t seed, size_t k)
{
    return seed ^ ((uint64_t)(k + 1) * 0x9E3779B97F4A7C15ull);
}

static void pattern_fill(uint8_t *buf, size_t len, uint64_t seed)
{
    size_t n = len / 8;
    for (size_t k = 0; k < n; k++) {
        uint64_t w = pattern_word(seed, k);
        memcpy(buf + 8 * k, &w, 8);
    }
    uint64_t w = pattern_word(seed, n);
    memcpy(buf + 8 * n, &w, len - 8 * n);
}

/* Offset of the first wrong byte, or -1. */
static long pattern_check(const uint8_t *buf, size_t len, uint64_t seed)
{
    size_t n = len / 8;
    for (size_t k = 0; k < n; k++) {
        uint64_t w = pattern_word(seed, k);
        if (memcmp(buf + 8 * k, &w, 8) != 0)
            for (size_t i = 8 * k;; i++)
                if (buf[i] != ((const uint8_t *)&w)[i - 8 * k])
                    return (long)i;
    }
    uint64_t w = pattern_word(seed, n);
    for (size_t i = 8 * n; i < len; i++)
        if (buf[i] != ((const uint8_t *)&w)[i - 8 * n])
            return (long)i;
    return -1;
}

static void verify_or_die(struct bench *b, const uint8_t *buf, size_t len, uint64_t tag, int from,
                          const char *what)
{
    long bad = pattern_check(buf, len, pattern_seed(tag, len));
    if (bad >= 0)
        die(b,
            "DATA CORRUPTION: %s, %zu-byte message from rank %d (tag %llu): byte %ld of %zu "
            "differs from the pattern",
            what, len, from, (unsigned long long)tag, bad, len);
}

/* The pattern of `seed` in the send buffer (copied to the device with --mem cuda). */
static void tx_fill(struct bench *b, size_t size, uint64_t seed)
{
    pattern_fill(b->sbuf, size, seed);
    if (b->sx != b->sbuf && bcuda_copy(b->sx, b->sbuf, size))
        die(b, "copy to the device failed");
}

static void rx_clear(struct bench *b, size_t size)
{
    memset(b->rbuf, 0, size);
    if (b->rx != b->rbuf && bcuda_copy(b->rx, b->rbuf, size))
        die(b, "copy to the device failed");
}

static void rx_verify(struct bench *b, size_t size, uint64_t tag, int from, const char *what)
{
    if (b->rx != b->rbuf && bcuda_copy(b->rbuf, b->rx, size))
        die(b, "copy from the device failed");
    verify_or_die(b, b->rbuf, size, tag, from, what);
}

/* ---- messaging helpers (all bounded by --timeout) ---- */

static void send_tag(struct bench *b, int peer, uint64_t tag, const void *buf, size_t len)
{
    CHECK(b, lite_send(b->lc, peer, tag, buf, len, b->o.timeout_ms));
}

static void recv_tag(struct bench *b, int peer, uint64_t tag, void *buf, size_t len)
{
    size_t got = 0;
    CHECK(b, lite_recv(b->lc, peer, tag, buf, len, &got, b->o.timeout_ms));
    if (got != len)
        die(b, "received %zu bytes from rank %d, expected %zu", got, peer, len);
}

static lite_request_t *irecv_tag(struct bench *b, int peer, uint64_t tag, void *buf, size_t len)
{
    lite_request_t *r = NULL;
    CHECK(b, lite_irecv(b->lc, peer, tag, buf, len, &r));
    return r;
}

static lite_request_t *isend_tag(struct bench *b, int peer, uint64_t tag, const void *buf,
                                 size_t len)
{
    lite_request_t *r = NULL;
    CHECK(b, lite_isend(b->lc, peer, tag, buf, len, &r));
    return r;
}

static void wait_req(struct bench *b, lite_request_t *r, size_t expect)
{
    lite_status_t st;
    CHECK(b, lite_wait(b->lc, r, b->o.timeout_ms, &st));
    if (st.bytes != expect)
        die(b, "request with rank %d (tag %llu) moved %zu bytes, expected %zu", st.peer,
            (unsigned long long)st.tag, st.bytes, expect);
}

/*
 * Rank 0 sends its plan (PLAN_WORDS values) to ranks 1..n-1, which overwrite theirs with it.
 * Modes use it to agree on sizes and iteration counts that rank 0 derived from its timings.
 */
static void plan_sync(struct bench *b, uint64_t plan[PLAN_WORDS], int n)
{
    uint64_t msg[PLAN_WORDS + 1];
    if (b->rank == 0) {
        msg[0] = PLAN_MAGIC;
        memcpy(msg + 1, plan, sizeof(msg) - 8);
        for (int p = 1; p < n; p++)
            send_tag(b, p, tag_tx(b, p), msg, sizeof(msg));
    } else if (b->rank < n) {
        recv_tag(b, 0, tag_rx(b, 0), msg, sizeof(msg));
        if (msg[0] != PLAN_MAGIC)
            die(b, "plan message from rank 0 is garbled (tag streams out of step?)");
        memcpy(plan, msg + 1, sizeof(msg) - 8);
    }
}

/* Iterations per rep for a budget of o.secs per size, from a measured time per iteration. */
static long iters_for(struct bench *b, double per_iter_s, long min_iters)
{
    if (b->o.iters > 0)
        return b->o.iters;
    double budget = b->o.secs / b->o.reps;
    double n = per_iter_s > 0 ? budget / per_iter_s : (double)b->o.max_iters;
    return clampl(n > (double)b->o.max_iters ? b->o.max_iters : (long)n, min_iters,
                  b->o.max_iters > min_iters ? b->o.max_iters : min_iters);
}

/* ---- reporting ---- */

static void csv_row(struct bench *b, size_t size, const char *metric, double value,
                    const char *unit, const char *rep)
{
    if (b->csv)
        fprintf(b->csv, "%s,%s,%d,%zu,%s,%.6g,%s,%s\n", b->o.mode, b->transport, b->world, size,
                metric, value, unit, rep);
}

/* CSV rows for every rep and the median row; returns the median (and min/max over reps). */
static double report_series(struct bench *b, size_t size, const char *metric, const char *unit,
                            const double *v, int n, double *lo, double *hi)
{
    char rep[16];
    for (int i = 0; i < n; i++) {
        snprintf(rep, sizeof(rep), "%d", i + 1);
        csv_row(b, size, metric, v[i], unit, rep);
    }
    double med = median_of(v, n, lo, hi);
    csv_row(b, size, metric, med, unit, "median");
    return med;
}

static const char *size_str(size_t s, char *buf, size_t len)
{
    if (s >= (1u << 20) && s % (1u << 20) == 0)
        snprintf(buf, len, "%zuM", s >> 20);
    else if (s >= 1024 && s % 1024 == 0)
        snprintf(buf, len, "%zuK", s >> 10);
    else
        snprintf(buf, len, "%zu", s);
    return buf;
}

/* ---- mode: lat (ping-pong between ranks 0 and 1) ---- */

/*
 * n round trips of `size` bytes. Each side has its next receive posted before the message that
 * it answers can arrive, so replies land in place (no unexpected-message copy). Rank 0 stores
 * each round trip's time in rtt[] (seconds) when rtt is not NULL.
 */
static void lat_loop(struct bench *b, size_t size, long n, double *rtt)
{
    int peer = 1 - b->rank;
    if (b->rank == 0) {
        for (long i = 0; i < n; i++) {
            /* No clock read in the pass timed as a whole: one costs 26-45 ns in a VM. */
            double t0 = rtt ? now_s() : 0;
            lite_request_t *r = irecv_tag(b, peer, tag_rx(b, peer), b->rx, size);
            lite_request_t *s = isend_tag(b, peer, tag_tx(b, peer), b->sx, size);
            wait_req(b, s, size);
            wait_req(b, r, size);
            if (rtt)
                rtt[i] = now_s() - t0;
        }
    } else {
        lite_request_t *r = n > 0 ? irecv_tag(b, peer, tag_rx(b, peer), b->rx, size) : NULL;
        for (long i = 0; i < n; i++) {
            wait_req(b, r, size);
            r = i + 1 < n ? irecv_tag(b, peer, tag_rx(b, peer), b->rx, size) : NULL;
            send_tag(b, peer, tag_tx(b, peer), b->sx, size);
        }
    }
}

/* One untimed round trip whose both messages carry a pattern the receiver checks. */
static void lat_verified(struct bench *b, size_t size, const char *what)
{
    int peer = 1 - b->rank;
    if (b->rank == 0) {
        uint64_t tt = tag_tx(b, peer), rt = tag_rx(b, peer);
        tx_fill(b, size, pattern_seed(tt, size));
        rx_clear(b, size);
        lite_request_t *r = irecv_tag(b, peer, rt, b->rx, size);
        send_tag(b, peer, tt, b->sx, size);
        wait_req(b, r, size);
        rx_verify(b, size, rt, peer, what);
    } else {
        uint64_t rt = tag_rx(b, peer), tt = tag_tx(b, peer);
        rx_clear(b, size);
        recv_tag(b, peer, rt, b->rx, size);
        rx_verify(b, size, rt, peer, what);
        tx_fill(b, size, pattern_seed(tt, size));
        send_tag(b, peer, tt, b->sx, size);
    }
}

static int mode_lat(struct bench *b)
{
    if (b->rank > 1)
        return 0; /* ranks beyond the pair idle until the final barrier */
    double *rtt = b->rank == 0 ? malloc((size_t)b->o.max_iters * sizeof(double)) : NULL;
    if (b->rank == 0 && !rtt)
        die(b, "out of memory for %ld samples", b->o.max_iters);
    if (b->rank == 0) {
        printf("%10s %9s %12s %12s %12s %12s %12s %21s\n", "size", "iters", "one-way_us",
               "ow_run_us", "rtt_p50_us", "rtt_p99_us", "rtt_mean_us", "rtt_p50 [min-max]");
        fflush(stdout);
    }
    for (int si = 0; si < b->o.nsizes; si++) {
        size_t size = b->o.sizes[si];
        long warm = b->o.warmup > 0 ? b->o.warmup : clampl((long)((16u << 20) / size), 4, 1000);
        uint64_t plan[PLAN_WORDS] = {size, (uint64_t)warm, 0, 0};
        plan_sync(b, plan, 2);
        if (plan[0] != size)
            die(b, "size out of step with rank 0 (%llu vs %zu)", (unsigned long long)plan[0], size);
        warm = (long)plan[1];

        lat_verified(b, size, "lat, first exchange");
        double t0 = now_s();
        lat_loop(b, size, warm, NULL);
        double per = (now_s() - t0) / (double)(warm > 0 ? warm : 1);

        plan[0] = b->rank == 0 ? (uint64_t)iters_for(b, per, 5) : 0;
        plan_sync(b, plan, 2);
        long iters = (long)plan[0];

        double p50[MAX_REPS], p99[MAX_REPS], mean[MAX_REPS], ow[MAX_REPS], cnt[MAX_REPS];
        double run[MAX_REPS];
        for (int rep = 0; rep < b->o.reps; rep++) {
            /* Two passes: one timed as a whole, as fi_rdm_pingpong and osu_latency time theirs
             * (no clock read inside; ~45 ns each in a VM), one sampled per round trip. */
            double r0 = now_s();
            lat_loop(b, size, iters, NULL);
            run[rep] = (now_s() - r0) / (double)iters / 2 * 1e6;
            lat_loop(b, size, iters, rtt);
            if (b->rank != 0)
                continue;
            double sum = 0;
            for (long i = 0; i < iters; i++)
                sum += rtt[i];
            mean[rep] = sum / (double)iters * 1e6;
            p50[rep] = quantile(rtt, (size_t)iters, 0.50) * 1e6;
            p99[rep] = quantile(rtt, (size_t)iters, 0.99) * 1e6;
            ow[rep] = p50[rep] / 2;
            cnt[rep] = (double)iters;
        }
        lat_verified(b, size, "lat, last exchange");
        if (b->rank != 0)
            continue;

        double lo, hi, m_ow, m_run, m_p50, m_p99, m_mean;
        report_series(b, size, "iters", "count", cnt, b->o.reps, NULL, NULL);
        m_run = report_series(b, size, "oneway_run", "us", run, b->o.reps, NULL, NULL);
        m_ow = report_series(b, size, "oneway_p50", "us", ow, b->o.reps, NULL, NULL);
        m_p99 = report_series(b, size, "rtt_p99", "us", p99, b->o.reps, NULL, NULL);
        m_mean = report_series(b, size, "rtt_mean", "us", mean, b->o.reps, NULL, NULL);
        m_p50 = report_series(b, size, "rtt_p50", "us", p50, b->o.reps, &lo, &hi);
        char sz[24], range[40];
        snprintf(range, sizeof(range), "[%.2f-%.2f]", lo, hi);
        printf("%10s %9ld %12.2f %12.2f %12.2f %12.2f %12.2f %21s\n",
               size_str(size, sz, sizeof(sz)), iters, m_ow, m_run, m_p50, m_p99, m_mean, range);
        fflush(stdout);
    }
    free(rtt);
    return 0;
}

/* ---- mode: bw (streaming from rank 0 to rank 1) ---- */

/*
 * A batch of n messages of `size` bytes, rank 0 -> rank 1. Rank 1 keeps up to W receives posted
 * (sliding window), then says "ready"; rank 0 starts the clock on "ready", keeps up to W sends in
 * flight, and stops it when rank 1's ack arrives after the last message landed, so the time
 * covers delivery, not just handing bytes to the socket. Returns the time on rank 0.
 */
static double bw_batch(struct bench *b, size_t size, long n, lite_request_t **win)
{
    long w = b->o.window;
    uint64_t token = 0, token2 = 0;
    if (b->rank == 0) {
        lite_request_t *ready = irecv_tag(b, 1, tag_rx(b, 1), &token, sizeof(token));
        lite_request_t *ack = irecv_tag(b, 1, tag_rx(b, 1), &token2, sizeof(token2));
        wait_req(b, ready, sizeof(token));
        double t0 = now_s();
        long posted = 0;
        for (long done = 0; done < n; done++) {
            while (posted < n && posted - done < w) {
                win[posted % w] = isend_tag(b, 1, tag_tx(b, 1), b->sx, size);
                posted++;
            }
            wait_req(b, win[done % w], size);
        }
        wait_req(b, ack, sizeof(token));
        return now_s() - t0;
    }
    long posted = 0;
    for (; posted < n && posted < w; posted++)
        win[posted] = irecv_tag(b, 0, tag_rx(b, 0), b->rx, size);
    send_tag(b, 0, tag_tx(b, 0), &token, sizeof(token));
    for (long done = 0; done < n; done++) {
        wait_req(b, win[done % w], size);
        if (posted < n) {
            win[posted % w] = irecv_tag(b, 0, tag_rx(b, 0), b->rx, size);
            posted++;
        }
    }
    send_tag(b, 0, tag_tx(b, 0), &token, sizeof(token));
    return 0;
}

/* One untimed message 0 -> 1 carrying a pattern that rank 1 checks. */
static void bw_verified(struct bench *b, size_t size, const char *what)
{
    if (b->rank == 0) {
        uint64_t t = tag_tx(b, 1);
        tx_fill(b, size, pattern_seed(t, size));
        send_tag(b, 1, t, b->sx, size);
    } else {
        uint64_t t = tag_rx(b, 0);
        rx_clear(b, size);
        recv_tag(b, 0, t, b->rx, size);
        rx_verify(b, size, t, 0, what);
    }
}

static int mode_bw(struct bench *b)
{
    if (b->rank > 1)
        return 0;
    lite_request_t **win = calloc((size_t)b->o.window, sizeof(*win));
    if (!win)
        die(b, "out of memory");
    if (b->rank == 0) {
        printf("%10s %9s %12s %21s %12s %10s\n", "size", "msgs", "MB/s", "MB/s [min-max]", "Mmsg/s",
               "s/rep");
        fflush(stdout);
    }
    for (int si = 0; si < b->o.nsizes; si++) {
        size_t size = b->o.sizes[si];
        long warm = b->o.warmup > 0 ? b->o.warmup : clampl((long)((128ull << 20) / size), 2, 4096);
        uint64_t plan[PLAN_WORDS] = {size, (uint64_t)warm, 0, 0};
        plan_sync(b, plan, 2);
        if (plan[0] != size)
            die(b, "size out of step with rank 0");
        warm = (long)plan[1];

        bw_verified(b, size, "bw, first message");
        double per = bw_batch(b, size, warm, win) / (double)warm;

        plan[0] = b->rank == 0 ? (uint64_t)iters_for(b, per, 2) : 0;
        plan_sync(b, plan, 2);
        long n = (long)plan[0];

        double mbs[MAX_REPS], rate[MAX_REPS], secs[MAX_REPS], cnt[MAX_REPS];
        for (int rep = 0; rep < b->o.reps; rep++) {
            double t = bw_batch(b, size, n, win);
            mbs[rep] = t > 0 ? (double)n * (double)size / t / 1e6 : 0;
            rate[rep] = t > 0 ? (double)n / t : 0;
            secs[rep] = t;
            cnt[rep] = (double)n;
        }
        bw_verified(b, size, "bw, last message");
        if (b->rank != 0)
            continue;

        double lo, hi;
        report_series(b, size, "msgs", "count", cnt, b->o.reps, NULL, NULL);
        double m_t = report_series(b, size, "seconds", "s", secs, b->o.reps, NULL, NULL);
        double m_rate = report_series(b, size, "msg_rate", "msg/s", rate, b->o.reps, NULL, NULL);
        double m_bw = report_series(b, size, "bw", "MB/s", mbs, b->o.reps, &lo, &hi);
        char sz[24], range[48];
        snprintf(range, sizeof(range), "[%.0f-%.0f]", lo, hi);
        printf("%10s %9ld %12.1f %21s %12.4f %10.3f\n", size_str(size, sz, sizeof(sz)), n, m_bw,
               range, m_rate / 1e6, m_t);
        fflush(stdout);
    }
    free(win);
    return 0;
}

/* ---- mode table ---- */

static const struct mode modes[] = {
    {"lat", mode_lat,
     "ping-pong 0<->1 in us: one-way (RTT p50/2), one-way over a whole run (time/2n, as "
     "fi_rdm_pingpong), RTT p50/p99/mean",
     8, 4u << 20, 2},
    {"bw", mode_bw, "streaming 0->1, W sends in flight, ack per batch: MB/s, msg/s", 4096,
     64u << 20, 2},
};
#define NMODES (sizeof(modes) / sizeof(modes[0]))

/* ---- options ---- */

static void usage(FILE *f)
{
    fprintf(f, "usage: litetx-run -n 2 litetx_bench MODE [options]\n"
               "modes:\n");
    for (size_t i = 0; i < NMODES; i++)
        fprintf(f, "  %-8s %s\n", modes[i].name, modes[i].help);
    fprintf(f,
            "options:\n"
            "  -s MIN:MAX | -s A,B,C  message sizes (suffix K/M/G = KiB/MiB/GiB); MIN:MAX takes\n"
            "                         the powers of two between (default: per mode)\n"
            "  -i ITERS               timed iterations per rep (default: from -T)\n"
            "  -T SECONDS             time budget per size, all reps together (default 0.5)\n"
            "  -r REPS                repetitions per size; the median is reported (default 3)\n"
            "  -w WINDOW              bw: sends in flight (default 64)\n"
            "  --warmup N             warm-up iterations per size (default: by size)\n"
            "  --max-iters N          cap on iterations per rep (default 200000)\n"
            "  --timeout MS           bound of every single wait (default 30000)\n"
            "  --csv FILE             CSV: mode,transport,ranks,size,metric,value,unit,rep\n"
            "                         (rep = 1..REPS, then 'median')\n"
            "  --mem host|cuda        message buffers in host memory (default) or on CUDA device\n"
            "                         LITETX_BENCH_DEVICE (default 0), driver loaded at run time\n"
            "transport: LITETX_TRANSPORT or litetx-run --transport NAME\n");
}

static bool parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return false;
    unsigned shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10;
    else if (*end == 'M' || *end == 'm')
        shift = 20;
    else if (*end == 'G' || *end == 'g')
        shift = 30;
    if (shift) {
        end++;
        if (!strcmp(end, "iB") || !strcmp(end, "B"))
            end += strlen(end);
    } else if (!strcmp(end, "B")) {
        end++;
    }
    if (*end || v == 0 || v > (1ull << 40) >> shift)
        return false;
    *out = (size_t)(v << shift);
    return true;
}

static bool parse_sizes(const char *arg, struct opts *o)
{
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", arg);
    char *colon = strchr(buf, ':');
    o->nsizes = 0;
    if (colon) {
        size_t lo, hi;
        *colon = 0;
        if (!parse_size(buf, &lo) || !parse_size(colon + 1, &hi) || lo > hi)
            return false;
        for (size_t s = lo; s <= hi && o->nsizes < MAX_SIZES; s *= 2)
            o->sizes[o->nsizes++] = s;
        return true;
    }
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (o->nsizes == MAX_SIZES || !parse_size(t, &o->sizes[o->nsizes]))
            return false;
        o->nsizes++;
    }
    return o->nsizes > 0;
}

static bool parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* Parses argv into o; returns the mode, or NULL after printing why (on rank 0 only). */
static const struct mode *parse_args(int argc, char **argv, struct opts *o, bool loud)
{
    *o = (struct opts){
        .secs = 0.5, .reps = 3, .window = 64, .timeout_ms = 30000, .max_iters = 200000};
    const char *bad = NULL;
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        if (loud)
            usage(argc < 2 ? stderr : stdout);
        return NULL;
    }
    o->mode = argv[1];
    const struct mode *m = NULL;
    for (size_t i = 0; i < NMODES; i++)
        if (!strcmp(modes[i].name, o->mode))
            m = &modes[i];
    if (!m)
        bad = "unknown mode";
    for (int i = 2; i < argc && !bad; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long l;
        if (!v) {
            bad = a;
        } else if (!strcmp(a, "-s")) {
            bad = parse_sizes(v, o) ? NULL : a;
        } else if (!strcmp(a, "-i")) {
            bad = parse_long(v, 1, 100000000, &o->iters) ? NULL : a;
        } else if (!strcmp(a, "-T")) {
            char *end;
            o->secs = strtod(v, &end);
            bad = (*end || !(o->secs > 0 && o->secs <= 3600)) ? a : NULL;
        } else if (!strcmp(a, "-r")) {
            bad = parse_long(v, 1, MAX_REPS, &l) ? NULL : a;
            o->reps = (int)l;
        } else if (!strcmp(a, "-w")) {
            bad = parse_long(v, 1, 65536, &l) ? NULL : a;
            o->window = (int)l;
        } else if (!strcmp(a, "--warmup")) {
            bad = parse_long(v, 1, 100000000, &o->warmup) ? NULL : a;
        } else if (!strcmp(a, "--max-iters")) {
            bad = parse_long(v, 1, 100000000, &o->max_iters) ? NULL : a;
        } else if (!strcmp(a, "--timeout")) {
            bad = parse_long(v, 1, 3600000, &l) ? NULL : a;
            o->timeout_ms = (int)l;
        } else if (!strcmp(a, "--csv")) {
            o->csv = v;
        } else if (!strcmp(a, "--mem")) {
            o->cuda = !strcmp(v, "cuda");
            bad = o->cuda || !strcmp(v, "host") ? NULL : a;
        } else {
            bad = a;
        }
        i++;
    }
    if (bad) {
        if (loud) {
            fprintf(stderr, "litetx_bench: bad argument: %s\n", bad);
            usage(stderr);
        }
        return NULL;
    }
    if (o->iters > o->max_iters)
        o->max_iters = o->iters;
    if (o->nsizes == 0) {
        char range[64];
        snprintf(range, sizeof(range), "%zu:%zu", m->def_min, m->def_max);
        parse_sizes(range, o);
    }
    return m;
}

int main(int argc, char **argv)
{
    struct bench b = {.rank = -1};
    /* Before init only the environment says who is rank 0; only that rank complains. */
    const char *er = getenv("LITETX_RANK");
    bool loud = !er || !strcmp(er, "0");
    const struct mode *m = parse_args(argc, argv, &b.o, loud);
    if (!m)
        return argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) ? 0 : 2;

    /* The device before lite_init: a backend that binds one (nccl) takes the current one. */
    char why[200];
    if (b.o.cuda && bcuda_init(why, sizeof(why))) {
        fprintf(stderr, "litetx_bench: --mem cuda: %s\n", why);
        return 1;
    }
    lite_config_t cfg = lite_config_default();
    int rc = lite_init(&cfg, &b.lc);
    if (rc) {
        fprintf(stderr, "litetx_bench: lite_init: %s: %s\n", lite_strerror(rc), lite_init_error());
        return 1;
    }
    b.rank = lite_rank(b.lc);
    b.world = lite_world_size(b.lc);
    b.transport = lite_transport_name(b.lc);
    if (b.world < m->min_ranks) {
        if (b.rank == 0)
            fprintf(stderr, "litetx_bench: mode %s needs %d ranks, have %d\n", m->name,
                    m->min_ranks, b.world);
        lite_finalize(b.lc);
        return 2;
    }
    b.tx_tag = calloc((size_t)b.world, sizeof(uint64_t));
    b.rx_tag = calloc((size_t)b.world, sizeof(uint64_t));
    for (int i = 0; i < b.o.nsizes; i++)
        b.buf_len = b.o.sizes[i] > b.buf_len ? b.o.sizes[i] : b.buf_len;
    b.sbuf = aligned_alloc(4096, (b.buf_len + 4095) / 4096 * 4096);
    b.rbuf = aligned_alloc(4096, (b.buf_len + 4095) / 4096 * 4096);
    if (!b.tx_tag || !b.rx_tag || !b.sbuf || !b.rbuf)
        die(&b, "out of memory for %zu-byte buffers", b.buf_len);
    /* Touch the buffers so page faults stay out of the first timings. */
    memset(b.sbuf, 0x5a, b.buf_len);
    memset(b.rbuf, 0, b.buf_len);
    b.sx = b.sbuf;
    b.rx = b.rbuf;
    if (b.o.cuda) {
        if (!(b.sx = bcuda_alloc(b.buf_len)) || !(b.rx = bcuda_alloc(b.buf_len)))
            die(&b, "--mem cuda: cannot allocate 2 x %zu bytes of device memory", b.buf_len);
        if (bcuda_copy(b.sx, b.sbuf, b.buf_len) || bcuda_copy(b.rx, b.rbuf, b.buf_len))
            die(&b, "--mem cuda: copy to the device failed");
    }

    if (b.rank == 0) {
        if (b.o.csv) {
            b.csv = fopen(b.o.csv, "w");
            if (!b.csv)
                die(&b, "cannot write %s: %s", b.o.csv, strerror(errno));
            fprintf(b.csv, "mode,transport,ranks,size,metric,value,unit,rep\n");
        }
        const char *spin = getenv("LITETX_SPIN_US");
        printf("# litetx_bench %s: liblitetx %s, transport %s, %d ranks, %s memory, %d rep(s), ",
               m->name, lite_version(), b.transport, b.world, b.o.cuda ? "cuda" : "host", b.o.reps);
        if (b.o.iters)
            printf("%ld iters/rep", b.o.iters);
        else
            printf("%.3g s/size", b.o.secs);
        if (!strcmp(m->name, "bw"))
            printf(", window %d", b.o.window);
        printf(", LITETX_SPIN_US=%s\n", spin ? spin : "(default)");
        fflush(stdout);
    }
    CHECK(&b, lite_barrier(b.lc, b.o.timeout_ms));
    rc = m->fn(&b);
    CHECK(&b, lite_barrier(b.lc, b.o.timeout_ms));
    if (b.csv && fclose(b.csv) != 0)
        die(&b, "writing %s failed", b.o.csv);
    lite_finalize(b.lc);
    if (b.o.cuda) {
        bcuda_free(b.sx);
        bcuda_free(b.rx);
    }
    free(b.sbuf);
    free(b.rbuf);
    free(b.tx_tag);
    free(b.rx_tag);
    return rc ? 1 : 0;
}
