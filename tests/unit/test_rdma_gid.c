/* test_rdma_gid.c - the RDMA backend's choice of a RoCE GID from tables like real ports have. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "lite_int.h"
#include "transports/rdma/rdma_logic.h"

static struct lite_rdma_gid_cand cand(uint32_t index, const char *ip, uint8_t type,
                                      const char *netdev)
{
    struct lite_rdma_gid_cand c = {.index = index, .type = type};
    assert_int_equal(lite_rdma_gid_from_ip(ip, c.gid), 0);
    strcpy(c.netdev, netdev);
    return c;
}

static int choose(const struct lite_rdma_gid_cand *c, size_t n, const char *bind_ip,
                  const char *bind_netdev, int override, uint32_t *out, char *why)
{
    uint8_t g[16];
    const uint8_t *bg = NULL;
    if (bind_ip) {
        assert_int_equal(lite_rdma_gid_from_ip(bind_ip, g), 0);
        bg = g;
    }
    return lite_rdma_gid_choose(c, n, bg, bind_netdev, override, out, why, 512);
}

#define V1 LITE_RDMA_GID_ROCE_V1
#define V2 LITE_RDMA_GID_ROCE_V2

/* What Soft-RoCE on a dummy netdev shows (the VM of tests/rdma): link-local, then IPv4. */
static void test_rxe_table(void **state)
{
    struct lite_rdma_gid_cand c[] = {cand(0, "fe80::c0cf:46ff:fe3e:e978", V2, "rxenet0"),
                                     cand(1, "192.0.2.1", V2, "rxenet0")};
    uint32_t idx = 99;
    char why[512];
    /* the bootstrap address itself */
    assert_int_equal(choose(c, 2, "192.0.2.1", "rxenet0", -1, &idx, why), 0);
    assert_int_equal(idx, 1);
    /* bootstrap over loopback: the port's only IPv4 RoCE v2 GID, never the link-local one */
    idx = 99;
    assert_int_equal(choose(c, 2, "127.0.0.1", "lo", -1, &idx, why), 0);
    assert_int_equal(idx, 1);
    idx = 99;
    assert_int_equal(choose(c, 2, NULL, NULL, -1, &idx, why), 0);
    assert_int_equal(idx, 1);
}

/* A ConnectX port on RoCE: every address twice, as v1 and v2; v2 is the one to use. */
static void test_v1_v2_pairs(void **state)
{
    struct lite_rdma_gid_cand c[] = {
        cand(0, "fe80::1", V1, "eth0"),     cand(1, "fe80::1", V2, "eth0"),
        cand(2, "10.0.0.5", V1, "eth0"),    cand(3, "10.0.0.5", V2, "eth0"),
        cand(4, "2001:db8::5", V1, "eth0"), cand(5, "2001:db8::5", V2, "eth0"),
    };
    uint32_t idx = 99;
    char why[512];
    assert_int_equal(choose(c, 6, "10.0.0.5", "eth0", -1, &idx, why), 0);
    assert_int_equal(idx, 3);
    /* IPv4 is preferred when the bootstrap address says nothing */
    assert_int_equal(choose(c, 6, "127.0.0.1", "lo", -1, &idx, why), 0);
    assert_int_equal(idx, 3);
    /* an IPv6 bootstrap address picks its own v2 GID */
    assert_int_equal(choose(c, 6, "2001:db8::5", "eth0", -1, &idx, why), 0);
    assert_int_equal(idx, 5);
}

/* Two IPv4 addresses on one port: the bootstrap address decides; without it, an error that
 * lists the candidates and names the override. */
