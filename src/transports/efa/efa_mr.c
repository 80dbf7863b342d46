/*
 * efa_mr.c - memory registration that honours the provider's mr_mode bits:
 *   FI_MR_LOCAL      local buffers need a descriptor: the eager and send pools are registered
 *                    once; a rendezvous source (the core passes no handle) is registered for the
 *                    one op and released at its completion ("on the fly", no cache: a cache
 *                    would need memory hooks to notice freed buffers).
 *   FI_MR_VIRT_ADDR  remote addresses are virtual (base + offset), else offsets in the region.
 *   FI_MR_PROV_KEY   the provider picks keys; otherwise we ask for the core's key (a random
 *                    per-context generation in the high half, so keys are hard to guess and
 *                    never reused) or, for internal regions, a counter with a zero low half.
 *   FI_MR_ALLOCATED  everything registered is allocated memory anyway.
 *   FI_MR_ENDPOINT   each registration is bound to its rail's endpoint and enabled.
 *   FI_MR_HMEM       device memory is registered with iface FI_HMEM_CUDA (CUDA builds only).
 * One registration spans every rail (one fid_mr per domain); the per-rail keys go into the
 * core's remote descriptor, and also back to peers that ask (efa_rma.c) so a target's own
 * word decides what an initiator puts on the wire.
 */
#include <stdlib.h>
#include <string.h>

#include "efa.h"
#include "gpu.h"

static uint32_t bucket(uint64_t key)
{
    uint64_t h = (key ^ (key >> 29)) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 56) & (EFA_MR_BUCKETS - 1);
}

struct efa_mr *lite_efa_mr_find(struct lite_transport *t, uint64_t core_key)
{
    for (struct efa_mr *m = t->mrtab[bucket(core_key)]; m; m = m->hnext)
        if (m->core_key == core_key)
            return m;
    return NULL;
}

/* Register [addr, addr+len) on one rail. */
static int reg_one(struct lite_transport *t, uint32_t rail, const void *addr, size_t len, int kind,
                   uint64_t access, uint64_t key, struct fid_mr **mr, void **desc)
{
    struct efa_rail *r = &t->rail[rail];
    struct iovec iov = {.iov_base = (void *)addr, .iov_len = len};
    struct fi_mr_attr a = {.mr_iov = &iov,
                           .iov_count = 1,
                           .access = access,
                           .requested_key = key,
                           .iface = FI_HMEM_SYSTEM};
    if (kind == LITE_MEM_CUDA) {
#ifdef LITE_EFA_CUDA
        int dev = 0;
        if (!lite_gpu_ptr_is_device(addr, &dev)) {
            LITE_ERROR("%s: %p is not CUDA device memory (registered as LITE_MEM_CUDA)", EFA_LOG,
                       addr);
            return -EINVAL;
        }
        a.iface = FI_HMEM_CUDA;
        a.device.cuda = dev;
#else
        return -ENOSYS;
#endif
    }
    int rc = fi_mr_regattr(r->domain, &a, 0, mr);
    if (rc)
        return lite_efa_err(rc);
    if (t->mr_endpoint) {
        rc = fi_mr_bind(*mr, &r->ep->fid, 0);
        if (!rc)
            rc = fi_mr_enable(*mr);
        if (rc) {
            fi_close(&(*mr)->fid);
            *mr = NULL;
            return lite_efa_err(rc);
        }
    }
    *desc = fi_mr_desc(*mr);
    return 0;
}

/* A key we may ask for: the core's key when keys are 8 bytes, else a fresh counter value. */
static uint64_t pick_key(struct lite_transport *t, uint64_t core_key)
{
    size_t ksz = t->rail[0].info->domain_attr->mr_key_size;
    if (core_key && ksz >= 8)
        return core_key;
    uint64_t k = ++t->next_key;
    /* Internal keys keep the low half zero, which no core key has (its slot part is >= 1). */
    if (ksz >= 8)
        return k << 32;
    return ksz >= 4 ? k & 0xffffffffu : k & 0xffffu;
}

int lite_efa_mr_fly(struct lite_transport *t, uint32_t rail, const void *addr, size_t len,
                    uint64_t access, struct fid_mr **mr, void **desc)
{
    return reg_one(t, rail, addr, len ? len : 1, LITE_MEM_HOST, access, pick_key(t, 0), mr, desc);
}

