/*
 * test_registry.c - transport selection and the -ENOSYS defaults.
 * The transports here are test doubles (fake_*): selection logic is the same whatever the
 * backends do, and the real backends cannot all run on this machine.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "lite_int.h"
#include "registry.h"
#include "tp_select.h"

static int fake_probe_nodev(const struct lite_tp_env *env, char *why, size_t len)
{
    lite_fmt(why, len, "no device found");
    return -ENODEV;
}

static int fake_probe_ok(const struct lite_tp_env *env, char *why, size_t len)
{
    return 0;
}

static int fake_progress(struct lite_transport *tp, int timeout_ms)
{
    return 7;
}

static const struct lite_transport_ops fake_rdma = {
    .size = sizeof(struct lite_transport_ops),
    .abi_version = LITE_TRANSPORT_ABI_VERSION,
    .name = "fake_rdma",
    .probe = fake_probe_nodev,
};
static const struct lite_transport_ops fake_efa = {
    .size = sizeof(struct lite_transport_ops),
    .abi_version = LITE_TRANSPORT_ABI_VERSION,
    .name = "fake_efa",
    .probe = fake_probe_nodev,
};
static const struct lite_transport_ops fake_tcp = {
    .size = sizeof(struct lite_transport_ops),
    .abi_version = LITE_TRANSPORT_ABI_VERSION,
    .name = "fake_tcp",
    .probe = fake_probe_ok,
    .progress = fake_progress,
};
static const struct lite_transport_ops *const table[] = {&fake_rdma, &fake_efa, &fake_tcp};

static void test_auto_falls_back(void **state)
{
    const struct lite_transport_ops *out = NULL;
    char why[256] = "";
    assert_int_equal(lite_transport_select(table, 3, "auto", &out, why, sizeof(why)), 0);
    assert_ptr_equal(out, &fake_tcp);
    /* the ones passed over, for lite_init to report once per job */
    assert_non_null(strstr(why, "fake_rdma not usable"));
    assert_non_null(strstr(why, "fake_efa not usable"));
    assert_int_equal(lite_transport_select(table, 3, NULL, &out, why, sizeof(why)), 0);
    assert_ptr_equal(out, &fake_tcp);
}

static void test_auto_prefers_first_usable(void **state)
{
    const struct lite_transport_ops *const t2[] = {&fake_tcp, &fake_rdma};
    const struct lite_transport_ops *out = NULL;
    char why[256];
    assert_int_equal(lite_transport_select(t2, 2, "auto", &out, why, sizeof(why)), 0);
    assert_ptr_equal(out, &fake_tcp);
    assert_string_equal(why, ""); /* nothing passed over */
}

static void test_auto_nothing_usable(void **state)
{
    const struct lite_transport_ops *out = &fake_tcp;
    char why[256] = "";
    assert_int_equal(lite_transport_select(table, 2, "auto", &out, why, sizeof(why)),
                     -LITE_ERR_NO_TRANSPORT);
    assert_null(out);
    assert_non_null(strstr(why, "no compiled-in transport"));
    assert_non_null(strstr(why, "fake_efa not usable")); /* and why each is not */
}

/* Asking for a transport by name never falls back silently. */
static void test_named_unusable_is_an_error(void **state)
{
    const struct lite_transport_ops *out = NULL;
    char why[256] = "";
    assert_int_equal(lite_transport_select(table, 3, "fake_efa", &out, why, sizeof(why)),
                     -LITE_ERR_NO_TRANSPORT);
    assert_null(out);
    assert_non_null(strstr(why, "fake_efa"));
    assert_non_null(strstr(why, "no device found"));
}

static void test_named_not_compiled(void **state)
{
    const struct lite_transport_ops *out = NULL;
    char why[256] = "";
    assert_int_equal(lite_transport_select(table, 3, "quic", &out, why, sizeof(why)),
                     -LITE_ERR_NO_TRANSPORT);
    assert_non_null(strstr(why, "not compiled"));
    assert_non_null(strstr(why, "fake_rdma, fake_efa, fake_tcp"));
}

static void test_named_ok(void **state)
{
    const struct lite_transport_ops *out = NULL;
    char why[256] = "";
    assert_int_equal(lite_transport_select(table, 3, "fake_tcp", &out, why, sizeof(why)), 0);
    assert_ptr_equal(out, &fake_tcp);
}

/* NULL ops become -ENOSYS defaults; provided ops are kept. */
static void test_fill_enosys(void **state)
{
    struct lite_transport_ops ops;
    assert_int_equal(lite_transport_fill(&fake_tcp, &ops), 0);
    assert_string_equal(ops.name, "fake_tcp");
    assert_int_equal(ops.progress(NULL, 0), 7);
    struct lite_transport *tp = NULL;
    assert_int_equal(ops.open(NULL, &tp), -ENOSYS);
    size_t len = 0;
    assert_int_equal(ops.addr_get(NULL, NULL, &len), -ENOSYS);
    struct lite_msg_hdr h = {0};
    assert_int_equal(ops.msg_send(NULL, 0, &h, NULL, NULL), -ENOSYS);
    assert_null(ops.msg_inject); /* optional: the core takes msg_send instead */
}

static int fake_inject(struct lite_transport *tp, int peer, const struct lite_msg_hdr *hdr,
                       const void *payload)
{
    return 9;
}

/* A table from an older, shorter ABI keeps the defaults for the ops it does not know. */
static void test_fill_short_table(void **state)
{
    struct lite_transport_ops shorter = fake_tcp;
    shorter.size = offsetof(struct lite_transport_ops, progress);
    struct lite_transport_ops ops;
    assert_int_equal(lite_transport_fill(&shorter, &ops), 0);
    assert_int_equal(ops.progress(NULL, 0), -ENOSYS);

    /* An optional op past the table's end is not there; within it, it is kept. */
    shorter = fake_tcp;
    shorter.msg_inject = fake_inject;
    shorter.size = offsetof(struct lite_transport_ops, msg_inject);
    assert_int_equal(lite_transport_fill(&shorter, &ops), 0);
    assert_null(ops.msg_inject);
    shorter.size = sizeof(shorter);
    assert_int_equal(lite_transport_fill(&shorter, &ops), 0);
    assert_int_equal(ops.msg_inject(NULL, 0, NULL, NULL), 9);

    struct lite_transport_ops wrong = fake_tcp;
    wrong.abi_version = LITE_TRANSPORT_ABI_VERSION + 1;
    assert_int_equal(lite_transport_fill(&wrong, &ops), -EINVAL);
}

/* The real registry lists tcp, which is always built. */
static void test_real_registry_has_tcp(void **state)
{
    size_t n = 0;
    const struct lite_transport_ops *const *t = lite_registry(&n);
    int found = 0;
    for (size_t i = 0; i < n; i++)
        found |= strcmp(t[i]->name, "tcp") == 0;
    assert_true(found);
}

int main(void)
{
    lite_log_set_level(-1); /* the fallbacks warn on purpose */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auto_falls_back),
        cmocka_unit_test(test_auto_prefers_first_usable),
        cmocka_unit_test(test_auto_nothing_usable),
        cmocka_unit_test(test_named_unusable_is_an_error),
        cmocka_unit_test(test_named_not_compiled),
        cmocka_unit_test(test_named_ok),
        cmocka_unit_test(test_fill_enosys),
        cmocka_unit_test(test_fill_short_table),
        cmocka_unit_test(test_real_registry_has_tcp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
