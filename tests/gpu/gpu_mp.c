/*
 * gpu_mp.c - device buffers through the library between processes sharing one GPU, under
 * litetx-run (one process per rank, every rank on device 0). Exits 77 without a CUDA device.
 *
 *   gpu_mp check   p2p (blocking and not, 1 B .. 16 MiB), collectives on device buffers
 *                  byte-identical to the same collectives on host buffers, and one-sided ops
 *                  on LITE_MEM_CUDA regions where the transport registers device memory
 *                  (elsewhere: the registration must be refused with -ENOSYS)
 *   gpu_mp bench   16 MiB send/recv ping-pong, host buffers and device buffers interleaved,
 *                  medians and their ratio (rank 0 prints one line per size)
 *   gpu_mp pipe    2 ranks: sizes around the staging chunk (LITETX_GPU_STAGE_CHUNK: 1 B,
 *                  chunk-1, chunk, chunk+1, 5.5 chunks, 64 MiB), device to device, device to
 *                  host and host to device, blocking and not; a device receive cancelled, and a
 *                  device send withdrawn after its timeout (its receiver gets -LITE_ERR_CANCELLED)
 *   gpu_mp lost    2 ranks: rank 1 starts a 64 MiB device send to rank 0 and vanishes while
 *                  it moves; rank 0's device receive ends with -LITE_ERR_PEER_LOST (the test's
 *                  timeout is the hang bound)
 *   gpu_mp lost_recv  the same with the receiver vanishing: the device send ends with
 *                  -LITE_ERR_PEER_LOST
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu.h"
#include "litetx/litetx.h"
#include "mp_common.h" /* CHECK, CHECK_RC, mp_rank */

static void *dev_alloc(size_t n)
{
    void *p = NULL;
    CHECK(lite_gpu_mem_alloc(0, n, &p) == 0, "cuMemAlloc %zu", n);
    return p;
}

static void to_dev(void *d, const void *h, size_t n)
{
    CHECK(lite_gpu_copy(d, h, n) == 0, "copy to device");
}

static void from_dev(void *h, const void *d, size_t n)
{
    CHECK(lite_gpu_copy(h, d, n) == 0, "copy from device");
}

static uint8_t pat(int src, uint32_t id, size_t i)
{
    uint64_t x = (uint64_t)src * 0x9E3779B1u ^ (uint64_t)id * 0xC2B2AE3Du ^ i * 0x27D4EB2Fu;
    x ^= x >> 29;
    return (uint8_t)(x ^ (x >> 8));
}

static void fill_pat(uint8_t *b, size_t n, int src, uint32_t id)
{
    for (size_t i = 0; i < n; i++)
        b[i] = pat(src, id, i);
}

static void check_pat(const uint8_t *b, size_t n, int src, uint32_t id, const char *what)
{
    for (size_t i = 0; i < n; i++)
        CHECK(b[i] == pat(src, id, i), "%s: byte %zu of %zu wrong", what, i, n);
}

