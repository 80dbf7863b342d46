/*
 * test_config.c - configuration resolution (src/core/config.c): defaults, every level of the
 * precedence beating the next, every kind of bad input (with the key and the source named in
 * the message), host:port parsing and log level names.
 *
 * The environment is a fake table handed to lite_settings_resolve() through its getenv hook, so
 * the tests never depend on (or change) the real process environment, except the one test that
 * proves the real environment is not consulted.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "lite_int.h"

/* ---------------------------------------------------------------------------------------------
 * Fixtures: a fake environment and temporary JSON files
 * ------------------------------------------------------------------------------------------- */

/* A fake environment: pairs of name/value, ended by a NULL name. */
typedef const char *env_t[][2];

static const char *fake_getenv(const char *name, void *arg)
{
    const char *(*env)[2] = arg;
    for (size_t i = 0; env != NULL && env[i][0] != NULL; i++)
        if (strcmp(env[i][0], name) == 0)
            return env[i][1];
    return NULL;
}

static env_t no_env = {{NULL, NULL}};

#define MAX_TMP 64
static char tmp_paths[MAX_TMP][64];
static int n_tmp;

/* Write `len` bytes to a new temporary file; the path lives until the test's teardown. */
static const char *tmp_file_n(const char *content, size_t len)
{
    assert_true(n_tmp < MAX_TMP);
    char *path = tmp_paths[n_tmp];
    strcpy(path, "/tmp/litetx-test-config-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    n_tmp++;
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(fd, content + off, len - off);
        assert_true(n > 0);
        off += (size_t)n;
    }
    assert_int_equal(close(fd), 0);
    return path;
}

static const char *tmp_file(const char *content)
{
    return tmp_file_n(content, strlen(content));
}

static int teardown_tmp(void **state)
{
    (void)state;
    for (int i = 0; i < n_tmp; i++)
        unlink(tmp_paths[i]);
    n_tmp = 0;
    return 0;
}

static char err[1024];

static int resolve(const lite_config_t *cfg, const char *(*env)[2], struct lite_settings *s)
{
    memset(err, 0, sizeof(err));
    return lite_settings_resolve(cfg, fake_getenv, (void *)env, s, err, sizeof(err));
}

/* Resolve and expect success. */
static struct lite_settings ok(const lite_config_t *cfg, const char *(*env)[2])
{
    struct lite_settings s;
    memset(&s, 0x5a, sizeof(s));
    int rc = resolve(cfg, env, &s);
    if (rc != 0)
        print_error("unexpected failure: %s\n", err);
    assert_int_equal(rc, 0);
    return s;
}

/* Expect -LITE_ERR_CONFIG, an untouched output, and every given substring in the message. */
static void expect_fail_v(const lite_config_t *cfg, const char *(*env)[2], ...)
{
    struct lite_settings s, before;
    memset(&s, 0x5a, sizeof(s));
    before = s;
    int rc = resolve(cfg, env, &s);
    if (rc != -LITE_ERR_CONFIG)
        print_error("expected a config error, got rc=%d err=\"%s\"\n", rc, err);
    assert_int_equal(rc, -LITE_ERR_CONFIG);
    assert_memory_equal(&s, &before, sizeof(s));
    va_list ap;
    va_start(ap, env);
    for (const char *want = va_arg(ap, const char *); want != NULL;
         want = va_arg(ap, const char *)) {
        if (strstr(err, want) == NULL)
            print_error("message \"%s\" lacks \"%s\"\n", err, want);
        assert_non_null(strstr(err, want));
    }
    va_end(ap);
}
#define expect_fail(cfg, env, ...) expect_fail_v(cfg, env, __VA_ARGS__, (const char *)NULL)

/* Expect a failure from a single environment variable, naming that variable. */
static void expect_env_fail(const char *var, const char *val, const char *what)
{
    const char *env[][2] = {{var, val}, {NULL, NULL}};
    expect_fail(NULL, env, var, what);
}

/* Expect a failure from a config file with this content, naming the file and `what`. */
static void expect_file_fail(const char *content, const char *what, const char *what2)
{
    lite_config_t c = lite_config_default();
    c.config_file = tmp_file(content);
    expect_fail(&c, no_env, c.config_file, what, what2);
}

/* ---------------------------------------------------------------------------------------------
 * Defaults
 * ------------------------------------------------------------------------------------------- */

static void test_config_default(void **state)
{
    (void)state;
    lite_config_t c = lite_config_default();
    assert_int_equal(c.version, LITE_CONFIG_VERSION);
    assert_int_equal(c.struct_size, sizeof(lite_config_t));
    assert_int_equal(c.rank, -1);
    assert_int_equal(c.world_size, -1);
    assert_null(c.root);
    assert_null(c.transport);
    assert_int_equal(c.log_level, LITE_LOG_UNSET);
    assert_int_equal(c.init_timeout_ms, -2);
    assert_int_equal(c.op_timeout_ms, -2);
    assert_null(c.config_file);
}

static void check_builtin_defaults(const struct lite_settings *s)
{
    assert_int_equal(s->rank, 0);
    assert_int_equal(s->world_size, 1);
    assert_string_equal(s->root_host, "127.0.0.1");
    assert_int_equal(s->root_port, 29500);
    assert_string_equal(s->transport, "auto");
    assert_int_equal(s->log_level, LITE_LOG_WARN);
    assert_int_equal(s->init_timeout_ms, 30000);
    assert_int_equal(s->op_timeout_ms, 60000);
}

static void test_defaults(void **state)
{
    (void)state;
    struct lite_settings s = ok(NULL, no_env);
    check_builtin_defaults(&s);
    lite_config_t c = lite_config_default();
    s = ok(&c, no_env);
    check_builtin_defaults(&s);
    /* A NULL hook means the process environment; with none of our variables set, defaults. */
    static const char *const vars[] = {"LITETX_RANK",
                                       "LITETX_WORLD_SIZE",
                                       "LITETX_ROOT",
                                       "LITETX_TRANSPORT",
                                       "LITETX_CONFIG",
                                       "LITETX_LOG_LEVEL",
                                       "LITETX_INIT_TIMEOUT_MS",
                                       "LITETX_OP_TIMEOUT_MS",
                                       "OMPI_COMM_WORLD_RANK",
                                       "OMPI_COMM_WORLD_SIZE",
                                       "SLURM_PROCID",
                                       "SLURM_NTASKS",
                                       "RANK",
                                       "WORLD_SIZE",
                                       "MASTER_ADDR",
                                       "MASTER_PORT"};
    for (size_t i = 0; i < LITE_ARRAY_LEN(vars); i++)
        unsetenv(vars[i]);
    memset(&s, 0x5a, sizeof(s));
    assert_int_equal(lite_settings_resolve(NULL, NULL, NULL, &s, err, sizeof(err)), 0);
    check_builtin_defaults(&s);
}

