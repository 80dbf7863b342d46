/*
 * test_tunables.c - the table of LITETX_* variables: lookups over the core's and the compiled-in
 * backends' entries, the closest-name suggestion, and the warning for unknown variables.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "litetx/litetx.h"
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

/* lite_init with one rank and `var`=`value` set (unless var is NULL): its return code, and the
 * context in *out (finalized when out is NULL). */
static int init_ctx(const char *var, const char *value, lite_ctx_t **out)
{
    if (var)
        setenv(var, value, 1);
    lite_config_t cfg = lite_config_default();
    cfg.rank = 0;
    cfg.world_size = 1;
    cfg.transport = "tcp";
    char root[64];
    int fd = socket(AF_INET, SOCK_STREAM, 0); /* a port free now, for the bootstrap */
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    assert_true(fd >= 0 && !bind(fd, (struct sockaddr *)&sa, sizeof(sa)) &&
                !getsockname(fd, (struct sockaddr *)&sa, &len));
    close(fd);
    snprintf(root, sizeof(root), "127.0.0.1:%d", ntohs(sa.sin_port));
    cfg.root = root;
    cfg.init_timeout_ms = 10000;
    lite_ctx_t *ctx = NULL;
    int rc = lite_init(&cfg, &ctx);
    if (var)
        unsetenv(var);
    if (out)
        *out = ctx;
    else if (!rc)
        assert_int_equal(lite_finalize(ctx), 0);
    return rc;
}

static int init_with(const char *var, const char *value)
{
    return init_ctx(var, value, NULL);
}

static void test_init_refuses_bad_tuning(void **state)
{
    /* one policy for every variable: a value that does not parse fails lite_init, naming it */
    const char *cases[][2] = {{"LITETX_SPIN_US", "abc"},     {"LITETX_SPIN_PAUSE_NS", "5000"},
                              {"LITETX_IMM_COUNTERS", "0"},  {"LITETX_YIELD", "yes"},
                              {"LITETX_COLL_ALGO", "ring"},  {"LITETX_COLL_CHUNK", "-4k"},
                              {"LITETX_COLL_CHECK", "maybe"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(init_with(cases[i][0], cases[i][1]), -LITE_ERR_CONFIG);
        assert_non_null(strstr(lite_init_error(), cases[i][0]));
    }
    /* and a good one starts */
    assert_int_equal(init_with("LITETX_SPIN_US", "50"), 0);
}

/* The collective options: read from the environment once by lite_init, then lite_coll_set's. */
static void test_coll_opts(void **state)
{
    lite_coll_opts_t o = lite_coll_opts_default();
    assert_int_equal(o.struct_size, sizeof(o));
    assert_int_equal(o.algo, LITE_COLL_ALGO_AUTO);
    assert_int_equal(o.chunk, 0);
    assert_int_equal(o.check, 1);
    setenv("LITETX_COLL_CHUNK", "64k", 1);
    setenv("LITETX_COLL_CHECK", "off", 1);
    lite_ctx_t *ctx = NULL;
    assert_int_equal(init_ctx("LITETX_COLL_ALGO", "rsag", &ctx), 0);
    unsetenv("LITETX_COLL_CHUNK");
    unsetenv("LITETX_COLL_CHECK");
    assert_int_equal(lite_coll_get(ctx, &o), 0);
    assert_int_equal(o.algo, LITE_COLL_ALGO_RSAG);
    assert_int_equal(o.chunk, 65536);
    assert_int_equal(o.check, 0);
    /* the environment is not read again */
    setenv("LITETX_COLL_ALGO", "ring", 1);
    float x = 1.5f, y = 0;
    assert_int_equal(lite_allreduce(ctx, &x, &y, 1, LITE_F32, LITE_SUM, 1000), 0);
    unsetenv("LITETX_COLL_ALGO");
    assert_true(y == 1.5f);
    /* set, then get it back */
    lite_coll_opts_t n = lite_coll_opts_default();
    n.algo = LITE_COLL_ALGO_PIPE;
    n.chunk = 4096;
    assert_int_equal(lite_coll_set(ctx, &n), 0);
    lite_coll_opts_t g = lite_coll_opts_default();
    assert_int_equal(lite_coll_get(ctx, &g), 0);
    assert_int_equal(g.algo, LITE_COLL_ALGO_PIPE);
    assert_int_equal(g.chunk, 4096);
    assert_int_equal(g.check, 1);
    /* each bad field refused with a detail, the options unchanged */
    for (int i = 0; i < 6; i++) {
        lite_coll_opts_t b = lite_coll_opts_default();
        if (i == 0)
            b.struct_size = 8;
        if (i == 1)
            b.algo = 4;
        if (i == 2)
            b.chunk = (1ull << 40) + 1;
        if (i == 3)
            b.check = 2;
        if (i == 4)
            b.reserved[4] = 1;
        if (i == 5)
            b.algo = -1;
        assert_int_equal(lite_coll_set(ctx, &b), -EINVAL);
        assert_non_null(strstr(lite_last_error(ctx), "lite_coll_set"));
    }
    g = lite_coll_opts_default();
    assert_int_equal(lite_coll_get(ctx, &g), 0);
    assert_int_equal(g.algo, LITE_COLL_ALGO_PIPE);
    assert_int_equal(lite_coll_set(NULL, &n), -EINVAL);
    assert_int_equal(lite_coll_set(ctx, NULL), -EINVAL);
    assert_int_equal(lite_coll_get(NULL, &g), -EINVAL);
    g.struct_size = 0;
    assert_int_equal(lite_coll_get(ctx, &g), -EINVAL);
    assert_int_equal(lite_finalize(ctx), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find),         cmocka_unit_test(test_closest),
        cmocka_unit_test(test_warn_unknown), cmocka_unit_test(test_init_refuses_bad_tuning),
        cmocka_unit_test(test_coll_opts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