static void p2p(lite_ctx_t *ctx, int world)
{
    const size_t sizes[] = {1, 4096, (1u << 20) + 3, 16u << 20};
    size_t max = 16u << 20;
    uint8_t *h = malloc(max);
    void *d = dev_alloc(max);
    uint64_t tag = 1;
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++, tag++) {
        size_t n = sizes[s];
        int to = (mp_rank + 1) % world, from = (mp_rank + world - 1) % world;
        /* blocking: send to the next rank, receive from the previous one (even ranks first) */
        fill_pat(h, n, mp_rank, (uint32_t)tag);
        to_dev(d, h, n);
        void *rd = dev_alloc(n);
        size_t got = 0;
        if (mp_rank % 2 == 0) {
            CHECK_RC(ctx, lite_send(ctx, to, tag, d, n, LITE_TIMEOUT_DEFAULT));
            CHECK_RC(ctx, lite_recv(ctx, from, tag, rd, n, &got, LITE_TIMEOUT_DEFAULT));
        } else {
            CHECK_RC(ctx, lite_recv(ctx, from, tag, rd, n, &got, LITE_TIMEOUT_DEFAULT));
            CHECK_RC(ctx, lite_send(ctx, to, tag, d, n, LITE_TIMEOUT_DEFAULT));
        }
        CHECK(got == n, "received %zu of %zu", got, n);
        from_dev(h, rd, n);
        check_pat(h, n, from, (uint32_t)tag, "device recv");
        /* non-blocking, device receive posted before the device send */
        tag++;
        lite_request_t *rr, *sr;
        CHECK_RC(ctx, lite_irecv(ctx, from, tag, rd, n, &rr));
        fill_pat(h, n, mp_rank, (uint32_t)tag);
        to_dev(d, h, n);
        CHECK_RC(ctx, lite_isend(ctx, to, tag, d, n, &sr));
        lite_status_t st;
        CHECK_RC(ctx, lite_wait(ctx, sr, LITE_TIMEOUT_DEFAULT, NULL));
        CHECK_RC(ctx, lite_wait(ctx, rr, LITE_TIMEOUT_DEFAULT, &st));
        CHECK(st.bytes == n, "irecv got %zu of %zu", st.bytes, n);
        from_dev(h, rd, n);
        check_pat(h, n, from, (uint32_t)tag, "device irecv");
        lite_gpu_mem_free(rd);
    }
    lite_gpu_mem_free(d);
    free(h);
    if (mp_rank == 0)
        printf("p2p: device buffers 1 B .. 16 MiB, blocking and not: ok\n");
}

