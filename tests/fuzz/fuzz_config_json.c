/*
 * fuzz_config_json.c - the JSON configuration file (lite_settings_resolve with config_file
 * set): json-c's tokenizer in strict mode and the checks of every key. The input is the file.
 * A file that resolves is written back as JSON from the settings it gave, and must resolve to
 * the same settings.
 */
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "fuzz_check.h"
#include "lite_int.h"

static int fd = -1;
static char path[64];

/* Nothing from the environment: the file alone decides. */
static const char *no_env(const char *name, void *arg)
{
    return NULL;
}

static void put_file(const void *data, size_t size)
{
    FUZZ_CHECK(ftruncate(fd, 0) == 0);
    FUZZ_CHECK(pwrite(fd, data, size, 0) == (ssize_t)size);
}

static int resolve(struct lite_settings *s, char *err, size_t errlen)
{
    lite_config_t cfg = lite_config_default();
    cfg.config_file = path;
    memset(err, 0x7f, errlen);
    return lite_settings_resolve(&cfg, no_env, NULL, s, err, errlen);
}

static bool name_ok(const char *s)
{
    if (!s[0])
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
            return false;
    return true;
}

/* What the rest of the library assumes of resolved settings. */
static void check_settings(const struct lite_settings *s)
{
    FUZZ_CHECK(s->world_size >= 1 && s->world_size <= 65536);
    FUZZ_CHECK(s->rank >= 0 && s->rank < s->world_size);
    FUZZ_CHECK(memchr(s->root_host, 0, sizeof(s->root_host)) != NULL && s->root_host[0]);
    FUZZ_CHECK(s->root_port >= 1);
    FUZZ_CHECK(memchr(s->transport, 0, sizeof(s->transport)) != NULL && name_ok(s->transport));
    FUZZ_CHECK(s->log_level >= LITE_LOG_ERROR && s->log_level <= LITE_LOG_DEBUG);
    FUZZ_CHECK(s->init_timeout_ms >= LITE_TIMEOUT_INFINITE);
    FUZZ_CHECK(s->op_timeout_ms >= LITE_TIMEOUT_INFINITE);
    FUZZ_CHECK(s->credits >= 2 && s->credits <= 65535);
    FUZZ_CHECK(s->rndv_threshold >= 64 && s->rndv_threshold <= (1 << 30));
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    lite_log_set_level(LITE_LOG_ERROR);
    /* A memory file: no disk traffic per run, and a path the loader opens like any other. */
    fd = memfd_create("litetx-fuzz-config", MFD_CLOEXEC);
    FUZZ_CHECK(fd >= 0);
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    put_file(data, size);
    struct lite_settings s;
    char err[256];
    int rc = resolve(&s, err, sizeof(err));
    FUZZ_CHECK(memchr(err, 0, sizeof(err)) != NULL);
    if (rc != 0) {
        FUZZ_CHECK(rc == -LITE_ERR_CONFIG);
        FUZZ_CHECK(err[0] != '\0');
        return 0;
    }
    check_settings(&s);

    /* Round trip: the settings as a file of their own. */
    bool v6 = strchr(s.root_host, ':') || strchr(s.root_host, '%');
    char json[1024];
    int n = snprintf(json, sizeof(json),
                     "{\"rank\": %d, \"world_size\": %d, \"root\": \"%s%s%s:%u\", "
                     "\"transport\": \"%s\", \"log_level\": %d, \"init_timeout_ms\": %d, "
                     "\"op_timeout_ms\": %d, \"credits\": %d, \"rndv_threshold\": %d}",
                     s.rank, s.world_size, v6 ? "[" : "", s.root_host, v6 ? "]" : "",
                     (unsigned)s.root_port, s.transport, s.log_level, s.init_timeout_ms,
                     s.op_timeout_ms, s.credits, s.rndv_threshold);
    FUZZ_CHECK(n > 0 && (size_t)n < sizeof(json));
    put_file(json, (size_t)n);
    struct lite_settings t;
    rc = resolve(&t, err, sizeof(err));
    if (rc != 0)
        fprintf(stderr, "written back: %s\nrefused: %s\n", json, err);
    FUZZ_CHECK(rc == 0);
    FUZZ_CHECK(t.rank == s.rank && t.world_size == s.world_size && t.root_port == s.root_port &&
               strcmp(t.root_host, s.root_host) == 0 && strcmp(t.transport, s.transport) == 0 &&
               t.log_level == s.log_level && t.init_timeout_ms == s.init_timeout_ms &&
               t.op_timeout_ms == s.op_timeout_ms && t.credits == s.credits &&
               t.rndv_threshold == s.rndv_threshold);
    return 0;
}
