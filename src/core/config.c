/*
 * config.c - turning a lite_config_t, the environment and an optional JSON file into a fully
 * resolved struct lite_settings.
 *
 * Precedence per field, first found wins (see lite_config_t and docs/CONFIG.md):
 *   1. the struct field, if set;
 *   2. LITETX_* environment variables;
 *   3. launcher variables (rank, world_size and root only), launchers tried in the order
 *      Open MPI, torchrun, Slurm (the innermost launcher wins: torchrun inside an sbatch job
 *      must not take the job's SLURM_PROCID);
 *   4. the JSON file named by cfg->config_file, else by LITETX_CONFIG;
 *   5. built-in defaults.
 *
 * A value that is set but invalid is an error at whatever level it sits; it never falls through
 * to a lower level, so a typo cannot silently turn into a default. Environment variables are
 * only looked at when the levels above them did not decide the field, but a named JSON file is
 * always read and checked in full, so a broken file is reported even when every field it holds
 * is overridden.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "config.h"
#include "lite_int.h"
#include "security.h"

#define LITE_WORLD_MAX       65536
#define LITE_CONFIG_FILE_MAX (1024 * 1024)

#define DEFAULT_RANK            0
#define DEFAULT_WORLD_SIZE      1
#define DEFAULT_ROOT_HOST       "127.0.0.1"
#define DEFAULT_ROOT_PORT       29500
#define DEFAULT_TRANSPORT       "auto"
#define DEFAULT_LOG_LEVEL       LITE_LOG_WARN
#define DEFAULT_INIT_TIMEOUT_MS 30000
#define DEFAULT_OP_TIMEOUT_MS   60000
#define DEFAULT_CREDITS         64
#define DEFAULT_RNDV_THRESHOLD  65536
#define DEFAULT_RECONNECT_MS    10000

/* The struct's "unset" value for the timeouts (LITE_TIMEOUT_INFINITE is a real value). */
#define CFG_TIMEOUT_UNSET (-2)

#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(lite_config_t) == LITE_CONFIG_SIZE,
               "lite_config_t's size is part of the ABI: take new fields from reserved[]");
#endif

LITE_API lite_config_t lite_config_default(void)
{
    lite_config_t c;
    memset(&c, 0, sizeof(c));
    c.version = LITE_CONFIG_VERSION;
    c.struct_size = (uint32_t)sizeof(c);
    c.rank = -1;
    c.world_size = -1;
    c.root = NULL;
    c.transport = NULL;
    c.log_level = LITE_LOG_UNSET;
    c.init_timeout_ms = CFG_TIMEOUT_UNSET;
    c.op_timeout_ms = CFG_TIMEOUT_UNSET;
    c.config_file = NULL;
    c.credits = -1;
    c.rndv_threshold = -1;
    c.reconnect_timeout_ms = -1;
    return c;
}

/* ---------------------------------------------------------------------------------------------
 * Small parsers
 * ------------------------------------------------------------------------------------------- */

/* ASCII classes, independent of the caller's locale. */
static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_lower(char c)
{
    return c >= 'a' && c <= 'z';
}

static bool is_alnum(char c)
{
    return is_digit(c) || is_lower(c) || (c >= 'A' && c <= 'Z');
}

static char to_lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

static bool host_char_ok(char c, bool bracketed)
{
    if (is_alnum(c) || c == '.' || c == '-' || c == '_')
        return true;
    /* Inside brackets: an IPv6 literal, possibly with a zone ("fe80::1%eth0"). */
    return bracketed && (c == ':' || c == '%');
}

/* Port: 1..65535, decimal digits only (no sign, no spaces). */
static int parse_port(const char *s, size_t n, uint16_t *port)
{
    if (n == 0 || n > 5)
        return -EINVAL;
    unsigned v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!is_digit(s[i]))
            return -EINVAL;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v < 1 || v > 65535)
        return -EINVAL;
    *port = (uint16_t)v;
    return 0;
}

/* Check host s[0..n) (bracketed: the inside of [...]) and copy it out. */
static int copy_host(const char *s, size_t n, bool bracketed, char *host, size_t hostlen)
{
    if (n == 0 || n >= hostlen)
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!host_char_ok(s[i], bracketed))
            return -EINVAL;
    memcpy(host, s, n);
    host[n] = '\0';
    return 0;
}