/* A collective on device buffers against the same collective on host buffers. */
static void colls(lite_ctx_t *ctx, int world)
{
    const size_t count = (3u << 20) + 7; /* f32: 12 MiB, several staging segments */
    size_t bytes = count * 4, all = bytes * (size_t)world;
    uint8_t *hin = malloc(all), *hout = malloc(all), *back = malloc(all);
    void *din = dev_alloc(all), *dout = dev_alloc(all);
    for (int dt = 0; dt < 2; dt++) {
        int dtype = dt ? LITE_BF16 : LITE_F32;
        size_t es = dt ? 2 : 4, n = count, nb = n * es;
        for (size_t i = 0; i < all; i++)
            hin[i] = pat(mp_rank, 7u + (uint32_t)dt, i) & 0x3F; /* finite, varied values */
        to_dev(din, hin, all);
        /* allreduce, out of place and in place */
        CHECK_RC(ctx, lite_allreduce(ctx, hin, hout, n, dtype, LITE_SUM, LITE_TIMEOUT_DEFAULT));
        CHECK_RC(ctx, lite_allreduce(ctx, din, dout, n, dtype, LITE_SUM, LITE_TIMEOUT_DEFAULT));
        from_dev(back, dout, nb);
        CHECK(memcmp(back, hout, nb) == 0, "allreduce %d: device result differs from host", dt);
        CHECK_RC(ctx,
                 lite_allreduce(ctx, LITE_IN_PLACE, din, n, dtype, LITE_AVG, LITE_TIMEOUT_DEFAULT));
        CHECK_RC(ctx,
                 lite_allreduce(ctx, LITE_IN_PLACE, hin, n, dtype, LITE_AVG, LITE_TIMEOUT_DEFAULT));
        from_dev(back, din, nb);
        CHECK(memcmp(back, hin, nb) == 0, "allreduce avg in place %d: differs from host", dt);
        /* reduce_scatter of world blocks of n / world elements */
        size_t rc = n / (size_t)world;
        to_dev(din, hin, rc * es * (size_t)world);
        CHECK_RC(ctx,
                 lite_reduce_scatter(ctx, hin, hout, rc, dtype, LITE_MAX, LITE_TIMEOUT_DEFAULT));
        CHECK_RC(ctx,
                 lite_reduce_scatter(ctx, din, dout, rc, dtype, LITE_MAX, LITE_TIMEOUT_DEFAULT));
        from_dev(back, dout, rc * es);
        CHECK(memcmp(back, hout, rc * es) == 0, "reduce_scatter %d differs", dt);
    }
    /* bcast from the last rank, allgather, alltoall: bytes only */
    size_t n = 1u << 20;
    fill_pat(hin, n, mp_rank, 11);
    to_dev(din, hin, n);
    CHECK_RC(ctx, lite_bcast(ctx, din, n, LITE_U8, world - 1, LITE_TIMEOUT_DEFAULT));
    from_dev(back, din, n);
    check_pat(back, n, world - 1, 11, "bcast");
    fill_pat(hin, n, mp_rank, 12);
    to_dev(din, hin, n);
    CHECK_RC(ctx, lite_allgather(ctx, din, dout, n, LITE_U8, LITE_TIMEOUT_DEFAULT));
    from_dev(back, dout, n * (size_t)world);
    for (int r = 0; r < world; r++)
        check_pat(back + (size_t)r * n, n, r, 12, "allgather");
    size_t blk = 1u << 18;
    for (int p = 0; p < world; p++)
        fill_pat(hin + (size_t)p * blk, blk, mp_rank, 100u + (uint32_t)p);
    to_dev(din, hin, blk * (size_t)world);
    CHECK_RC(ctx, lite_alltoall(ctx, din, dout, blk, LITE_U8, LITE_TIMEOUT_DEFAULT));
    from_dev(back, dout, blk * (size_t)world);
    for (int p = 0; p < world; p++)
        check_pat(back + (size_t)p * blk, blk, p, 100u + (uint32_t)mp_rank, "alltoall");
    /* alltoallv: rank p gets (p + 1) * 1000 + rank elements from each rank, packed, with a gap
     * of 7 elements after each segment that must stay untouched */
    size_t sc[16], sd[16], rcn[16], rd[16], so = 0, ro = 0;
    CHECK(world <= 16, "world %d", world);
    for (int p = 0; p < world; p++) {
        sc[p] = (size_t)(p + 1) * 1000 + (size_t)mp_rank;
        sd[p] = so;
        so += sc[p];
        rcn[p] = (size_t)(mp_rank + 1) * 1000 + (size_t)p;
        rd[p] = ro;
        ro += rcn[p] + 7;
    }
    for (int p = 0; p < world; p++)
        fill_pat(hin + sd[p] * 4, sc[p] * 4, mp_rank, 200u + (uint32_t)p);
    to_dev(din, hin, so * 4);
    memset(back, 0xA5, ro * 4);
    to_dev(dout, back, ro * 4);
    CHECK_RC(ctx, lite_alltoallv(ctx, din, sc, sd, dout, rcn, rd, LITE_F32, LITE_TIMEOUT_DEFAULT));
    from_dev(back, dout, ro * 4);
    for (int p = 0; p < world; p++) {
        check_pat(back + rd[p] * 4, rcn[p] * 4, p, 200u + (uint32_t)mp_rank, "alltoallv");
        for (size_t i = 0; i < 7 * 4; i++)
            CHECK(back[(rd[p] + rcn[p]) * 4 + i] == 0xA5, "alltoallv wrote into a gap");
    }
    /* the same exchange non-blocking, against the host-buffer ialltoallv (gaps untouched) */
    uint8_t *hv = malloc(ro * 4);
    memset(hv, 0x5A, ro * 4);
    memset(back, 0x5A, ro * 4);
    to_dev(dout, back, ro * 4);
    lite_request_t *rv_d = NULL, *rv_h = NULL;
    CHECK_RC(ctx, lite_ialltoallv(ctx, din, sc, sd, dout, rcn, rd, LITE_F32, &rv_d));
    CHECK_RC(ctx, lite_ialltoallv(ctx, hin, sc, sd, hv, rcn, rd, LITE_F32, &rv_h));
    CHECK_RC(ctx, lite_wait(ctx, rv_h, LITE_TIMEOUT_DEFAULT, NULL));
    CHECK_RC(ctx, lite_wait(ctx, rv_d, LITE_TIMEOUT_DEFAULT, NULL));
    from_dev(back, dout, ro * 4);
    CHECK(memcmp(back, hv, ro * 4) == 0, "ialltoallv: device result differs from host");
    for (int p = 0; p < world; p++)
        check_pat(back + rd[p] * 4, rcn[p] * 4, p, 200u + (uint32_t)mp_rank, "ialltoallv");
    CHECK(back[(rd[0] + rcn[0]) * 4] == 0x5A, "ialltoallv wrote into a gap");
    free(hv);
    /* non-blocking: an allreduce and an allgather outstanding together, waited in reverse */
    size_t an = (1u << 20) + 3;
    for (size_t i = 0; i < an * 4; i++)
        hin[i] = pat(mp_rank, 300, i) & 0x3F;
    to_dev(din, hin, an * 4);
    fill_pat(hin + an * 4, 4096, mp_rank, 301);
    void *dg = dev_alloc(4096 * (size_t)world), *dgin = dev_alloc(4096);
    to_dev(dgin, hin + an * 4, 4096);
    lite_request_t *ra = NULL, *rg = NULL;
    CHECK_RC(ctx, lite_iallreduce(ctx, din, dout, an, LITE_F32, LITE_SUM, &ra));
    CHECK_RC(ctx, lite_iallgather(ctx, dgin, dg, 4096, LITE_U8, &rg));
    CHECK_RC(ctx, lite_wait(ctx, rg, LITE_TIMEOUT_DEFAULT, NULL));
    CHECK_RC(ctx, lite_wait(ctx, ra, LITE_TIMEOUT_DEFAULT, NULL));
    CHECK_RC(ctx, lite_allreduce(ctx, hin, hout, an, LITE_F32, LITE_SUM, LITE_TIMEOUT_DEFAULT));
    from_dev(back, dout, an * 4);
    CHECK(memcmp(back, hout, an * 4) == 0, "iallreduce: device result differs from host");
    from_dev(back, dg, 4096 * (size_t)world);
    for (int r = 0; r < world; r++)
        check_pat(back + (size_t)r * 4096, 4096, r, 301, "iallgather");
    lite_gpu_mem_free(dg);
    lite_gpu_mem_free(dgin);
    lite_gpu_mem_free(din);
    lite_gpu_mem_free(dout);
    free(hin);
    free(hout);
    free(back);
    if (mp_rank == 0)
        printf("collectives: device buffers give the host-buffer bytes (allreduce sum/avg, "
               "reduce_scatter, bcast, allgather, alltoall, alltoallv, ialltoallv, iallreduce, "
               "iallgather): ok\n");
}