/* The real process environment is never read when a hook is given. */
static void test_process_env_not_read(void **state)
{
    (void)state;
    assert_int_equal(setenv("LITETX_RANK", "3", 1), 0);
    assert_int_equal(setenv("LITETX_WORLD_SIZE", "8", 1), 0);
    assert_int_equal(setenv("LITETX_CONFIG", "/nonexistent/litetx.json", 1), 0);
    struct lite_settings s = ok(NULL, no_env);
    check_builtin_defaults(&s);
    /* ...and the NULL hook does read it (so the test above is meaningful). */
    int rc = lite_settings_resolve(NULL, NULL, NULL, &s, err, sizeof(err));
    assert_int_equal(rc, -LITE_ERR_CONFIG);
    assert_non_null(strstr(err, "/nonexistent/litetx.json"));
    unsetenv("LITETX_CONFIG");
    assert_int_equal(lite_settings_resolve(NULL, NULL, NULL, &s, err, sizeof(err)), 0);
    assert_int_equal(s.rank, 3);
    assert_int_equal(s.world_size, 8);
    unsetenv("LITETX_RANK");
    unsetenv("LITETX_WORLD_SIZE");
}

/* ---------------------------------------------------------------------------------------------
 * Precedence
 * ------------------------------------------------------------------------------------------- */

static const char full_file[] = "{\n"
                                "  \"rank\": 6,\n"
                                "  \"world_size\": 70,\n"
                                "  \"root\": \"file-host:6000\",\n"
                                "  \"transport\": \"file_tp\",\n"
                                "  \"log_level\": \"info\",\n"
                                "  \"init_timeout_ms\": 6001,\n"
                                "  \"op_timeout_ms\": 6002\n"
                                "}\n";

/* Level 1: the struct beats everything below it. */
static void test_struct_beats_all(void **state)
{
    (void)state;
    const char *path = tmp_file(full_file);
    env_t env = {{"LITETX_RANK", "2"},
                 {"LITETX_WORLD_SIZE", "20"},
                 {"LITETX_ROOT", "env-host:2000"},
                 {"LITETX_TRANSPORT", "env_tp"},
                 {"LITETX_LOG_LEVEL", "error"},
                 {"LITETX_INIT_TIMEOUT_MS", "2001"},
                 {"LITETX_OP_TIMEOUT_MS", "2002"},
                 {"OMPI_COMM_WORLD_RANK", "3"},
                 {"OMPI_COMM_WORLD_SIZE", "30"},
                 {"MASTER_ADDR", "tr-host"},
                 {"MASTER_PORT", "5000"},
                 {"LITETX_CONFIG", path},
                 {NULL, NULL}};
    lite_config_t c = lite_config_default();
    c.rank = 1;
    c.world_size = 10;
    c.root = "struct-host:1000";
    c.transport = "struct_tp";
    c.log_level = LITE_LOG_DEBUG;
    c.init_timeout_ms = LITE_TIMEOUT_INFINITE;
    c.op_timeout_ms = 0;
    struct lite_settings s = ok(&c, env);
    assert_int_equal(s.rank, 1);
    assert_int_equal(s.world_size, 10);
    assert_string_equal(s.root_host, "struct-host");
    assert_int_equal(s.root_port, 1000);
    assert_string_equal(s.transport, "struct_tp");
    assert_int_equal(s.log_level, LITE_LOG_DEBUG);
    assert_int_equal(s.init_timeout_ms, LITE_TIMEOUT_INFINITE);
    assert_int_equal(s.op_timeout_ms, 0);
}

/* Level 2: LITETX_* beats the launchers and the file. */
static void test_litetx_env_beats_launchers_and_file(void **state)
{
    (void)state;
    const char *path = tmp_file(full_file);
    env_t env = {{"LITETX_RANK", "2"},
                 {"LITETX_WORLD_SIZE", "20"},
                 {"LITETX_ROOT", "env-host:2000"},
                 {"LITETX_TRANSPORT", "env_tp"},
                 {"LITETX_LOG_LEVEL", "error"},
                 {"LITETX_INIT_TIMEOUT_MS", "-1"},
                 {"LITETX_OP_TIMEOUT_MS", "2002"},
                 {"OMPI_COMM_WORLD_RANK", "3"},
                 {"OMPI_COMM_WORLD_SIZE", "30"},
                 {"SLURM_PROCID", "4"},
                 {"SLURM_NTASKS", "40"},
                 {"RANK", "5"},
                 {"WORLD_SIZE", "50"},
                 {"MASTER_ADDR", "tr-host"},
                 {"MASTER_PORT", "5000"},
                 {"LITETX_CONFIG", path},
                 {NULL, NULL}};
    struct lite_settings s = ok(NULL, env);
    assert_int_equal(s.rank, 2);
    assert_int_equal(s.world_size, 20);
    assert_string_equal(s.root_host, "env-host");
    assert_int_equal(s.root_port, 2000);
    assert_string_equal(s.transport, "env_tp");
    assert_int_equal(s.log_level, LITE_LOG_ERROR);
    assert_int_equal(s.init_timeout_ms, LITE_TIMEOUT_INFINITE);
    assert_int_equal(s.op_timeout_ms, 2002);
}

