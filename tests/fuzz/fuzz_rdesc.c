/*
 * fuzz_rdesc.c - the remote descriptor parser (lite_rdesc_parse). A descriptor is bytes an
 * application ships through any channel or gets from lite_mr_exchange, i.e. from a peer; the
 * parse decides what a one-sided op may address.
 *
 * Input: u8 mode, u8 peer, then the descriptor's bytes (zero-padded to LITE_RDESC_SIZE). The
 * mode's bits repair what random bytes almost never get right, so that the fields behind the
 * checks are fuzzed too: bit 0 the magic and checksum, bit 1 the version, bit 2 the transport,
 * bit 3 the owner. Repairs are applied version, transport, owner first, checksum last.
 */
#include "ctx.h"
#include "mr.h"
#include "fuzz_check.h"

#define RDESC_MAGIC   0x4452544cu /* the layout documented in src/core/mr.c */
#define RDESC_SUM_OFF 104
#define TRANSPORT     "tcp"

static struct lite_ctx ctx;

static uint32_t fnv1a(const uint8_t *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

static void seal(uint8_t *b)
{
    lite_put32(b + RDESC_SUM_OFF, RDESC_MAGIC);
    lite_put32(b + RDESC_SUM_OFF + 4, fnv1a(b, RDESC_SUM_OFF));
}

static bool same_info(const struct lite_rdesc_info *a, const struct lite_rdesc_info *b)
{
    if (a->addr != b->addr || a->len != b->len || a->core_key != b->core_key ||
        a->access != b->access || a->kind != b->kind || a->owner != b->owner ||
        a->nrails != b->nrails)
        return false;
    for (uint32_t i = 0; i < a->nrails && i < LITE_MAX_RAILS; i++)
        if (a->rkey[i] != b->rkey[i])
            return false;
    return true;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    lite_log_set_level(LITE_LOG_ERROR);
    ctx.ops.name = TRANSPORT;
    ctx.s.world_size = 256;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_in in = {data, size};
    uint8_t mode = fuzz_u8(&in);
    int peer = fuzz_u8(&in);
    lite_rdesc_t d;
    for (size_t i = 0; i < sizeof(d.bytes); i++)
        d.bytes[i] = fuzz_u8(&in);
    uint8_t *b = d.bytes;
    if (mode & 2)
        b[0] = LITE_RDESC_VERSION;
    if (mode & 4) {
        uint32_t h = fnv1a((const uint8_t *)TRANSPORT, strlen(TRANSPORT));
        uint16_t id = (uint16_t)(h ^ (h >> 16));
        b[2] = (uint8_t)id;
        b[3] = (uint8_t)(id >> 8);
    }
    if (mode & 8)
        lite_put32(b + 4, (uint32_t)peer);
    if (mode & 1)
        seal(b);

    struct lite_rdesc_info ri;
    memset(&ri, 0, sizeof(ri));
    int rc = lite_rdesc_parse(&ctx, &d, peer, &ri);
    FUZZ_CHECK(rc == 0 || rc == -EINVAL);
    FUZZ_CHECK(memchr(ctx.last_error, 0, sizeof(ctx.last_error)) != NULL);
    if (rc == 0) {
        /* What the one-sided ops build on: the descriptor is what it says and its region is a
         * region (lite_mr_reg makes no other). */
        FUZZ_CHECK(lite_get32(b + RDESC_SUM_OFF) == RDESC_MAGIC);
        FUZZ_CHECK(lite_get32(b + RDESC_SUM_OFF + 4) == fnv1a(b, RDESC_SUM_OFF));
        FUZZ_CHECK(b[0] == LITE_RDESC_VERSION);
        FUZZ_CHECK(ri.owner == (uint32_t)peer);
        FUZZ_CHECK(ri.nrails <= LITE_MAX_RAILS);
        FUZZ_CHECK(ri.addr == lite_get64(b + 8) && ri.len == lite_get64(b + 16));
        FUZZ_CHECK(ri.core_key == lite_get64(b + 32));
        FUZZ_CHECK(ri.addr <= UINT64_MAX - ri.len);
        FUZZ_CHECK((ri.access & ~(unsigned)(LITE_ACCESS_REMOTE_WRITE | LITE_ACCESS_REMOTE_READ)) ==
                   0);
        FUZZ_CHECK(ri.kind == LITE_MEM_HOST || ri.kind == LITE_MEM_CUDA);
    }

    /* The same bytes again are answered from the parse memo: the same verdict and fields, and
     * the owner is still checked against the peer named this time. */
    struct lite_rdesc_info again;
    memset(&again, 0, sizeof(again));
    int rc2 = lite_rdesc_parse(&ctx, &d, peer, &again);
    FUZZ_CHECK(rc2 == rc);
    if (rc == 0) {
        FUZZ_CHECK(same_info(&ri, &again));
        FUZZ_CHECK(lite_rdesc_parse(&ctx, &d, (peer + 1) % 256, &again) == -EINVAL);

        /* Packing the parsed region gives a descriptor that parses to the same fields, and
         * the same bytes where the input left the unused rail keys and the tail zero. */
        struct lite_mr mr;
        memset(&mr, 0, sizeof(mr));
        mr.addr = (void *)(uintptr_t)ri.addr;
        mr.len = (size_t)ri.len;
        mr.kind = ri.kind;
        mr.access = ri.access;
        mr.key = ri.core_key;
        mr.keys.nrails = ri.nrails;
        memcpy(mr.keys.rkey, ri.rkey, sizeof(mr.keys.rkey));
        lite_rdesc_t p;
        ctx.s.rank = (int)ri.owner;
        FUZZ_CHECK(lite_mr_desc((lite_ctx_t *)&ctx, &mr, &p) == 0);
        ctx.s.rank = 0;
        FUZZ_CHECK(lite_rdesc_parse(&ctx, &p, peer, &again) == 0);
        FUZZ_CHECK(same_info(&ri, &again));
        bool unused_zero = true;
        for (size_t i = 40 + 8 * (size_t)ri.nrails; i < RDESC_SUM_OFF; i++)
            unused_zero &= b[i] == 0;
        for (size_t i = RDESC_SUM_OFF + 8; i < LITE_RDESC_SIZE; i++)
            unused_zero &= b[i] == 0;
        if (unused_zero)
            FUZZ_CHECK(memcmp(p.bytes, b, LITE_RDESC_SIZE) == 0);
    }
    /* Each run starts from an empty memo, so a crash reproduces from its input alone. */
    free(ctx.rdesc_memo);
    ctx.rdesc_memo = NULL;
    return 0;
}
