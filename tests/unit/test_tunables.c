/*
 * test_tunables.c - the table of LITETX_* variables: lookups over the core's and the compiled-in
 * backends' entries, the closest-name suggestion, and the warning for unknown variables.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "lite_int.h"
#include "tunables.h"

static void test_find(void **state)
{
    const char *owner = NULL;
    const struct lite_tunable *t = lite_tunable_find("LITETX_CREDITS", &owner);
    assert_non_null(t);
    assert_string_equal(owner, "core");
    assert_non_null(t->doc);
    assert_non_null(t->def);
    /* tcp is always built, and its variables come from its ops table */
    t = lite_tunable_find("LITETX_TCP_CONNECT", &owner);
    assert_non_null(t);
    assert_string_equal(owner, "tcp");
    assert_null(lite_tunable_find("LITETX_NO_SUCH_THING", NULL));
    assert_null(lite_tunable_find("LITETX_CREDITS ", NULL));
}

static void test_closest(void **state)
{
    assert_string_equal(lite_tunable_closest("LITETX_CREDIT"), "LITETX_CREDITS");
    assert_string_equal(lite_tunable_closest("LITETX_TCP_CONECT"), "LITETX_TCP_CONNECT");
    assert_string_equal(lite_tunable_closest("LITETX_LOGLEVEL"), "LITETX_LOG_LEVEL");
    /* nothing within 3 edits */
    assert_null(lite_tunable_closest("LITETX_SOMETHING_ELSE_ENTIRELY"));
    /* longer than any name: no suggestion, no overrun */
    char big[200];
    memset(big, 'X', sizeof(big) - 1);
    big[sizeof(big) - 1] = 0;
    assert_null(lite_tunable_closest(big));
}

static void test_warn_unknown(void **state)
{
    char *env[] = {"PATH=/bin",      "LITETX_CREDITS=8", "LITETX_CREDIT=8", "LITETX_RANK=0",
                   "LITETX_BOGUS=1", "LITETX_NOVALUE",   "NOT_LITETX_X=1",  NULL};
    /* LITETX_CREDIT, LITETX_BOGUS and LITETX_NOVALUE are unknown */
    assert_int_equal(lite_tunables_warn_unknown(env, 0), 3);
    char *none[] = {"LITETX_TRANSPORT=tcp", NULL};
    assert_int_equal(lite_tunables_warn_unknown(none, 0), 0);
    assert_int_equal(lite_tunables_warn_unknown(NULL, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find),
        cmocka_unit_test(test_closest),
        cmocka_unit_test(test_warn_unknown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