/* Level 3, first launcher: Open MPI beats Slurm, torchrun and the file. */
static void test_ompi_beats_slurm(void **state)
{
    (void)state;
    const char *path = tmp_file(full_file);
    env_t env = {{"OMPI_COMM_WORLD_RANK", "3"},
                 {"OMPI_COMM_WORLD_SIZE", "30"},
                 {"SLURM_PROCID", "4"},
                 {"SLURM_NTASKS", "40"},
                 {"RANK", "5"},
                 {"WORLD_SIZE", "50"},
                 {"LITETX_CONFIG", path},
                 {NULL, NULL}};
    struct lite_settings s = ok(NULL, env);
    assert_int_equal(s.rank, 3);
    assert_int_equal(s.world_size, 30);
    /* Launchers do not set the other keys: they come from the file. */
    assert_string_equal(s.root_host, "file-host");
    assert_string_equal(s.transport, "file_tp");
    assert_int_equal(s.log_level, LITE_LOG_INFO);
    assert_int_equal(s.init_timeout_ms, 6001);
    assert_int_equal(s.op_timeout_ms, 6002);
}

/* Level 3, second launcher: torchrun beats Slurm (torchrun inside an sbatch job) and the file. */
static void test_torchrun_beats_slurm(void **state)
{
    (void)state;
    const char *path = tmp_file(full_file);
    env_t env = {{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "40"},  {"RANK", "5"},
                 {"WORLD_SIZE", "50"},  {"LITETX_CONFIG", path}, {NULL, NULL}};
    struct lite_settings s = ok(NULL, env);
    assert_int_equal(s.rank, 5);
    assert_int_equal(s.world_size, 50);
}

