/*
 * tunables.c - the table of the core's LITETX_* variables and the lookups over it and the
 * backends' tables: what litetx-info prints and what lite_init checks the environment against.
 * Each entry has a type and a range: lite_init checks the core's and the selected backend's
 * against them once, and hands the backend its values through a snapshot (struct lite_tp_env,
 * below); the core reads its numeric tuning variables with lite_tun_long, whose range is the
 * table's. The keys of lite_config_t are also parsed by config.c (struct, environment, JSON).
 * tests/tunables_check.sh keeps this table, the sources and docs/CONFIG.md in step.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"
#include "lite_int.h"
#include "tunables.h"

/* Types and ranges as lite_init checks them (the keys of lite_config_t are also checked, with
 * their own messages, by config.c, which runs first; STRING entries are checked there or where
 * they are read). */
#define C LITE_TUN_CONTEXT
#define P LITE_TUN_PROCESS
const struct lite_tunable lite_core_tunables[] = {
    /* lite_config_t keys (also JSON keys; docs/CONFIG.md, Keys) */
    {"LITETX_RANK", "0", "this rank, 0 .. world_size - 1 (launchers' variables also work)",
     LITE_TUN_INT, C, 0, 65535, NULL},
    {"LITETX_WORLD_SIZE", "1", "number of ranks", LITE_TUN_INT, C, 1, 65536, NULL},
    {"LITETX_ROOT", "127.0.0.1:29500", "host:port where rank 0 serves the bootstrap",
     LITE_TUN_STRING, C, 0, 0, NULL},
    {"LITETX_TRANSPORT", "auto", "auto or a backend name (litetx-info lists them)", LITE_TUN_STRING,
     C, 0, 0, NULL},
    {"LITETX_LOG_LEVEL", "warn", "error, warn, info, debug or 0 .. 3", LITE_TUN_STRING, C, 0, 0,
     NULL},
    {"LITETX_INIT_TIMEOUT_MS", "30000", "bound on lite_init's bootstrap and connects; -1: none",
     LITE_TUN_INT, C, -1, INT_MAX, NULL},
    {"LITETX_OP_TIMEOUT_MS", "60000", "bound on every blocking wait; -1: none", LITE_TUN_INT, C, -1,
     INT_MAX, NULL},
    {"LITETX_CONFIG", "none", "path of a JSON configuration file", LITE_TUN_STRING, C, 0, 0, NULL},
    {"LITETX_CREDITS", "64", "eager messages a peer may have outstanding here", LITE_TUN_INT, C, 2,
     65535, NULL},
    {"LITETX_RNDV_THRESHOLD", "65536", "messages this large or larger use rendezvous (bytes)",
     LITE_TUN_INT, C, 64, 1 << 30, NULL},
    {"LITETX_RECONNECT_TIMEOUT_MS", "10000",
     "resume a broken connection for this long (ms); 0: a break is final", LITE_TUN_INT, C, 0,
     24 * 3600 * 1000, NULL},
    {"LITETX_SECURITY", "off", "off, ca (certificates) or psk (a pre-shared key)", LITE_TUN_STRING,
     C, 0, 0, NULL},
    {"LITETX_SECURITY_CERT", "none", "ca: this rank's certificate (PEM); {rank} is replaced",
     LITE_TUN_STRING, C, 0, 0, NULL},
    {"LITETX_SECURITY_KEY", "none", "ca: the certificate's private key (PEM)", LITE_TUN_STRING, C,
     0, 0, NULL},
    {"LITETX_SECURITY_CA", "none", "ca: the CA certificate(s) every rank's must chain to",
     LITE_TUN_STRING, C, 0, 0, NULL},
    {"LITETX_SECURITY_PSK", "none", "psk: file with the job's key in hex (16 .. 64 bytes)",
     LITE_TUN_STRING, C, 0, 0, NULL},
    /* tuning (environment only; docs/CONFIG.md, Tuning variables) */
    {"LITETX_LOCAL_SIZE", "launcher's", "ranks on this host (litetx-run sets it)", LITE_TUN_STRING,
     C, 0, 0, NULL},
    {"LITETX_SPIN_US", "200 (2 ranks), 20", "how long a wait polls before sleeping (us)",
     LITE_TUN_INT, C, 0, 10000000, NULL},
    {"LITETX_SPIN_PAUSE_NS", "0", "pause after an empty poll (ns of CPU pause hints)", LITE_TUN_INT,
     C, 0, 1000, NULL},
    {"LITETX_YIELD", "when crowded", "1: sched_yield after each poll of a wait; 0: never",
     LITE_TUN_BOOL, C, 0, 1, NULL},
    {"LITETX_IMM_COUNTERS", "65536", "most distinct immediates with a non-zero count", LITE_TUN_INT,
     C, 1, 1 << 24, NULL},
    {"LITETX_COLL_ALGO", "auto", "force a collective algorithm: auto, direct, rsag, pipe",
     LITE_TUN_STRING, C, 0, 0, NULL},
    {"LITETX_COLL_CHUNK", "by world size", "collective pipeline chunk per peer (k/m/g suffix)",
     LITE_TUN_STRING, C, 0, 0, NULL},
    {"LITETX_COLL_CHECK", "1", "1/0 (on/off, true/false): verify collective arguments across ranks",
     LITE_TUN_STRING, C, 0, 0, NULL},
    {"LITETX_CUDA_DRIVER", "libcuda.so.1", "path of the CUDA driver library loaded at run time",
     LITE_TUN_STRING, P, 0, 0, NULL},
    {"LITETX_GPU_STAGE_CHUNK", "4194304",
     "bytes per staged segment of a device-buffer allreduce (same on every rank) and per copied "
     "chunk of a large device send",
     LITE_TUN_INT, C, 4096, 1 << 30, NULL},
    /* for tests only */
    {"LITETX_TEST_CORE_RMA", "0",
     "for tests: 1 carries one-sided ops as core messages even if the backend has its own",
     LITE_TUN_BOOL, C, 0, 1, NULL},
    {"LITETX_TEST_SECURITY_ANY_RANK", "0",
     "for tests: 1 lets a certificate name any rank (impersonation tests; other values: 0)",
     LITE_TUN_STRING, C, 0, 0, NULL},
    {NULL, NULL, NULL, 0, 0, 0, 0, NULL},
};
#undef C
#undef P

