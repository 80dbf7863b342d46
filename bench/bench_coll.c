/*
 * bench_coll.c - litetx_coll_bench: timing of the deterministic collectives, built to be read
 * side by side with the peers' figures (the Open MPI peer program mpi_coll.c, given to
 * bench/run_coll_compare.sh by PEERS, uses the same method and prints the same RESULT lines).
 *
 *   litetx-run -n N litetx_coll_bench [BATCHES] [TARGET_SECONDS] [--pin] [--only NAME]
 *                                     [--mem host|cuda]
 *
 * For each case: 3 warm-up calls, then rank 0 calibrates an iteration count so one batch takes
 * about TARGET seconds (default 0.3; three times that at 64 MiB) and broadcasts it; then BATCHES
 * (default 5) batches are timed, each starting after a barrier, the batch time being the maximum
 * over ranks. Prints min/median/max microseconds per op over the batches, algbw (per-rank bytes /
 * median time, MB/s) and, for allreduce, busbw = algbw x 2(n-1)/n.
 *
 * Cases: allreduce f32 sum at 4 KiB, 1 MiB and 64 MiB per rank; barrier; alltoall with 1 MiB
 * send buffer per rank (1 MiB / n to each peer) and with 1 MiB to each peer; bcast 1 MiB;
 * allgather 1 MiB per rank. --only takes one of allreduce, barrier, alltoall, bcast, allgather.
 * --pin binds rank r to CPU r mod ncpu (as mpirun --bind-to core). LITETX_COLL_ALGO,
 * LITETX_COLL_CHUNK and LITETX_COLL_CHECK apply as everywhere (read once, by lite_init);
 * --algo LIST (comma-separated: auto, direct, rsag, pipe) runs every case once per algorithm in
 * the same job, switched with lite_coll_set between cases and named case/algorithm; --chunk
 * BYTES sets the pipeline chunk the same way. --mem cuda puts every buffer on CUDA device
 * LITETX_BENCH_DEVICE (default 0; the library stages them, or hands them to a backend that
 * takes device buffers).
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_cuda.h"
#include "litetx/litetx.h"

static lite_ctx_t *ctx;
static int rank, np;
static int on_device; /* --mem cuda */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "rank %d: %s: %s: %s\n", rank, what, lite_strerror(rc), lite_last_error(ctx));
    exit(1);
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef int (*op_fn)(void *arg);

struct buf2 {
    void *in, *out;
    size_t count;
};

static int do_allreduce(void *a)
{
    struct buf2 *b = a;
    return lite_allreduce(ctx, b->in, b->out, b->count, LITE_F32, LITE_SUM, 60000);
}

static int do_barrier(void *a)
{
    return lite_barrier(ctx, 60000);
}

static int do_alltoall(void *a)
{
    struct buf2 *b = a;
    return lite_alltoall(ctx, b->in, b->out, b->count, LITE_U8, 60000);
}

static int do_bcast(void *a)
{
    struct buf2 *b = a;
    return lite_bcast(ctx, b->in, b->count, LITE_U8, 0, 60000);
}

static int do_allgather(void *a)
{
    struct buf2 *b = a;
    return lite_allgather(ctx, b->in, b->out, b->count, LITE_U8, 60000);
}

static double max_over_ranks(double t)
{
    double m;
    int rc = lite_allreduce(ctx, &t, &m, 1, LITE_F64, LITE_MAX, 60000);
    if (rc)
        die("allreduce(max)", rc);
    return m;
}

