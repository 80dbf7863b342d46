/*
 * fuzz_config_env.c - the LITETX_* environment and the launcher variables, through the real
 * process environment: set the variables the input names, resolve the configuration
 * (lite_settings_resolve), read tuning variables (lite_env_long) and CPU lists
 * (lite_cpulist_count), and the EFA backend's variables when it is built; unset them all.
 *
 * Input: u8 lo/hi selector for lite_env_long, then entries: u8 variable index, value bytes up
 * to a NUL.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>

#include "config.h"
#include "fuzz_check.h"
#include "lite_int.h"
#include "tunables.h"
#ifdef LITE_HAVE_EFA
#include "transports/efa/efa.h"
#endif

static const char *const vars[] = {
    "LITETX_RANK",
    "LITETX_WORLD_SIZE",
    "LITETX_ROOT",
    "LITETX_TRANSPORT",
    "LITETX_LOG_LEVEL",
    "LITETX_INIT_TIMEOUT_MS",
    "LITETX_OP_TIMEOUT_MS",
    "LITETX_CREDITS",
    "LITETX_RNDV_THRESHOLD",
    "OMPI_COMM_WORLD_RANK",
    "RANK",
    "SLURM_PROCID",
    "OMPI_COMM_WORLD_SIZE",
    "WORLD_SIZE",
    "SLURM_NTASKS",
    "MASTER_ADDR",
    "MASTER_PORT",
    "LITETX_EFA_PROVIDER",
    "LITETX_EFA_RAILS",
    "LITETX_EFA_EAGER_MAX",
    "LITETX_EFA_STRIPE_MIN",
    "LITETX_EFA_IMM",
    "LITETX_EFA_KEEPALIVE_MS",
    "LITETX_EFA_WRITER_COPY",
};
#define NVARS LITE_ARRAY_LEN(vars)

/* lite_env_long's rule, written the plain way: optional sign, decimal digits, in range. */
static long env_long_ref(const char *v, long lo, long hi, long dflt)
{
    if (!v || !*v)
        return dflt;
    const char *d = (*v == '+' || *v == '-') ? v + 1 : v;
    if (!*d)
        return dflt;
    for (const char *c = d; *c; c++)
        if (*c < '0' || *c > '9')
            return dflt;
    long n = 0;
    for (const char *c = d; *c; c++) {
        int digit = *c - '0';
        if (*v == '-' ? n < (LONG_MIN + digit) / 10 : n > (LONG_MAX - digit) / 10)
            return dflt; /* does not fit a long */
        n = *v == '-' ? n * 10 - digit : n * 10 + digit;
    }
    return n >= lo && n <= hi ? n : dflt;
}

static void check_settings(const struct lite_settings *s)
{
    FUZZ_CHECK(s->world_size >= 1 && s->world_size <= 65536);
    FUZZ_CHECK(s->rank >= 0 && s->rank < s->world_size);
    FUZZ_CHECK(memchr(s->root_host, 0, sizeof(s->root_host)) != NULL && s->root_host[0]);
    FUZZ_CHECK(s->root_port >= 1);
    FUZZ_CHECK(memchr(s->transport, 0, sizeof(s->transport)) != NULL && s->transport[0]);
    for (const char *c = s->transport; *c; c++)
        FUZZ_CHECK((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_');
    FUZZ_CHECK(s->log_level >= LITE_LOG_ERROR && s->log_level <= LITE_LOG_DEBUG);
    FUZZ_CHECK(s->init_timeout_ms >= LITE_TIMEOUT_INFINITE);
    FUZZ_CHECK(s->op_timeout_ms >= LITE_TIMEOUT_INFINITE);
    FUZZ_CHECK(s->credits >= 2 && s->credits <= 65535);
    FUZZ_CHECK(s->rndv_threshold >= 64 && s->rndv_threshold <= (1 << 30));
}

#ifdef LITE_HAVE_EFA
static void check_efa(void)
{
    struct efa_cfg c;
    char why[256];
    memset(why, 0x7f, sizeof(why));
    struct lite_tp_env *env = lite_tun_env_new("efa");
    FUZZ_CHECK(env != NULL);
    int rc = lite_efa_cfg_read(&c, env, NULL, why, sizeof(why));
    lite_tun_env_free(env);
    if (rc != 0) {
        FUZZ_CHECK(rc == -LITE_ERR_CONFIG);
        FUZZ_CHECK(memchr(why, 0, sizeof(why)) != NULL && why[0]);
        return;
    }
    FUZZ_CHECK(memchr(c.provider, 0, sizeof(c.provider)) != NULL && c.provider[0]);
    FUZZ_CHECK(c.rails >= 1 && c.rails <= LITE_MAX_RAILS);
    FUZZ_CHECK(c.eager_max >= LITE_EFA_EAGER_MIN && c.eager_max <= (1u << 20));
    FUZZ_CHECK(c.credits >= 2 && c.credits <= 65535);
    FUZZ_CHECK(c.stripe_min >= 4096 && c.stripe_min <= (1ull << 40));
    FUZZ_CHECK(c.keepalive_ms >= 0 && c.keepalive_ms <= 3600000);
    FUZZ_CHECK(c.peer_timeout_ms >= 100);
    FUZZ_CHECK(c.imm >= 0 && c.imm <= 3);
}
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    lite_log_set_level(LITE_LOG_ERROR);
    for (size_t i = 0; i < NVARS; i++)
        unsetenv(vars[i]);
    unsetenv("LITETX_CONFIG");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const long ranges[][3] = {
        {0, 10000000, 200}, {1, 1L << 24, 4096}, {LONG_MIN, LONG_MAX, 7}, {-5, 5, 0}};
    struct fuzz_in in = {data, size};
    const long *range = ranges[fuzz_u8(&in) % LITE_ARRAY_LEN(ranges)];
    static char values[NVARS][512];
    bool set[NVARS] = {false};
    while (in.n > 0) {
        size_t k = fuzz_u8(&in) % NVARS;
        fuzz_str(&in, values[k], sizeof(values[k]));
        set[k] = true;
        FUZZ_CHECK(setenv(vars[k], values[k], 1) == 0);
    }

    struct lite_settings s;
    char err[256];
    memset(err, 0x7f, sizeof(err));
    int rc = lite_settings_resolve(NULL, NULL, NULL, &s, err, sizeof(err));
    FUZZ_CHECK(memchr(err, 0, sizeof(err)) != NULL);
    if (rc == 0)
        check_settings(&s);
    else
        FUZZ_CHECK(rc == -LITE_ERR_CONFIG && err[0] != '\0');

    for (size_t k = 0; k < NVARS; k++) {
        if (!set[k])
            continue;
        long got = lite_env_long(vars[k], range[0], range[1], range[2]);
        FUZZ_CHECK(got == env_long_ref(values[k], range[0], range[1], range[2]));
        FUZZ_CHECK(lite_cpulist_count(values[k]) >= 0);
    }
#ifdef LITE_HAVE_EFA
    check_efa();
#endif
    for (size_t k = 0; k < NVARS; k++)
        if (set[k])
            unsetenv(vars[k]);
    return 0;
}
