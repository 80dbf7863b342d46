/* test_util.c - the kernel cpulist parser behind the yield heuristic (LITETX_YIELD). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "lite_int.h"

static void test_cpulist_valid(void **state)
{
    (void)state;
    assert_int_equal(lite_cpulist_count("0"), 1);
    assert_int_equal(lite_cpulist_count("0-1\n"), 2);
    assert_int_equal(lite_cpulist_count("0-3,8,10-11\n"), 7);
    assert_int_equal(lite_cpulist_count("5,7,9"), 3);
    assert_int_equal(lite_cpulist_count("0-127"), 128);
}

/* Anything malformed counts as unknown (0), so the caller falls back to the CPUs online. */
static void test_cpulist_invalid(void **state)
{
    (void)state;
    assert_int_equal(lite_cpulist_count(""), 0);
    assert_int_equal(lite_cpulist_count("\n"), 0);
    assert_int_equal(lite_cpulist_count("3-1"), 0);
    assert_int_equal(lite_cpulist_count("a-b"), 0);
    assert_int_equal(lite_cpulist_count("0-"), 0);
    assert_int_equal(lite_cpulist_count("1;2"), 0);
    assert_int_equal(lite_cpulist_count("-1"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpulist_valid),
        cmocka_unit_test(test_cpulist_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