int lite_parse_hostport(const char *s, char *host, size_t hostlen, uint16_t *port)
{
    if (s == NULL || host == NULL || hostlen == 0 || port == NULL)
        return -EINVAL;
    const char *h, *colon;
    size_t hn;
    bool bracketed = (s[0] == '[');
    if (bracketed) {
        const char *close = strchr(s, ']');
        if (close == NULL || close[1] != ':')
            return -EINVAL;
        h = s + 1;
        hn = (size_t)(close - h);
        colon = close + 1;
    } else {
        /* A bare IPv6 address ("::1:80") is ambiguous and must be bracketed: its further
         * colons land in the port, which must be all digits, so it is refused there. */
        colon = strchr(s, ':');
        if (colon == NULL)
            return -EINVAL;
        h = s;
        hn = (size_t)(colon - s);
    }
    uint16_t p;
    if (parse_port(colon + 1, strlen(colon + 1), &p) != 0)
        return -EINVAL;
    /* Copy last so that the outputs are untouched on failure. */
    char tmp[LITE_HOST_MAX];
    if (copy_host(h, hn, bracketed, tmp, hostlen < sizeof(tmp) ? hostlen : sizeof(tmp)) != 0)
        return -EINVAL;
    memcpy(host, tmp, hn + 1);
    *port = p;
    return 0;
}

enum { PI_OK = 0, PI_EMPTY, PI_JUNK, PI_RANGE };

/* Strict decimal integer: optional sign, digits, nothing else (no spaces either). */
static int parse_long(const char *s, long *out)
{
    if (s[0] == '\0')
        return PI_EMPTY;
    if (!(is_digit(s[0]) || s[0] == '-' || s[0] == '+'))
        return PI_JUNK; /* strtol would skip leading spaces; we do not */
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0')
        return PI_JUNK;
    if (errno == ERANGE)
        return PI_RANGE;
    *out = v;
    return PI_OK;
}

static bool ascii_case_equal(const char *a, const char *b)
{
    for (; *a != '\0' && *b != '\0'; a++, b++)
        if (to_lower(*a) != to_lower(*b))
            return false;
    return *a == *b;
}

static int parse_log_level(const char *s, int *out)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    for (size_t i = 0; i < LITE_ARRAY_LEN(names); i++) {
        if (ascii_case_equal(s, names[i])) {
            *out = (int)i;
            return 0;
        }
    }
    if (s[0] >= '0' && s[0] <= '3' && s[1] == '\0') {
        *out = s[0] - '0';
        return 0;
    }
    return -EINVAL;
}

/* Characters only; check_transport() checks the length first, for a clearer message. */
static bool transport_name_ok(const char *s)
{
    if (s[0] == '\0')
        return false;
    for (size_t i = 0; s[i] != '\0'; i++)
        if (!(is_lower(s[i]) || is_digit(s[i]) || s[i] == '_'))
            return false;
    return true;
}

/* A printable, bounded copy of a user string for error messages. */
static const char *show(const char *s, char *buf, size_t len)
{
    size_t n = 0, i = 0;
    const size_t keep = len > 4 ? len - 4 : 0; /* room for "..." and NUL */
    for (; s[i] != '\0' && n < keep; i++)
        buf[n++] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
    if (s[i] != '\0' && len >= 4) {
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n] = '\0';
    return buf;
}

#define SHOW_MAX 48

static int parse_sec_mode(const char *s, int *mode)
{
    static const char *const names[] = {"off", "ca", "psk"};
    for (int i = 0; i < 3; i++) {
        if (ascii_case_equal(s, names[i])) {
            *mode = i;
            return 0;
        }
    }
    return -EINVAL;
}

/* The security file keys, in enum LITE_SEC_F_* order: names in the JSON file and the struct. */
static const char *const sec_keys[LITE_SEC_NF] = {"security_cert", "security_key", "security_ca",
                                                  "security_psk"};
static const char *const sec_envs[LITE_SEC_NF] = {"LITETX_SECURITY_CERT", "LITETX_SECURITY_KEY",
                                                  "LITETX_SECURITY_CA", "LITETX_SECURITY_PSK"};

static int sec_key(const char *key)
{
    for (int i = 0; i < LITE_SEC_NF; i++)
        if (strcmp(key, sec_keys[i]) == 0)
            return i;
    return -1;
}

/* ---------------------------------------------------------------------------------------------
 * Resolution state
 * ------------------------------------------------------------------------------------------- */

/* What the JSON file said; each has_* is set only for a valid value. */
struct file_vals {
    bool has_rank, has_world, has_root, has_transport, has_log, has_init_to, has_op_to;
    bool has_credits, has_rndv, has_reconnect;
    int rank, world_size, log_level, init_timeout_ms, op_timeout_ms, credits, rndv_threshold;
    int reconnect_timeout_ms;
    char root_host[LITE_HOST_MAX];
    uint16_t root_port;
    char transport[LITE_NAME_MAX];
    bool has_sec, has_sec_path[LITE_SEC_NF];
    int sec_mode;
    char sec_path[LITE_SEC_NF][LITE_SEC_PATH_MAX];
};

struct resolver {
    lite_getenv_fn getenv_fn;
    void *arg;
    char *err;
    size_t errlen;
    char file_desc[512];  /* "config file <path>", for messages */
    const char *path_src; /* where the path came from, for open errors */
    struct file_vals file;
};