int lite_tunables_each(int (*fn)(const char *owner, const struct lite_tunable *t, void *arg),
                       void *arg)
{
    for (const struct lite_tunable *t = lite_core_tunables; t->name; t++) {
        int rc = fn("core", t, arg);
        if (rc)
            return rc;
    }
    size_t n;
    const struct lite_transport_ops *const *tab = lite_registry(&n);
    for (size_t i = 0; i < n; i++) {
        const struct lite_tunable *t = tab[i]->tunables;
        for (; t && t->name; t++) {
            int rc = fn(tab[i]->name, t, arg);
            if (rc)
                return rc;
        }
    }
    return 0;
}

struct find_arg {
    const char *name;
    const struct lite_tunable *hit;
    const char *owner;
};

/* A variable may be listed by two backends (nccl lists the variables of the tcp instance it runs
 * inside): the owner named in the variable (tcp for LITETX_TCP_PORT) wins, else the first. */
static bool names_owner(const char *name, const char *owner)
{
    char up[40] = "_";
    size_t n = strlen(owner);
    if (n + 3 > sizeof(up))
        return false;
    for (size_t i = 0; i < n; i++)
        up[1 + i] = (char)toupper((unsigned char)owner[i]);
    up[1 + n] = '_';
    up[2 + n] = 0;
    return strstr(name, up) != NULL;
}

static int find_one(const char *owner, const struct lite_tunable *t, void *arg)
{
    struct find_arg *a = arg;
    if (strcmp(t->name, a->name))
        return 0;
    if (!a->hit) {
        a->hit = t;
        a->owner = owner;
    }
    if (!names_owner(t->name, owner))
        return 0; /* look on: the backend it names may list it too */
    a->hit = t;
    a->owner = owner;
    return 1;
}

const struct lite_tunable *lite_tunable_find(const char *name, const char **owner)
{
    struct find_arg a = {.name = name};
    lite_tunables_each(find_one, &a);
    if (owner)
        *owner = a.owner;
    return a.hit;
}

/* Edit distance, capped: names are short (< 64), anything longer counts as far. */
static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la >= 64 || lb >= 64)
        return (size_t)-1;
    size_t row[65];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

