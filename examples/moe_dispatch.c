/*
 * moe_dispatch - one MoE layer's dispatch and combine across ranks (expert parallelism), with
 * DeepSeek-V3-like shapes, done both ways the library offers, timed in steady state:
 *
 *   litetx-run -n 4 [--transport tcp|efa] build/examples/moe_dispatch
 *       [-t TOKENS_PER_RANK] [-e EXPERTS_PER_RANK] [-k TOPK] [-H HIDDEN] [-w WARMUP] [-i ITERS]
 *       [-s SEED]
 *
 * Defaults: 128 tokens per rank (up to 4096), hidden 7168 in bf16 (14336 B per token), top-8
 * routing over 8 experts per rank (256 experts at 32 ranks, ranks x 8 below), 5 warm-up and 50
 * timed iterations. Routing is pseudo-random and seeded, and changes every iteration (as it does
 * from layer to layer), so counts and data differ each time.
 *
 * Each token is sent once to every rank that owns at least one of its k experts, with its
 * routing metadata (source rank, token index, its k expert ids and gate weights) packed behind
 * the hidden state: one record per (token, destination rank). The expert e of a rank multiplies
 * a token by a fixed scale s(e); the rank returns, per record, its partial result
 *     partial = bf16( sum over the token's experts e it owns, in top-k order: w_e * s(e) * x )
 * and the token's owner combines the partials of its destination ranks in rank order, in f32,
 * rounded to bf16: a real weighted-sum combine. Every byte of every record is checked after
 * dispatch, and every partial after combine, against a local recomputation (the arithmetic is
 * deterministic); a mismatch exits non-zero.
 *
 * The two methods (same records, same receive layout: grouped by source rank, in token order):
 *   (a) alltoallv: lite_alltoall of the per-peer record counts, pack the records grouped by
 *       destination, lite_alltoallv; combine is one lite_alltoallv with the counts reversed.
 *   (b) write_scatter: lite_allgather of the per-peer counts (each rank needs the whole count
 *       matrix to know where its records start in every peer's buffer), then one
 *       lite_write_scatter with one entry and one immediate per record, straight from the
 *       token buffer (no pack) into the peers' pre-registered receive buffers; a rank is done
 *       when lite_imm_wait has counted every record it expects and its own scatter completed.
 *       Combine is a scatter of the partials back to their owners, completed the same way.
 * Timed: dispatch from the count exchange to the records in place (for (a) this includes the
 * pack, which (b) does not need); combine from the partials being ready to every partial in
 * place at its owner (the final f32 sum is outside both). Each iteration starts from a barrier;
 * an iteration's latency is that of the slowest rank. Median and p90 over the timed iterations.
 *
 * Memory per rank: tokens x 14.5 KB x (1 + 2 x min(ranks, topk) + 2 x ranks) is reserved for
 * the worst routing, but only the part used is touched: 4096 tokens at 8 ranks reserve ~2 GB and
 * touch ~1.3 GB per rank; the default 128 tokens, a few tens of MB.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <litetx/litetx.h>

#define MAX_TOPK   16
#define MAX_TOKENS 4096
#define WAIT_MS    60000

#define TRY(call)                                                                                  \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_) {                                                                                 \
            fprintf(stderr, "rank %d: %s: %s (%s)\n", lite_rank(ctx), #call, lite_strerror(rc_),   \
                    lite_last_error(ctx));                                                         \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Routing metadata carried behind each token's hidden state. */
struct meta {
    uint32_t src, token;
    int32_t expert[MAX_TOPK];
    float weight[MAX_TOPK];
};

/* The layer's shapes, and where each part of a record lies. */
struct shape {
    int ranks, me, tokens, epr, experts, topk, hidden;
    size_t meta_off, rec, part; /* record bytes; partial result bytes (hidden bf16) */
    uint64_t seed;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33, x *= 0xFF51AFD7ED558CCDull, x ^= x >> 33, x *= 0xC4CEB9FE1A85EC53ull;
    return x ^ x >> 33;
}

static float bf16_to_f32(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static uint16_t f32_to_bf16(float f) /* round to nearest even (no NaNs here) */
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return (uint16_t)((u + 0x7FFFu + (u >> 16 & 1u)) >> 16);
}

