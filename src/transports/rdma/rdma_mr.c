/*
 * rdma_mr.c - memory registration. A region is registered once per device its rails use; its
 * remote descriptor carries one 64-bit key per rail: the device's rkey in the low half and a
 * tag of the core key in the high half, so an initiator refuses a descriptor whose two keys do
 * not belong together before any packet leaves (a native target cannot see the core key).
 *
 * Send buffers of the core's rendezvous arrive without a registration (local_handle NULL).
 * They are looked up among the live registrations (a buffer inside a region the application
 * registered costs nothing); otherwise registered for the op and released when it completes.
 * LITETX_RDMA_REG_CACHE=N keeps up to N such registrations for reuse. It is off by default:
 * a cached registration pins the pages it was made on, so a buffer that is freed and whose
 * address is handed out again by a later malloc/mmap would be sent from the old pages.
 *
 * GPU memory (LITE_MEM_CUDA) is registered with ibv_reg_dmabuf_mr from the dmabuf the CUDA
 * driver exports for the range (built only with CUDA; libcuda is loaded at run time).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu.h"
#include "transports/rdma/rdma_int.h"

static int ibv_access(unsigned access)
{
    int a = IBV_ACCESS_LOCAL_WRITE;
    if (access & LITE_TP_ACCESS_REMOTE_WRITE)
        a |= IBV_ACCESS_REMOTE_WRITE;
    if (access & LITE_TP_ACCESS_REMOTE_READ)
        a |= IBV_ACCESS_REMOTE_READ;
    return a;
}

static void mr_free(struct lite_transport *t, struct lite_rdma_mr *m)
{
    for (int d = 0; d < t->ndevs; d++)
        if (m->mr[d])
            ibv_dereg_mr(m->mr[d]);
    if (m->dmabuf_fd >= 0)
        close(m->dmabuf_fd);
    free(m);
}

static void link_mr(struct lite_transport *t, struct lite_rdma_mr *m)
{
    m->prev = NULL;
    m->next = t->mrs;
    if (t->mrs)
        t->mrs->prev = m;
    t->mrs = m;
}

static void unlink_mr(struct lite_transport *t, struct lite_rdma_mr *m)
{
    if (m->prev)
        m->prev->next = m->next;
    else
        t->mrs = m->next;
    if (m->next)
        m->next->prev = m->prev;
    m->next = m->prev = NULL;
}

/* Register [addr, addr + len) on every device a rail uses. */
static int mr_make(struct lite_transport *t, void *addr, size_t len, int kind, unsigned access,
                   struct lite_rdma_mr **out)
{
    struct lite_rdma_mr *m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    m->addr = addr;
    m->len = len;
    m->access = access;
    m->dmabuf_fd = -1;
    uint64_t off = 0;
    if (kind == LITE_MEM_CUDA) {
#ifdef LITE_RDMA_CUDA
        int rc = lite_gpu_dmabuf(addr, len, &m->dmabuf_fd, &off);
        if (rc) {
            free(m);
            return rc;
        }
#else
        free(m);
        return -ENOSYS;
#endif
    }
    for (uint32_t r = 0; r < t->nrails; r++) {
        int d = t->rails[r].dev;
        if (m->mr[d])
            continue;
        if (m->dmabuf_fd >= 0)
            m->mr[d] = ibv_reg_dmabuf_mr(t->devs[d].pd, off, len, (uintptr_t)addr, m->dmabuf_fd,
                                         ibv_access(access));
        else
            m->mr[d] = ibv_reg_mr(t->devs[d].pd, addr, len, ibv_access(access));
        if (!m->mr[d]) {
            int rc = lite_rdma_errno(errno);
            LITE_ERROR("rdma rank %d: cannot register %zu bytes at %p on %s: %s", t->rank, len,
                       addr, t->devs[d].name, strerror(-rc));
            mr_free(t, m);
            return rc;
        }
    }
    *out = m;
    return 0;
}

