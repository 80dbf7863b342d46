/* test_tag.c - tag composition, splitting, ordering and range checks. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "litetx/litetx.h"

static void test_roundtrip_extremes(void **state)
{
    const lite_tag_parts_t cases[] = {
        {0, 0, 0, 0},
        {1, 2, 3, 4},
        {(1u << 24) - 1, (1u << 16) - 1, (1u << 8) - 1, (1u << 16) - 1},
        {0x123456, 0xabcd, 0x7f, 0x0102},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t t;
        lite_tag_parts_t p;
        assert_int_equal(lite_tag_compose(&cases[i], &t), 0);
        assert_int_equal(lite_tag_split(t, &p), 0);
        assert_int_equal(p.step, cases[i].step);
        assert_int_equal(p.layer, cases[i].layer);
        assert_int_equal(p.level, cases[i].level);
        assert_int_equal(p.seq, cases[i].seq);
    }
    uint64_t all;
    lite_tag_parts_t max = {(1u << 24) - 1, (1u << 16) - 1, (1u << 8) - 1, (1u << 16) - 1};
    lite_tag_compose(&max, &all);
    assert_true(all == UINT64_MAX);
}

static void test_out_of_range(void **state)
{
    uint64_t t = 42;
    lite_tag_parts_t p = {1u << 24, 0, 0, 0};
    assert_int_equal(lite_tag_compose(&p, &t), -EINVAL);
    p = (lite_tag_parts_t){0, 1u << 16, 0, 0};
    assert_int_equal(lite_tag_compose(&p, &t), -EINVAL);
    p = (lite_tag_parts_t){0, 0, 1u << 8, 0};
    assert_int_equal(lite_tag_compose(&p, &t), -EINVAL);
    p = (lite_tag_parts_t){0, 0, 0, 1u << 16};
    assert_int_equal(lite_tag_compose(&p, &t), -EINVAL);
    assert_true(t == 42); /* untouched on error */
    assert_int_equal(lite_tag_compose(NULL, &t), -EINVAL);
    assert_int_equal(lite_tag_split(1, NULL), -EINVAL);
}

/* Tags order lexicographically by (step, layer, level, seq). */
static void test_ordering(void **state)
{
    lite_tag_parts_t a = {5, 9, 1, 65535}, b = {5, 9, 2, 0}, c = {5, 10, 0, 0}, d = {6, 0, 0, 0};
    uint64_t ta, tb, tc, td;
    lite_tag_compose(&a, &ta);
    lite_tag_compose(&b, &tb);
    lite_tag_compose(&c, &tc);
    lite_tag_compose(&d, &td);
    assert_true(ta < tb && tb < tc && tc < td);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_extremes),
        cmocka_unit_test(test_out_of_range),
        cmocka_unit_test(test_ordering),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
