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

/* The typed checks of the table (lite_tunable_parse): ranges, enums, booleans, strict digits. */
static void test_typed_parse(void **state)
{
    const struct lite_tunable i = {"LITETX_X",       "0", "doc", LITE_TUN_INT,
                                   LITE_TUN_CONTEXT, -1,  10,    NULL};
    const struct lite_tunable z = {"LITETX_Z",       "0", "doc", LITE_TUN_SIZE,
                                   LITE_TUN_BACKEND, 4,   8,     NULL};
    const struct lite_tunable b = {"LITETX_B",       "0", "doc", LITE_TUN_BOOL,
                                   LITE_TUN_BACKEND, 0,   1,     NULL};
    const struct lite_tunable e = {"LITETX_E",       "a", "doc", LITE_TUN_ENUM,
                                   LITE_TUN_BACKEND, 0,   0,     "auto|all|lazy"};
    const struct lite_tunable s = {"LITETX_S",       "", "doc", LITE_TUN_STRING,
                                   LITE_TUN_BACKEND, 0,  0,     NULL};
    int64_t n = 99;
    char why[192];
    /* good values */
    assert_int_equal(lite_tunable_parse(&i, "-1", &n, why, sizeof(why)), 0);
    assert_int_equal(n, -1);
    assert_int_equal(lite_tunable_parse(&i, "+10", &n, why, sizeof(why)), 0);
    assert_int_equal(n, 10);
    assert_int_equal(lite_tunable_parse(&z, "8", &n, why, sizeof(why)), 0);
    assert_int_equal(n, 8);
    assert_int_equal(lite_tunable_parse(&b, "1", &n, why, sizeof(why)), 0);
    assert_int_equal(n, 1);
    assert_int_equal(lite_tunable_parse(&e, "lazy", &n, why, sizeof(why)), 0);
    assert_int_equal(n, 2);
    assert_int_equal(lite_tunable_parse(&s, "any text", &n, why, sizeof(why)), 0);
    /* out of range, not decimal, signed where only digits go */
    const char *bad_int[] = {"11", "-2", "1x", " 1", "0x1", "1.5", "99999999999999999999"};
    for (size_t k = 0; k < sizeof(bad_int) / sizeof(bad_int[0]); k++) {
        assert_int_equal(lite_tunable_parse(&i, bad_int[k], &n, why, sizeof(why)),
                         -LITE_ERR_CONFIG);
        assert_non_null(strstr(why, "LITETX_X"));
        assert_non_null(strstr(why, "-1..10"));
    }
    const char *bad_size[] = {"3", "9", "+5", "-5"};
    for (size_t k = 0; k < sizeof(bad_size) / sizeof(bad_size[0]); k++)
        assert_int_equal(lite_tunable_parse(&z, bad_size[k], &n, why, sizeof(why)),
                         -LITE_ERR_CONFIG);
    /* a bad enum word names the words; a bad bool says 0 or 1 */
    const char *bad_enum[] = {"Lazy", "al", "auto|all", "ring"};
    for (size_t k = 0; k < sizeof(bad_enum) / sizeof(bad_enum[0]); k++) {
        assert_int_equal(lite_tunable_parse(&e, bad_enum[k], &n, why, sizeof(why)),
                         -LITE_ERR_CONFIG);
        assert_non_null(strstr(why, "must be one of auto,all,lazy"));
    }
    const char *bad_bool[] = {"2", "yes", "true", "01", "-1"};
    for (size_t k = 0; k < sizeof(bad_bool) / sizeof(bad_bool[0]); k++) {
        assert_int_equal(lite_tunable_parse(&b, bad_bool[k], &n, why, sizeof(why)),
                         -LITE_ERR_CONFIG);
        assert_non_null(strstr(why, "LITETX_B"));
        assert_non_null(strstr(why, "must be 0 or 1"));
    }
}

/* What the core hands a backend: the resolved values through lite_tp_env.get, unset as 0, an
 * invalid one as -LITE_ERR_CONFIG with the message, a name outside the tables as -ENOENT. */