/* Level 3, third launcher: Slurm alone beats the file. */
static void test_slurm_beats_file(void **state)
{
    (void)state;
    const char *path = tmp_file(full_file);
    env_t env = {
        {"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "40"}, {"LITETX_CONFIG", path}, {NULL, NULL}};
    struct lite_settings s = ok(NULL, env);
    assert_int_equal(s.rank, 4);
    assert_int_equal(s.world_size, 40);
}

/* Level 3, third launcher: torchrun beats the file, MASTER_ADDR/PORT included. */
static void test_torchrun_beats_file(void **state)
{
    (void)state;
    const char *path = tmp_file(full_file);
    env_t env = {{"RANK", "5"},           {"WORLD_SIZE", "50"},    {"MASTER_ADDR", "tr-host"},
                 {"MASTER_PORT", "5000"}, {"LITETX_CONFIG", path}, {NULL, NULL}};
    struct lite_settings s = ok(NULL, env);
    assert_int_equal(s.rank, 5);
    assert_int_equal(s.world_size, 50);
    assert_string_equal(s.root_host, "tr-host");
    assert_int_equal(s.root_port, 5000);
    assert_string_equal(s.transport, "file_tp");
}

/* Level 4: the file beats the defaults, for every key. */
static void test_file_beats_defaults(void **state)
{
    (void)state;
    lite_config_t c = lite_config_default();
    c.config_file = tmp_file(full_file);
    struct lite_settings s = ok(&c, no_env);
    assert_int_equal(s.rank, 6);
    assert_int_equal(s.world_size, 70);
    assert_string_equal(s.root_host, "file-host");
    assert_int_equal(s.root_port, 6000);
    assert_string_equal(s.transport, "file_tp");
    assert_int_equal(s.log_level, LITE_LOG_INFO);
    assert_int_equal(s.init_timeout_ms, 6001);
    assert_int_equal(s.op_timeout_ms, 6002);
}

/* A partial file: the keys it lacks come from the defaults. */
static void test_file_partial(void **state)
{
    (void)state;
    lite_config_t c = lite_config_default();
    c.config_file = tmp_file("{\"world_size\": 3, \"op_timeout_ms\": -1}");
    struct lite_settings s = ok(&c, no_env);
    assert_int_equal(s.world_size, 3);
    assert_int_equal(s.op_timeout_ms, LITE_TIMEOUT_INFINITE);
    assert_int_equal(s.rank, 0);
    assert_int_equal(s.init_timeout_ms, 30000);
    assert_string_equal(s.transport, "auto");
    /* An empty object is a valid file that sets nothing. */
    c.config_file = tmp_file(" {} \n");
    s = ok(&c, no_env);
    check_builtin_defaults(&s);
}

/* Per field: each field takes its own winner, whatever won the others. */
static void test_per_field_mix(void **state)
{
    (void)state;
    const char *path = tmp_file(full_file);
    env_t env = {{"LITETX_TRANSPORT", "tcp"},
                 {"SLURM_NTASKS", "16"},
                 {"RANK", "9"},
                 {"LITETX_CONFIG", path},
                 {NULL, NULL}};
    lite_config_t c = lite_config_default();
    c.op_timeout_ms = 7;
    struct lite_settings s = ok(&c, env);
    assert_int_equal(s.rank, 9);        /* torchrun */
    assert_int_equal(s.world_size, 16); /* Slurm */
    assert_string_equal(s.transport, "tcp");
    assert_int_equal(s.op_timeout_ms, 7);
    assert_int_equal(s.init_timeout_ms, 6001);
    assert_string_equal(s.root_host, "file-host");
}

/* cfg->config_file beats LITETX_CONFIG (which is then not even opened). */
static void test_config_file_struct_beats_env(void **state)
{
    (void)state;
    env_t env = {{"LITETX_CONFIG", "/nonexistent/dir/litetx.json"}, {NULL, NULL}};
    lite_config_t c = lite_config_default();
    c.config_file = tmp_file("{\"world_size\": 5}");
    struct lite_settings s = ok(&c, env);
    assert_int_equal(s.world_size, 5);
    /* Without the struct field, LITETX_CONFIG is used. */
    env_t env2 = {{"LITETX_CONFIG", c.config_file}, {NULL, NULL}};
    s = ok(NULL, env2);
    assert_int_equal(s.world_size, 5);
}

/* A named file is always read: a bad file fails even when the struct sets every field. */
static void test_file_always_checked(void **state)
{
    (void)state;
    lite_config_t c = lite_config_default();
    c.rank = 0;
    c.world_size = 2;
    c.root = "h:1";
    c.transport = "tcp";
    c.log_level = LITE_LOG_INFO;
    c.init_timeout_ms = 1;
    c.op_timeout_ms = 1;
    c.config_file = tmp_file("{\"rank\": \"zero\"}");
    expect_fail(&c, no_env, c.config_file, "\"rank\"", "must be an integer");
    c.config_file = "/nonexistent/dir/litetx.json";
    expect_fail(&c, no_env, "/nonexistent/dir/litetx.json", "cannot open");
}

/* A bad value at a level below the winner is not consulted (only the file is always read). */
static void test_shadowed_env_not_checked(void **state)
{
    (void)state;
    env_t env = {{"LITETX_RANK", "1"},
                 {"LITETX_WORLD_SIZE", "2"},
                 {"OMPI_COMM_WORLD_RANK", "x"},
                 {"SLURM_NTASKS", "junk"},
                 {"MASTER_ADDR", "only-addr"},
                 {"LITETX_ROOT", "h:9"},
                 {NULL, NULL}};
    struct lite_settings s = ok(NULL, env);
    assert_int_equal(s.rank, 1);
    assert_int_equal(s.world_size, 2);
    assert_string_equal(s.root_host, "h");
}

/* ---------------------------------------------------------------------------------------------
 * Bad input from the environment
 * ------------------------------------------------------------------------------------------- */

static void test_env_bad_integers(void **state)
{
    (void)state;
    expect_env_fail("LITETX_WORLD_SIZE", "abc", "not an integer");
    expect_env_fail("LITETX_WORLD_SIZE", "0", "out of range");
    expect_env_fail("LITETX_WORLD_SIZE", "-3", "out of range");
    expect_env_fail("LITETX_WORLD_SIZE", "65537", "out of range");
    expect_env_fail("LITETX_WORLD_SIZE", "", "empty");
    expect_env_fail("LITETX_RANK", "12x", "not an integer");
    expect_env_fail("LITETX_RANK", "99999999999999", "out of range");
    expect_env_fail("LITETX_RANK", "99999999999999999999999999", "out of range");
    expect_env_fail("LITETX_RANK", "-1", "out of range");
    expect_env_fail("LITETX_RANK", "65536", "between 0 and 65535");
    expect_env_fail("LITETX_RANK", " 1", "not an integer");
    expect_env_fail("LITETX_RANK", "1 ", "not an integer");
    expect_env_fail("LITETX_RANK", "0x1", "not an integer");
    expect_env_fail("LITETX_RANK", "-", "not an integer");
    expect_env_fail("LITETX_RANK", "", "empty");
    expect_env_fail("LITETX_INIT_TIMEOUT_MS", "-2", "out of range");
    expect_env_fail("LITETX_INIT_TIMEOUT_MS", "abc", "not an integer");
    expect_env_fail("LITETX_INIT_TIMEOUT_MS", "2147483648", "out of range");
    expect_env_fail("LITETX_OP_TIMEOUT_MS", "1.5", "not an integer");
    expect_env_fail("LITETX_OP_TIMEOUT_MS", "", "empty");
    expect_env_fail("LITETX_OP_TIMEOUT_MS", "-100", "out of range");
    expect_env_fail("LITETX_CREDITS", "1", "out of range");
    expect_env_fail("LITETX_CREDITS", "70000", "out of range");
    expect_env_fail("LITETX_RNDV_THRESHOLD", "63", "out of range");
    expect_env_fail("LITETX_RNDV_THRESHOLD", "64k", "not an integer");
    /* The message quotes the bad value. */
    expect_env_fail("LITETX_WORLD_SIZE", "abc", "LITETX_WORLD_SIZE=\"abc\"");
}

static void test_env_bad_launchers(void **state)
{
    (void)state;
    expect_env_fail("OMPI_COMM_WORLD_RANK", "x", "not an integer");
    expect_env_fail("OMPI_COMM_WORLD_SIZE", "0", "out of range");
    expect_env_fail("SLURM_PROCID", "", "empty");
    expect_env_fail("SLURM_NTASKS", "4k", "not an integer");
    expect_env_fail("RANK", "abc", "not an integer");
    expect_env_fail("WORLD_SIZE", "99999999999999", "out of range");
    expect_env_fail("MASTER_ADDR", "node1", "MASTER_PORT");
    expect_env_fail("MASTER_PORT", "29500", "MASTER_ADDR");
    env_t bad_port = {{"MASTER_ADDR", "node1"}, {"MASTER_PORT", "99999"}, {NULL, NULL}};
    expect_fail(NULL, bad_port, "MASTER_PORT", "99999");
    env_t bad_port2 = {{"MASTER_ADDR", "node1"}, {"MASTER_PORT", "0"}, {NULL, NULL}};
    expect_fail(NULL, bad_port2, "MASTER_PORT");
    env_t bad_addr = {{"MASTER_ADDR", "bad host"}, {"MASTER_PORT", "1"}, {NULL, NULL}};
    expect_fail(NULL, bad_addr, "MASTER_ADDR", "bad host");
    env_t empty_addr = {{"MASTER_ADDR", ""}, {"MASTER_PORT", "1"}, {NULL, NULL}};
    expect_fail(NULL, empty_addr, "MASTER_ADDR");
    env_t addr_port = {{"MASTER_ADDR", "host:1"}, {"MASTER_PORT", "1"}, {NULL, NULL}};
    expect_fail(NULL, addr_port, "MASTER_ADDR");
}

static void test_env_bad_strings(void **state)
{
    (void)state;
    expect_env_fail("LITETX_TRANSPORT", "", "empty");
    expect_env_fail("LITETX_TRANSPORT", "TCP", "invalid");
    expect_env_fail("LITETX_TRANSPORT", "t-c-p", "invalid");
    expect_env_fail("LITETX_TRANSPORT", "tcp ", "invalid");
    char long_name[LITE_NAME_MAX + 1];
    memset(long_name, 'a', LITE_NAME_MAX);
    long_name[LITE_NAME_MAX] = '\0';
    expect_env_fail("LITETX_TRANSPORT", long_name, "too long");
    long_name[LITE_NAME_MAX - 1] = '\0'; /* exactly LITE_NAME_MAX - 1 characters: fine */
    env_t env = {{"LITETX_TRANSPORT", long_name}, {NULL, NULL}};
    struct lite_settings s = ok(NULL, env);
    assert_string_equal(s.transport, long_name);

    expect_env_fail("LITETX_ROOT", "", "empty");
    expect_env_fail("LITETX_ROOT", "host", "not host:port");
    expect_env_fail("LITETX_ROOT", "host:", "not host:port");
    expect_env_fail("LITETX_ROOT", ":80", "not host:port");
    expect_env_fail("LITETX_ROOT", "host:0", "not host:port");
    expect_env_fail("LITETX_ROOT", "host:65536", "not host:port");
    expect_env_fail("LITETX_ROOT", "::1:80", "not host:port");

    expect_env_fail("LITETX_LOG_LEVEL", "", "empty");
    expect_env_fail("LITETX_LOG_LEVEL", "verbose", "not a log level");
    expect_env_fail("LITETX_LOG_LEVEL", "4", "not a log level");
    expect_env_fail("LITETX_LOG_LEVEL", "-1", "not a log level");
    expect_env_fail("LITETX_LOG_LEVEL", "warning", "not a log level");

    expect_env_fail("LITETX_CONFIG", "", "empty");
    expect_env_fail("LITETX_CONFIG", "/nonexistent/dir/x.json", "No such file or directory");
}

/* Control characters in a bad value are not copied raw into the message. */
static void test_env_value_sanitised(void **state)
{
    (void)state;
    expect_env_fail("LITETX_RANK", "1\n2\x1b[31m", "not an integer");
    assert_null(strchr(err, '\n'));
    assert_null(strchr(err, '\x1b'));
    /* A huge value is shortened. */
    char big[4096];
    memset(big, '7', sizeof(big) - 2);
    big[sizeof(big) - 2] = 'x';
    big[sizeof(big) - 1] = '\0';
    expect_env_fail("LITETX_WORLD_SIZE", big, "not an integer");
    assert_true(strlen(err) < 200);
    assert_non_null(strstr(err, "777...\""));
}

/* ---------------------------------------------------------------------------------------------
 * Bad input in the struct
 * ------------------------------------------------------------------------------------------- */

/* A caller built against the first layout (no credits/rndv_threshold) still works: the newer
 * fields are taken as unset, even if the bytes after its struct hold garbage. */
static void test_struct_older_layout(void **state)
{
    (void)state;
    struct {
        lite_config_t c;
        char garbage[16];
    } big;
    memset(&big, 0x7f, sizeof(big));
    lite_config_t d = lite_config_default();
    memcpy(&big.c, &d, offsetof(lite_config_t, credits));
    big.c.struct_size = (uint32_t)(offsetof(lite_config_t, config_file) + sizeof(void *));
    env_t env = {{"LITETX_CREDITS", "8"}, {NULL, NULL}};
    struct lite_settings s = ok(&big.c, env);
    assert_int_equal(s.credits, 8);
    assert_int_equal(s.rndv_threshold, 65536);
    assert_true(s.rndv_default); /* set by nobody: a backend's preference may apply */
    env_t none = {{NULL, NULL}};
    s = ok(&big.c, none);
    assert_int_equal(s.credits, 64);
}

static void test_flow_keys_file(void **state)
{
    (void)state;
    lite_config_t c = lite_config_default();
    c.config_file = tmp_file("{\"credits\": 16, \"rndv_threshold\": 4096}");
    env_t none = {{NULL, NULL}};
    struct lite_settings s = ok(&c, none);
    assert_int_equal(s.credits, 16);
    assert_int_equal(s.rndv_threshold, 4096);
    assert_false(s.rndv_default); /* configured: no backend preference overrides it */
    env_t th = {{"LITETX_RNDV_THRESHOLD", "65536"}, {NULL, NULL}};
    c.config_file = NULL;
    s = ok(&c, th);
    assert_false(s.rndv_default);
    c.rndv_threshold = 65536;
    s = ok(&c, none);
    assert_false(s.rndv_default);
    expect_file_fail("{\"credits\": \"many\"}", "credits", "integer");
    expect_file_fail("{\"rndv_threshold\": 0}", "rndv_threshold", "out of range");
}

static void test_struct_bad(void **state)
{
    (void)state;
    lite_config_t c = lite_config_default();
    c.version = 2;
    expect_fail(&c, no_env, "lite_config_t.version", "lite_config_default");
    c = lite_config_default();
    c.version = 0;
    expect_fail(&c, no_env, "lite_config_t.version");
    c = lite_config_default();
    c.struct_size = (uint32_t)sizeof(c) + 8; /* newer than this library */
    expect_fail(&c, no_env, "lite_config_t.struct_size");
    c = lite_config_default();
    c.struct_size = 12; /* shorter than the first layout */
    expect_fail(&c, no_env, "lite_config_t.struct_size");
    c = lite_config_default();
    c.credits = 1;
    expect_fail(&c, no_env, "lite_config_t.credits", "out of range");
    c = lite_config_default();
    c.rndv_threshold = (1 << 30) + 1; /* one past the top */
    expect_fail(&c, no_env, "lite_config_t.rndv_threshold", "out of range");
    c = lite_config_default();
    c.rank = -5;
    expect_fail(&c, no_env, "lite_config_t.rank", "out of range");
    c = lite_config_default();
    c.world_size = 0;
    expect_fail(&c, no_env, "lite_config_t.world_size", "out of range");
    c.world_size = -7;
    expect_fail(&c, no_env, "lite_config_t.world_size", "out of range");
    c.world_size = 65537;
    expect_fail(&c, no_env, "lite_config_t.world_size", "out of range");
    c = lite_config_default();
    c.init_timeout_ms = -3;
    expect_fail(&c, no_env, "lite_config_t.init_timeout_ms", "out of range");
    c = lite_config_default();
    c.op_timeout_ms = INT_MIN;
    expect_fail(&c, no_env, "lite_config_t.op_timeout_ms", "out of range");
    c = lite_config_default();
    c.log_level = 4;
    expect_fail(&c, no_env, "lite_config_t.log_level");
    c.log_level = -2;
    expect_fail(&c, no_env, "lite_config_t.log_level");
    c = lite_config_default();
    c.root = "nope";
    expect_fail(&c, no_env, "lite_config_t.root", "nope");
    c.root = "";
    expect_fail(&c, no_env, "lite_config_t.root");
    c = lite_config_default();
    c.transport = "";
    expect_fail(&c, no_env, "lite_config_t.transport", "empty");
    c.transport = "Bad";
    expect_fail(&c, no_env, "lite_config_t.transport", "Bad");
    c.transport = "a_transport_name_that_is_too_long";
    expect_fail(&c, no_env, "lite_config_t.transport", "too long");
    c = lite_config_default();
    c.config_file = "";
    expect_fail(&c, no_env, "lite_config_t.config_file", "empty");
    /* A struct value that is bad fails even if the environment has a good one. */
    env_t env = {{"LITETX_WORLD_SIZE", "4"}, {NULL, NULL}};
    c = lite_config_default();
    c.world_size = 0;
    expect_fail(&c, env, "lite_config_t.world_size");
}

/* Valid extremes are accepted. */
static void test_edges_ok(void **state)
{
    (void)state;
    env_t env = {{"LITETX_RANK", "65535"},        {"LITETX_WORLD_SIZE", "65536"},
                 {"LITETX_INIT_TIMEOUT_MS", "0"}, {"LITETX_OP_TIMEOUT_MS", "2147483647"},
                 {"LITETX_ROOT", "[::1]:65535"},  {NULL, NULL}};
    struct lite_settings s = ok(NULL, env);
    assert_int_equal(s.rank, 65535);
    assert_int_equal(s.world_size, 65536);
    assert_int_equal(s.init_timeout_ms, 0);
    assert_int_equal(s.op_timeout_ms, INT_MAX);
    assert_string_equal(s.root_host, "::1");
    assert_int_equal(s.root_port, 65535);
    env_t env2 = {{"LITETX_RANK", "+1"}, {"LITETX_WORLD_SIZE", "002"}, {NULL, NULL}};
    s = ok(NULL, env2);
    assert_int_equal(s.rank, 1);
    assert_int_equal(s.world_size, 2);
    /* torchrun with an IPv6 MASTER_ADDR, bare or bracketed. */
    env_t env3 = {{"MASTER_ADDR", "fd00::2"}, {"MASTER_PORT", "1234"}, {NULL, NULL}};
    s = ok(NULL, env3);
    assert_string_equal(s.root_host, "fd00::2");
    assert_int_equal(s.root_port, 1234);
    env_t env4 = {{"MASTER_ADDR", "[fd00::3]"}, {"MASTER_PORT", "1235"}, {NULL, NULL}};
    s = ok(NULL, env4);
    assert_string_equal(s.root_host, "fd00::3");
    assert_int_equal(s.root_port, 1235);
}

/* ---------------------------------------------------------------------------------------------
 * rank vs world_size
 * ------------------------------------------------------------------------------------------- */

static void test_rank_out_of_world(void **state)
{
    (void)state;
    env_t env = {{"LITETX_RANK", "5"}, {"LITETX_WORLD_SIZE", "4"}, {NULL, NULL}};
    expect_fail(NULL, env, "rank 5", "world_size 4", "LITETX_RANK", "LITETX_WORLD_SIZE");
    /* rank == world_size is out of range too. */
    env_t env2 = {{"LITETX_RANK", "4"}, {"LITETX_WORLD_SIZE", "4"}, {NULL, NULL}};
    expect_fail(NULL, env2, "rank 4", "world_size 4");
    /* Sources differ: struct rank, world_size from the file. */
    lite_config_t c = lite_config_default();
    c.rank = 2;
    c.config_file = tmp_file("{\"world_size\": 2}");
    expect_fail(&c, no_env, "rank 2", "world_size 2", "lite_config_t.rank", c.config_file);
    /* A rank with the default world size of 1. */
    env_t env3 = {{"OMPI_COMM_WORLD_RANK", "1"}, {NULL, NULL}};
    expect_fail(NULL, env3, "rank 1", "world_size 1", "OMPI_COMM_WORLD_RANK", "default");
    /* Launchers mixed per field. */
    env_t env4 = {{"SLURM_PROCID", "7"}, {"WORLD_SIZE", "3"}, {NULL, NULL}};
    expect_fail(NULL, env4, "SLURM_PROCID", "WORLD_SIZE");
}

/* ---------------------------------------------------------------------------------------------
 * Bad config files
 * ------------------------------------------------------------------------------------------- */

static void test_file_bad_keys(void **state)
{
    (void)state;
    expect_file_fail("{\"wrld_size\": 4}", "unknown key", "\"wrld_size\"");
    expect_file_fail("{\"rank\": \"3\"}", "\"rank\"", "must be an integer");
    expect_file_fail("{\"rank\": 3.0}", "\"rank\"", "must be an integer");
    expect_file_fail("{\"rank\": true}", "\"rank\"", "must be an integer");
    expect_file_fail("{\"rank\": null}", "\"rank\"", "must be an integer");
    expect_file_fail("{\"rank\": -1}", "\"rank\"", "out of range");
    expect_file_fail("{\"rank\": 99999999999999}", "\"rank\"", "out of range");
    expect_file_fail("{\"rank\": 99999999999999999999999}", "\"rank\"", "out of range");
    expect_file_fail("{\"world_size\": 0}", "\"world_size\"", "out of range");
    expect_file_fail("{\"world_size\": 65537}", "\"world_size\"", "out of range");
    expect_file_fail("{\"world_size\": [4]}", "\"world_size\"", "must be an integer");
    expect_file_fail("{\"init_timeout_ms\": -2}", "\"init_timeout_ms\"", "out of range");
    expect_file_fail("{\"op_timeout_ms\": \"5\"}", "\"op_timeout_ms\"", "must be an integer");
    expect_file_fail("{\"op_timeout_ms\": 2147483648}", "\"op_timeout_ms\"", "out of range");
    expect_file_fail("{\"root\": 5}", "\"root\"", "must be a string");
    expect_file_fail("{\"root\": \"\"}", "\"root\"", "empty");
    expect_file_fail("{\"root\": \"nohost\"}", "\"root\"", "nohost");
    expect_file_fail("{\"root\": \"h:1\\u0000x\"}", "\"root\"", "NUL");
    expect_file_fail("{\"transport\": \"\"}", "\"transport\"", "empty");
    expect_file_fail("{\"transport\": \"TCP\"}", "\"transport\"", "invalid");
    expect_file_fail("{\"transport\": \"a_transport_name_that_is_too_long\"}", "\"transport\"",
                     "too long");
    expect_file_fail("{\"transport\": {}}", "\"transport\"", "must be a string");
    expect_file_fail("{\"log_level\": \"loud\"}", "\"log_level\"", "not a log level");
    expect_file_fail("{\"log_level\": 7}", "\"log_level\"", "out of range");
    expect_file_fail("{\"log_level\": -1}", "\"log_level\"", "out of range");
    expect_file_fail("{\"log_level\": [1]}", "\"log_level\"", "string or an integer");
}

static void test_file_bad_syntax(void **state)
{
    (void)state;
    expect_file_fail("{\n  \"rank\": 1,\n  \"world_size\": }\n", "syntax error", "line 3");
    expect_file_fail("{\"rank\": 1", "syntax error", "end of file");
    expect_file_fail("", "syntax error", "end of file");
    expect_file_fail(" \n ", "syntax error", "end of file");
    expect_file_fail("{} x", "syntax error", "line 1");
    expect_file_fail("{}\n{}", "syntax error", "line 2");
    expect_file_fail("{\"rank\": 1,}", "syntax error", "line 1");
    expect_file_fail("[1, 2]", "top level", "object");
    expect_file_fail("42", "top level", "object");
    expect_file_fail("\"rank\"", "top level", "object");
    expect_file_fail("true\n", "top level", "object");
    /* A NUL byte inside the file. */
    lite_config_t c = lite_config_default();
    c.config_file = tmp_file_n("{}\0{\"rank\": 1}", 15);
    expect_fail(&c, no_env, c.config_file, "NUL");
}

static void test_file_bad_files(void **state)
{
    (void)state;
    lite_config_t c = lite_config_default();
    c.config_file = "/nonexistent/dir/litetx.json";
    expect_fail(&c, no_env, "config file /nonexistent/dir/litetx.json",
                "cannot open: No such file or directory", "lite_config_t.config_file");
    c.config_file = "/tmp";
    expect_fail(&c, no_env, "config file /tmp", "not a regular file");
    /* Just over 1 MiB (valid JSON, padded with spaces): refused for its size. */
    size_t n = 1024 * 1024 + 1;
    char *big = malloc(n + 1);
    assert_non_null(big);
    memset(big, ' ', n);
    big[0] = '{';
    big[n - 1] = '}';
    big[n] = '\0';
    c.config_file = tmp_file_n(big, n);
    expect_fail(&c, no_env, c.config_file, "larger than");
    /* Exactly 1 MiB is accepted. */
    big[n - 2] = '}';
    c.config_file = tmp_file_n(big, n - 1);
    struct lite_settings s = ok(&c, no_env);
    assert_int_equal(s.world_size, 1);
    free(big);
}

/* ---------------------------------------------------------------------------------------------
 * host:port parsing
 * ------------------------------------------------------------------------------------------- */

static void expect_hostport(const char *in, const char *host, uint16_t port)
{
    char h[LITE_HOST_MAX];
    uint16_t p = 0;
    memset(h, 'z', sizeof(h));
    int rc = lite_parse_hostport(in, h, sizeof(h), &p);
    if (rc != 0)
        print_error("\"%s\" refused\n", in);
    assert_int_equal(rc, 0);
    assert_string_equal(h, host);
    assert_int_equal(p, port);
}

static void expect_hostport_bad(const char *in)
{
    char h[LITE_HOST_MAX] = "untouched";
    uint16_t p = 7;
    int rc = lite_parse_hostport(in, h, sizeof(h), &p);
    if (rc != -EINVAL)
        print_error("\"%s\" accepted (host \"%s\", port %u)\n", in, h, p);
    assert_int_equal(rc, -EINVAL);
    assert_string_equal(h, "untouched");
    assert_int_equal(p, 7);
}

static void test_hostport(void **state)
{
    (void)state;
    expect_hostport("localhost:80", "localhost", 80);
    expect_hostport("10.0.0.1:65535", "10.0.0.1", 65535);
    expect_hostport("node-01.cluster_a:1", "node-01.cluster_a", 1);
    expect_hostport("[::1]:29500", "::1", 29500);
    expect_hostport("[2001:db8::7]:443", "2001:db8::7", 443);
    expect_hostport("[fe80::1%eth0]:9", "fe80::1%eth0", 9);
    expect_hostport("[::ffff:10.1.2.3]:5", "::ffff:10.1.2.3", 5);
    expect_hostport("h:00080", "h", 80);

    expect_hostport_bad("");
    expect_hostport_bad("host");
    expect_hostport_bad("host:");
    expect_hostport_bad(":80");
    expect_hostport_bad("host:0");
    expect_hostport_bad("host:65536");
    expect_hostport_bad("host:100000");
    expect_hostport_bad("host:-1");
    expect_hostport_bad("host:+80");
    expect_hostport_bad("host:80 ");
    expect_hostport_bad("host: 80");
    expect_hostport_bad("host:80x");
    expect_hostport_bad("host:8o");
    expect_hostport_bad(" host:80");
    expect_hostport_bad("ho st:80");
    expect_hostport_bad("host/x:80");
    expect_hostport_bad("a:b:80");
    expect_hostport_bad("::1:80");
    expect_hostport_bad("[::1]");
    expect_hostport_bad("[::1]:");
    expect_hostport_bad("[::1]80");
    expect_hostport_bad("[::1]x80");
    expect_hostport_bad("[::1]180");
    expect_hostport_bad("[::1:80");
    expect_hostport_bad("[]:80");
    expect_hostport_bad("[[::1]]:80");
    expect_hostport_bad("[::1]:80:80");
    expect_hostport_bad("h%eth0:80");

    /* Host length: LITE_HOST_MAX - 1 characters fit, LITE_HOST_MAX do not. */
    char in[LITE_HOST_MAX + 16];
    memset(in, 'a', LITE_HOST_MAX - 1);
    strcpy(in + LITE_HOST_MAX - 1, ":1");
    char h[LITE_HOST_MAX];
    uint16_t p;
    assert_int_equal(lite_parse_hostport(in, h, sizeof(h), &p), 0);
    assert_int_equal(strlen(h), LITE_HOST_MAX - 1);
    memset(in, 'a', LITE_HOST_MAX);
    strcpy(in + LITE_HOST_MAX, ":1");
    expect_hostport_bad(in);
    /* A small output buffer: the host must fit with its NUL. */
    char small[5] = "xxxx";
    assert_int_equal(lite_parse_hostport("abcde:1", small, sizeof(small), &p), -EINVAL);
    assert_string_equal(small, "xxxx");
    assert_int_equal(lite_parse_hostport("abcd:1", small, sizeof(small), &p), 0);
    assert_string_equal(small, "abcd");
    /* NULL arguments. */
    assert_int_equal(lite_parse_hostport(NULL, h, sizeof(h), &p), -EINVAL);
    assert_int_equal(lite_parse_hostport("h:1", NULL, sizeof(h), &p), -EINVAL);
    assert_int_equal(lite_parse_hostport("h:1", h, 0, &p), -EINVAL);
    assert_int_equal(lite_parse_hostport("h:1", h, sizeof(h), NULL), -EINVAL);
}

/* ---------------------------------------------------------------------------------------------
 * Log levels
 * ------------------------------------------------------------------------------------------- */

static int env_log_level(const char *val)
{
    env_t env = {{"LITETX_LOG_LEVEL", val}, {NULL, NULL}};
    return ok(NULL, env).log_level;
}

static void test_log_levels(void **state)
{
    (void)state;
    assert_int_equal(env_log_level("error"), LITE_LOG_ERROR);
    assert_int_equal(env_log_level("warn"), LITE_LOG_WARN);
    assert_int_equal(env_log_level("info"), LITE_LOG_INFO);
    assert_int_equal(env_log_level("debug"), LITE_LOG_DEBUG);
    assert_int_equal(env_log_level("DEBUG"), LITE_LOG_DEBUG);
    assert_int_equal(env_log_level("Info"), LITE_LOG_INFO);
    assert_int_equal(env_log_level("0"), LITE_LOG_ERROR);
    assert_int_equal(env_log_level("1"), LITE_LOG_WARN);
    assert_int_equal(env_log_level("2"), LITE_LOG_INFO);
    assert_int_equal(env_log_level("3"), LITE_LOG_DEBUG);

    lite_config_t c = lite_config_default();
    c.config_file = tmp_file("{\"log_level\": \"debug\"}");
    assert_int_equal(ok(&c, no_env).log_level, LITE_LOG_DEBUG);
    c.config_file = tmp_file("{\"log_level\": 0}");
    assert_int_equal(ok(&c, no_env).log_level, LITE_LOG_ERROR);
    c.config_file = tmp_file("{\"log_level\": \"2\"}");
    assert_int_equal(ok(&c, no_env).log_level, LITE_LOG_INFO);
    c.config_file = NULL;
    c.log_level = LITE_LOG_ERROR;
    assert_int_equal(ok(&c, no_env).log_level, LITE_LOG_ERROR);
}

/* ---------------------------------------------------------------------------------------------
 * The error buffer
 * ------------------------------------------------------------------------------------------- */

static void test_err_buffer(void **state)
{
    (void)state;
    env_t env = {{"LITETX_RANK", "abc"}, {NULL, NULL}};
    struct lite_settings s;
    /* No buffer: still fails cleanly. */
    assert_int_equal(lite_settings_resolve(NULL, fake_getenv, (void *)env, &s, NULL, 0),
                     -LITE_ERR_CONFIG);
    /* A tiny buffer is truncated, not overrun. */
    char small[8];
    memset(small, 'q', sizeof(small));
    assert_int_equal(lite_settings_resolve(NULL, fake_getenv, (void *)env, &s, small, 6),
                     -LITE_ERR_CONFIG);
    assert_int_equal(strlen(small), 5);
    assert_int_equal(small[6], 'q');
    /* Success leaves an empty message. */
    char msg[64] = "stale";
    assert_int_equal(lite_settings_resolve(NULL, fake_getenv, (void *)no_env, &s, msg, sizeof(msg)),
                     0);
    assert_string_equal(msg, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_config_default, teardown_tmp),
        cmocka_unit_test_teardown(test_defaults, teardown_tmp),
        cmocka_unit_test_teardown(test_process_env_not_read, teardown_tmp),
        cmocka_unit_test_teardown(test_struct_beats_all, teardown_tmp),
        cmocka_unit_test_teardown(test_litetx_env_beats_launchers_and_file, teardown_tmp),
        cmocka_unit_test_teardown(test_ompi_beats_slurm, teardown_tmp),
        cmocka_unit_test_teardown(test_torchrun_beats_slurm, teardown_tmp),
        cmocka_unit_test_teardown(test_struct_older_layout, teardown_tmp),
        cmocka_unit_test_teardown(test_flow_keys_file, teardown_tmp),
        cmocka_unit_test_teardown(test_slurm_beats_file, teardown_tmp),
        cmocka_unit_test_teardown(test_torchrun_beats_file, teardown_tmp),
        cmocka_unit_test_teardown(test_file_beats_defaults, teardown_tmp),
        cmocka_unit_test_teardown(test_file_partial, teardown_tmp),
        cmocka_unit_test_teardown(test_per_field_mix, teardown_tmp),
        cmocka_unit_test_teardown(test_config_file_struct_beats_env, teardown_tmp),
        cmocka_unit_test_teardown(test_file_always_checked, teardown_tmp),
        cmocka_unit_test_teardown(test_shadowed_env_not_checked, teardown_tmp),
        cmocka_unit_test_teardown(test_env_bad_integers, teardown_tmp),
        cmocka_unit_test_teardown(test_env_bad_launchers, teardown_tmp),
        cmocka_unit_test_teardown(test_env_bad_strings, teardown_tmp),
        cmocka_unit_test_teardown(test_env_value_sanitised, teardown_tmp),
        cmocka_unit_test_teardown(test_struct_bad, teardown_tmp),
        cmocka_unit_test_teardown(test_edges_ok, teardown_tmp),
        cmocka_unit_test_teardown(test_rank_out_of_world, teardown_tmp),
        cmocka_unit_test_teardown(test_file_bad_keys, teardown_tmp),
        cmocka_unit_test_teardown(test_file_bad_syntax, teardown_tmp),
        cmocka_unit_test_teardown(test_file_bad_files, teardown_tmp),
        cmocka_unit_test_teardown(test_hostport, teardown_tmp),
        cmocka_unit_test_teardown(test_log_levels, teardown_tmp),
        cmocka_unit_test_teardown(test_err_buffer, teardown_tmp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