#define FAIL(r, ...) (lite_fmt((r)->err, (r)->errlen, __VA_ARGS__), -LITE_ERR_CONFIG)

static const char *env_get(struct resolver *r, const char *name)
{
    return r->getenv_fn(name, r->arg);
}

static const char *process_getenv(const char *name, void *arg)
{
    (void)arg;
    return getenv(name);
}

/* One integer key: its names at every level and its valid range. */
struct int_key {
    const char *name;             /* JSON key, and the field's name in messages */
    const char *field;            /* "lite_config_t.<name>" */
    const char *env;              /* LITETX_* variable */
    const char *const *launchers; /* launcher variables in order, NULL-terminated; may be NULL */
    long min, max;
};

/* Launchers in precedence order: Open MPI, torchrun, Slurm (innermost first). */
static const char *const rank_launchers[] = {"OMPI_COMM_WORLD_RANK", "RANK", "SLURM_PROCID", NULL};
static const char *const world_launchers[] = {"OMPI_COMM_WORLD_SIZE", "WORLD_SIZE", "SLURM_NTASKS",
                                              NULL};

static const struct int_key key_rank = {
    .name = "rank",
    .field = "lite_config_t.rank",
    .env = "LITETX_RANK",
    .launchers = rank_launchers,
    .min = 0,
    .max = LITE_WORLD_MAX - 1,
};
static const struct int_key key_world = {
    .name = "world_size",
    .field = "lite_config_t.world_size",
    .env = "LITETX_WORLD_SIZE",
    .launchers = world_launchers,
    .min = 1,
    .max = LITE_WORLD_MAX,
};
static const struct int_key key_init_to = {
    .name = "init_timeout_ms",
    .field = "lite_config_t.init_timeout_ms",
    .env = "LITETX_INIT_TIMEOUT_MS",
    .min = LITE_TIMEOUT_INFINITE,
    .max = INT_MAX,
};
static const struct int_key key_op_to = {
    .name = "op_timeout_ms",
    .field = "lite_config_t.op_timeout_ms",
    .env = "LITETX_OP_TIMEOUT_MS",
    .min = LITE_TIMEOUT_INFINITE,
    .max = INT_MAX,
};

static const struct int_key key_credits = {
    .name = "credits",
    .field = "lite_config_t.credits",
    .env = "LITETX_CREDITS",
    .min = 2,
    .max = 65535,
};
static const struct int_key key_rndv = {
    .name = "rndv_threshold",
    .field = "lite_config_t.rndv_threshold",
    .env = "LITETX_RNDV_THRESHOLD",
    .min = 64,
    .max = 1 << 30,
};
static const struct int_key key_reconnect = {
    .name = "reconnect_timeout_ms",
    .field = "lite_config_t.reconnect_timeout_ms",
    .env = "LITETX_RECONNECT_TIMEOUT_MS",
    .min = 0,
    .max = 24 * 3600 * 1000,
};

/* Parse an integer from environment variable `var` for key k. */
static int env_int(struct resolver *r, const struct int_key *k, const char *var, const char *val,
                   int *out)
{
    char sb[SHOW_MAX];
    long v = 0;
    switch (parse_long(val, &v)) {
    case PI_EMPTY:
        return FAIL(r, "%s is set but empty (%s must be an integer)", var, k->name);
    case PI_JUNK:
        return FAIL(r, "%s=\"%s\": not an integer (%s)", var, show(val, sb, sizeof(sb)), k->name);
    case PI_RANGE:
        return FAIL(r, "%s=\"%s\": %s out of range, must be between %ld and %ld", var,
                    show(val, sb, sizeof(sb)), k->name, k->min, k->max);
    default:
        break;
    }
    if (v < k->min || v > k->max)
        return FAIL(r, "%s=\"%s\": %s out of range, must be between %ld and %ld", var,
                    show(val, sb, sizeof(sb)), k->name, k->min, k->max);
    *out = (int)v;
    return 0;
}

/*
 * Resolve one integer key. struct_val/unset: the struct's value and its "unset" sentinel;
 * file_has/file_val: what the JSON file gave. *from names the winning source.
 */
static int resolve_int(struct resolver *r, const struct int_key *k, int struct_val, int unset,
                       bool file_has, int file_val, int def, int *out, const char **from)
{
    if (struct_val != unset) {
        if (struct_val < k->min || struct_val > k->max)
            return FAIL(r, "%s=%d: %s out of range, must be between %ld and %ld (or %d for unset)",
                        k->field, struct_val, k->name, k->min, k->max, unset);
        *out = struct_val;
        *from = k->field;
        return 0;
    }
    const char *val = env_get(r, k->env);
    if (val != NULL) {
        *from = k->env;
        return env_int(r, k, k->env, val, out);
    }
    for (const char *const *l = k->launchers; l != NULL && *l != NULL; l++) {
        val = env_get(r, *l);
        if (val != NULL) {
            *from = *l;
            return env_int(r, k, *l, val, out);
        }
    }
    if (file_has) {
        *out = file_val;
        *from = r->file_desc;
        return 0;
    }
    *out = def;
    *from = "default";
    return 0;
}

