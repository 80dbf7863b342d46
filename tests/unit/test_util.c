/* test_util.c - the kernel cpulist parser behind the yield heuristic (LITETX_YIELD), and
 * lite_sock_connect's report of why it gave up (real sockets on loopback). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpulist_valid),
        cmocka_unit_test(test_cpulist_invalid),
        cmocka_unit_test(test_connect_refused_is_named),
        cmocka_unit_test(test_connect_listening),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