static void test_ambiguous(void **state)
{
    struct lite_rdma_gid_cand c[] = {
        cand(0, "fe80::1", V2, "eth0"),
        cand(1, "10.0.0.5", V2, "eth0"),
        cand(2, "10.1.0.5", V2, "eth0.100"),
    };
    uint32_t idx = 99;
    char why[512] = "";
    assert_int_equal(choose(c, 3, "10.1.0.5", "eth0.100", -1, &idx, why), 0);
    assert_int_equal(idx, 2);
    /* the bootstrap interface is on this port: its only IPv4 GID */
    assert_int_equal(choose(c, 3, "10.0.0.77", "eth0", -1, &idx, why), 0);
    assert_int_equal(idx, 1);
    /* nothing decides */
    idx = 99;
    assert_int_equal(choose(c, 3, "192.168.1.1", "eth7", -1, &idx, why), -LITE_ERR_CONFIG);
    assert_int_equal(idx, 99);
    assert_non_null(strstr(why, "[1] ::ffff:10.0.0.5 RoCE v2 eth0"));
    assert_non_null(strstr(why, "[2] ::ffff:10.1.0.5 RoCE v2 eth0.100"));
    assert_non_null(strstr(why, "LITETX_RDMA_GID_INDEX"));
    assert_non_null(strstr(why, "::ffff:192.168.1.1"));
}

/* A secondary rail (another NIC): the bootstrap address is not on it; its own IPv4 GID. */
static void test_secondary_rail(void **state)
{
    struct lite_rdma_gid_cand c[] = {cand(0, "fe80::2", V2, "eth1"),
                                     cand(1, "10.2.0.5", V1, "eth1"),
                                     cand(2, "10.2.0.5", V2, "eth1")};
    uint32_t idx = 99;
    char why[512];
    assert_int_equal(choose(c, 3, "10.0.0.5", "eth0", -1, &idx, why), 0);
    assert_int_equal(idx, 2);
}

/* Only RoCE v1 or link-local GIDs: nothing routable to choose by itself. */
static void test_nothing_routable(void **state)
{
    struct lite_rdma_gid_cand c[] = {cand(0, "fe80::1", V2, "eth0"),
                                     cand(1, "10.0.0.5", V1, "eth0")};
    uint32_t idx = 99;
    char why[512] = "";
    assert_int_equal(choose(c, 2, "10.0.0.5", "eth0", -1, &idx, why), -LITE_ERR_CONFIG);
    assert_non_null(strstr(why, "[1] ::ffff:10.0.0.5 RoCE v1 eth0"));
    assert_int_equal(choose(c, 0, "10.0.0.5", "eth0", -1, &idx, why), -LITE_ERR_CONFIG);
    assert_non_null(strstr(why, "candidates: none"));
}

/* LITETX_RDMA_GID_INDEX wins when valid, and is refused with the list when not. */
static void test_override(void **state)
{
    struct lite_rdma_gid_cand c[] = {cand(0, "fe80::1", V2, "eth0"),
                                     cand(3, "10.0.0.5", V2, "eth0")};
    uint32_t idx = 99;
    char why[512] = "";
    assert_int_equal(choose(c, 2, "10.0.0.5", "eth0", 0, &idx, why), 0);
    assert_int_equal(idx, 0);
    assert_int_equal(choose(c, 2, "10.0.0.5", "eth0", 2, &idx, why), -LITE_ERR_CONFIG);
    assert_non_null(strstr(why, "LITETX_RDMA_GID_INDEX=2"));
    assert_non_null(strstr(why, "[3] ::ffff:10.0.0.5"));
}

static void test_addresses(void **state)
{
    uint8_t g[16];
    char s[64];
    assert_int_equal(lite_rdma_gid_from_ip("192.0.2.1", g), 0);
    assert_true(lite_rdma_gid_is_v4(g));
    lite_rdma_gid_str(g, s, sizeof(s));
    assert_string_equal(s, "::ffff:192.0.2.1");
    assert_int_equal(lite_rdma_gid_from_ip("fe80::1", g), 0);
    assert_false(lite_rdma_gid_is_v4(g));
    assert_int_equal(lite_rdma_gid_from_ip("localhost", g), -EINVAL);
    assert_int_equal(lite_rdma_gid_from_ip(NULL, g), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rxe_table),        cmocka_unit_test(test_v1_v2_pairs),
        cmocka_unit_test(test_ambiguous),        cmocka_unit_test(test_secondary_rail),
        cmocka_unit_test(test_nothing_routable), cmocka_unit_test(test_override),
        cmocka_unit_test(test_addresses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
