/*
 * rdma_cm_stub.c - the rdma_cm path's entry points in a build without librdmacm: asking for it
 * (LITETX_RDMA_CM=1) fails lite_init with the reason.
 */
#include <stdlib.h>
#include <string.h>

#include "transports/rdma/rdma_int.h"

bool lite_rdma_cm_wanted(const struct lite_transport *t)
{
    return lite_tp_num(t->env, "LITETX_RDMA_CM", 0) == 1;
}

int lite_rdma_cm_open(struct lite_transport *t, char *why, size_t why_len)
{
    (void)t;
    lite_fmt(why, why_len,
             "rdma: LITETX_RDMA_CM=1 but liblitetx was built without librdmacm "
             "(Debian: apt-get install librdmacm-dev, then rebuild)");
    return -LITE_ERR_CONFIG;
}

int lite_rdma_cm_connect_all(struct lite_transport *t, const uint8_t *const *peer_gids,
                             const uint16_t *peer_ports, int64_t deadline, char *why,
                             size_t why_len)
{
    (void)t, (void)peer_gids, (void)peer_ports, (void)deadline;
    lite_fmt(why, why_len, "rdma: built without librdmacm");
    return -LITE_ERR_CONFIG;
}

int lite_rdma_cm_service(struct lite_transport *t)
{
    (void)t;
    return 0;
}

void lite_rdma_cm_close(struct lite_transport *t)
{
    (void)t;
}
