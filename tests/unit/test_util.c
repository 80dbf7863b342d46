/* test_util.c - the kernel cpulist parser behind the yield heuristic (LITETX_YIELD),
 * lite_sock_connect's report of why it gave up (real sockets on loopback), and the wait-loop
 * clock (lite_waiter: deadline and spin phase with few clock reads), and the tuning variables'
 * reader (lite_env_long: strict integers in range, else the default). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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
    /* numbers no kernel has: the count of such ranges overflowed a long */
    assert_int_equal(lite_cpulist_count("0-9223372036854775807"), 0);
    assert_int_equal(lite_cpulist_count("0-4194304,0-4194305"), 0);
    assert_int_equal(lite_cpulist_count("99999999999999999999"), 0);
}

/* A loopback port nobody listens on: bound, then closed (not listening). */
static void closed_port(struct sockaddr_storage *ss, socklen_t *sl)
{
    struct sockaddr_in *a = (struct sockaddr_in *)ss;
    memset(ss, 0, sizeof(*ss));
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    *sl = sizeof(*a);
    assert_int_equal(bind(fd, (struct sockaddr *)a, *sl), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)a, sl), 0);
    close(fd);
}

static void test_connect_refused_is_named(void **state)
{
    (void)state;
    struct sockaddr_storage ss;
    socklen_t sl;
    closed_port(&ss, &sl);
    int last = -1;
    int64_t t0 = lite_now_ns();
    int rc = lite_sock_connect(&ss, sl, t0 + 300 * 1000000LL, &last);
    int64_t took_ms = (lite_now_ns() - t0) / 1000000;
    assert_int_equal(rc, -ETIMEDOUT);
    assert_int_equal(last, ECONNREFUSED);
    assert_true(took_ms < 2000); /* bounded by the deadline, not by the kernel */
    char buf[96];
    assert_string_equal(lite_sock_last_err(last, buf, sizeof(buf)),
                        " (last attempt: Connection refused)");
    assert_string_equal(lite_sock_last_err(0, buf, sizeof(buf)), "");
}

static void test_connect_listening(void **state)
{
    (void)state;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(ls >= 0);
    assert_int_equal(bind(ls, (struct sockaddr *)&a, al), 0);
    assert_int_equal(getsockname(ls, (struct sockaddr *)&a, &al), 0);
    assert_int_equal(listen(ls, 1), 0);
    struct sockaddr_storage ss;
    memcpy(&ss, &a, sizeof(a));
    int last = -1;
    int fd = lite_sock_connect(&ss, al, lite_now_ns() + 2000 * 1000000LL, &last);
    assert_true(fd >= 0);
    assert_int_equal(last, 0);
    close(fd);
    close(ls);
}

/* The first LITE_WAIT_UNTIMED polls spin and never time out, even past the deadline: no clock. */
static void test_waiter_untimed_polls(void **state)
{
    (void)state;
    struct lite_waiter w;
    lite_waiter_start(&w, 1 /* long past */, 0, 0);
    for (int i = 0; i < LITE_WAIT_UNTIMED; i++)
        assert_int_equal(lite_waiter_next(&w), 0);
    assert_int_equal(lite_waiter_next(&w), -ETIMEDOUT);
}

/* A relative timeout starts at the first timed poll; timeout 0 ends the wait there. */
static void test_waiter_timeout_ms(void **state)
{
    (void)state;
    struct lite_waiter w;
    lite_waiter_start(&w, 0, 0, 1000000000LL);
    for (int i = 0; i < LITE_WAIT_UNTIMED; i++)
        assert_int_equal(lite_waiter_next(&w), 0);
    assert_int_equal(lite_waiter_next(&w), -ETIMEDOUT);

    /* 30 ms: still running 10 ms in, over after 40 ms; no deadline at all with -1 */
    lite_waiter_start(&w, 0, 30, 0);
    int64_t t0 = lite_now_ns(), end = t0 + 2000 * 1000000LL;
    int rc = 0;
    while ((rc = lite_waiter_next(&w)) >= 0 && lite_now_ns() < end)
        if (lite_now_ns() - t0 < 10 * 1000000LL)
            assert_true(rc >= 0);
    assert_int_equal(rc, -ETIMEDOUT);
    assert_true(lite_now_ns() - t0 >= 30 * 1000000LL);

    lite_waiter_start(&w, 0, -1, 0);
    for (int i = 0; i < 1000; i++)
        assert_true(lite_waiter_next(&w) >= 0);
}

/* Spin phase: timeout 0 for the backend until spin_ns have passed, then a sleep of at most
 * 100 ms and never past the deadline; respin starts the spin again. */
static void test_waiter_spin_then_sleep(void **state)
{
    (void)state;
    struct lite_waiter w;
    int64_t spin = 5 * 1000000LL;
    lite_waiter_start(&w, lite_now_ns() + 10000 * 1000000LL, 0, spin);
    int64_t t0 = lite_now_ns(), end = t0 + 2000 * 1000000LL;
    int ms = 0;
    while ((ms = lite_waiter_next(&w)) == 0 && lite_now_ns() < end)
        ;
    assert_true(lite_now_ns() - t0 >= spin);
    assert_true(ms > 0 && ms <= 100);

    lite_waiter_respin(&w);
    assert_int_equal(lite_waiter_next(&w), 0);

    lite_waiter_start(&w, lite_now_ns() + 50 * 1000000LL, 0, 0);
    for (int i = 0; i < LITE_WAIT_UNTIMED; i++)
        lite_waiter_next(&w);
    ms = lite_waiter_next(&w);
    assert_true(ms >= 0 && ms <= 50);
}

static long env_with(const char *value)
{
    lite_env_error_reset();
    if (value)
        setenv("LITETX_TEST_TUNING", value, 1);
    else
        unsetenv("LITETX_TEST_TUNING");
    return lite_env_long("LITETX_TEST_TUNING", 0, 64, 7);
}

static void test_env_long(void **state)
{
    (void)state;
    assert_int_equal(env_with(NULL), 7);
    assert_int_equal(env_with(""), 7);
    assert_int_equal(env_with("0"), 0);
    assert_int_equal(env_with("64"), 64);
    assert_int_equal(env_with("+3"), 3);
    assert_string_equal(lite_env_error(), "");
    /* refused: the default stays, and the variable is recorded for lite_init to fail on */
    const char *bad[] = {"65", "-1", "12x", " 3", "0x1", "1.5", "99999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(env_with(bad[i]), 7);
        assert_non_null(strstr(lite_env_error(), "LITETX_TEST_TUNING="));
        assert_non_null(strstr(lite_env_error(), "0..64"));
    }
    /* the first bad one is what is reported */
    env_with("abc");
    setenv("LITETX_TEST_TUNING", "def", 1);
    lite_env_long("LITETX_TEST_TUNING", 0, 64, 7);
    assert_non_null(strstr(lite_env_error(), "\"abc\""));
    lite_env_error_reset();
    assert_string_equal(lite_env_error(), "");
    unsetenv("LITETX_TEST_TUNING");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpulist_valid),
        cmocka_unit_test(test_cpulist_invalid),
        cmocka_unit_test(test_connect_refused_is_named),
        cmocka_unit_test(test_connect_listening),
        cmocka_unit_test(test_waiter_untimed_polls),
        cmocka_unit_test(test_waiter_timeout_ms),
        cmocka_unit_test(test_waiter_spin_then_sleep),
        cmocka_unit_test(test_env_long),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