static void test_backend_env(void **state)
{
    setenv("LITETX_TCP_CONNECT", "lazy", 1);
    setenv("LITETX_TCP_BULK_MIN", "4096", 1);
    unsetenv("LITETX_TCP_PORT");
    struct lite_tp_env *env = lite_tun_env_new("tcp");
    assert_non_null(env);
    assert_null(lite_tun_env_error(env));
    struct lite_tun_val v = {0};
    assert_int_equal(env->get(env, "LITETX_TCP_CONNECT", &v), 1);
    assert_int_equal(v.num, 2); /* the index of "lazy" in "auto|all|lazy" */
    assert_string_equal(v.str, "lazy");
    assert_int_equal(env->get(env, "LITETX_TCP_BULK_MIN", &v), 1);
    assert_int_equal(v.num, 4096);
    assert_int_equal(env->get(env, "LITETX_TCP_PORT", &v), 0);
    assert_int_equal(env->get(env, "LITETX_CREDITS", &v) >= 0, 1);    /* the core's are there too */
    assert_int_equal(env->get(env, "LITETX_EFA_RAILS", &v), -ENOENT); /* another backend's */
    assert_int_equal(lite_tp_num(env, "LITETX_TCP_PORT", 7), 7);
    assert_non_null(env->log);
    assert_non_null(env->log_level);
    /* read once: a later change of the environment is not seen by this snapshot */
    setenv("LITETX_TCP_BULK_MIN", "1", 1);
    assert_int_equal(lite_tp_num(env, "LITETX_TCP_BULK_MIN", 0), 4096);
    lite_tun_env_free(env);

    setenv("LITETX_TCP_CONNECT", "sometimes", 1);
    env = lite_tun_env_new("tcp");
    assert_non_null(env);
    assert_non_null(lite_tun_env_error(env));
    assert_non_null(strstr(lite_tun_env_error(env), "LITETX_TCP_CONNECT"));
    assert_int_equal(env->get(env, "LITETX_TCP_CONNECT", &v), -LITE_ERR_CONFIG);
    assert_non_null(strstr(v.str, "must be one of auto,all,lazy"));
    lite_tun_env_free(env);
    unsetenv("LITETX_TCP_CONNECT");
    unsetenv("LITETX_TCP_BULK_MIN");
}

/* The backends' log macros go through the sink the core hands over (tp_log.c): the level is
 * the sink's, the line is formatted once, nothing reaches the core's log state directly. */
void lite_tp_env_attach(const struct lite_tp_env *env); /* tp_support.h, backends' side */
void lite_tp_log(int level, const char *fmt, ...);
static char sink_line[256];
static int sink_calls, sink_level_seen;
static void capture_log(int level, const char *msg)
{
    sink_calls++;
    sink_level_seen = level;
    snprintf(sink_line, sizeof(sink_line), "%s", msg);
}
static int capture_level(void)
{
    return LITE_LOG_INFO;
}

static void test_backend_log_sink(void **state)
{
    struct lite_tp_env mine = {
        .size = sizeof(mine), .log = capture_log, .log_level = capture_level};
    lite_tp_env_attach(&mine);
    lite_tp_log(LITE_LOG_WARN, "rank %d: %s", 3, "lost");
    assert_int_equal(sink_calls, 1);
    assert_int_equal(sink_level_seen, LITE_LOG_WARN);
    assert_string_equal(sink_line, "rank 3: lost");
    lite_tp_log(LITE_LOG_DEBUG, "below the sink's level"); /* filtered before formatting */
    assert_int_equal(sink_calls, 1);
    lite_tp_log(LITE_LOG_INFO, "at it");
    assert_int_equal(sink_calls, 2);
    /* a struct too short for a sink is ignored: the last good sink stays */
    struct lite_tp_env old = {.size = offsetof(struct lite_tp_env, log)};
    lite_tp_env_attach(&old);
    lite_tp_env_attach(NULL);
    lite_tp_log(LITE_LOG_ERROR, "still here");
    assert_int_equal(sink_calls, 3);
    /* the core's sink back, as every probe and open installs it */
    struct lite_tp_env *core = lite_tun_env_new(NULL);
    assert_non_null(core);
    lite_tp_env_attach(core);
    lite_tun_env_free(core);
    lite_tp_log(LITE_LOG_DEBUG, "not captured");
    assert_int_equal(sink_calls, 3);
}

/* lite_init refuses an invalid value of the selected backend's variables before it opens,
 * naming the variable (out of range, bad enum word, bad bool). */
static void test_init_refuses_bad_backend_var(void **state)
{
    const char *cases[][2] = {{"LITETX_TCP_PORT", "70000"},
                              {"LITETX_TCP_PORT", "80x"},
                              {"LITETX_TCP_CONNECT", "sometimes"},
                              {"LITETX_TCP_BULK_MIN", "-1"},
                              {"LITETX_TEST_CORE_RMA", "yes"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(init_with(cases[i][0], cases[i][1]), -LITE_ERR_CONFIG);
        assert_non_null(strstr(lite_init_error(), cases[i][0]));
    }
    /* another backend's bad value does not stop a tcp context (efa is not opened) */
    assert_int_equal(init_with("LITETX_EFA_RAILS", "99"), 0);
    assert_int_equal(init_with("LITETX_TCP_CONNECT", "lazy"), 0);
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
        cmocka_unit_test(test_find),
        cmocka_unit_test(test_closest),
        cmocka_unit_test(test_warn_unknown),
        cmocka_unit_test(test_init_refuses_bad_tuning),
        cmocka_unit_test(test_coll_opts),
        cmocka_unit_test(test_typed_parse),
        cmocka_unit_test(test_backend_env),
        cmocka_unit_test(test_init_refuses_bad_backend_var),
        cmocka_unit_test(test_backend_log_sink),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
