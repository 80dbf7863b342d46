/*
 * rdma_gid.c - which GID of a RoCE port to use. Peer projects leave this to the user (`-x 3`,
 * NCCL_IB_GID_INDEX) and a wrong index gives a QP that connects and then times out, so the
 * choice is made here from the GID table, the GID types and the interface the bootstrap uses,
 * and an undecidable case is an error that lists the candidates.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tp_support.h"
#include "transports/rdma/rdma_logic.h"

bool lite_rdma_gid_is_v4(const uint8_t gid[16])
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(gid, prefix, sizeof(prefix)) == 0;
}

static bool gid_is_link_local(const uint8_t gid[16])
{
    return gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80;
}

static bool gid_is_zero(const uint8_t gid[16])
{
    for (int i = 0; i < 16; i++)
        if (gid[i])
            return false;
    return true;
}

void lite_rdma_gid_str(const uint8_t gid[16], char *buf, size_t len)
{
    char tmp[INET6_ADDRSTRLEN];
    if (!inet_ntop(AF_INET6, gid, tmp, sizeof(tmp)))
        lite_fmt(tmp, sizeof(tmp), "?");
    lite_fmt(buf, len, "%s", tmp);
}

int lite_rdma_gid_from_ip(const char *host, uint8_t gid[16])
{
    struct in_addr a4;
    memset(gid, 0, 16);
    if (host && inet_pton(AF_INET, host, &a4) == 1) {
        gid[10] = gid[11] = 0xff;
        memcpy(gid + 12, &a4, 4);
        return 0;
    }
    if (host && inet_pton(AF_INET6, host, gid) == 1)
        return 0;
    return -EINVAL;
}

static const char *type_name(uint8_t t)
{
    return t == LITE_RDMA_GID_ROCE_V2 ? "RoCE v2" : t == LITE_RDMA_GID_ROCE_V1 ? "RoCE v1" : "IB";
}

/* "[1] ::ffff:192.0.2.1 RoCE v2 eth0, [2] ..." */
static void list_candidates(const struct lite_rdma_gid_cand *c, size_t n, char *out, size_t len)
{
    size_t used = 0;
    out[0] = 0;
    for (size_t i = 0; i < n && used + 1 < len; i++) {
        char g[INET6_ADDRSTRLEN];
        lite_rdma_gid_str(c[i].gid, g, sizeof(g));
        int w = snprintf(out + used, len - used, "%s[%u] %s %s%s%s", i ? ", " : "", c[i].index, g,
                         type_name(c[i].type), c[i].netdev[0] ? " " : "", c[i].netdev);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    if (n == 0)
        lite_fmt(out, len, "none");
}

/* The only candidate of `pick` in c (0 or > 1: none); index into c or -1. */
static int only(const struct lite_rdma_gid_cand *c, size_t n, const char *netdev, bool want_v4)
{
    int hit = -1, count = 0;
    for (size_t i = 0; i < n; i++) {
        if (c[i].type != LITE_RDMA_GID_ROCE_V2 || gid_is_zero(c[i].gid) ||
            gid_is_link_local(c[i].gid))
            continue;
        if (netdev && strcmp(c[i].netdev, netdev) != 0)
            continue;
        if (lite_rdma_gid_is_v4(c[i].gid) != want_v4)
            continue;
        hit = (int)i;
        count++;
    }
    return count == 1 ? hit : -1;
}

int lite_rdma_gid_choose(const struct lite_rdma_gid_cand *c, size_t n, const uint8_t *bind_gid,
                         const char *bind_netdev, int override, uint32_t *out, char *why,
                         size_t why_len)
{
    char list[512];
    if (override >= 0) {
        for (size_t i = 0; i < n; i++)
            if (c[i].index == (uint32_t) override && !gid_is_zero(c[i].gid)) {
                *out = c[i].index;
                return 0;
            }
        list_candidates(c, n, list, sizeof(list));
        lite_fmt(why, why_len,
                 "LITETX_RDMA_GID_INDEX=%d is not a valid GID of this port; "
                 "candidates: %s",
                 override, list);
        return -LITE_ERR_CONFIG;
    }
    /* 2. the bootstrap address itself */
    if (bind_gid && !gid_is_zero(bind_gid)) {
        for (size_t i = 0; i < n; i++)
            if (c[i].type == LITE_RDMA_GID_ROCE_V2 && memcmp(c[i].gid, bind_gid, 16) == 0) {
                *out = c[i].index;
                return 0;
            }
    }
    /* 3. the bootstrap interface, when this port is on it */
    bool on_bind_if = false;
    for (size_t i = 0; bind_netdev && bind_netdev[0] && i < n; i++)
        on_bind_if |= strcmp(c[i].netdev, bind_netdev) == 0;
    const char *nd = on_bind_if ? bind_netdev : NULL;
    int hit = only(c, n, nd, true);
    if (hit < 0)
        hit = only(c, n, nd, false);
    if (hit >= 0) {
        *out = c[hit].index;
        return 0;
    }
    list_candidates(c, n, list, sizeof(list));
    char b[INET6_ADDRSTRLEN] = "none";
    if (bind_gid && !gid_is_zero(bind_gid))
        lite_rdma_gid_str(bind_gid, b, sizeof(b));
    lite_fmt(why, why_len,
             "cannot choose a RoCE v2 GID (bootstrap address %s%s%s): no single "
             "routable RoCE v2 candidate; set LITETX_RDMA_GID_INDEX; candidates: %s",
             b, nd ? " on " : "", nd ? nd : "", list);
    return -LITE_ERR_CONFIG;
}