static void bench(const char *name, op_fn fn, void *arg, size_t bytes, double busfactor,
                  int batches, double target)
{
    int rc;
    for (int i = 0; i < 3; i++)
        if ((rc = fn(arg)))
            die(name, rc);
    long iters = 1;
    for (;;) {
        if ((rc = lite_barrier(ctx, 60000)))
            die("barrier", rc);
        double t0 = now_s();
        for (long i = 0; i < iters; i++)
            if ((rc = fn(arg)))
                die(name, rc);
        double tm = max_over_ranks(now_s() - t0);
        if (tm > target / 4 || iters > (1L << 24)) {
            long want = (long)((double)iters * target / (tm > 0 ? tm : 1e-9));
            iters = want < 1 ? 1 : want;
            break;
        }
        iters *= 4;
    }
    if ((rc = lite_bcast(ctx, &iters, 1, LITE_I64, 0, 60000)))
        die("bcast", rc);
    double *us = malloc(sizeof(double) * (size_t)batches);
    for (int b = 0; b < batches; b++) {
        if ((rc = lite_barrier(ctx, 60000)))
            die("barrier", rc);
        double t0 = now_s();
        for (long i = 0; i < iters; i++)
            if ((rc = fn(arg)))
                die(name, rc);
        us[b] = max_over_ranks(now_s() - t0) / (double)iters * 1e6;
    }
    qsort(us, (size_t)batches, sizeof(double), cmpd);
    double med = batches % 2 ? us[batches / 2] : 0.5 * (us[batches / 2 - 1] + us[batches / 2]);
    if (rank == 0) {
        double algbw = bytes ? (double)bytes / (med * 1e-6) / 1e6 : 0.0;
        printf("RESULT %-12s np=%d bytes=%zu iters=%ld batches=%d us_per_op min=%.2f med=%.2f "
               "max=%.2f algbw_MBps=%.1f busbw_MBps=%.1f\n",
               name, np, bytes, iters, batches, us[0], med, us[batches - 1], algbw,
               algbw * busfactor);
        fflush(stdout);
    }
    free(us);
}

static const char *const algo_names[] = {"auto", "direct", "rsag", "pipe"};
static int algos[8], nalgos; /* --algo: the algorithms each case runs with (none: the context's) */
static unsigned long long chunk_opt; /* --chunk: 0 = the context's */

/* Run one case once per --algo entry, switching the context's options between them. */
static void bench_algos(const char *name, op_fn fn, void *arg, size_t bytes, double busfactor,
                        int batches, double target)
{
    for (int a = 0; a < (nalgos ? nalgos : 1); a++) {
        char full[64];
        snprintf(full, sizeof(full), "%s", name);
        if (nalgos || chunk_opt) {
            lite_coll_opts_t o = lite_coll_opts_default();
            int rc = lite_coll_get(ctx, &o);
            if (nalgos) {
                o.algo = algos[a];
                snprintf(full, sizeof(full), "%s/%s", name, algo_names[algos[a]]);
            }
            if (chunk_opt)
                o.chunk = chunk_opt;
            if (rc || (rc = lite_coll_set(ctx, &o)))
                die("lite_coll_set", rc);
        }
        bench(full, fn, arg, bytes, busfactor, batches, target);
    }
}

static int parse_algos(char *list)
{
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        int found = -1;
        for (int i = 0; i < 4; i++)
            if (!strcmp(tok, algo_names[i]))
                found = i;
        if (found < 0 || nalgos == 8)
            return -1;
        algos[nalgos++] = found;
    }
    return nalgos ? 0 : -1;
}

static struct buf2 alloc2(size_t in_bytes, size_t out_bytes, size_t count)
{
    struct buf2 b = {malloc(in_bytes ? in_bytes : 1), malloc(out_bytes ? out_bytes : 1), count};
    if (!b.in || !b.out) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    memset(b.in, rank + 1, in_bytes);
    memset(b.out, 0, out_bytes);
    if (on_device) {
        struct buf2 d = {bcuda_alloc(in_bytes), bcuda_alloc(out_bytes), count};
        if (!d.in || !d.out || bcuda_copy(d.in, b.in, in_bytes) ||
            bcuda_copy(d.out, b.out, out_bytes)) {
            fprintf(stderr, "rank %d: --mem cuda: device buffers of %zu + %zu bytes failed\n", rank,
                    in_bytes, out_bytes);
            exit(1);
        }
        free(b.in);
        free(b.out);
        return d;
    }
    return b;
}

static void free2(struct buf2 *b)
{
    if (on_device) {
        bcuda_free(b->in);
        bcuda_free(b->out);
    } else {
        free(b->in);
        free(b->out);
    }
}