/* One-sided between device regions: write, write_imm, read, paged, scatter. */
static void onesided(lite_ctx_t *ctx, int world)
{
    size_t len = 1u << 20;
    void *d = dev_alloc(len), *src = dev_alloc(len);
    lite_mr_t *mr = NULL, *smr = NULL;
    int rc = lite_mr_reg(ctx, d, len, LITE_MEM_CUDA,
                         LITE_ACCESS_REMOTE_WRITE | LITE_ACCESS_REMOTE_READ, &mr);
    if (rc == -ENOSYS) {
        if (mp_rank == 0)
            printf("one-sided: transport %s does not register device memory: refused with "
                   "-ENOSYS (%s)\n",
                   lite_transport_name(ctx), lite_last_error(ctx));
        lite_gpu_mem_free(d);
        lite_gpu_mem_free(src);
        return;
    }
    CHECK_RC(ctx, rc);
    CHECK_RC(ctx, lite_mr_reg(ctx, src, len, LITE_MEM_CUDA, 0, &smr));
    lite_rdesc_t *descs = calloc((size_t)world, sizeof(*descs));
    CHECK_RC(ctx, lite_mr_exchange(ctx, mr, descs, LITE_TIMEOUT_DEFAULT));
    uint8_t *h = malloc(len);
    fill_pat(h, len, mp_rank, 21);
    to_dev(src, h, len);
    int to = (mp_rank + 1) % world, from = (mp_rank + world - 1) % world;
    lite_request_t *req;
    size_t half = len / 2;
    CHECK_RC(ctx, lite_write(ctx, to, smr, 0, &descs[to], 0, half, &req));
    CHECK_RC(ctx, lite_wait(ctx, req, LITE_TIMEOUT_DEFAULT, NULL));
    CHECK_RC(ctx, lite_write_imm(ctx, to, smr, half, &descs[to], half, half, 77, &req));
    CHECK_RC(ctx, lite_wait(ctx, req, LITE_TIMEOUT_DEFAULT, NULL));
    CHECK_RC(ctx, lite_imm_wait(ctx, 77, 1, LITE_TIMEOUT_DEFAULT));
    from_dev(h, d, len);
    check_pat(h, len, from, 21, "write + write_imm into device memory");
    CHECK_RC(ctx, lite_barrier(ctx, LITE_TIMEOUT_DEFAULT));
    /* read it back from the next rank's region (holding this rank's pattern) */
    void *rd = dev_alloc(len);
    lite_mr_t *rmr = NULL;
    CHECK_RC(ctx, lite_mr_reg(ctx, rd, len, LITE_MEM_CUDA, 0, &rmr));
    CHECK_RC(ctx, lite_read(ctx, to, rmr, 0, &descs[to], 0, len, &req));
    CHECK_RC(ctx, lite_wait(ctx, req, LITE_TIMEOUT_DEFAULT, NULL));
    from_dev(h, rd, len);
    check_pat(h, len, mp_rank, 21, "read from device memory");
    CHECK_RC(ctx, lite_barrier(ctx, LITE_TIMEOUT_DEFAULT));
    /* paged: 8 pages of 64 KiB, reversed */
    uint32_t sp[8], dp[8];
    for (uint32_t i = 0; i < 8; i++) {
        sp[i] = i;
        dp[i] = 7 - i;
    }
    fill_pat(h, len, mp_rank, 22);
    to_dev(src, h, len);
    CHECK_RC(ctx, lite_write_paged(ctx, to, smr, sp, &descs[to], dp, 8, 65536, 78,
                                   LITE_WRITE_WITH_IMM, &req));
    CHECK_RC(ctx, lite_wait(ctx, req, LITE_TIMEOUT_DEFAULT, NULL));
    CHECK_RC(ctx, lite_imm_wait(ctx, 78, 8, LITE_TIMEOUT_DEFAULT));
    from_dev(h, d, len);
    uint8_t *want = malloc(len);
    fill_pat(want, len, from, 22);
    for (int i = 0; i < 8; i++)
        CHECK(memcmp(h + (size_t)(7 - i) * 65536, want + (size_t)i * 65536, 65536) == 0,
              "paged page %d", i);
    CHECK_RC(ctx, lite_barrier(ctx, LITE_TIMEOUT_DEFAULT));
    /* scatter: 4 KiB to every rank at offset rank * 4 KiB */
    lite_scatter_entry_t *e = calloc((size_t)world, sizeof(*e));
    for (int p = 0; p < world; p++)
        e[p] = (lite_scatter_entry_t){.peer = p,
                                      .local_off = 0,
                                      .remote = &descs[p],
                                      .remote_off = (size_t)mp_rank * 4096,
                                      .len = 4096,
                                      .imm = 79,
                                      .flags = LITE_WRITE_WITH_IMM};
    CHECK_RC(ctx, lite_write_scatter(ctx, smr, e, (size_t)world, &req));
    CHECK_RC(ctx, lite_wait(ctx, req, LITE_TIMEOUT_DEFAULT, NULL));
    CHECK_RC(ctx, lite_imm_wait(ctx, 79, (uint64_t)world, LITE_TIMEOUT_DEFAULT));
    from_dev(h, d, (size_t)world * 4096);
    for (int p = 0; p < world; p++) {
        fill_pat(want, 4096, p, 22);
        CHECK(memcmp(h + (size_t)p * 4096, want, 4096) == 0, "scatter from %d", p);
    }
    CHECK_RC(ctx, lite_barrier(ctx, LITE_TIMEOUT_DEFAULT));
    CHECK_RC(ctx, lite_mr_dereg(ctx, rmr));
    CHECK_RC(ctx, lite_mr_dereg(ctx, smr));
    CHECK_RC(ctx, lite_mr_dereg(ctx, mr));
    lite_gpu_mem_free(rd);
    lite_gpu_mem_free(d);
    lite_gpu_mem_free(src);
    free(e);
    free(want);
    free(h);
    free(descs);
    if (mp_rank == 0)
        printf("one-sided: write, write_imm, read, paged, scatter on device regions over %s: "
               "ok\n",
               lite_transport_name(ctx));
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One round trip of n bytes between ranks 0 and 1 from buf. */
static double pingpong(lite_ctx_t *ctx, void *buf, size_t n, uint64_t tag)
{
    double t0 = now_s();
    if (mp_rank == 0) {
        CHECK_RC(ctx, lite_send(ctx, 1, tag, buf, n, LITE_TIMEOUT_DEFAULT));
        CHECK_RC(ctx, lite_recv(ctx, 1, tag, buf, n, NULL, LITE_TIMEOUT_DEFAULT));
    } else if (mp_rank == 1) {
        CHECK_RC(ctx, lite_recv(ctx, 0, tag, buf, n, NULL, LITE_TIMEOUT_DEFAULT));
        CHECK_RC(ctx, lite_send(ctx, 0, tag, buf, n, LITE_TIMEOUT_DEFAULT));
    }
    return now_s() - t0;
}

static void bench(lite_ctx_t *ctx)
{
    const size_t n = 16u << 20;
    const int iters = 15;
    void *h = malloc(n), *d = dev_alloc(n);
    memset(h, 1, n);
    CHECK(lite_gpu_memset(d, 1, n) == 0, "memset");
    double th[15], td[15];
    uint64_t tag = 1000;
    pingpong(ctx, h, n, tag++); /* warm-up: connections, bounce buffers */
    pingpong(ctx, d, n, tag++);
    for (int i = 0; i < iters; i++) { /* interleaved */
        th[i] = pingpong(ctx, h, n, tag++);
        td[i] = pingpong(ctx, d, n, tag++);
    }
    qsort(th, iters, sizeof(double), cmp_d);
    qsort(td, iters, sizeof(double), cmp_d);
    double mh = th[iters / 2], md = td[iters / 2];
    if (mp_rank == 0)
        printf("bench %s send/recv 16 MiB round trip, median of %d: host %.3f ms (%.2f GB/s), "
               "device %.3f ms (%.2f GB/s), device/host throughput %.2fx\n",
               lite_transport_name(ctx), iters, mh * 1e3, 2.0 * (double)n / mh / 1e9, md * 1e3,
               2.0 * (double)n / md / 1e9, mh / md);
    free(h);
    lite_gpu_mem_free(d);
}

/* The staging chunk the library uses (LITETX_GPU_STAGE_CHUNK, default 4 MiB). */
static size_t stage_chunk(void)
{
    const char *v = getenv("LITETX_GPU_STAGE_CHUNK");
    long long c = v ? atoll(v) : 0;
    return c > 0 ? (size_t)c : (size_t)4 << 20;
}

/* One message of n bytes from rank 0 to rank 1, each side's buffer on the device or not. */
static void pipe_one(lite_ctx_t *ctx, size_t n, bool sdev, bool rdev, bool nb, uint64_t tag,
                     uint8_t *h, void *d)
{
    const char *what = sdev && rdev ? "device to device"
                       : sdev       ? "device to host"
                                    : "host to device";
    if (mp_rank == 0) {
        fill_pat(h, n, 0, (uint32_t)tag);
        void *src = h;
        if (sdev) {
            to_dev(d, h, n);
            src = d;
        }
        if (nb) {
            lite_request_t *sr;
            CHECK_RC(ctx, lite_isend(ctx, 1, tag, src, n, &sr));
            CHECK_RC(ctx, lite_wait(ctx, sr, LITE_TIMEOUT_DEFAULT, NULL));
        } else {
            CHECK_RC(ctx, lite_send(ctx, 1, tag, src, n, LITE_TIMEOUT_DEFAULT));
        }
        return;
    }
    /* bytes past n keep their old value: mark them, check them after */
    memset(h, 0xA5, n + 1);
    void *dst = h;
    if (rdev) {
        to_dev(d, h, n + 1);
        dst = d;
    }
    size_t got = 0;
    if (nb) {
        lite_request_t *rr;
        lite_status_t st;
        CHECK_RC(ctx, lite_irecv(ctx, 0, tag, dst, n + 1, &rr));
        CHECK_RC(ctx, lite_wait(ctx, rr, LITE_TIMEOUT_DEFAULT, &st));
        got = st.bytes;
    } else {
        CHECK_RC(ctx, lite_recv(ctx, 0, tag, dst, n + 1, &got, LITE_TIMEOUT_DEFAULT));
    }
    CHECK(got == n, "%s %s: received %zu of %zu", what, nb ? "irecv" : "recv", got, n);
    if (rdev)
        from_dev(h, d, n + 1);
    check_pat(h, n, 0, (uint32_t)tag, what);
    CHECK(h[n] == 0xA5, "%s: byte %zu past the message was written", what, n);
}

static void pipe_check(lite_ctx_t *ctx, int world)
{
    CHECK(world == 2, "gpu_mp pipe runs with 2 ranks, not %d", world);
    size_t c = stage_chunk();
    const size_t sizes[] = {1, c - 1, c, c + 1, 5 * c + c / 2, (size_t)64 << 20};
    const size_t max = (size_t)64 << 20 > 6 * c ? (size_t)64 << 20 : 6 * c;
    uint8_t *h = malloc(max + 1);
    CHECK(h != NULL, "malloc");
    void *d = dev_alloc(max + 1);
    uint64_t tag = 1;
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        if (sizes[s] == 0)
            continue;
        for (int combo = 0; combo < 3; combo++) {
            for (int nb = 0; nb < 2; nb++)
                pipe_one(ctx, sizes[s], combo != 2, combo != 1, nb != 0, tag++, h, d);
        }
    }
    /* A device receive nobody sends to: withdrawn after its wait times out. */
    lite_request_t *rr;
    CHECK_RC(ctx, lite_irecv(ctx, 1 - mp_rank, 900, d, c, &rr));
    int rc = lite_wait(ctx, rr, 50, NULL);
    CHECK(rc == -ETIMEDOUT, "a device receive nobody sends to ended with %d", rc);
    CHECK_RC(ctx, lite_cancel(ctx, rr));
    /* A large device send its receiver does not post in time: withdrawn after its timeout;
     * the receive posted later gets -LITE_ERR_CANCELLED and never the bytes. */
    size_t big = 3 * c + 5;
    if (mp_rank == 0) {
        fill_pat(h, big, 0, 901);
        to_dev(d, h, big);
        rc = lite_send(ctx, 1, 901, d, big, 200);
        CHECK(rc == -ETIMEDOUT, "a device send nobody received ended with %d", rc);
    }
    CHECK_RC(ctx, lite_barrier(ctx, LITE_TIMEOUT_DEFAULT));
    if (mp_rank == 1) {
        memset(h, 0xA5, big);
        to_dev(d, h, big);
        rc = lite_recv(ctx, 0, 901, d, big, NULL, LITE_TIMEOUT_DEFAULT);
        CHECK(rc == -LITE_ERR_CANCELLED, "the receive of a withdrawn send ended with %d", rc);
        from_dev(h, d, big);
        for (size_t i = 0; i < big; i++)
            CHECK(h[i] == 0xA5, "a withdrawn send wrote byte %zu", i);
    }
    /* the pipe still works after both */
    pipe_one(ctx, 2 * c + 1, true, true, true, 902, h, d);
    lite_gpu_mem_free(d);
    free(h);
    if (mp_rank == 0)
        printf("pipe: device send/recv around the %zu-byte chunk (1 B .. 64 MiB, device/host "
               "combinations, blocking and not), cancel, withdrawn send: ok\n",
               c);
}