struct near_arg {
    const char *name;
    const char *best;
    size_t dist;
};

static int near_one(const char *owner, const struct lite_tunable *t, void *arg)
{
    struct near_arg *a = arg;
    size_t d = distance(a->name, t->name);
    if (d < a->dist) {
        a->dist = d;
        a->best = t->name;
    }
    return 0;
}

const char *lite_tunable_closest(const char *name)
{
    struct near_arg a = {.name = name, .dist = 4};
    lite_tunables_each(near_one, &a);
    return a.best;
}

int lite_tunables_warn_unknown(char *const *envp, int rank)
{
    int unknown = 0;
    for (; envp && *envp; envp++) {
        if (strncmp(*envp, "LITETX_", 7))
            continue;
        const char *eq = strchr(*envp, '=');
        size_t len = eq ? (size_t)(eq - *envp) : strlen(*envp);
        char name[64];
        if (len >= sizeof(name))
            len = sizeof(name) - 1;
        memcpy(name, *envp, len);
        name[len] = 0;
        if (lite_tunable_find(name, NULL))
            continue;
        const char *near = lite_tunable_closest(name);
        LITE_WARN("rank %d: %s is not a variable this build of liblitetx knows%s%s%s "
                  "(litetx-info --config lists them)",
                  rank, name, near ? " (did you mean " : "", near ? near : "", near ? "?)" : "");
        unknown++;
    }
    return unknown;
}

/* ---- typed values ---- */

const char *lite_tunable_type_name(int type)
{
    static const char *const names[] = {"string", "int", "size", "bool", "enum"};
    return type >= 0 && type <= LITE_TUN_ENUM ? names[type] : "?";
}

void lite_tunable_range(const struct lite_tunable *t, char *buf, size_t len)
{
    switch (t->type) {
    case LITE_TUN_INT:
    case LITE_TUN_SIZE:
        lite_fmt(buf, len, "%lld..%lld", (long long)t->lo, (long long)t->hi);
        break;
    case LITE_TUN_BOOL:
        lite_fmt(buf, len, "0|1");
        break;
    case LITE_TUN_ENUM:
        lite_fmt(buf, len, "%s", t->values ? t->values : "");
        break;
    default:
        lite_fmt(buf, len, "-");
    }
}

/* The index of word v among t->values ("a|b|c"), or -1. */
static int enum_index(const struct lite_tunable *t, const char *v)
{
    const char *p = t->values;
    size_t vl = strlen(v);
    for (int i = 0; p && *p; i++) {
        const char *bar = strchr(p, '|');
        size_t wl = bar ? (size_t)(bar - p) : strlen(p);
        if (wl == vl && !strncmp(p, v, wl))
            return i;
        if (!bar)
            break;
        p = bar + 1;
    }
    return -1;
}

int lite_tunable_parse(const struct lite_tunable *t, const char *v, int64_t *num, char *why,
                       size_t len)
{
    *num = 0;
    switch (t->type) {
    case LITE_TUN_INT:
    case LITE_TUN_SIZE: {
        /* strict decimal: no spaces, no hex, no trailing text; SIZE without a sign */
        bool sign = t->type == LITE_TUN_INT && (v[0] == '-' || v[0] == '+');
        bool digits = isdigit((unsigned char)v[sign ? 1 : 0]);
        char *end;
        errno = 0;
        long long n = strtoll(v, &end, 10);
        if (digits && *end == 0 && errno == 0 && n >= t->lo && n <= t->hi) {
            *num = n;
            return 0;
        }
        lite_fmt(why, len, "%s=\"%s\": must be an integer in %lld..%lld", t->name, v,
                 (long long)t->lo, (long long)t->hi);
        return -LITE_ERR_CONFIG;
    }
    case LITE_TUN_BOOL:
        if ((v[0] == '0' || v[0] == '1') && v[1] == 0) {
            *num = v[0] - '0';
            return 0;
        }
        lite_fmt(why, len, "%s=\"%s\": must be 0 or 1", t->name, v);
        return -LITE_ERR_CONFIG;
    case LITE_TUN_ENUM: {
        int i = enum_index(t, v);
        if (i >= 0) {
            *num = i;
            return 0;
        }
        char list[160];
        lite_fmt(list, sizeof(list), "%s", t->values ? t->values : "");
        for (char *c = list; *c; c++)
            if (*c == '|')
                *c = ',';
        lite_fmt(why, len, "%s=\"%s\": must be one of %s", t->name, v, list);
        return -LITE_ERR_CONFIG;
    }
    default:
        return 0;
    }
}

