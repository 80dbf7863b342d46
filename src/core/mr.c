/*
 * mr.c - memory registration: the region table, remote descriptors (pack, parse; their exchange
 * is mr_exchange.c), and
 * the target-side check of every emulated one-sided op (key, bounds, rights) before a byte moves.
 *
 * Remote descriptor layout (LITE_RDESC_SIZE bytes, little-endian):
 *    0  u8 version | u8 nrails | u16 transport id | u32 owner rank
 *    8  u64 base address
 *   16  u64 length
 *   24  u32 access | u32 memory kind
 *   32  u64 core key (generation << 32 | slot + 1)
 *   40  u64 rkey[LITE_MAX_RAILS]
 *  104  u32 magic "LTRD" | u32 FNV-1a checksum of bytes 0..103
 *  112  zero
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu.h"
#include "mr.h"
#include "progress.h"
#include "request.h"

#define RDESC_MAGIC   0x4452544cu /* "LTRD" */
#define RDESC_SUM_OFF 104
_Static_assert(RDESC_SUM_OFF + 8 == LITE_RDESC_PARSED, "the memo keeps what parse reads");

static uint32_t fnv1a(const uint8_t *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

static uint16_t transport_id(const char *name)
{
    uint32_t h = fnv1a((const uint8_t *)name, strlen(name));
    return (uint16_t)(h ^ (h >> 16));
}

static struct lite_mr *lookup(struct lite_ctx *ctx, uint64_t key)
{
    uint32_t slot = (uint32_t)key;
    if (slot == 0 || slot > ctx->nmrs || ctx->mr_closed)
        return NULL;
    struct lite_mr *mr = ctx->mrs[slot - 1];
    return mr && mr->key == key ? mr : NULL;
}

LITE_API int lite_mr_reg(lite_ctx_t *ctx, void *addr, size_t len, int kind, unsigned access,
                         lite_mr_t **out)
{
    if (!ctx)
        return -EINVAL;
    if (!out || !addr || len == 0)
        return lite_fail(ctx, -EINVAL, "mr_reg: %s", !out ? "NULL output" : "empty region");
    if (access & ~(unsigned)(LITE_ACCESS_REMOTE_WRITE | LITE_ACCESS_REMOTE_READ))
        return lite_fail(ctx, -EINVAL, "mr_reg: unknown access bits %#x", access);
    if (kind != LITE_MEM_HOST && kind != LITE_MEM_CUDA)
        return lite_fail(ctx, -EINVAL, "mr_reg: unknown memory kind %d", kind);
    if (kind == LITE_MEM_CUDA) {
        char why[200];
        int g = lite_gpu_available(why, sizeof(why));
        if (g)
            return lite_fail(ctx, g, "mr_reg: LITE_MEM_CUDA needs a CUDA device: %s", why);
        if (!lite_gpu_ptr_is_device(addr, NULL))
            return lite_fail(ctx, -EINVAL, "mr_reg: %p is not CUDA device memory (LITE_MEM_CUDA)",
                             addr);
    }
    if (kind == LITE_MEM_CUDA && !(ctx->ops.caps & LITE_CAP_DEVICE_MEM))
        return lite_fail(ctx, -ENOSYS, "mr_reg: transport %s cannot register device memory",
                         ctx->ops.name);
    if ((uintptr_t)addr > UINTPTR_MAX - len)
        return lite_fail(ctx, -EINVAL, "mr_reg: region wraps around the address space");
    if (!ctx->tp_id)
        ctx->tp_id = transport_id(ctx->ops.name);

    uint32_t slot = 0;
    while (slot < ctx->nmrs && ctx->mrs[slot])
        slot++;
    if (slot == ctx->nmrs) {
        uint32_t n = ctx->nmrs ? ctx->nmrs * 2 : 16;
        struct lite_mr **m = realloc(ctx->mrs, n * sizeof(*m));
        if (!m)
            return lite_fail(ctx, -ENOMEM, "mr_reg: out of memory");
        ctx->mrs = m;
        uint32_t *g = realloc(ctx->mr_gen, n * sizeof(*g));
        if (!g)
            return lite_fail(ctx, -ENOMEM, "mr_reg: out of memory");
        ctx->mr_gen = g;
        /* Generations start at a per-context random point so another context's (or an earlier
         * run's) descriptor does not happen to name a live region. */
        uint32_t seed = (uint32_t)lite_now_ns() ^ (uint32_t)(uintptr_t)ctx;
        for (uint32_t i = ctx->nmrs; i < n; i++) {
            ctx->mrs[i] = NULL;
            ctx->mr_gen[i] = fnv1a((const uint8_t *)&seed, sizeof(seed)) + i * 7919u;
        }
        ctx->nmrs = n;
    }
    struct lite_mr *mr = calloc(1, sizeof(*mr));
    if (!mr)
        return lite_fail(ctx, -ENOMEM, "mr_reg: out of memory");
    mr->addr = addr;
    mr->len = len;
    mr->kind = kind;
    mr->access = access;
    mr->key = (uint64_t)(++ctx->mr_gen[slot]) << 32 | (slot + 1);
    struct lite_tp_mr tm = {
        .addr = addr, .len = len, .mem_kind = kind, .access = access, .core_key = mr->key};
    /* Emulated one-sided ops need no backend registration: the core key names the region. */
    int rc = (ctx->emu & LITE_EMU_WRITE) ? 0 : ctx->ops.mr_reg(ctx->tp, &tm, &mr->keys);
    if (rc) {
        free(mr);
        return lite_fail(ctx, rc, "mr_reg: transport %s refused the region: %s", ctx->ops.name,
                         lite_strerror(rc));
    }
    ctx->mrs[slot] = mr;
    *out = mr;
    return 0;
}

LITE_API int lite_mr_dereg(lite_ctx_t *ctx, lite_mr_t *mr)
{
    if (!ctx || !mr)
        return ctx ? 0 : -EINVAL;
    if (lookup(ctx, mr->key) != mr)
        return lite_fail(ctx, -EINVAL, "mr_dereg: not a registered region of this context");
    /* Peers' ops already placing data here finish first, so nothing writes into memory the
     * caller may free as soon as this returns. */
    int64_t deadline = lite_deadline_ns(ctx->s.op_timeout_ms);
    while (mr->inflight > 0 && lite_now_ns() < deadline)
        lite_progress_once(ctx, 1);
    if (mr->inflight > 0)
        return lite_fail(ctx, -ETIMEDOUT, "mr_dereg: %u peer op(s) still using the region",
                         mr->inflight);
    /* A backend whose peers place data natively withdraws the region with their help
     * (-EAGAIN: progress, then ask again). */
    int rc = (ctx->emu & LITE_EMU_WRITE) ? 0 : ctx->ops.mr_dereg(ctx->tp, mr->keys.handle);
    while (rc == -EAGAIN && lite_now_ns() < deadline) {
        lite_progress_once(ctx, 1);
        rc = ctx->ops.mr_dereg(ctx->tp, mr->keys.handle);
    }
    if (rc == -EAGAIN)
        return lite_fail(ctx, -ETIMEDOUT,
                         "mr_dereg: a peer that used the region has not confirmed that its ops "
                         "into it are over; it stays registered (peers' new ops are refused): "
                         "call again before freeing the memory");
    ctx->mrs[(uint32_t)mr->key - 1] = NULL;
    free(mr);
    return rc;
}

/* Before the transport closes: deregister every region (providers want their MRs closed
 * before the domain) and stop accepting peers' ops into them, but keep the records: a closing
 * transport may still finish a peer's op that was placing data and hand its token back. */
void lite_mr_close(struct lite_ctx *ctx)
{
    for (uint32_t i = 0; i < ctx->nmrs && !ctx->mr_closed; i++)
        if (ctx->mrs[i] && ctx->tp && !(ctx->emu & LITE_EMU_WRITE))
            ctx->ops.mr_dereg(ctx->tp, ctx->mrs[i]->keys.handle);
    ctx->mr_closed = true;
}

/* After the transport closed: nothing refers to the records any more. */
void lite_mr_fini(struct lite_ctx *ctx)
{
    lite_mr_close(ctx);
    for (uint32_t i = 0; i < ctx->nmrs; i++)
        free(ctx->mrs[i]);
    free(ctx->mrs);
    free(ctx->mr_gen);
    free(ctx->rdesc_memo);
    ctx->rdesc_memo = NULL;
    ctx->mrs = NULL;
    ctx->mr_gen = NULL;
    ctx->nmrs = 0;
}

static void pack(struct lite_ctx *ctx, const struct lite_mr *mr, lite_rdesc_t *d)
{
    uint8_t *b = d->bytes;
    memset(b, 0, LITE_RDESC_SIZE);
    b[0] = LITE_RDESC_VERSION;
    b[1] = (uint8_t)mr->keys.nrails;
    b[2] = (uint8_t)ctx->tp_id;
    b[3] = (uint8_t)(ctx->tp_id >> 8);
    lite_put32(b + 4, (uint32_t)ctx->s.rank);
    lite_put64(b + 8, (uint64_t)(uintptr_t)mr->addr);
    lite_put64(b + 16, mr->len);
    lite_put32(b + 24, mr->access);
    lite_put32(b + 28, (uint32_t)mr->kind);
    lite_put64(b + 32, mr->key);
    for (uint32_t i = 0; i < mr->keys.nrails && i < LITE_MAX_RAILS; i++)
        lite_put64(b + 40 + 8 * i, mr->keys.rkey[i]);
    lite_put32(b + RDESC_SUM_OFF, RDESC_MAGIC);
    lite_put32(b + RDESC_SUM_OFF + 4, fnv1a(b, RDESC_SUM_OFF));
}

LITE_API int lite_mr_desc(lite_ctx_t *ctx, const lite_mr_t *mr, lite_rdesc_t *desc)
{
    if (!ctx || !mr || !desc)
        return -EINVAL;
    pack(ctx, mr, desc);
    return 0;
}

int lite_rdesc_parse(struct lite_ctx *ctx, const lite_rdesc_t *d, int peer,
                     struct lite_rdesc_info *out)
{
    if (!d)
        return lite_fail(ctx, -EINVAL, "NULL remote descriptor");
    const uint8_t *b = d->bytes;
    /* A one-sided op names its descriptor every time, and the checksum is a byte loop (~600
     * instructions, more than the rest of a shm write's core path): the last descriptors
     * parsed are kept, found by their checksum field and compared whole. */
    struct lite_rdesc_memo *m = NULL;
    if (ctx->rdesc_memo || (ctx->rdesc_memo = calloc(LITE_RDESC_MEMOS, sizeof(*m)))) {
        m = &ctx->rdesc_memo[lite_get32(b + RDESC_SUM_OFF + 4) % LITE_RDESC_MEMOS];
        if (m->valid && memcmp(m->raw, b, LITE_RDESC_PARSED) == 0) {
            if (m->info.owner != (uint32_t)peer)
                return lite_fail(ctx, -EINVAL, "remote descriptor is of rank %u, not of rank %d",
                                 m->info.owner, peer);
            *out = m->info;
            return 0;
        }
    }
    if (!ctx->tp_id)
        ctx->tp_id = transport_id(ctx->ops.name);
    if (lite_get32(b + RDESC_SUM_OFF) != RDESC_MAGIC ||
        lite_get32(b + RDESC_SUM_OFF + 4) != fnv1a(b, RDESC_SUM_OFF))
        return lite_fail(ctx, -EINVAL, "not a remote descriptor (bad magic or checksum)");
    if (b[0] != LITE_RDESC_VERSION)
        return lite_fail(ctx, -EINVAL, "remote descriptor version %u, expected %u", b[0],
                         LITE_RDESC_VERSION);
    if ((uint16_t)(b[2] | b[3] << 8) != ctx->tp_id)
        return lite_fail(ctx, -EINVAL, "remote descriptor belongs to another transport than %s",
                         ctx->ops.name);
    out->owner = lite_get32(b + 4);
    if (out->owner != (uint32_t)peer)
        return lite_fail(ctx, -EINVAL, "remote descriptor is of rank %u, not of rank %d",
                         out->owner, peer);
    out->nrails = b[1];
    if (out->nrails > LITE_MAX_RAILS)
        return lite_fail(ctx, -EINVAL, "remote descriptor with %u rails", out->nrails);
    out->addr = lite_get64(b + 8);
    out->len = lite_get64(b + 16);
    out->access = lite_get32(b + 24);
    out->kind = (int)lite_get32(b + 28);
    out->core_key = lite_get64(b + 32);
    for (uint32_t i = 0; i < out->nrails; i++)
        out->rkey[i] = lite_get64(b + 40 + 8 * i);
    /* The checksum is no seal: bytes from elsewhere may carry any fields. Refuse what
     * lite_mr_reg never registers, so backends get no region that wraps around or rights and
     * kinds they do not know. */
    if (out->addr > UINT64_MAX - out->len)
        return lite_fail(ctx, -EINVAL, "remote descriptor's region wraps around the address space");
    if (out->access & ~(unsigned)(LITE_ACCESS_REMOTE_WRITE | LITE_ACCESS_REMOTE_READ))
        return lite_fail(ctx, -EINVAL, "remote descriptor with unknown access bits %#x",
                         out->access);
    if (out->kind != LITE_MEM_HOST && out->kind != LITE_MEM_CUDA)
        return lite_fail(ctx, -EINVAL, "remote descriptor with unknown memory kind %d", out->kind);
    if (m) {
        memcpy(m->raw, b, LITE_RDESC_PARSED);
        m->info = *out;
        m->valid = true;
    }
    return 0;
}

/* ---- target side of emulated one-sided ops ---- */

int lite_mr_target(struct lite_core *core, int peer, uint64_t key, uint64_t offset, uint64_t len,
                   unsigned access, void **addr, void **token)
{
    struct lite_ctx *ctx = (struct lite_ctx *)core;
    struct lite_mr *mr = lookup(ctx, key);
    int rc = 0;
    ctx->rma_last_len = len;
    if (!mr)
        rc = -LITE_ERR_REMOTE_KEY;
    else if (offset > mr->len || len > mr->len - offset)
        rc = -LITE_ERR_REMOTE_BOUNDS;
    else if (!(mr->access & access))
        rc = -LITE_ERR_REMOTE_ACCESS;
    if (rc) {
        LITE_INFO("rank %d refused a one-sided op of rank %d (key %#llx, offset %llu, %llu "
                  "bytes): %s",
                  ctx->s.rank, peer, (unsigned long long)key, (unsigned long long)offset,
                  (unsigned long long)len, lite_strerror(rc));
        return rc;
    }
    mr->inflight++;
    *addr = (uint8_t *)mr->addr + offset;
    *token = mr;
    return 0;
}

void lite_mr_target_done(struct lite_core *core, void *token)
{
    struct lite_mr *mr = token;
    if (mr && mr->inflight)
        mr->inflight--;
}