/* Top-k distinct experts and normalised gate weights of token t of rank src, iteration it. */
static void route(const struct shape *sh, int it, int src, int t, struct meta *m)
{
    memset(m, 0, sizeof(*m));
    m->src = (uint32_t)src, m->token = (uint32_t)t;
    uint64_t x = mix(sh->seed ^ mix((uint64_t)it << 40 ^ (uint64_t)src << 20 ^ (uint64_t)t));
    float sum = 0;
    for (int k = 0; k < sh->topk; k++) {
        int e, dup;
        do {
            x = mix(x + 0x9E3779B97F4A7C15ull);
            e = (int)(x % (uint64_t)sh->experts);
            dup = 0;
            for (int j = 0; j < k; j++)
                dup |= m->expert[j] == e;
        } while (dup);
        m->expert[k] = e;
        m->weight[k] = (float)(x >> 40 & 1023) + 1.0f;
        sum += m->weight[k];
    }
    for (int k = 0; k < sh->topk; k++)
        m->weight[k] /= sum;
}

/* The whole record (hidden state in bf16, then the metadata) of token t of rank src. */
static void make_record(const struct shape *sh, int it, int src, int t, uint8_t *rec)
{
    uint16_t *x = (uint16_t *)rec;
    uint64_t s = mix((uint64_t)it * 0x9E3779B97F4A7C15ull ^ (uint64_t)src << 32 ^ (uint64_t)t);
    for (int h = 0; h < sh->hidden; h++) {
        uint64_t v = (s + (uint64_t)h * 0xD6E8FEB86659FD93ull) >> 32;
        /* sign, exponent 125..127, 7 random mantissa bits: finite values in (-2, 2) */
        x[h] = (uint16_t)((v & 1) << 15 | (125 + v % 3) << 7 | (v >> 8 & 0x7F));
    }
    memset(rec + sh->hidden * 2, 0, sh->rec - (size_t)sh->hidden * 2);
    route(sh, it, src, t, (struct meta *)(rec + sh->meta_off));
}

static int owner(const struct shape *sh, int e)
{
    return e / sh->epr;
}

/* Does the token of this metadata go to rank r? */
static int goes_to(const struct shape *sh, const struct meta *m, int r)
{
    for (int k = 0; k < sh->topk; k++)
        if (owner(sh, m->expert[k]) == r)
            return 1;
    return 0;
}

/* Rank r's experts applied to the record: its partial of the weighted sum, in bf16. */
static void expert_partial(const struct shape *sh, const uint8_t *rec, int r, uint16_t *out)
{
    const uint16_t *x = (const uint16_t *)rec;
    const struct meta *m = (const struct meta *)(rec + sh->meta_off);
    float coef = 0; /* sum of w_e * s(e): the expert here is a scale, so it folds into one */
    for (int k = 0; k < sh->topk; k++)
        if (owner(sh, m->expert[k]) == r)
            coef += m->weight[k] * (1.0f + (float)(m->expert[k] & 7) * 0.125f);
    for (int h = 0; h < sh->hidden; h++)
        out[h] = f32_to_bf16(coef * bf16_to_f32(x[h]));
}

/* What this rank sends in one iteration, and where it lands (in records). */
struct layout {
    uint64_t *cnt_out, *cnt_in, *matrix; /* matrix[s * n + r]: records from s to r */
    size_t *sdispl, *rdispl, *sc, *sd, *rc, *rd;
    int *send_tok; /* the token of each send slot, slots grouped by destination */
    size_t nout, nin;
};

/* Send slots grouped by destination rank, in token order. */
static void plan_sends(const struct shape *sh, const uint8_t *xrec, struct layout *L)
{
    int n = sh->ranks;
    memset(L->cnt_out, 0, sizeof(uint64_t) * (size_t)n);
    for (int t = 0; t < sh->tokens; t++)
        for (int r = 0; r < n; r++)
            L->cnt_out[r] +=
                (uint64_t)goes_to(sh, (const struct meta *)(xrec + t * sh->rec + sh->meta_off), r);
    size_t off = 0;
    for (int r = 0; r < n; r++)
        L->sdispl[r] = off, off += L->cnt_out[r];
    L->nout = off;
    size_t k = 0;
    for (int r = 0; r < n; r++)
        for (int t = 0; t < sh->tokens; t++)
            if (goes_to(sh, (const struct meta *)(xrec + t * sh->rec + sh->meta_off), r))
                L->send_tok[k++] = t;
}