/* ---- the snapshot handed to a backend ---- */

struct slot {
    const struct lite_tunable *t;
    char *raw; /* NULL: unset (or empty) */
    int64_t num;
    char err[192]; /* non-empty: invalid */
};

struct tun_env {
    struct lite_tp_env env; /* first: the backend's handle is this */
    const char *owner;      /* the backend whose variables these are, or NULL */
    size_t n;
    struct slot *slot;
    const char *first_err;
};

static void sink_log(int level, const char *msg)
{
    lite_log(level, "%s", msg);
}

static int env_get(const struct lite_tp_env *env, const char *name, struct lite_tun_val *val)
{
    const struct tun_env *e = env ? env->core : NULL;
    if (!e || !name)
        return -ENOENT;
    for (size_t i = 0; i < e->n; i++) {
        const struct slot *s = &e->slot[i];
        if (strcmp(s->t->name, name))
            continue;
        if (!s->raw)
            return 0;
        val->str = s->raw;
        val->num = s->num;
        if (s->err[0]) {
            val->str = s->err; /* what is wrong, naming the variable */
            return -LITE_ERR_CONFIG;
        }
        return 1;
    }
    LITE_ERROR("%s asked for %s, which is not in its table of variables",
               e->owner ? e->owner : "core", name);
    return -ENOENT;
}

struct fill_arg {
    struct tun_env *e;
    size_t cap;
};

static int count_one(const char *owner, const struct lite_tunable *t, void *arg)
{
    struct fill_arg *a = arg;
    if (!strcmp(owner, "core") || (a->e->owner && !strcmp(owner, a->e->owner)))
        a->cap++;
    return 0;
}

static int fill_one(const char *owner, const struct lite_tunable *t, void *arg)
{
    struct fill_arg *a = arg;
    struct tun_env *e = a->e;
    if (strcmp(owner, "core") && !(e->owner && !strcmp(owner, e->owner)))
        return 0;
    struct slot *s = &e->slot[e->n++];
    s->t = t;
    const char *v = getenv(t->name);
    if (!v || !*v)
        return 0;
    s->raw = strdup(v);
    if (!s->raw)
        return -ENOMEM;
    if (lite_tunable_parse(t, v, &s->num, s->err, sizeof(s->err)) && !e->first_err)
        e->first_err = s->err;
    return 0;
}

struct lite_tp_env *lite_tun_env_new(const char *owner)
{
    struct tun_env *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->owner = owner;
    struct fill_arg a = {.e = e};
    lite_tunables_each(count_one, &a);
    e->slot = calloc(a.cap ? a.cap : 1, sizeof(*e->slot));
    if (!e->slot || lite_tunables_each(fill_one, &a)) {
        lite_tun_env_free(&e->env);
        return NULL;
    }
    e->env.size = sizeof(e->env);
    e->env.get = env_get;
    e->env.log = sink_log;
    e->env.log_level = lite_log_get_level;
    e->env.core = e;
    return &e->env;
}

const char *lite_tun_env_error(const struct lite_tp_env *env)
{
    const struct tun_env *e = env ? env->core : NULL;
    return e ? e->first_err : NULL;
}

void lite_tun_env_free(struct lite_tp_env *env)
{
    struct tun_env *e = env ? (struct tun_env *)env : NULL;
    if (!e)
        return;
    for (size_t i = 0; e->slot && i < e->n; i++)
        free(e->slot[i].raw);
    free(e->slot);
    free(e);
}

long lite_tun_long(const char *name, long dflt)
{
    const struct lite_tunable *t = NULL;
    for (const struct lite_tunable *c = lite_core_tunables; c->name && !t; c++)
        if (!strcmp(c->name, name))
            t = c;
    if (!t || t->type == LITE_TUN_STRING) {
        LITE_ERROR("%s is not a numeric variable of the core's table", name);
        return dflt;
    }
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    int64_t n;
    char why[192];
    if (lite_tunable_parse(t, v, &n, why, sizeof(why))) {
        lite_env_error_note(why);
        return dflt;
    }
    return (long)n;
}