int main(int argc, char **argv)
{
    int batches = 5;
    double target = 0.3;
    const char *only = NULL;
    int pin = 0, pos = 0, bad = 0;
    const char *mem = "host";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--pin"))
            pin = 1;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--algo") && i + 1 < argc)
            bad |= parse_algos(argv[++i]) != 0;
        else if (!strcmp(argv[i], "--chunk") && i + 1 < argc)
            bad |= (chunk_opt = strtoull(argv[++i], NULL, 10)) == 0;
        else if (!strcmp(argv[i], "--mem") && i + 1 < argc)
            mem = argv[++i];
        else if (pos++ == 0)
            batches = atoi(argv[i]);
        else
            target = atof(argv[i]);
    }
    on_device = !strcmp(mem, "cuda");
    if (batches < 1 || target <= 0 || bad || (!on_device && strcmp(mem, "host"))) {
        fprintf(stderr, "usage: litetx_coll_bench [BATCHES] [TARGET_S] [--pin] [--only NAME] "
                        "[--algo auto,direct,rsag,pipe] [--chunk BYTES] [--mem host|cuda]\n");
        return 2;
    }
    char why[200];
    if (on_device && bcuda_init(why, sizeof(why))) {
        fprintf(stderr, "litetx_coll_bench: --mem cuda: %s\n", why);
        return 1;
    }
    lite_config_t cfg = lite_config_default();
    int rc = lite_init(&cfg, &ctx);
    if (rc) {
        fprintf(stderr, "lite_init: %s: %s\n", lite_strerror(rc), lite_init_error());
        return 1;
    }
    rank = lite_rank(ctx);
    np = lite_world_size(ctx);
    if (pin) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(rank % (int)sysconf(_SC_NPROCESSORS_ONLN), &set);
        sched_setaffinity(0, sizeof(set), &set);
    }
    if (rank == 0)
        printf("# litetx_coll_bench: %d ranks, transport %s, %s memory, %d batches of ~%.2f s%s\n",
               np, lite_transport_name(ctx), on_device ? "cuda" : "host", batches, target,
               pin ? ", pinned" : "");

    size_t ar_sizes[] = {4096, 1u << 20, 64u << 20};
    if (!only || !strcmp(only, "allreduce"))
        for (size_t s = 0; s < 3; s++) {
            struct buf2 b = alloc2(ar_sizes[s], ar_sizes[s], ar_sizes[s] / 4);
            bench_algos("allreduce", do_allreduce, &b, ar_sizes[s], 2.0 * (np - 1) / np, batches,
                        ar_sizes[s] >= (64u << 20) ? target * 3 : target);
            free2(&b);
        }
    if (!only || !strcmp(only, "barrier"))
        bench_algos("barrier", do_barrier, NULL, 0, 0.0, batches, target);
    if (!only || !strcmp(only, "alltoall")) {
        size_t pp_opts[] = {(1u << 20) / (size_t)np, 1u << 20};
        const char *names[] = {"a2a_1MiB_tot", "a2a_1MiB_pp"};
        for (int k = 0; k < 2; k++) {
            size_t pp = pp_opts[k], tot = pp * (size_t)np;
            struct buf2 b = alloc2(tot, tot, pp);
            bench_algos(names[k], do_alltoall, &b, tot, 1.0 * (np - 1) / np, batches, target);
            free2(&b);
        }
    }
    if (!only || !strcmp(only, "bcast")) {
        struct buf2 b = alloc2(1u << 20, 0, 1u << 20);
        bench_algos("bcast_1MiB", do_bcast, &b, 1u << 20, 1.0, batches, target);
        free2(&b);
    }
    if (!only || !strcmp(only, "allgather")) {
        struct buf2 b = alloc2(1u << 20, (1u << 20) * (size_t)np, 1u << 20);
        bench_algos("allgather_1M", do_allgather, &b, 1u << 20, 1.0 * (np - 1), batches, target);
        free2(&b);
    }
    lite_finalize(ctx);
    return 0;
}