int lite_rdma_mr_reg(struct lite_transport *t, const struct lite_tp_mr *mr,
                     struct lite_tp_mr_keys *keys)
{
    struct lite_rdma_mr *m;
    int rc = mr_make(t, mr->addr, mr->len, mr->mem_kind, mr->access, &m);
    if (rc)
        return rc;
    m->core_key = mr->core_key;
    link_mr(t, m);
    keys->handle = m;
    keys->nrails = t->nrails;
    uint32_t tag = lite_rdma_key_tag(mr->core_key);
    for (uint32_t r = 0; r < t->nrails; r++)
        keys->rkey[r] = (uint64_t)tag << 32 | m->mr[t->rails[r].dev]->rkey;
    return 0;
}

int lite_rdma_mr_dereg(struct lite_transport *t, void *handle)
{
    struct lite_rdma_mr *m = handle;
    if (!m)
        return 0;
    unlink_mr(t, m);
    mr_free(t, m);
    return 0;
}

/* Drop cached temporary registrations beyond the cache size, oldest first. */
static void cache_trim(struct lite_transport *t)
{
    while (t->ncached > t->reg_cache) {
        struct lite_rdma_mr *old = NULL;
        for (struct lite_rdma_mr *m = t->mrs; m; m = m->next)
            if (m->temp && m->users == 0 && (!old || m->stamp < old->stamp))
                old = m;
        if (!old)
            return;
        unlink_mr(t, old);
        mr_free(t, old);
        t->ncached--;
    }
}

int lite_rdma_mr_local(struct lite_transport *t, void *addr, size_t len, uint32_t *lkeys,
                       struct lite_rdma_mr **tmp)
{
    *tmp = NULL;
    uint8_t *p = addr;
    for (struct lite_rdma_mr *m = t->mrs; m; m = m->next) {
        if (p < m->addr || len > m->len || (size_t)(p - m->addr) > m->len - len)
            continue;
        if (m->temp) {
            if (m->users++ == 0)
                t->ncached--;
            m->stamp = ++t->stamp;
            *tmp = m;
        }
        for (uint32_t r = 0; r < t->nrails; r++)
            lkeys[r] = m->mr[t->rails[r].dev]->lkey;
        return 0;
    }
    struct lite_rdma_mr *m;
    int rc = mr_make(t, addr, len ? len : 1, LITE_MEM_HOST, 0, &m);
    if (rc)
        return rc;
    m->temp = true;
    m->users = 1;
    m->stamp = ++t->stamp;
    link_mr(t, m);
    for (uint32_t r = 0; r < t->nrails; r++)
        lkeys[r] = m->mr[t->rails[r].dev]->lkey;
    *tmp = m;
    return 0;
}

void lite_rdma_mr_release(struct lite_transport *t, struct lite_rdma_mr *m)
{
    if (!m || --m->users > 0)
        return;
    t->ncached++;
    cache_trim(t);
}

int lite_rdma_mr_diagnose(struct lite_transport *t, int dev, uint32_t rkey, uint64_t addr,
                          uint64_t len, unsigned need)
{
    for (struct lite_rdma_mr *m = t->mrs; m; m = m->next) {
        if (m->temp || !m->mr[dev] || m->mr[dev]->rkey != rkey)
            continue;
        uint64_t base = (uintptr_t)m->addr;
        if (addr < base || len > m->len || addr - base > m->len - len)
            return -LITE_ERR_REMOTE_BOUNDS;
        if (!(m->access & need))
            return -LITE_ERR_REMOTE_ACCESS;
        return -LITE_ERR_REMOTE; /* refused for a reason the region does not explain */
    }
    return -LITE_ERR_REMOTE_KEY;
}

void lite_rdma_mr_fini(struct lite_transport *t)
{
    while (t->mrs) {
        struct lite_rdma_mr *m = t->mrs;
        unlink_mr(t, m);
        mr_free(t, m);
    }
    t->ncached = 0;
}
