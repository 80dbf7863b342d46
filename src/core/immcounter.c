/*
 * immcounter.c - ImmCounter: a count per 32-bit immediate, bumped when a write with that
 * immediate has placed its data here, and consumed by lite_imm_wait(). Arrivals before the wait
 * are kept ("banked"). Memory is bounded: at most `max` distinct immediates with a non-zero
 * count; counters back at zero are recycled when the table fills up.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "immcounter.h"
#include "progress.h"
#include "request.h"
#include "tunables.h"

#define IMM_DEFAULT_MAX 65536u

static uint32_t hash32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    return x ^ (x >> 16);
}

static uint32_t max_counters(void)
{
    return (uint32_t)lite_tun_long("LITETX_IMM_COUNTERS", IMM_DEFAULT_MAX);
}

static struct lite_imm_entry *find(struct lite_imm_table *t, uint32_t imm)
{
    if (!t->cap)
        return NULL;
    for (uint32_t i = hash32(imm) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        if (!t->e[i].used)
            return NULL;
        if (t->e[i].imm == imm)
            return &t->e[i];
    }
}

/* Rebuild into `cap` slots, dropping counters at zero. */
static int rebuild(struct lite_imm_table *t, uint32_t cap)
{
    struct lite_imm_entry *e = calloc(cap, sizeof(*e));
    if (!e)
        return -ENOMEM;
    uint32_t used = 0;
    for (uint32_t i = 0; i < t->cap; i++) {
        if (!t->e[i].used || t->e[i].count == 0)
            continue;
        uint32_t j = hash32(t->e[i].imm) & (cap - 1);
        while (e[j].used)
            j = (j + 1) & (cap - 1);
        e[j] = t->e[i];
        used++;
    }
    free(t->e);
    t->e = e;
    t->cap = cap;
    t->used = used;
    return 0;
}

static struct lite_imm_entry *find_or_add(struct lite_imm_table *t, uint32_t imm)
{
    struct lite_imm_entry *x = find(t, imm);
    if (x)
        return x;
    if (!t->max)
        t->max = max_counters();
    if (t->used >= t->max && rebuild(t, t->cap) != 0) /* recycle counters back at zero */
        return NULL;
    /* Keep the load under 1/2; grow up to what `max` entries need, else recycle zeros. */
    if (2 * (t->used + 1) > t->cap) {
        uint32_t cap = t->cap ? t->cap : 64;
        while (2 * (t->used + 1) > cap && cap < 4 * t->max)
            cap *= 2;
        if (rebuild(t, cap) != 0)
            return NULL;
    }
    if (t->used >= t->max || 2 * (t->used + 1) > t->cap)
        return NULL;
    uint32_t i = hash32(imm) & (t->cap - 1);
    while (t->e[i].used)
        i = (i + 1) & (t->cap - 1);
    t->e[i] = (struct lite_imm_entry){.imm = imm, .used = true, .count = 0};
    t->used++;
    return &t->e[i];
}

void lite_imm_arrived(struct lite_core *core, int peer, uint32_t imm)
{
    struct lite_ctx *ctx = (struct lite_ctx *)core;
    struct lite_imm_entry *x = find_or_add(&ctx->imm, imm);
    if (!x) {
        if (!ctx->imm.overflow)
            LITE_ERROR("rank %d: ImmCounter table full (%u immediates in use); an arrival from "
                       "rank %d for imm %#x is lost",
                       ctx->s.rank, ctx->imm.used, peer, imm);
        ctx->imm.overflow = true;
        return;
    }
    x->count++;
}

void lite_imm_setup(struct lite_ctx *ctx)
{
    ctx->imm.max = max_counters(); /* at init, so a bad LITETX_IMM_COUNTERS fails lite_init */
}

void lite_imm_fini(struct lite_ctx *ctx)
{
    free(ctx->imm.e);
    memset(&ctx->imm, 0, sizeof(ctx->imm));
}

LITE_API int lite_imm_peek(lite_ctx_t *ctx, uint32_t imm, uint64_t *count)
{
    if (!ctx || !count)
        return -EINVAL;
    struct lite_imm_entry *x = find(&ctx->imm, imm);
    *count = x ? x->count : 0;
    return 0;
}

LITE_API int lite_imm_reset(lite_ctx_t *ctx, uint32_t imm)
{
    if (!ctx)
        return -EINVAL;
    struct lite_imm_entry *x = find(&ctx->imm, imm);
    if (x)
        x->count = 0;
    return 0;
}

#define IMM_SPIN_MAX_WRITE (256 * 1024) /* byte streams: writes this small keep a wait spinning */

LITE_API int lite_imm_wait(lite_ctx_t *ctx, uint32_t imm, uint64_t expected, int timeout_ms)
{
    if (!ctx)
        return -EINVAL;
    bool stream = (ctx->ops.caps & LITE_CAP_EMULATED_RMA) != 0;
    struct lite_waiter w;
    lite_waiter_start(&w, 0, timeout_ms == LITE_TIMEOUT_DEFAULT ? ctx->s.op_timeout_ms : timeout_ms,
                      ctx->spin_ns);
    uint64_t seen = UINT64_MAX;
    for (;;) {
        struct lite_imm_entry *x = find(&ctx->imm, imm);
        uint64_t have = x ? x->count : 0;
        if (have >= expected) {
            if (x)
                x->count -= expected;
            return 0;
        }
        if (ctx->imm.overflow)
            return lite_fail(ctx, -ENOSPC,
                             "imm_wait(%#x): arrivals were lost, the ImmCounter table is full "
                             "(raise LITETX_IMM_COUNTERS)",
                             imm);
        if (lite_any_peer_lost(ctx)) {
            /* Counts do not say who writes them: name the lost peers, the likely writers. */
            char lost[200];
            lite_lost_peers(ctx, lost, sizeof(lost));
            return lite_fail(ctx, -LITE_ERR_PEER_LOST, "imm_wait(%#x): %llu of %llu arrived and %s",
                             imm, (unsigned long long)have, (unsigned long long)expected, lost);
        }
        if (have != seen) {
            if (!stream || ctx->rma_last_len < IMM_SPIN_MAX_WRITE)
                lite_waiter_respin(&w);
            seen = have;
        }
        int ms = lite_waiter_next(&w);
        if (ms < 0)
            return lite_fail(ctx, -ETIMEDOUT, "imm_wait(%#x): %llu of %llu arrived by the deadline",
                             imm, (unsigned long long)have, (unsigned long long)expected);
        int rc = lite_progress_once(ctx, ms);
        if (rc < 0)
            return rc;
    }
}