/* torchrun's MASTER_ADDR + MASTER_PORT; *found is false when neither is set. */
static int launcher_root(struct resolver *r, struct lite_settings *s, bool *found)
{
    const char *addr = env_get(r, "MASTER_ADDR");
    const char *port = env_get(r, "MASTER_PORT");
    char sb[SHOW_MAX];
    *found = false;
    if (addr == NULL && port == NULL)
        return 0;
    if (addr == NULL || port == NULL)
        return FAIL(r, "%s is set but %s is not (root needs both)",
                    addr ? "MASTER_ADDR" : "MASTER_PORT", addr ? "MASTER_PORT" : "MASTER_ADDR");
    size_t n = strlen(addr);
    bool bracketed = n >= 2 && addr[0] == '[' && addr[n - 1] == ']';
    /* A bare address with two or more colons is an IPv6 literal; "host:port" is not allowed. */
    const char *c1 = strchr(addr, ':');
    bool v6 = bracketed || (c1 != NULL && strchr(c1 + 1, ':') != NULL);
    const char *h = bracketed ? addr + 1 : addr;
    size_t hn = bracketed ? n - 2 : n;
    if (copy_host(h, hn, v6, s->root_host, sizeof(s->root_host)) != 0)
        return FAIL(r, "MASTER_ADDR=\"%s\": not a valid host name or address (root)",
                    show(addr, sb, sizeof(sb)));
    if (parse_port(port, strlen(port), &s->root_port) != 0)
        return FAIL(r, "MASTER_PORT=\"%s\": not a port number 1..65535 (root)",
                    show(port, sb, sizeof(sb)));
    *found = true;
    return 0;
}