int lite_efa_mr_make(struct lite_transport *t, void *addr, size_t len, int kind, unsigned access,
                     uint64_t core_key, uint32_t nrails, struct efa_mr **out)
{
    struct efa_mr *m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    m->core_key = core_key;
    m->addr = addr;
    m->len = len;
    m->access = access;
    m->kind = kind;
    uint64_t fa = FI_SEND | FI_RECV | FI_READ | FI_WRITE;
    if (access & LITE_TP_ACCESS_REMOTE_WRITE)
        fa |= FI_REMOTE_WRITE;
    if (access & LITE_TP_ACCESS_REMOTE_READ)
        fa |= FI_REMOTE_READ;
    uint64_t key = pick_key(t, core_key);
    for (uint32_t i = 0; i < nrails; i++) {
        int rc = reg_one(t, i, addr, len, kind, fa, key, &m->mr[i], &m->desc[i]);
        if (rc) {
            LITE_ERROR("%s rank %d: registering %zu bytes at %p on rail %u failed: %s", EFA_LOG,
                       t->rank, len, addr, i, lite_strerror(rc));
            lite_efa_mr_free(t, m);
            return rc;
        }
        m->rkey[i] = fi_mr_key(m->mr[i]);
        m->nrails = i + 1;
    }
    if (core_key) {
        m->told = calloc(((size_t)t->world + 7) / 8, 1);
        if (!m->told) {
            lite_efa_mr_free(t, m);
            return -ENOMEM;
        }
        uint32_t b = bucket(core_key);
        m->hnext = t->mrtab[b];
        t->mrtab[b] = m;
    }
    *out = m;
    return 0;
}

void lite_efa_mr_free(struct lite_transport *t, struct efa_mr *m)
{
    if (!m)
        return;
    if (m->core_key) {
        for (struct efa_mr **pp = &t->mrtab[bucket(m->core_key)]; *pp; pp = &(*pp)->hnext)
            if (*pp == m) {
                *pp = m->hnext;
                break;
            }
    }
    for (uint32_t i = 0; i < LITE_MAX_RAILS; i++)
        if (m->mr[i])
            fi_close(&m->mr[i]->fid);
    free(m->told);
    free(m);
}

int lite_efa_mr_reg(struct lite_transport *t, const struct lite_tp_mr *mr,
                    struct lite_tp_mr_keys *keys)
{
    if (mr->mem_kind == LITE_MEM_CUDA && !t->hmem) {
        LITE_ERROR("%s rank %d: provider %s cannot register device memory (no FI_HMEM)", EFA_LOG,
                   t->rank, t->cfg.provider);
        return -ENOSYS;
    }
    if (mr->core_key == 0 || lite_efa_mr_find(t, mr->core_key))
        return -EINVAL;
    struct efa_mr *m;
    int rc = lite_efa_mr_make(t, mr->addr, mr->len, mr->mem_kind, mr->access, mr->core_key,
                              t->nrails, &m);
    if (rc)
        return rc;
    keys->handle = m;
    keys->nrails = m->nrails;
    for (uint32_t i = 0; i < m->nrails; i++)
        keys->rkey[i] = m->rkey[i];
    return 0;
}

static bool told(const struct efa_mr *m, int peer)
{
    return m->told && (m->told[peer / 8] >> (peer % 8) & 1);
}

/* Withdraw a region in two steps, so that no op of a peer touches it once it is gone. Peers
 * that learned its keys are told (INVAL): they drop the keys (their next op asks again and hears
 * "no such key"), fail their stripes into it not yet posted, and answer (INVAL_ACK) once the
 * ones posted are over; until every such peer answered (or is gone) the region stays open and
 * this returns -EAGAIN, and the core makes progress and calls again (bounded by its op
 * timeout). Meanwhile queries about it are refused. What this guards most is shm's writer copy
 * (efa_rma.c): the peer's CPU copies into this process, and no provider key check stands
 * between that copy and the memory. Inside progress (a deregistration from an upcall: the
 * core's rendezvous regions, which peers never ask about) the region closes at once, as it
 * does while the transport closes (peers have said BYE after all they posted). */
int lite_efa_mr_dereg(struct lite_transport *t, void *handle)
{
    struct efa_mr *m = handle;
    if (!m)
        return 0;
    if (!m->dying) {
        m->dying = true;
        for (int p = 0; p < t->world; p++)
            if (told(m, p) && !t->peers[p].dead && !t->peers[p].lost)
                lite_efa_ctl_must(t, p, LITE_EFA_T_INVAL, m->core_key, NULL, 0);
    }
    if (!t->in_progress && !t->closing)
        for (int p = 0; p < t->world; p++)
            if (told(m, p) && !t->peers[p].dead && !t->peers[p].lost)
                return -EAGAIN;
    lite_efa_mr_free(t, m);
    return 0;
}

void lite_efa_mr_inval_acked(struct lite_transport *t, int peer, uint64_t core_key)
{
    struct efa_mr *m = lite_efa_mr_find(t, core_key);
    if (m && m->dying && m->told)
        m->told[peer / 8] &= (uint8_t) ~(1u << (peer % 8));
}

void lite_efa_mr_fini(struct lite_transport *t)
{
    for (int b = 0; b < EFA_MR_BUCKETS; b++) {
        while (t->mrtab[b]) {
            struct efa_mr *m = t->mrtab[b];
            LITE_DEBUG("%s rank %d: region %p still registered at close", EFA_LOG, t->rank,
                       m->addr);
            lite_efa_mr_free(t, m);
        }
    }
}
