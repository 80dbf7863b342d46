/*
 * efa_rail.c - one rail: a fabric, a domain, a completion queue (FI_CQ_FORMAT_DATA, so a
 * target sees the immediate of a write as CQ data), an address vector and an RDM endpoint.
 * On AWS each rail is one EFA device; with the tcp and shm providers the rails are independent
 * endpoints of the same interface, which is enough to run the striping code for real.
 */
#include <stdlib.h>
#include <string.h>

#include "efa.h"

static int fail(struct efa_rail *r, const char *what, int rc)
{
    LITE_ERROR("%s: %s failed: %s", EFA_LOG, what, fi_strerror(rc < 0 ? -rc : rc));
    lite_efa_rail_close(r);
    return lite_efa_err(rc);
}

/* The endpoint, bound to the rail's AV and CQ, and enabled; *what names the call that failed. */
/* fi_enable retries after regions left by a dead process (lite_efa_rail_open). */
#define EBUSY_TRIES (2 * LITE_MAX_RAILS)

static int open_ep(struct efa_rail *r, struct fi_info *info, const char **what)
{
    *what = "fi_endpoint";
    int rc = fi_endpoint(r->domain, info, &r->ep, NULL);
    if (rc)
        return rc;
    *what = "fi_ep_bind";
    rc = fi_ep_bind(r->ep, &r->av->fid, 0);
    if (!rc)
        rc = fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV);
    if (rc)
        return rc;
    *what = "fi_enable";
    return fi_enable(r->ep);
}

int lite_efa_rail_open(struct lite_transport *t, uint32_t i, struct fi_info *info)
{
    struct efa_rail *r = &t->rail[i];
    memset(r, 0, sizeof(*r));
    r->wait_fd = -1;
    r->info = fi_dupinfo(info);
    r->addr = malloc((size_t)t->world * sizeof(fi_addr_t));
    if (!r->info || !r->addr) {
        lite_efa_rail_close(r);
        return -ENOMEM;
    }
    for (int p = 0; p < t->world; p++)
        r->addr[p] = FI_ADDR_NOTAVAIL;
    int rc = fi_fabric(info->fabric_attr, &r->fabric, NULL);
    if (rc)
        return fail(r, "fi_fabric", rc);
    rc = fi_domain(r->fabric, info, &r->domain, NULL);
    if (rc)
        return fail(r, "fi_domain", rc);
    struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_DATA,
                            .wait_obj = t->use_wait ? FI_WAIT_FD : FI_WAIT_NONE};
    rc = fi_cq_open(r->domain, &ca, &r->cq, NULL);
    if (rc && t->use_wait) {
        /* No file descriptor to sleep on: progress polls with short sleeps instead. */
        t->use_wait = false;
        ca.wait_obj = FI_WAIT_NONE;
        rc = fi_cq_open(r->domain, &ca, &r->cq, NULL);
    }
    if (rc)
        return fail(r, "fi_cq_open", rc);
    if (t->use_wait && fi_control(&r->cq->fid, FI_GETWAIT, &r->wait_fd) != 0) {
        t->use_wait = false;
        r->wait_fd = -1;
    }
    struct fi_av_attr aa = {.type = info->domain_attr->av_type, .count = (size_t)t->world};
    rc = fi_av_open(r->domain, &aa, &r->av, NULL);
    if (rc)
        return fail(r, "fi_av_open", rc);
    const char *what = NULL;
    rc = open_ep(r, info, &what);
    /* shm names a region "pid:uid:n", n counting the process's endpoints. A killed process
     * leaves its regions behind; one whose pid we now have reads as "in use", and the provider
     * removes it and fails fi_enable. The next endpoint takes the next n, which that process
     * may have left too (one per rail): retry while that happens, a bounded number of times
     * (each try removes one leftover). */
    for (int tries = 0; rc == -FI_EBUSY && !strcmp(what, "fi_enable") && tries < EBUSY_TRIES;
         tries++) {
        LITE_WARN("%s: fi_enable: region busy (left by a dead process?), retrying", EFA_LOG);
        fi_close(&r->ep->fid);
        r->ep = NULL;
        rc = open_ep(r, info, &what);
    }
    if (rc)
        return fail(r, what, rc);
    r->name_len = sizeof(r->name);
    rc = fi_getname(&r->ep->fid, r->name, &r->name_len);
    if (rc)
        return fail(r, "fi_getname", rc);
    return 0;
}

int lite_efa_rail_av(struct lite_transport *t, uint32_t i, const void *name, int rank)
{
    struct efa_rail *r = &t->rail[i];
    fi_addr_t a = FI_ADDR_NOTAVAIL;
    int n = fi_av_insert(r->av, name, 1, &a, 0, NULL);
    if (n != 1) {
        LITE_ERROR("%s rank %d: fi_av_insert of rank %d on rail %u failed: %s", EFA_LOG, t->rank,
                   rank, i, n < 0 ? fi_strerror(-n) : "address refused");
        return n < 0 ? lite_efa_err(n) : -LITE_ERR_PROTOCOL;
    }
    r->addr[rank] = a;
    return 0;
}

void lite_efa_rail_close(struct efa_rail *r)
{
    /* Endpoint first: it references the CQ and the AV. */
    if (r->ep)
        fi_close(&r->ep->fid);
    if (r->av)
        fi_close(&r->av->fid);
    if (r->cq)
        fi_close(&r->cq->fid);
    if (r->domain)
        fi_close(&r->domain->fid);
    if (r->fabric)
        fi_close(&r->fabric->fid);
    if (r->info)
        fi_freeinfo(r->info);
    free(r->addr);
    memset(r, 0, sizeof(*r));
    r->wait_fd = -1;
}