/* Progress for ms milliseconds: long enough for part of a 64 MiB message to move. */
static void progress_for(lite_ctx_t *ctx, int ms)
{
    double end = now_s() + ms / 1e3;
    for (int i = 0; i < 10000000 && now_s() < end; i++)
        lite_progress(ctx);
}

/* One rank vanishes in the middle of a 64 MiB device message from rank 1 to rank 0: the
 * sender (`lost`) or the receiver (`lost_recv`). The survivor's request ends with
 * -LITE_ERR_PEER_LOST. */
static void lost(lite_ctx_t *ctx, int world, bool sender_dies)
{
    CHECK(world == 2, "gpu_mp lost runs with 2 ranks, not %d", world);
    const size_t len = (size_t)64 << 20;
    void *d = dev_alloc(len);
    CHECK(lite_gpu_memset(d, 7, len) == 0, "memset");
    lite_request_t *req;
    int dying = sender_dies ? 1 : 0;
    if (mp_rank == 1) {
        /* after rank 0's receive is posted, so the rendezvous is under way */
        CHECK_RC(ctx, lite_recv(ctx, 0, 1, NULL, 0, NULL, LITE_TIMEOUT_DEFAULT));
        CHECK_RC(ctx, lite_isend(ctx, 0, 2, d, len, &req));
    } else {
        CHECK_RC(ctx, lite_irecv(ctx, 1, 2, d, len, &req));
        CHECK_RC(ctx, lite_send(ctx, 1, 1, NULL, 0, LITE_TIMEOUT_DEFAULT));
    }
    if (mp_rank == dying) {
        progress_for(ctx, 20);
        _exit(0);
    }
    lite_status_t st;
    int rc = lite_wait(ctx, req, 60000, &st);
    printf("lost: the device %s the vanished rank ended with %d (%s)\n",
           sender_dies ? "receive from" : "send to", rc, lite_strerror(rc));
    CHECK(rc == -LITE_ERR_PEER_LOST, "expected -LITE_ERR_PEER_LOST, got %d", rc);
    lite_gpu_mem_free(d); /* nothing may write into it any more (ASan would see it) */
    lite_finalize(ctx);   /* returns; its result reports the lost peer */
    exit(0);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "check";
    char why[256];
    if (lite_gpu_available(why, sizeof(why)) != 0) {
        printf("SKIPPED: %s\n", why);
        return 77;
    }
    lite_config_t cfg = lite_config_default();
    lite_ctx_t *ctx = NULL;
    int rc = lite_init(&cfg, &ctx);
    CHECK(rc == 0, "lite_init: %s", lite_init_error());
    mp_rank = lite_rank(ctx);
    int world = lite_world_size(ctx);
    if (strcmp(mode, "bench") == 0) {
        bench(ctx);
    } else if (strcmp(mode, "pipe") == 0) {
        pipe_check(ctx, world);
    } else if (strcmp(mode, "lost") == 0 || strcmp(mode, "lost_recv") == 0) {
        lost(ctx, world, strcmp(mode, "lost") == 0);
    } else {
        p2p(ctx, world);
        colls(ctx, world);
        onesided(ctx, world);
    }
    CHECK_RC(ctx, lite_barrier(ctx, LITE_TIMEOUT_DEFAULT));
    CHECK_RC(ctx, lite_finalize(ctx));
    return 0;
}