/* Check a transport name (the registry decides whether it exists) and copy it to out. */
static int check_transport(struct resolver *r, const char *src, const char *name,
                           char out[LITE_NAME_MAX])
{
    char sb[SHOW_MAX];
    if (name[0] == '\0')
        return FAIL(r, "%s: transport name is empty", src);
    if (strlen(name) >= LITE_NAME_MAX)
        return FAIL(r, "%s: transport name \"%s\" too long (at most %d characters)", src,
                    show(name, sb, sizeof(sb)), LITE_NAME_MAX - 1);
    if (!transport_name_ok(name))
        return FAIL(r, "%s: transport name \"%s\" is invalid (only a-z, 0-9 and _)", src,
                    show(name, sb, sizeof(sb)));
    memcpy(out, name, strlen(name) + 1);
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * The JSON file
 * ------------------------------------------------------------------------------------------- */

/* Read the whole file (at most LITE_CONFIG_FILE_MAX bytes) into a NUL-terminated buffer. */
static int read_file(struct resolver *r, const char *path, char **out, size_t *outlen)
{
    /* O_NONBLOCK so that a FIFO cannot hang open(); only regular files are accepted. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return FAIL(r, "%s: cannot open: %s (path from %s)", r->file_desc, strerror(errno),
                    r->path_src);
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return FAIL(r, "%s: not a regular file (path from %s)", r->file_desc, r->path_src);
    }
    if (st.st_size > LITE_CONFIG_FILE_MAX) {
        close(fd);
        return FAIL(r, "%s: larger than %d bytes", r->file_desc, LITE_CONFIG_FILE_MAX);
    }
    /* One spare byte detects a file that grew past the limit after fstat. */
    char *buf = malloc(LITE_CONFIG_FILE_MAX + 2);
    if (buf == NULL) {
        close(fd);
        return FAIL(r, "%s: out of memory", r->file_desc);
    }
    size_t len = 0;
    while (len <= LITE_CONFIG_FILE_MAX) {
        ssize_t n = read(fd, buf + len, LITE_CONFIG_FILE_MAX + 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return FAIL(r, "%s: read error: %s", r->file_desc, strerror(e));
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    if (len > LITE_CONFIG_FILE_MAX) {
        free(buf);
        return FAIL(r, "%s: larger than %d bytes", r->file_desc, LITE_CONFIG_FILE_MAX);
    }
    buf[len] = '\0';
    *out = buf;
    *outlen = len;
    return 0;
}

/* 1-based line and column of byte offset `off` in buf. */
static void line_col(const char *buf, size_t off, int *line, int *col)
{
    int l = 1;
    size_t start = 0;
    for (size_t i = 0; i < off; i++) {
        if (buf[i] == '\n') {
            l++;
            start = i + 1;
        }
    }
    *line = l;
    *col = (int)(off - start) + 1;
}

static int file_int(struct resolver *r, const struct int_key *k, struct json_object *v, int *out)
{
    if (!json_object_is_type(v, json_type_int))
        return FAIL(r, "%s: key \"%s\" must be an integer", r->file_desc, k->name);
    /* json-c saturates huge literals at INT64_MIN/MAX, which is out of our ranges anyway. */
    int64_t x = json_object_get_int64(v);
    if (x < k->min || x > k->max)
        return FAIL(r, "%s: key \"%s\" = %lld out of range, must be between %ld and %ld",
                    r->file_desc, k->name, (long long)x, k->min, k->max);
    *out = (int)x;
    return 0;
}

static int file_string(struct resolver *r, const char *key, struct json_object *v, const char **out)
{
    if (!json_object_is_type(v, json_type_string))
        return FAIL(r, "%s: key \"%s\" must be a string", r->file_desc, key);
    const char *s = json_object_get_string(v);
    /* A string with an embedded NUL would be silently cut short. */
    if ((size_t)json_object_get_string_len(v) != strlen(s))
        return FAIL(r, "%s: key \"%s\" contains a NUL character", r->file_desc, key);
    if (s[0] == '\0')
        return FAIL(r, "%s: key \"%s\" is an empty string", r->file_desc, key);
    *out = s;
    return 0;
}

/* Check one key of the file's top-level object and record its value. */
static int file_key(struct resolver *r, const char *key, struct json_object *v)
{
    struct file_vals *f = &r->file;
    char sb[SHOW_MAX];
    const char *s;
    int rc;
    if (strcmp(key, "rank") == 0) {
        rc = file_int(r, &key_rank, v, &f->rank);
        f->has_rank = rc == 0;
    } else if (strcmp(key, "world_size") == 0) {
        rc = file_int(r, &key_world, v, &f->world_size);
        f->has_world = rc == 0;
    } else if (strcmp(key, "init_timeout_ms") == 0) {
        rc = file_int(r, &key_init_to, v, &f->init_timeout_ms);
        f->has_init_to = rc == 0;
    } else if (strcmp(key, "op_timeout_ms") == 0) {
        rc = file_int(r, &key_op_to, v, &f->op_timeout_ms);
        f->has_op_to = rc == 0;
    } else if (strcmp(key, "credits") == 0) {
        rc = file_int(r, &key_credits, v, &f->credits);
        f->has_credits = rc == 0;
    } else if (strcmp(key, "rndv_threshold") == 0) {
        rc = file_int(r, &key_rndv, v, &f->rndv_threshold);
        f->has_rndv = rc == 0;
    } else if (strcmp(key, "reconnect_timeout_ms") == 0) {
        rc = file_int(r, &key_reconnect, v, &f->reconnect_timeout_ms);
        f->has_reconnect = rc == 0;
    } else if (strcmp(key, "root") == 0) {
        rc = file_string(r, key, v, &s);
        if (rc == 0 &&
            lite_parse_hostport(s, f->root_host, sizeof(f->root_host), &f->root_port) != 0)
            rc = FAIL(r, "%s: key \"root\" = \"%s\": not host:port or [v6addr]:port", r->file_desc,
                      show(s, sb, sizeof(sb)));
        f->has_root = rc == 0;
    } else if (strcmp(key, "transport") == 0) {
        rc = file_string(r, key, v, &s);
        if (rc == 0) {
            char src[sizeof(r->file_desc) + 32];
            lite_fmt(src, sizeof(src), "%s: key \"transport\"", r->file_desc);
            rc = check_transport(r, src, s, f->transport);
        }
        f->has_transport = rc == 0;
    } else if (strcmp(key, "security") == 0) {
        rc = file_string(r, key, v, &s);
        if (rc == 0 && parse_sec_mode(s, &f->sec_mode) != 0)
            rc = FAIL(r, "%s: key \"security\" = \"%s\": must be off, ca or psk", r->file_desc,
                      show(s, sb, sizeof(sb)));
        f->has_sec = rc == 0;
    } else if (sec_key(key) >= 0) {
        int k = sec_key(key);
        rc = file_string(r, key, v, &s);
        if (rc == 0 && strlen(s) >= LITE_SEC_PATH_MAX)
            rc = FAIL(r, "%s: key \"%s\": path longer than %d bytes", r->file_desc, key,
                      LITE_SEC_PATH_MAX - 1);
        if (rc == 0)
            memcpy(f->sec_path[k], s, strlen(s) + 1);
        f->has_sec_path[k] = rc == 0;
    } else if (strcmp(key, "log_level") == 0) {
        if (json_object_is_type(v, json_type_int)) {
            int64_t x = json_object_get_int64(v);
            rc = 0;
            if (x < LITE_LOG_ERROR || x > LITE_LOG_DEBUG)
                rc = FAIL(r, "%s: key \"log_level\" = %lld out of range, must be 0..3",
                          r->file_desc, (long long)x);
            f->log_level = (int)x;
        } else if (json_object_is_type(v, json_type_string)) {
            s = json_object_get_string(v);
            rc = parse_log_level(s, &f->log_level);
            if (rc != 0)
                rc = FAIL(r,
                          "%s: key \"log_level\" = \"%s\": not a log level (error, warn, info, "
                          "debug or 0..3)",
                          r->file_desc, show(s, sb, sizeof(sb)));
        } else {
            rc = FAIL(r, "%s: key \"log_level\" must be a string or an integer", r->file_desc);
        }
        f->has_log = rc == 0;
    } else {
        rc = FAIL(r, "%s: unknown key \"%s\"", r->file_desc, show(key, sb, sizeof(sb)));
    }
    return rc;
}

static int load_file(struct resolver *r, const char *path)
{
    char *buf;
    size_t len;
    int rc = read_file(r, path, &buf, &len);
    if (rc != 0)
        return rc;
    if (strlen(buf) != len) {
        free(buf);
        return FAIL(r, "%s: contains a NUL byte", r->file_desc);
    }
    struct json_tokener *tok = json_tokener_new();
    if (tok == NULL) {
        free(buf);
        return FAIL(r, "%s: out of memory", r->file_desc);
    }
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    /* Hand over the terminating NUL too, so that a top-level scalar ("42") ends cleanly. */
    struct json_object *top = json_tokener_parse_ex(tok, buf, (int)len + 1);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    int line, col;
    if (jerr == json_tokener_continue || jerr == json_tokener_error_parse_eof) {
        rc = FAIL(r, "%s: JSON syntax error: unexpected end of file", r->file_desc);
    } else if (jerr != json_tokener_success || top == NULL) {
        line_col(buf, end, &line, &col);
        rc = FAIL(r, "%s: JSON syntax error at line %d, column %d (byte %zu): %s", r->file_desc,
                  line, col, end, json_tokener_error_desc(jerr));
    } else if (end < len) {
        line_col(buf, end, &line, &col);
        rc = FAIL(r, "%s: JSON syntax error at line %d, column %d (byte %zu): trailing data",
                  r->file_desc, line, col, end);
    } else if (!json_object_is_type(top, json_type_object)) {
        rc = FAIL(r, "%s: the top level must be a JSON object ({...})", r->file_desc);
    } else {
        json_object_object_foreach(top, key, val)
        {
            rc = file_key(r, key, val);
            if (rc != 0)
                break;
        }
    }
    json_object_put(top);
    free(buf);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * The other fields
 * ------------------------------------------------------------------------------------------- */

static int resolve_root(struct resolver *r, const lite_config_t *cfg, struct lite_settings *s)
{
    char sb[SHOW_MAX];
    if (cfg->root != NULL) {
        if (lite_parse_hostport(cfg->root, s->root_host, sizeof(s->root_host), &s->root_port) != 0)
            return FAIL(r, "lite_config_t.root=\"%s\": not host:port or [v6addr]:port",
                        show(cfg->root, sb, sizeof(sb)));
        return 0;
    }
    const char *v = env_get(r, "LITETX_ROOT");
    if (v != NULL) {
        if (v[0] == '\0')
            return FAIL(r, "LITETX_ROOT is set but empty (root must be host:port)");
        if (lite_parse_hostport(v, s->root_host, sizeof(s->root_host), &s->root_port) != 0)
            return FAIL(r, "LITETX_ROOT=\"%s\": not host:port or [v6addr]:port",
                        show(v, sb, sizeof(sb)));
        return 0;
    }
    bool found;
    int rc = launcher_root(r, s, &found);
    if (rc != 0 || found)
        return rc;
    if (r->file.has_root) {
        memcpy(s->root_host, r->file.root_host, sizeof(s->root_host));
        s->root_port = r->file.root_port;
        return 0;
    }
    memcpy(s->root_host, DEFAULT_ROOT_HOST, sizeof(DEFAULT_ROOT_HOST));
    s->root_port = DEFAULT_ROOT_PORT;
    return 0;
}

static int resolve_transport(struct resolver *r, const lite_config_t *cfg, struct lite_settings *s)
{
    if (cfg->transport != NULL)
        return check_transport(r, "lite_config_t.transport", cfg->transport, s->transport);
    const char *v = env_get(r, "LITETX_TRANSPORT");
    if (v != NULL)
        return check_transport(r, "LITETX_TRANSPORT", v, s->transport);
    const char *name = r->file.has_transport ? r->file.transport : DEFAULT_TRANSPORT;
    memcpy(s->transport, name, strlen(name) + 1);
    return 0;
}

static int resolve_log_level(struct resolver *r, const lite_config_t *cfg, struct lite_settings *s)
{
    char sb[SHOW_MAX];
    if (cfg->log_level != LITE_LOG_UNSET) {
        if (cfg->log_level < LITE_LOG_ERROR || cfg->log_level > LITE_LOG_DEBUG)
            return FAIL(r,
                        "lite_config_t.log_level=%d: log_level out of range, must be 0..3 (or "
                        "%d for unset)",
                        cfg->log_level, LITE_LOG_UNSET);
        s->log_level = cfg->log_level;
        return 0;
    }
    const char *v = env_get(r, "LITETX_LOG_LEVEL");
    if (v != NULL) {
        if (v[0] == '\0')
            return FAIL(r, "LITETX_LOG_LEVEL is set but empty (log_level)");
        if (parse_log_level(v, &s->log_level) != 0)
            return FAIL(r,
                        "LITETX_LOG_LEVEL=\"%s\": not a log level (error, warn, info, debug or "
                        "0..3)",
                        show(v, sb, sizeof(sb)));
        return 0;
    }
    s->log_level = r->file.has_log ? r->file.log_level : DEFAULT_LOG_LEVEL;
    return 0;
}

/* Mode and files: struct, then LITETX_SECURITY*, then the file; each file checked (security.c). */
static int resolve_security(struct resolver *r, const lite_config_t *cfg, struct lite_settings *s)
{
    char sb[SHOW_MAX];
    s->sec.mode = LITE_SEC_OFF;
    const char *v = cfg->security, *from = "lite_config_t.security";
    if (!v) {
        v = env_get(r, "LITETX_SECURITY");
        from = "LITETX_SECURITY";
    }
    if (v) {
        if (parse_sec_mode(v, &s->sec.mode) != 0)
            return FAIL(r, "%s=\"%s\": security must be off, ca or psk", from,
                        show(v, sb, sizeof(sb)));
    } else if (r->file.has_sec) {
        s->sec.mode = r->file.sec_mode;
    }
    const char *path[LITE_SEC_NF], *src[LITE_SEC_NF];
    char expanded[LITE_SEC_NF][LITE_SEC_PATH_MAX];
    const char *const given[LITE_SEC_NF] = {cfg->security_cert, cfg->security_key, cfg->security_ca,
                                            cfg->security_psk};
    static const char *const fields[LITE_SEC_NF] = {
        "lite_config_t.security_cert", "lite_config_t.security_key", "lite_config_t.security_ca",
        "lite_config_t.security_psk"};
    for (int k = 0; k < LITE_SEC_NF; k++) {
        path[k] = given[k];
        src[k] = fields[k];
        if (!path[k]) {
            path[k] = env_get(r, sec_envs[k]);
            src[k] = sec_envs[k];
        }
        if (!path[k] && r->file.has_sec_path[k]) {
            path[k] = r->file.sec_path[k];
            src[k] = r->file_desc;
        }
        if (path[k] && path[k][0] == '\0')
            return FAIL(r, "%s is set but empty (%s must be a file path)", src[k], sec_keys[k]);
        /* "{rank}" stands for this rank, so one setting serves every rank of a job. */
        const char *at = path[k] ? strstr(path[k], "{rank}") : NULL;
        if (at) {
            int n = snprintf(expanded[k], sizeof(expanded[k]), "%.*s%d%s", (int)(at - path[k]),
                             path[k], s->rank, at + 6);
            if (n < 0 || (size_t)n >= sizeof(expanded[k]))
                return FAIL(r, "%s: path longer than %d bytes", src[k], LITE_SEC_PATH_MAX - 1);
            path[k] = expanded[k];
        }
    }
    /* Only the test suite sets this, to play an impostor: the peers' checks are what it tests. */
    const char *t = env_get(r, "LITETX_TEST_SECURITY_ANY_RANK");
    bool rank_check = !(t && strcmp(t, "1") == 0);
    return lite_security_check(&s->sec, s->rank, path, src, rank_check, r->err, r->errlen);
}

/* ---------------------------------------------------------------------------------------------
 * Entry point
 * ------------------------------------------------------------------------------------------- */

int lite_settings_resolve(const lite_config_t *cfg, lite_getenv_fn getenv_fn, void *getenv_arg,
                          struct lite_settings *out, char *err, size_t errlen)
{
    char scratch[8];
    struct resolver r;
    memset(&r, 0, sizeof(r));
    r.getenv_fn = getenv_fn != NULL ? getenv_fn : process_getenv;
    r.arg = getenv_arg;
    /* Always have somewhere to write, so FAIL needs no checks. */
    r.err = (err != NULL && errlen > 0) ? err : scratch;
    r.errlen = (err != NULL && errlen > 0) ? errlen : sizeof(scratch);
    r.err[0] = '\0';

    if (out == NULL)
        return FAIL(&r, "no output settings given");
    lite_config_t unset = lite_config_default();
    if (cfg == NULL)
        cfg = &unset;
    if (cfg->version != LITE_CONFIG_VERSION)
        return FAIL(&r,
                    "lite_config_t.version=%u: unsupported (this library knows version %d); "
                    "initialise the struct with lite_config_default()",
                    (unsigned)cfg->version, LITE_CONFIG_VERSION);
    /* A caller built against an earlier, shorter layout gets the newer fields unset. */
    size_t v1_size = offsetof(lite_config_t, config_file) + sizeof(cfg->config_file);
    if (cfg->struct_size < v1_size || cfg->struct_size > sizeof(lite_config_t))
        return FAIL(&r,
                    "lite_config_t.struct_size=%u: expected %zu..%zu; initialise the struct with "
                    "lite_config_default()",
                    (unsigned)cfg->struct_size, v1_size, sizeof(lite_config_t));
    lite_config_t grown = lite_config_default();
    memcpy(&grown, cfg, cfg->struct_size);
    grown.struct_size = (uint32_t)sizeof(grown);
    cfg = &grown;

    /* The file first: it is always read when named, so a bad one is always reported. */
    const char *path = cfg->config_file;
    const char *path_src = "lite_config_t.config_file";
    if (path == NULL) {
        path = env_get(&r, "LITETX_CONFIG");
        path_src = "LITETX_CONFIG";
    }
    if (path != NULL) {
        if (path[0] == '\0')
            return FAIL(&r, "%s is set but empty (config file path)", path_src);
        lite_fmt(r.file_desc, sizeof(r.file_desc), "config file %s", path);
        r.path_src = path_src;
        int rc = load_file(&r, path);
        if (rc != 0)
            return rc;
    }

    struct lite_settings s;
    memset(&s, 0, sizeof(s));
    const char *rank_from = NULL, *world_from = NULL, *ignored = NULL;
    const struct file_vals *f = &r.file;
    int rc = resolve_int(&r, &key_world, cfg->world_size, -1, f->has_world, f->world_size,
                         DEFAULT_WORLD_SIZE, &s.world_size, &world_from);
    if (rc == 0)
        rc = resolve_int(&r, &key_rank, cfg->rank, -1, f->has_rank, f->rank, DEFAULT_RANK, &s.rank,
                         &rank_from);
    if (rc == 0 && s.rank >= s.world_size)
        rc = FAIL(&r, "rank %d out of range for world_size %d (rank from %s, world_size from %s)",
                  s.rank, s.world_size, rank_from, world_from);
    if (rc == 0)
        rc = resolve_root(&r, cfg, &s);
    if (rc == 0)
        rc = resolve_transport(&r, cfg, &s);
    if (rc == 0)
        rc = resolve_log_level(&r, cfg, &s);
    if (rc == 0)
        rc = resolve_int(&r, &key_init_to, cfg->init_timeout_ms, CFG_TIMEOUT_UNSET, f->has_init_to,
                         f->init_timeout_ms, DEFAULT_INIT_TIMEOUT_MS, &s.init_timeout_ms, &ignored);
    if (rc == 0)
        rc = resolve_int(&r, &key_op_to, cfg->op_timeout_ms, CFG_TIMEOUT_UNSET, f->has_op_to,
                         f->op_timeout_ms, DEFAULT_OP_TIMEOUT_MS, &s.op_timeout_ms, &ignored);
    if (rc == 0)
        rc = resolve_int(&r, &key_credits, cfg->credits, -1, f->has_credits, f->credits,
                         DEFAULT_CREDITS, &s.credits, &ignored);
    if (rc == 0) {
        const char *rndv_from = NULL;
        rc = resolve_int(&r, &key_rndv, cfg->rndv_threshold, -1, f->has_rndv, f->rndv_threshold,
                         DEFAULT_RNDV_THRESHOLD, &s.rndv_threshold, &rndv_from);
        s.rndv_default = rndv_from != NULL && strcmp(rndv_from, "default") == 0;
    }
    if (rc == 0) {
        rc = resolve_int(&r, &key_reconnect, cfg->reconnect_timeout_ms, -1, f->has_reconnect,
                         f->reconnect_timeout_ms, DEFAULT_RECONNECT_MS, &s.reconnect_timeout_ms,
                         &ignored);
    }
    /* The collectives' variables, once per context (lite_coll_set changes them later). */
    if (rc == 0)
        rc = lite_coll_cfg_parse(env_get(&r, "LITETX_COLL_ALGO"), env_get(&r, "LITETX_COLL_CHUNK"),
                                 env_get(&r, "LITETX_COLL_CHECK"), &s.coll, r.err, r.errlen);
    if (rc == 0)
        rc = resolve_security(&r, cfg, &s);
    if (rc != 0) {
        memset(&s.sec, 0, sizeof(s.sec)); /* no key material left on the stack */
        return rc;
    }
    *out = s;
    memset(&s.sec, 0, sizeof(s.sec));
    return 0;
}
