/*
 * coll_test.c - the deterministic collectives against references computed here in the
 * canonical order (a left fold in rank order with the scalar reduction kernel), byte for byte.
 *
 * Run: litetx-run -n N coll_test MODE   (MODE: basic, big, stress, mismatch; any N >= 1)
 *
 *   basic     allreduce: every dtype x op x count {0, 1, n-1, 13, 1031, 40009} x algorithm
 *             {direct, rsag} (+ in place, + several chunk sizes); reduce_scatter every dtype x op;
 *             bcast from every root with both algorithms; allgather; alltoall; alltoallv with
 *             zero-length and skewed segments; several non-blocking collectives waited in
 *             rank-dependent orders; barrier meets ibarrier.
 *   big       allreduce of >= 16 MiB: every dtype x op on 2 ranks, every dtype's SUM on more
 *             (auto algorithm); bcast and alltoall of 1.2 MiB.
 *   stress    20 repetitions of the same allreduces with the algorithm and chunk size changing
 *             every repetition and random delays between the non-blocking calls: the output hash
 *             must equal the reference's on every repetition and rank.
 *   mismatch  count, dtype, op, root, collective, algorithm and alltoallv counts differing
 *             across ranks: every rank gets -EINVAL with a detail, nothing hangs, and the
 *             context keeps working; a rank that skips a collective makes the others time out.
 *
 * Every input is a deterministic function of (rank, case, element), so each rank computes every
 * rank's input and the reference locally. The reference uses the library's SCALAR kernel
 * (tests/unit/test_reduce.c checks that kernel against an independent implementation); what is
 * tested here is the order in which the collectives combine the ranks' data, and the data flow.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "credits.h"
#include "ctx.h" /* the backend table the context calls, to count FINs for one check below */
#include "mp_common.h"
#include "reduce.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#else
#define UNDER_ASAN 0
#endif

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static int g_n, g_me;
static lite_ctx_t *g_ctx;
static const char *const dt_names[] = {"f32", "f64", "f16", "bf16", "i8",
                                       "u8",  "i32", "u32", "i64",  "u64"};
static const char *const op_names[] = {"sum", "prod", "min", "max", "avg"};

static uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* A 64-bit hash of a buffer, a word at a time (FNV-1a style). */
static uint64_t fnv1a(const void *p, size_t len)
{
    const uint8_t *b = p;
    uint64_t h = 0xcbf29ce484222325ull ^ len;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; i < len; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Buffers reused across cases (grown, never shrunk): fresh 16 MiB allocations per case would
 * spend the test's time in page faults. */
static void *pool(int slot, size_t bytes)
{
    static void *buf[6];
    static size_t cap[6];
    if (bytes + 8 > cap[slot]) {
        free(buf[slot]);
        cap[slot] = bytes + 8;
        buf[slot] = malloc(cap[slot]);
        CHECK(buf[slot], "oom");
    }
    return buf[slot];
}

static int is_float(int dt)
{
    return dt == LITE_F32 || dt == LITE_F64 || dt == LITE_F16 || dt == LITE_BF16;
}

/*
 * Inputs. Floats have magnitudes spanning 2^-12..2^12 (so the order of a sum matters), or within
 * [0.5, 2) for PROD (so products neither all overflow nor all vanish), and rare specials (NaN,
 * +-Inf, +-0, a subnormal); they are built from bits, exactly, in each format. Integers are
 * random bytes (one draw per 8 bytes of the stream).
 */
static void gen_float_at(uint8_t *b, size_t first, size_t count, int dt, int op, uint64_t seed)
{
    static const uint64_t sp[4][6] = {
        {0x7FC00000u, 0x7F800000u, 0xFF800000u, 0x80000000u, 0, 0x00000001u},
        {0x7FF8000000000000ull, 0x7FF0000000000000ull, 0xFFF0000000000000ull, 0x8000000000000000ull,
         0, 1},
        {0x7E00, 0x7C00, 0xFC00, 0x8000, 0, 0x0001},
        {0x7FC0, 0x7F80, 0xFF80, 0x8000, 0, 0x0001}};
    /* exponent bias, mantissa bits, element size per float dtype */
    static const int bias[4] = {127, 1023, 15, 127}, mant[4] = {23, 52, 10, 7};
    size_t esz = lite_dtype_size(dt);
    uint16_t *h = (uint16_t *)(void *)b;
    uint32_t *f = (uint32_t *)(void *)b;
    uint64_t *d = (uint64_t *)(void *)b;
    for (size_t i = 0; i < count; i++) {
        uint64_t r = mix64(seed + first + i), bits;
        if (r % 1009 == 0) {
            bits = sp[dt][(r >> 12) % 6];
        } else {
            int e = op == LITE_PROD ? (int)((r >> 40) % 2) - 1 : (int)((r >> 40) % 25) - 12;
            int m = mant[dt];
            uint64_t frac = (r >> 11) & ((1ull << (m < 24 ? m : 24)) - 1);
            if (m > 24)
                frac <<= m - 24;
            bits = ((r >> 63) << (8 * esz - 1)) | ((uint64_t)(bias[dt] + e) << m) | frac;
        }
        if (esz == 2)
            h[i] = (uint16_t)bits;
        else if (esz == 4)
            f[i] = (uint32_t)bits;
        else
            d[i] = bits;
    }
}

/* Elements [first, first + count) of input(rank, id). */
static void gen_at(void *buf, size_t first, size_t count, int dt, int op, int rank, uint32_t id)
{
    uint8_t *b = buf;
    uint64_t seed = mix64(((uint64_t)id << 32) ^ (uint64_t)(rank + 1) * 0x51ED27ull);
    if (is_float(dt)) {
        gen_float_at(b, first, count, dt, op, seed);
        return;
    }
    size_t esz = lite_dtype_size(dt), lo = first * esz, len = count * esz, j = 0;
    for (size_t w = lo / 8; j < len; w++) {
        uint64_t r = mix64(seed + w);
        uint8_t bytes[8];
        memcpy(bytes, &r, 8);
        for (size_t k = (w == lo / 8 ? lo % 8 : 0); k < 8 && j < len; k++)
            b[j++] = bytes[k];
    }
}

static void gen(void *buf, size_t count, int dt, int op, int rank, uint32_t id)
{
    gen_at(buf, 0, count, dt, op, rank, id);
}

/* The canonical result: x0, then OP x1, ..., OP x(n-1), each step with the scalar kernel; AVG
 * divides once at the end. The inputs are input(rank, id). */
static void reference(void *out, size_t count, int dt, int op, uint32_t id, size_t offset)
{
    size_t esz = lite_dtype_size(dt);
    uint8_t *x = pool(5, count * esz);
    gen_at(out, offset, count, dt, op, 0, id);
    for (int r = 1; r < g_n; r++) {
        gen_at(x, offset, count, dt, op, r, id);
        lite_reduce_inplace_impl(LITE_REDUCE_IMPL_SCALAR, out, x, count, dt, op);
    }
    if (op == LITE_AVG)
        lite_reduce_scale_avg_impl(LITE_REDUCE_IMPL_SCALAR, out, count, dt, g_n);
}

/* Switch the context's collective options between calls (lite_coll_set): the algorithm by name,
 * the chunk in bytes and the check as 1/0, NULL for the library's default. */
static void set_coll(const char *algo, const char *chunk, const char *check)
{
    static const char *const names[] = {"auto", "direct", "rsag", "pipe"};
    lite_coll_opts_t o = lite_coll_opts_default();
    for (int i = 0; algo && i < (int)ARRAY_LEN(names); i++)
        if (!strcmp(algo, names[i]))
            o.algo = i;
    CHECK(!algo || !strcmp(algo, names[o.algo]), "unknown algorithm %s", algo);
    if (chunk) {
        char *end;
        o.chunk = strtoull(chunk, &end, 10);
        o.chunk <<= *end == 'k' ? 10 : *end == 'm' ? 20 : 0;
    }
    if (check)
        o.check = atoi(check);
    CHECK_RC(g_ctx, lite_coll_set(g_ctx, &o));
}

static void expect_same(const void *got, const void *want, size_t count, int dt, const char *what)
{
    size_t esz = lite_dtype_size(dt);
    if (!memcmp(got, want, count * esz))
        return;
    for (size_t i = 0; i < count; i++) {
        if (memcmp((const uint8_t *)got + i * esz, (const uint8_t *)want + i * esz, esz)) {
            uint64_t g = 0, w = 0;
            memcpy(&g, (const uint8_t *)got + i * esz, esz);
            memcpy(&w, (const uint8_t *)want + i * esz, esz);
            CHECK(0, "%s: element %zu of %zu differs: got %#llx, want %#llx", what, i, count,
                  (unsigned long long)g, (unsigned long long)w);
        }
    }
}

static uint32_t g_case = 1;

/* One allreduce checked against the reference. */
static void check_allreduce(size_t count, int dt, int op, const char *algo, const char *chunk,
                            bool inplace)
{
    size_t esz = lite_dtype_size(dt), bytes = count * esz;
    uint32_t id = g_case++;
    uint8_t *in = pool(0, bytes), *out = pool(1, bytes), *ref = pool(2, bytes);
    gen(in, count, dt, op, g_me, id);
    reference(ref, count, dt, op, id, 0);
    set_coll(algo, chunk, NULL);
    char what[160];
    snprintf(what, sizeof(what), "allreduce %s %s count %zu algo %s chunk %s%s", dt_names[dt],
             op_names[op], count, algo ? algo : "auto", chunk ? chunk : "auto",
             inplace ? " in place" : "");
    if (inplace) {
        memcpy(out, in, bytes);
        CHECK_RC(g_ctx, lite_allreduce(g_ctx, LITE_IN_PLACE, out, count, dt, op, 60000));
    } else {
        uint64_t before = fnv1a(in, bytes);
        memset(out, 0xA5, bytes);
        CHECK_RC(g_ctx, lite_allreduce(g_ctx, in, out, count, dt, op, 60000));
        CHECK(fnv1a(in, bytes) == before, "%s: the send buffer changed", what);
    }
    expect_same(out, ref, count, dt, what);
    set_coll(NULL, NULL, NULL);
}

static int nops_for(int dt)
{
    return is_float(dt) ? 5 : 4;
}

static void allreduce_grid(void)
{
    size_t counts[] = {0, 1, (size_t)(g_n - 1), 13, 1031, 40009};
    const char *algos[] = {"direct", "rsag"};
    int cases = 0;
    for (int dt = 0; dt < LITE_DTYPE_COUNT; dt++)
        for (int op = 0; op < nops_for(dt); op++)
            for (size_t c = 0; c < ARRAY_LEN(counts); c++)
                for (int a = 0; a < 2; a++, cases++)
                    check_allreduce(counts[c], dt, op, algos[a], NULL, false);
    /* in place, both algorithms, every dtype */
    for (int dt = 0; dt < LITE_DTYPE_COUNT; dt++)
        for (int a = 0; a < 2; a++, cases++)
            check_allreduce(1031, dt, dt % 2 ? LITE_MAX : LITE_SUM, algos[a], NULL, true);
    /* chunk sizes (including ones that are not a multiple of the element size) */
    const char *chunks[] = {"4096", "12346", "65536", "1m"};
    for (size_t k = 0; k < ARRAY_LEN(chunks); k++)
        for (int a = 0; a < 2; a++, cases += 2) {
            check_allreduce(100003, LITE_F32, LITE_SUM, algos[a], chunks[k], k % 2);
            check_allreduce(50021, LITE_BF16, LITE_AVG, algos[a], chunks[k], false);
        }
    if (g_me == 0)
        printf("allreduce: %d cases byte-identical to the canonical reference\n", cases);
}

/* With three or more ranks a different order gives different bits: show the test can tell. */
static void order_sensitivity(void)
{
    if (g_n < 3)
        return;
    size_t count = 1031;
    float *ref = malloc(count * 4), *rev = malloc(count * 4), *x = malloc(count * 4);
    CHECK(ref && rev && x, "oom");
    reference(ref, count, LITE_F32, LITE_SUM, 999999, 0);
    for (int r = g_n - 1; r >= 0; r--) {
        gen(x, count, LITE_F32, LITE_SUM, r, 999999);
        if (r == g_n - 1)
            memcpy(rev, x, count * 4);
        else
            lite_reduce_inplace_impl(LITE_REDUCE_IMPL_SCALAR, rev, x, count, LITE_F32, LITE_SUM);
    }
    size_t differ = 0;
    for (size_t i = 0; i < count; i++)
        differ += memcmp(&ref[i], &rev[i], 4) != 0;
    CHECK(differ > 0, "the inputs do not make the order visible");
    if (g_me == 0)
        printf("order sensitivity: reversed rank order changes %zu of %zu f32 sums\n", differ,
               count);
    free(ref);
    free(rev);
    free(x);
}

static void reduce_scatter_grid(void)
{
    size_t counts[] = {0, 1, 1031};
    int cases = 0;
    for (int dt = 0; dt < LITE_DTYPE_COUNT; dt++)
        for (int op = 0; op < nops_for(dt); op++)
            for (size_t c = 0; c < ARRAY_LEN(counts); c++) {
                size_t rc = counts[c], esz = lite_dtype_size(dt), total = rc * (size_t)g_n;
                uint32_t id = g_case++;
                uint8_t *in = malloc(total * esz + 1), *out = malloc(rc * esz + 1);
                uint8_t *ref = malloc(rc * esz + 1);
                CHECK(in && out && ref, "oom");
                gen(in, total, dt, op, g_me, id);
                reference(ref, rc, dt, op, id, (size_t)g_me * rc);
                bool inplace = c == 2 && op == LITE_SUM;
                if (inplace)
                    CHECK_RC(g_ctx,
                             lite_reduce_scatter(g_ctx, LITE_IN_PLACE, in, rc, dt, op, 60000));
                else
                    CHECK_RC(g_ctx, lite_reduce_scatter(g_ctx, in, out, rc, dt, op, 60000));
                char what[96];
                snprintf(what, sizeof(what), "reduce_scatter %s %s recvcount %zu%s", dt_names[dt],
                         op_names[op], rc, inplace ? " in place" : "");
                expect_same(inplace ? in + (size_t)g_me * rc * esz : out, ref, rc, dt, what);
                free(in);
                free(out);
                free(ref);
                cases++;
            }
    if (g_me == 0)
        printf("reduce_scatter: %d cases byte-identical\n", cases);
}

static void bcast_cases(size_t maxcount)
{
    size_t counts[] = {0, 1, 1031, 300007};
    const char *algos[] = {"direct", "pipe"};
    int cases = 0;
    for (size_t c = 0; c < ARRAY_LEN(counts) && counts[c] <= maxcount; c++)
        for (int root = 0; root < g_n; root++)
            for (int a = 0; a < 2; a++) {
                size_t count = counts[c], bytes = count * 4;
                uint8_t *buf = malloc(bytes + 1), *want = malloc(bytes + 1);
                CHECK(buf && want, "oom");
                uint32_t id = g_case++;
                gen(want, count, LITE_U32, LITE_SUM, root, id);
                if (g_me == root)
                    memcpy(buf, want, bytes);
                else
                    memset(buf, 0x5A, bytes);
                set_coll(algos[a], a ? "65536" : NULL, NULL);
                CHECK_RC(g_ctx, lite_bcast(g_ctx, buf, count, LITE_U32, root, 60000));
                set_coll(NULL, NULL, NULL);
                char what[80];
                snprintf(what, sizeof(what), "bcast count %zu root %d algo %s", count, root,
                         algos[a]);
                expect_same(buf, want, count, LITE_U32, what);
                free(buf);
                free(want);
                cases++;
            }
    if (g_me == 0)
        printf("bcast: %d cases (every root, both algorithms) correct\n", cases);
}

static void allgather_cases(void)
{
    size_t counts[] = {0, 1, 1031, 70001};
    for (size_t c = 0; c < ARRAY_LEN(counts); c++)
        for (int inplace = 0; inplace < 2; inplace++) {
            size_t count = counts[c], bytes = count * 2;
            uint32_t id = g_case++;
            uint8_t *in = malloc(bytes + 1), *out = malloc(bytes * (size_t)g_n + 1);
            uint8_t *want = malloc(bytes * (size_t)g_n + 1);
            CHECK(in && out && want, "oom");
            for (int r = 0; r < g_n; r++)
                gen(want + (size_t)r * bytes, count, LITE_F16, LITE_SUM, r, id);
            gen(in, count, LITE_F16, LITE_SUM, g_me, id);
            memset(out, 0x3C, bytes * (size_t)g_n);
            if (inplace) {
                memcpy(out + (size_t)g_me * bytes, in, bytes);
                CHECK_RC(g_ctx, lite_allgather(g_ctx, LITE_IN_PLACE, out, count, LITE_F16, 60000));
            } else {
                CHECK_RC(g_ctx, lite_allgather(g_ctx, in, out, count, LITE_F16, 60000));
            }
            expect_same(out, want, count * (size_t)g_n, LITE_F16, "allgather");
            free(in);
            free(out);
            free(want);
        }
    if (g_me == 0)
        printf("allgather: correct (in place and not)\n");
}

/* Rendezvous FINs this rank sent: the context's msg_send goes through this counter
 * (installed by count_fins), which passes every message on unchanged. */
static uint64_t g_fins;
static int (*g_msg_send)(struct lite_transport *, int, const struct lite_msg_hdr *, const void *,
                         void *);

static int counting_msg_send(struct lite_transport *tp, int peer, const struct lite_msg_hdr *hdr,
                             const void *payload, void *op)
{
    int rc = g_msg_send(tp, peer, hdr, payload, op);
    if (rc == 0 && hdr->channel == LITE_CHAN_CTRL && hdr->flags == LITE_CTRL_FIN)
        g_fins++;
    return rc;
}

static void count_fins(void)
{
    if (!g_msg_send) {
        g_msg_send = g_ctx->ops.msg_send;
        g_ctx->ops.msg_send = counting_msg_send;
    }
}

static void alltoall_cases(size_t maxcount)
{
    count_fins();
    size_t counts[] = {0, 1, 1031, 70001, 262144};
    for (size_t c = 0; c < ARRAY_LEN(counts) && counts[c] <= maxcount; c++) {
        size_t count = counts[c], bytes = count * 4, n = (size_t)g_n;
        uint32_t id = g_case++;
        uint8_t *in = malloc(bytes * n + 1), *out = malloc(bytes * n + 1);
        uint8_t *want = malloc(bytes * n + 1);
        CHECK(in && out && want, "oom");
        for (int p = 0; p < g_n; p++) {
            gen(in + (size_t)p * bytes, count, LITE_I32, LITE_SUM, g_me * 64 + p, id);
            gen(want + (size_t)p * bytes, count, LITE_I32, LITE_SUM, p * 64 + g_me, id);
        }
        memset(out, 0x77, bytes * n);
        uint64_t fins = g_fins;
        CHECK_RC(g_ctx, lite_alltoall(g_ctx, in, out, count, LITE_I32, 60000));
        expect_same(out, want, count * n, LITE_I32, "alltoall");
        /* Every segment at the rendezvous threshold goes by rendezvous, which ends with exactly
         * one FIN (a second one, as a write completing inside its post once caused, is waste). */
        if (bytes >= g_ctx->rndv_threshold)
            CHECK(g_fins - fins == n - 1,
                  "alltoall of %zu bytes per peer sent %llu FINs, "
                  "expected %zu",
                  bytes, (unsigned long long)(g_fins - fins), n - 1);
        free(in);
        free(out);
        free(want);
    }
    if (g_me == 0)
        printf("alltoall: correct\n");
}

/* Elements rank s sends rank d: skewed, with zeros; rank 0 sends rank n-1 a large segment. */
static size_t v_count(int s, int d, int variant)
{
    if (variant == 1)
        return s == 0 && d == g_n - 1 ? 300007 : (size_t)((s + d) % 2);
    size_t k = (size_t)((s * 7 + d * 3 + variant) % 5);
    return k * 97 + (k == 4 ? 5000 : 0);
}

static void alltoallv_cases(void)
{
    size_t n = (size_t)g_n;
    for (int variant = 0; variant < 3; variant++) {
        size_t *sc = calloc(n, sizeof(size_t)), *sd = calloc(n, sizeof(size_t));
        size_t *rc = calloc(n, sizeof(size_t)), *rd = calloc(n, sizeof(size_t));
        CHECK(sc && sd && rc && rd, "oom");
        size_t stot = 0, rtot = 0;
        /* Segments laid out in reverse peer order with gaps of 3 elements, to catch any
         * assumption that displacements follow the counts. */
        for (int p = g_n - 1; p >= 0; p--) {
            sc[p] = v_count(g_me, p, variant);
            sd[p] = stot;
            stot += sc[p] + 3;
            rc[p] = v_count(p, g_me, variant);
            rd[p] = rtot;
            rtot += rc[p] + 3;
        }
        uint32_t id = g_case++;
        uint64_t *in = malloc(stot * 8 + 8), *out = malloc(rtot * 8 + 8);
        CHECK(in && out, "oom");
        for (int p = 0; p < g_n; p++)
            gen(in + sd[p], sc[p], LITE_U64, LITE_SUM, g_me * 64 + p, id);
        memset(out, 0xEE, rtot * 8);
        CHECK_RC(g_ctx, lite_alltoallv(g_ctx, in, sc, sd, out, rc, rd, LITE_U64, 60000));
        for (int p = 0; p < g_n; p++) {
            uint64_t *want = malloc(rc[p] * 8 + 8);
            CHECK(want, "oom");
            gen(want, rc[p], LITE_U64, LITE_SUM, p * 64 + g_me, id);
            expect_same(out + rd[p], want, rc[p], LITE_U64, "alltoallv segment");
            for (size_t g = 0; g < 3; g++)
                CHECK(out[rd[p] + rc[p] + g] == 0xEEEEEEEEEEEEEEEEull,
                      "alltoallv wrote into a gap after the segment from rank %d", p);
            free(want);
        }
        free(in);
        free(out);
        free(sc);
        free(sd);
        free(rc);
        free(rd);
    }
    if (g_me == 0)
        printf("alltoallv: correct (zero-length and skewed segments, gaps untouched)\n");
}

/* Several non-blocking collectives in flight, waited in an order that depends on the rank. */
static void nonblocking_cases(void)
{
    size_t count = 70001, bytes = count * 4;
    uint32_t id_a = g_case++, id_c = g_case++;
    float *a_in = malloc(bytes), *a_out = malloc(bytes), *a_ref = malloc(bytes);
    uint32_t *b = malloc(1031 * 4), *b_want = malloc(1031 * 4);
    uint8_t *c_in = malloc(1031), *c_out = malloc(1031 * (size_t)g_n);
    CHECK(a_in && a_out && a_ref && b && b_want && c_in && c_out, "oom");
    gen(a_in, count, LITE_F32, LITE_SUM, g_me, id_a);
    reference(a_ref, count, LITE_F32, LITE_SUM, id_a, 0);
    gen(b_want, 1031, LITE_U32, LITE_SUM, g_n - 1, id_a);
    if (g_me == g_n - 1)
        memcpy(b, b_want, 1031 * 4);
    gen(c_in, 1031, LITE_U8, LITE_SUM, g_me, id_c);

    lite_request_t *r[4];
    CHECK_RC(g_ctx, lite_iallreduce(g_ctx, a_in, a_out, count, LITE_F32, LITE_SUM, &r[0]));
    CHECK_RC(g_ctx, lite_ibcast(g_ctx, b, 1031, LITE_U32, g_n - 1, &r[1]));
    CHECK_RC(g_ctx, lite_iallgather(g_ctx, c_in, c_out, 1031, LITE_U8, &r[2]));
    CHECK_RC(g_ctx, lite_ibarrier(g_ctx, &r[3]));
    int order[4] = {0, 1, 2, 3};
    if (g_me % 2)
        for (int i = 0; i < 4; i++)
            order[i] = 3 - i;
    for (int i = 0; i < 4; i++) {
        lite_status_t st;
        CHECK_RC(g_ctx, lite_wait(g_ctx, r[order[i]], 60000, &st));
        CHECK(st.error == 0 && st.peer == -1, "status of collective %d", order[i]);
    }
    expect_same(a_out, a_ref, count, LITE_F32, "iallreduce");
    expect_same(b, b_want, 1031, LITE_U32, "ibcast");
    for (int p = 0; p < g_n; p++) {
        uint8_t want[1031];
        gen(want, 1031, LITE_U8, LITE_SUM, p, id_c);
        expect_same(c_out + (size_t)p * 1031, want, 1031, LITE_U8, "iallgather");
    }
    /* lite_test polling to completion, and lite_cancel refusing a started collective */
    CHECK_RC(g_ctx, lite_iallreduce(g_ctx, LITE_IN_PLACE, a_in, count, LITE_F32, LITE_SUM, &r[0]));
    if (g_n == 1) { /* finished at once: cancel releases it */
        CHECK_RC(g_ctx, lite_cancel(g_ctx, r[0]));
        CHECK_RC(g_ctx,
                 lite_iallreduce(g_ctx, LITE_IN_PLACE, a_in, count, LITE_F32, LITE_SUM, &r[0]));
    } else {
        CHECK(lite_cancel(g_ctx, r[0]) == -EBUSY, "cancel of a started collective: not -EBUSY");
    }
    int rc = 0;
    for (int i = 0; i < 2000000 && rc == 0; i++)
        rc = lite_test(g_ctx, r[0], NULL);
    CHECK(rc == 1, "lite_test on iallreduce returned %d: %s", rc, lite_last_error(g_ctx));
    if (g_n > 1)
        expect_same(a_in, a_ref, count, LITE_F32, "iallreduce in place via lite_test");
    /* many in flight (more than the registry's on-stack batch), waited newest first on odd
     * ranks: every wait must advance the older ones */
    enum { MANY = 40 };
    lite_request_t *many[MANY];
    uint32_t mv[MANY], mo[MANY];
    for (int i = 0; i < MANY; i++) {
        mv[i] = (uint32_t)(i * 1000 + g_me);
        CHECK_RC(g_ctx, lite_iallreduce(g_ctx, &mv[i], &mo[i], 1, LITE_U32, LITE_SUM, &many[i]));
    }
    for (int k = 0; k < MANY; k++) {
        int i = g_me % 2 ? MANY - 1 - k : k;
        CHECK_RC(g_ctx, lite_wait(g_ctx, many[i], 60000, NULL));
    }
    for (int i = 0; i < MANY; i++)
        CHECK(mo[i] == (uint32_t)(i * 1000 * g_n + g_n * (g_n - 1) / 2), "many[%d] = %u", i, mo[i]);
    /* lite_mr_exchange is a collective too: one started while a non-blocking allreduce is in
     * flight takes its turn after it (it used to jump the queue, and the allreduce's later
     * messages then failed the tag order) */
    gen(a_in, count, LITE_F32, LITE_SUM, g_me, id_a); /* the in-place run above changed it */
    CHECK_RC(g_ctx, lite_iallreduce(g_ctx, a_in, a_out, count, LITE_F32, LITE_SUM, &r[0]));
    lite_mr_t *xmr;
    lite_rdesc_t *xd = calloc((size_t)g_n, sizeof(*xd));
    CHECK(xd, "oom");
    CHECK_RC(g_ctx, lite_mr_reg(g_ctx, c_in, 1031, LITE_MEM_HOST, LITE_ACCESS_REMOTE_WRITE, &xmr));
    CHECK_RC(g_ctx, lite_mr_exchange(g_ctx, xmr, xd, 60000));
    CHECK_RC(g_ctx, lite_wait(g_ctx, r[0], 60000, NULL));
    expect_same(a_out, a_ref, count, LITE_F32, "iallreduce around mr_exchange");
    for (int p = 0; p < g_n; p++) {
        static const lite_rdesc_t zero;
        CHECK(memcmp(&xd[p], &zero, sizeof(zero)) != 0, "no descriptor from rank %d", p);
    }
    CHECK_RC(g_ctx, lite_mr_dereg(g_ctx, xmr));
    free(xd);
    /* barrier and ibarrier meet */
    if (g_me == 0) {
        CHECK_RC(g_ctx, lite_barrier(g_ctx, 60000));
    } else {
        CHECK_RC(g_ctx, lite_ibarrier(g_ctx, &r[0]));
        CHECK_RC(g_ctx, lite_wait(g_ctx, r[0], 60000, NULL));
    }
    free(a_in);
    free(a_out);
    free(a_ref);
    free(b);
    free(b_want);
    free(c_in);
    free(c_out);
    if (g_me == 0)
        printf("non-blocking: 4 kinds, then 40, in flight, waited in rank-dependent orders; "
               "test/cancel ok\n");
}

static void mode_basic(void)
{
    order_sensitivity();
    allreduce_grid();
    reduce_scatter_grid();
    bcast_cases(g_n <= 3 ? SIZE_MAX : 1031);
    allgather_cases();
    alltoall_cases(70001);
    alltoallv_cases();
    nonblocking_cases();
}

static void mode_big(void)
{
    /* >= 16 MiB per rank, not a multiple of the world size */
    int cases = 0;
    for (int dt = 0; dt < LITE_DTYPE_COUNT; dt++)
        for (int op = 0; op < nops_for(dt); op++) {
            /* the full grid on 2 ranks; every dtype's SUM on more ranks and under the
             * sanitizers, to keep the suite short (the order is the same for every op) */
            if ((UNDER_ASAN || g_n > 2) && op != LITE_SUM)
                continue;
            size_t count = (16u << 20) / lite_dtype_size(dt) + 3;
            check_allreduce(count, dt, op, NULL, NULL, op == LITE_MAX);
            cases++;
        }
    if (g_me == 0)
        printf("big allreduce: %d cases of >= 16 MiB byte-identical\n", cases);
    bcast_cases(SIZE_MAX);
    alltoall_cases(262144);
}

static void sleep_random(uint64_t *rng, int max_us)
{
    *rng = mix64(*rng);
    usleep((useconds_t)(*rng % (uint64_t)max_us));
}

static void mode_stress(void)
{
    struct {
        const char *algo, *chunk, *check;
    } plans[] = {{"direct", NULL, NULL},   {"rsag", NULL, "0"},   {"rsag", "4096", NULL},
                 {"direct", "65536", "0"}, {"rsag", "777", NULL}, {"rsag", "262144", NULL},
                 {"auto", "12345", "0"},   {NULL, NULL, NULL}};
    size_t counts[] = {100003, 3001};
    int dts[] = {LITE_F32, LITE_BF16};
    uint64_t rng = mix64((uint64_t)g_me * 7919 + (uint64_t)time(NULL));
    for (int d = 0; d < 2; d++) {
        size_t count = counts[d], esz = lite_dtype_size(dts[d]), bytes = count * esz;
        uint32_t id = g_case++;
        uint8_t *in = malloc(bytes), *out = malloc(bytes), *ref = malloc(bytes);
        uint64_t *hashes = malloc(sizeof(uint64_t) * (size_t)g_n);
        CHECK(in && out && ref && hashes, "oom");
        gen(in, count, dts[d], LITE_SUM, g_me, id);
        reference(ref, count, dts[d], LITE_SUM, id, 0);
        uint64_t want = fnv1a(ref, bytes);
        for (int rep = 0; rep < 20; rep++) {
            size_t pl = (size_t)rep % ARRAY_LEN(plans);
            set_coll(plans[pl].algo, plans[pl].chunk, plans[pl].check);
            memset(out, 0, bytes);
            lite_request_t *r;
            sleep_random(&rng, 3000);
            CHECK_RC(g_ctx, lite_iallreduce(g_ctx, in, out, count, dts[d], LITE_SUM, &r));
            int rc = 0;
            for (int i = 0; i < 100000 && rc == 0; i++) {
                sleep_random(&rng, 200);
                rc = lite_test(g_ctx, r, NULL);
            }
            if (rc == 0)
                rc = lite_wait(g_ctx, r, 60000, NULL) == 0 ? 1 : -1;
            CHECK(rc == 1, "rep %d: %s", rep, lite_last_error(g_ctx));
            set_coll(NULL, NULL, NULL);
            uint64_t h = fnv1a(out, bytes);
            CHECK(h == want,
                  "rep %d (algo %s, chunk %s, check %s): output hash %016llx, reference %016llx",
                  rep, plans[pl].algo ? plans[pl].algo : "auto",
                  plans[pl].chunk ? plans[pl].chunk : "auto",
                  plans[pl].check ? plans[pl].check : "1", (unsigned long long)h,
                  (unsigned long long)want);
            CHECK_RC(g_ctx, lite_allgather(g_ctx, &h, hashes, 1, LITE_U64, 60000));
            for (int p = 0; p < g_n; p++)
                CHECK(hashes[p] == want, "rep %d: rank %d's hash differs", rep, p);
        }
        if (g_me == 0)
            printf("stress: %s sum x %zu: 20 repetitions, 8 algorithm/chunk/check plans, random "
                   "delays: "
                   "hash %016llx on every rank and repetition\n",
                   dt_names[dts[d]], count, (unsigned long long)want);
        free(in);
        free(out);
        free(ref);
        free(hashes);
    }
}

static void still_usable(void);

/* Expect every rank to fail the call with -EINVAL and a detail; then check the context works. */
static void expect_mismatch(int rc, const char *what)
{
    CHECK(rc == -EINVAL, "%s: expected -EINVAL, got %d (%s): %s", what, rc, lite_strerror(rc),
          lite_last_error(g_ctx));
    const char *d = lite_last_error(g_ctx);
    CHECK(strstr(d, "differ") || strstr(d, "different collective"),
          "%s: the detail does not say what differs: %s", what, d);
    if (g_me == 0)
        printf("mismatch %-28s -> %s\n", what, d);
    still_usable();
}

/* After a failed collective the context keeps working. */
static void still_usable(void)
{
    set_coll(NULL, NULL, NULL);
    CHECK_RC(g_ctx, lite_barrier(g_ctx, 30000));
    uint32_t x = (uint32_t)g_me + 1, y = 0;
    CHECK_RC(g_ctx, lite_allreduce(g_ctx, &x, &y, 1, LITE_U32, LITE_SUM, 30000));
    CHECK(y == (uint32_t)(g_n * (g_n + 1) / 2), "allreduce after a mismatch: %u", y);
}

static void mode_mismatch(void)
{
    CHECK(g_n >= 2, "mismatch needs 2 or more ranks");
    size_t big = 300000;
    float *a = calloc(big + 1, 4), *b = calloc(big + 1, 4);
    CHECK(a && b, "oom");
    int last = g_n - 1;
    expect_mismatch(lite_allreduce(g_ctx, a, b, g_me == last ? 10 : 12, LITE_F32, LITE_SUM, 20000),
                    "count (small)");
    expect_mismatch(
        lite_allreduce(g_ctx, a, b, g_me == 0 ? big + 1 : big, LITE_F32, LITE_SUM, 20000),
        "count (large)");
    expect_mismatch(
        lite_allreduce(g_ctx, a, b, 100, g_me == last ? LITE_I32 : LITE_F32, LITE_SUM, 20000),
        "dtype (same size)");
    expect_mismatch(
        lite_allreduce(g_ctx, a, b, 100, LITE_F32, g_me == 0 ? LITE_MAX : LITE_SUM, 20000), "op");
    expect_mismatch(lite_bcast(g_ctx, a, 100, LITE_F32, g_me == last ? 1 % g_n : 0, 20000),
                    "bcast root");
    expect_mismatch(g_me == 0 ? lite_bcast(g_ctx, a, 100, LITE_F32, 0, 20000)
                              : lite_allreduce(g_ctx, a, b, 100, LITE_F32, LITE_SUM, 20000),
                    "collective (bcast/allreduce)");
    /* shapes that differ: header alone vs in front of data, eager vs gated, no data at all */
    expect_mismatch(lite_allreduce(g_ctx, a, b, g_me == last ? 0 : 10, LITE_F32, LITE_SUM, 20000),
                    "count 0 vs 10");
    expect_mismatch(
        lite_allreduce(g_ctx, a, b, g_me == 0 ? 16000 : 17000, LITE_F32, LITE_SUM, 20000),
        "count (eager vs gated)");
    expect_mismatch(lite_allgather(g_ctx, a, b, g_me == last ? 7 : 9, LITE_U8, 20000),
                    "allgather count");
    if (g_me == last) {
        int r = lite_barrier(g_ctx, 20000);
        CHECK(r != 0 && r != -ETIMEDOUT, "barrier facing an allreduce: %d: %s", r,
              lite_last_error(g_ctx));
        if (g_me == 0)
            printf("mismatch barrier/allreduce: %s\n", lite_last_error(g_ctx));
        still_usable();
    } else {
        expect_mismatch(lite_allreduce(g_ctx, a, b, 10, LITE_F32, LITE_SUM, 20000),
                        "allreduce facing a barrier");
    }
    /* a rank that refuses its own arguments (root out of range) tells the others */
    {
        int r = lite_bcast(g_ctx, a, 100, LITE_F32, g_me == last ? g_n + 5 : 0, 20000);
        CHECK(r == -EINVAL, "bcast with a bad root on rank %d: %d: %s", last, r,
              lite_last_error(g_ctx));
        if (g_me == 0)
            printf("mismatch %-28s -> %s\n", "bad root on one rank", lite_last_error(g_ctx));
        still_usable();
    }
    set_coll(g_me == last ? "rsag" : "direct", NULL, NULL);
    expect_mismatch(lite_allreduce(g_ctx, a, b, 1000, LITE_F32, LITE_SUM, 20000),
                    "algorithm (config)");
    set_coll(NULL, g_me == 0 ? "131072" : "65536", NULL);
    expect_mismatch(lite_allreduce(g_ctx, a, b, big, LITE_F32, LITE_SUM, 20000), "chunk (config)");
    set_coll(NULL, NULL, NULL);
    {
        size_t n = (size_t)g_n, *sc = calloc(n, 8), *sd = calloc(n, 8), *rc = calloc(n, 8),
               *rd = calloc(n, 8);
        CHECK(sc && sd && rc && rd, "oom");
        for (size_t p = 0; p < n; p++) {
            sc[p] = rc[p] = 5;
            sd[p] = rd[p] = 5 * p;
        }
        if (g_me == 0)
            sc[1] = 6; /* rank 1 expects 5 */
        int r = lite_alltoallv(g_ctx, a, sc, sd, b, rc, rd, LITE_F32, 20000);
        if (g_me <= 1) {
            expect_mismatch(r, "alltoallv counts");
        } else {
            CHECK(r == 0, "alltoallv between agreeing ranks: %s", lite_last_error(g_ctx));
            still_usable();
        }
        free(sc);
        free(sd);
        free(rc);
        free(rd);
    }
    /* A rank that skips a collective: the others time out (bounded); then it runs the
     * collective late (its sequence number catches up) and everyone goes on. */
    if (g_me != last) {
        int rc = lite_allreduce(g_ctx, a, b, 100, LITE_F32, LITE_SUM, 1000);
        CHECK(rc == -ETIMEDOUT, "skipped collective: expected -ETIMEDOUT, got %d: %s", rc,
              lite_last_error(g_ctx));
        if (g_me == 0)
            printf("skipped collective -> %s\n", lite_last_error(g_ctx));
    } else {
        usleep(1500 * 1000);
        lite_allreduce(g_ctx, a, b, 100, LITE_F32, LITE_SUM, 1000); /* late: either result */
    }
    still_usable();
    free(a);
    free(b);
}

/* Rank 1 gives up on one allreduce after another (10 ms) while rank 0 joins each one late and
 * completes it: rank 0's part of each lands at rank 1 after its op ended. More rounds than
 * rank 1 grants credits: unless such leftovers are dropped (and their credit returned), rank 0
 * runs out of credit towards rank 1 and everything after stalls. */
static void mode_abandon(void)
{
    CHECK(g_n == 2, "needs 2 ranks");
    const char *cv = getenv("LITETX_CREDITS");
    int rounds = (cv ? atoi(cv) : 64) + 16, gave_up = 0;
    uint32_t in = (uint32_t)(g_me + 1), out = 0, go = 0;
    for (int i = 0; i < rounds; i++) {
        uint64_t tag = (uint64_t)i + 1;
        if (g_me == 1) {
            CHECK_RC(g_ctx, lite_send(g_ctx, 0, tag, &go, sizeof(go), 30000));
            int rc = lite_allreduce(g_ctx, &in, &out, 1, LITE_U32, LITE_SUM, 10);
            CHECK(rc == 0 || rc == -ETIMEDOUT, "round %d: %d (%s)", i, rc, lite_strerror(rc));
            gave_up += rc == -ETIMEDOUT;
        } else {
            CHECK_RC(g_ctx, lite_recv(g_ctx, 1, tag, &go, sizeof(go), NULL, 30000));
            usleep(30 * 1000);
            int rc = lite_allreduce(g_ctx, &in, &out, 1, LITE_U32, LITE_SUM, 10000);
            CHECK(rc == 0, "round %d: rank 0's late allreduce: %d (%s): %s", i, rc,
                  lite_strerror(rc), lite_last_error(g_ctx));
            CHECK(out == 3, "round %d: sum %u", i, out);
        }
    }
    /* Both still work together. */
    CHECK_RC(g_ctx, lite_allreduce(g_ctx, &in, &out, 1, LITE_U32, LITE_SUM, 30000));
    CHECK(out == 3, "final sum %u", out);
    if (g_me == 1)
        printf("abandon: rank 1 gave up on %d of %d allreduces; the pair still works\n", gave_up,
               rounds);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "basic";
    g_ctx = mp_init();
    g_n = lite_world_size(g_ctx);
    g_me = lite_rank(g_ctx);
    set_coll(NULL, NULL, NULL); /* the library's defaults, whatever the environment says */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (!strcmp(mode, "basic"))
        mode_basic();
    else if (!strcmp(mode, "big"))
        mode_big();
    else if (!strcmp(mode, "stress"))
        mode_stress();
    else if (!strcmp(mode, "mismatch"))
        mode_mismatch();
    else if (!strcmp(mode, "abandon"))
        mode_abandon();
    else
        CHECK(0, "unknown mode %s", mode);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (g_me == 0)
        printf("coll_test %s: %d ranks, transport %s: OK in %.1f s\n", mode, g_n,
               lite_transport_name(g_ctx),
               (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
    lite_finalize(g_ctx);
    return 0;
}