static void plan_recvs(const struct shape *sh, struct layout *L)
{
    size_t off = 0;
    for (int s = 0; s < sh->ranks; s++)
        L->rdispl[s] = off, off += L->cnt_in[s];
    L->nin = off;
}

/* After dispatch: record j from rank s must be exactly the j-th of s's tokens routed here. */
static long check_dispatch(const struct shape *sh, int it, const uint8_t *recv, uint8_t *tmp)
{
    long bad = 0;
    size_t i = 0;
    struct meta m;
    for (int s = 0; s < sh->ranks; s++)
        for (int t = 0; t < sh->tokens; t++) {
            route(sh, it, s, t, &m);
            if (!goes_to(sh, &m, sh->me))
                continue;
            make_record(sh, it, s, t, tmp);
            if (memcmp(recv + i++ * sh->rec, tmp, sh->rec) && bad++ == 0)
                fprintf(stderr, "rank %d: iteration %d: token %d of rank %d arrived wrong\n",
                        sh->me, it, t, s);
        }
    return bad;
}

/* After combine: each partial must be the one its rank computes, then the f32 sum. */
static long check_combine(const struct shape *sh, int it, const uint8_t *xrec,
                          const struct layout *L, const uint8_t *comb, uint16_t *tmp, float *acc,
                          uint16_t *out)
{
    long bad = 0;
    size_t *next = calloc((size_t)sh->ranks, sizeof(size_t));
    for (int t = 0; t < sh->tokens; t++) {
        const uint8_t *rec = xrec + t * sh->rec;
        for (int h = 0; h < sh->hidden; h++)
            acc[h] = 0;
        for (int r = 0; r < sh->ranks; r++) {
            if (!goes_to(sh, (const struct meta *)(rec + sh->meta_off), r))
                continue;
            const uint16_t *got = (const uint16_t *)(comb + (L->sdispl[r] + next[r]++) * sh->part);
            expert_partial(sh, rec, r, tmp);
            if (memcmp(got, tmp, sh->part) && bad++ == 0)
                fprintf(stderr, "rank %d: iteration %d: token %d: partial of rank %d wrong\n",
                        sh->me, it, t, r);
            for (int h = 0; h < sh->hidden; h++)
                acc[h] += bf16_to_f32(got[h]);
        }
        for (int h = 0; h < sh->hidden; h++) /* the layer's output for token t */
            out[h] = f32_to_bf16(acc[h]);
    }
    free(next);
    return bad;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void stats(double *v, int n, double *med, double *p90)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    *med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    int k = (9 * n + 9) / 10; /* nearest rank */
    *p90 = v[(k < 1 ? 1 : k) - 1];
}

static void *reserve(size_t bytes) /* large ones are mapped lazily: untouched pages cost nothing */
{
    void *p = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (!p) {
        fprintf(stderr, "moe_dispatch: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

int main(int argc, char **argv)
{
    struct shape sh = {.tokens = 128, .epr = 8, .topk = 8, .hidden = 7168, .seed = 1};
    int warm = 5, iters = 50;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "-t") && v)
            sh.tokens = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-e") && v)
            sh.epr = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-k") && v)
            sh.topk = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-H") && v)
            sh.hidden = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-w") && v)
            warm = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-i") && v)
            iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-s") && v)
            sh.seed = strtoull(argv[++i], NULL, 0);
        else {
            fprintf(stderr, "usage: moe_dispatch [-t TOKENS_PER_RANK] [-e EXPERTS_PER_RANK] "
                            "[-k TOPK] [-H HIDDEN] [-w WARMUP] [-i ITERS] [-s SEED]\n");
            return 2;
        }
    }
    lite_config_t cfg = lite_config_default();
    lite_ctx_t *ctx;
    int rc = lite_init(&cfg, &ctx);
    if (rc) {
        fprintf(stderr, "lite_init: %s: %s\n", lite_strerror(rc), lite_init_error());
        return 1;
    }
    int me = lite_rank(ctx), n = lite_world_size(ctx);
    sh.ranks = n, sh.me = me, sh.experts = n * sh.epr;
    if (sh.tokens < 1 || sh.tokens > MAX_TOKENS || sh.epr < 1 || sh.topk < 1 ||
        sh.topk > MAX_TOPK || sh.topk > sh.experts || sh.hidden < 1 || warm < 0 || iters < 1) {
        fprintf(stderr,
                "moe_dispatch: need 1 <= tokens <= %d, 1 <= topk <= min(%d, experts), "
                "hidden >= 1, iters >= 1\n",
                MAX_TOKENS, MAX_TOPK);
        return 2;
    }
    sh.meta_off = ((size_t)sh.hidden * 2 + 7) / 8 * 8;
    sh.rec = (sh.meta_off + sizeof(struct meta) + 63) / 64 * 64;
    sh.part = (size_t)sh.hidden * 2;

    size_t T = (size_t)sh.tokens, N = (size_t)n;
    size_t max_out = T * (size_t)(n < sh.topk ? n : sh.topk), max_in = T * N;
    uint8_t *xrec = reserve(T * sh.rec);          /* this rank's tokens */
    uint8_t *pack = reserve(max_out * sh.rec);    /* (a): records grouped by destination */
    uint8_t *recv = reserve(max_in * sh.rec);     /* dispatched records, by source */
    uint8_t *partial = reserve(max_in * sh.part); /* expert outputs, same order */
    uint8_t *comb = reserve(max_out * sh.part);   /* partials back, by destination */
    uint8_t *tmp = reserve(sh.rec);               /* checks */
    float *acc = reserve(sizeof(float) * (size_t)sh.hidden);
    uint16_t *out = reserve(sh.part);
    struct layout L = {0};
    L.cnt_out = calloc(N, 8), L.cnt_in = calloc(N, 8), L.matrix = calloc(N * N, 8);
    L.sdispl = calloc(N, sizeof(size_t)), L.rdispl = calloc(N, sizeof(size_t));
    L.sc = calloc(N, sizeof(size_t)), L.sd = calloc(N, sizeof(size_t));
    L.rc = calloc(N, sizeof(size_t)), L.rd = calloc(N, sizeof(size_t));
    L.send_tok = calloc(max_out, sizeof(int));
    lite_scatter_entry_t *ent = calloc(max_in > max_out ? max_in : max_out, sizeof(*ent));
    lite_rdesc_t *d_recv = calloc(N, sizeof(lite_rdesc_t)),
                 *d_comb = calloc(N, sizeof(lite_rdesc_t));
    int nt = warm + iters;
    double *lat = calloc(4 * (size_t)iters, sizeof(double)); /* a_disp, a_comb, b_disp, b_comb */
    size_t *peer_off = calloc(N, sizeof(size_t));
    if (!L.cnt_out || !L.cnt_in || !L.matrix || !L.sdispl || !L.rdispl || !L.sc || !L.sd || !L.rc ||
        !L.rd || !L.send_tok || !ent || !d_recv || !d_comb || !lat || !peer_off) {
        fprintf(stderr, "moe_dispatch: out of memory\n");
        return 1;
    }
    /* One-sided targets are registered once, up front, at their largest size. */
    lite_mr_t *mr_x, *mr_recv, *mr_part, *mr_comb;
    TRY(lite_mr_reg(ctx, xrec, T * sh.rec, LITE_MEM_HOST, 0, &mr_x));
    TRY(lite_mr_reg(ctx, recv, max_in * sh.rec, LITE_MEM_HOST, LITE_ACCESS_REMOTE_WRITE, &mr_recv));
    TRY(lite_mr_reg(ctx, partial, max_in * sh.part, LITE_MEM_HOST, 0, &mr_part));
    TRY(lite_mr_reg(ctx, comb, max_out * sh.part, LITE_MEM_HOST, LITE_ACCESS_REMOTE_WRITE,
                    &mr_comb));
    TRY(lite_mr_exchange(ctx, mr_recv, d_recv, WAIT_MS));
    TRY(lite_mr_exchange(ctx, mr_comb, d_comb, WAIT_MS));

    int64_t bad = 0;
    double sent_records = 0;
    for (int it = 0; it < nt; it++) {
        int ti = it - warm;                 /* < 0: warm-up */
        for (int t = 0; t < sh.tokens; t++) /* the router's output: outside the clock */
            make_record(&sh, it, me, t, xrec + (size_t)t * sh.rec);

        /* ---- (a) alltoallv ---- */
        TRY(lite_barrier(ctx, WAIT_MS));
        double t0 = now_s();
        plan_sends(&sh, xrec, &L);
        TRY(lite_alltoall(ctx, L.cnt_out, L.cnt_in, 1, LITE_U64, WAIT_MS));
        plan_recvs(&sh, &L);
        for (size_t k = 0; k < L.nout; k++)
            memcpy(pack + k * sh.rec, xrec + (size_t)L.send_tok[k] * sh.rec, sh.rec);
        for (int r = 0; r < n; r++) { /* in bytes: the records travel as LITE_U8 */
            L.sc[r] = L.cnt_out[r] * sh.rec, L.sd[r] = L.sdispl[r] * sh.rec;
            L.rc[r] = L.cnt_in[r] * sh.rec, L.rd[r] = L.rdispl[r] * sh.rec;
        }
        TRY(lite_alltoallv(ctx, pack, L.sc, L.sd, recv, L.rc, L.rd, LITE_U8, WAIT_MS));
        double t1 = now_s();
        bad += check_dispatch(&sh, it, recv, tmp);
        for (size_t i = 0; i < L.nin; i++) /* the experts */
            expert_partial(&sh, recv + i * sh.rec, me, (uint16_t *)(partial + i * sh.part));
        memset(comb, 0xEE, L.nout * sh.part); /* poison: a missing partial cannot pass */
        TRY(lite_barrier(ctx, WAIT_MS));
        double t2 = now_s();
        for (int r = 0; r < n; r++) {
            L.sc[r] = L.cnt_in[r] * sh.part, L.sd[r] = L.rdispl[r] * sh.part;
            L.rc[r] = L.cnt_out[r] * sh.part, L.rd[r] = L.sdispl[r] * sh.part;
        }
        TRY(lite_alltoallv(ctx, partial, L.sc, L.sd, comb, L.rc, L.rd, LITE_U8, WAIT_MS));
        double t3 = now_s();
        bad += check_combine(&sh, it, xrec, &L, comb, (uint16_t *)tmp, acc, out);
        if (ti >= 0)
            lat[ti] = t1 - t0, lat[iters + ti] = t3 - t2;
        sent_records += (double)L.nout;

        /* ---- (b) write_scatter with immediates ---- */
        memset(recv, 0xEE, L.nin * sh.rec);
        memset(comb, 0xEE, L.nout * sh.part);
        uint32_t imm_d = 0x40000000u | (uint32_t)it << 1, imm_c = imm_d | 1;
        TRY(lite_barrier(ctx, WAIT_MS));
        t0 = now_s();
        plan_sends(&sh, xrec, &L);
        TRY(lite_allgather(ctx, L.cnt_out, L.matrix, N, LITE_U64, WAIT_MS));
        for (int s = 0; s < n; s++)
            L.cnt_in[s] = L.matrix[(size_t)s * N + (size_t)me];
        plan_recvs(&sh, &L);
        for (int r = 0; r < n; r++) { /* where my records start in rank r's buffer */
            peer_off[r] = 0;
            for (int s = 0; s < me; s++)
                peer_off[r] += L.matrix[(size_t)s * N + (size_t)r];
        }
        for (int r = 0; r < n; r++) /* straight from the token buffer: no pack */
            for (size_t j = 0, k = L.sdispl[r]; j < L.cnt_out[r]; j++, k++)
                ent[k] = (lite_scatter_entry_t){.peer = r,
                                                .local_off = (size_t)L.send_tok[k] * sh.rec,
                                                .remote = &d_recv[r],
                                                .remote_off = (peer_off[r] + j) * sh.rec,
                                                .len = sh.rec,
                                                .imm = imm_d,
                                                .flags = LITE_WRITE_WITH_IMM};
        lite_request_t *req;
        TRY(lite_write_scatter(ctx, mr_x, ent, L.nout, &req));
        TRY(lite_imm_wait(ctx, imm_d, L.nin, WAIT_MS));
        TRY(lite_wait(ctx, req, WAIT_MS, NULL));
        t1 = now_s();
        bad += check_dispatch(&sh, it, recv, tmp);
        for (size_t i = 0; i < L.nin; i++)
            expert_partial(&sh, recv + i * sh.rec, me, (uint16_t *)(partial + i * sh.part));
        TRY(lite_barrier(ctx, WAIT_MS));
        t2 = now_s();
        for (int s = 0; s < n; s++) { /* where rank s expects my partials: its slots for me */
            peer_off[s] = 0;
            for (int r = 0; r < me; r++)
                peer_off[s] += L.matrix[(size_t)s * N + (size_t)r];
        }
        size_t k = 0;
        for (int s = 0; s < n; s++)
            for (size_t j = 0; j < L.cnt_in[s]; j++, k++)
                ent[k] = (lite_scatter_entry_t){.peer = s,
                                                .local_off = k * sh.part,
                                                .remote = &d_comb[s],
                                                .remote_off = (peer_off[s] + j) * sh.part,
                                                .len = sh.part,
                                                .imm = imm_c,
                                                .flags = LITE_WRITE_WITH_IMM};
        TRY(lite_write_scatter(ctx, mr_part, ent, L.nin, &req));
        TRY(lite_imm_wait(ctx, imm_c, L.nout, WAIT_MS));
        TRY(lite_wait(ctx, req, WAIT_MS, NULL));
        t3 = now_s();
        bad += check_combine(&sh, it, xrec, &L, comb, (uint16_t *)tmp, acc, out);
        if (ti >= 0)
            lat[2 * iters + ti] = t1 - t0, lat[3 * iters + ti] = t3 - t2;
    }
    /* An iteration is as slow as its slowest rank; and every rank learns about any mismatch. */
    TRY(lite_allreduce(ctx, LITE_IN_PLACE, lat, 4 * (size_t)iters, LITE_F64, LITE_MAX, WAIT_MS));
    TRY(lite_allreduce(ctx, LITE_IN_PLACE, &bad, 1, LITE_I64, LITE_SUM, WAIT_MS));
    TRY(lite_allreduce(ctx, LITE_IN_PLACE, &sent_records, 1, LITE_F64, LITE_SUM, WAIT_MS));
    if (me == 0) {
        double med[4], p90[4];
        for (int m = 0; m < 4; m++)
            stats(lat + (size_t)m * iters, iters, &med[m], &p90[m]);
        double per_tok = sent_records / ((double)nt * N * T);
        printf("# moe_dispatch: transport %s, %d ranks, %d tokens/rank, hidden %d bf16 (%zu B "
               "record with routing metadata), top-%d of %d experts (%d per rank), seed %llu\n"
               "# a token goes to %.2f ranks on average (its own included): %.2f MB dispatched per "
               "rank per "
               "iteration; combine = weighted sum, f32 accumulate, bf16 out\n"
               "# %d warm-up + %d timed iterations; latency of the slowest rank, ms\n"
               "%-14s %10s %8s %10s %8s\n",
               lite_transport_name(ctx), n, sh.tokens, sh.hidden, sh.rec, sh.topk, sh.experts,
               sh.epr, (unsigned long long)sh.seed, per_tok,
               per_tok * (double)T * (double)sh.rec / 1e6, warm, iters, "method", "dispatch", "p90",
               "combine", "p90");
        const char *name[2] = {"alltoallv", "write_scatter"};
        for (int m = 0; m < 2; m++)
            printf("%-14s %10.3f %8.3f %10.3f %8.3f\n", name[m], med[2 * m] * 1e3, p90[2 * m] * 1e3,
                   med[2 * m + 1] * 1e3, p90[2 * m + 1] * 1e3);
        printf("moe_dispatch: %s %d ranks %d tokens: dispatch faster with %s (%.3f vs %.3f ms), "
               "combine faster with %s (%.3f vs %.3f ms); every token checked: %s\n",
               lite_transport_name(ctx), n, sh.tokens, name[med[2] < med[0]],
               (med[2] < med[0] ? med[2] : med[0]) * 1e3, (med[2] < med[0] ? med[0] : med[2]) * 1e3,
               name[med[3] < med[1]], (med[3] < med[1] ? med[3] : med[1]) * 1e3,
               (med[3] < med[1] ? med[1] : med[3]) * 1e3, bad ? "MISMATCH" : "ok");
    }
    TRY(lite_mr_dereg(ctx, mr_x));
    TRY(lite_mr_dereg(ctx, mr_recv));
    TRY(lite_mr_dereg(ctx, mr_part));
    TRY(lite_mr_dereg(ctx, mr_comb));
    lite_finalize(ctx);
    free(xrec), free(pack), free(recv), free(partial), free(comb), free(tmp), free(acc), free(out);
    free(L.cnt_out), free(L.cnt_in), free(L.matrix), free(L.sdispl), free(L.rdispl);
    free(L.sc), free(L.sd), free(L.rc), free(L.rd), free(L.send_tok);
    free(ent), free(d_recv), free(d_comb), free(lat), free(peer_off);
    return bad ? 1 : 0;
}
