/*
 * tunables.c - the table of the core's LITETX_* variables and the lookups over it and the
 * backends' tables: what litetx-info prints and what lite_init checks the environment against.
 * The variables are still parsed where they are used (config.c for lite_config_t's keys);
 * this table is what a user reads, and tests/tunables_check.sh keeps it, the sources and
 * docs/CONFIG.md in step.
 */
#include <stdlib.h>
#include <string.h>

#include "registry.h"
#include "lite_int.h"
#include "tunables.h"

const struct lite_tunable lite_core_tunables[] = {
    /* lite_config_t keys (also JSON keys; docs/CONFIG.md, Keys) */
    {"LITETX_RANK", "0", "this rank, 0 .. world_size - 1 (launchers' variables also work)"},
    {"LITETX_WORLD_SIZE", "1", "number of ranks, 1 .. 65536"},
    {"LITETX_ROOT", "127.0.0.1:29500", "host:port where rank 0 serves the bootstrap"},
    {"LITETX_TRANSPORT", "auto", "auto or a backend name (litetx-info lists them)"},
    {"LITETX_LOG_LEVEL", "warn", "error, warn, info, debug or 0 .. 3"},
    {"LITETX_INIT_TIMEOUT_MS", "30000", "bound on lite_init's bootstrap and connects; -1: none"},
    {"LITETX_OP_TIMEOUT_MS", "60000", "bound on every blocking wait; -1: none"},
    {"LITETX_CONFIG", "none", "path of a JSON configuration file"},
    {"LITETX_CREDITS", "64", "eager messages a peer may have outstanding here, 2 .. 65535"},
    {"LITETX_RNDV_THRESHOLD", "65536", "messages this large or larger use rendezvous (bytes)"},
    {"LITETX_RECONNECT_TIMEOUT_MS", "10000",
     "resume a broken connection for this long (ms); 0: a break is final"},
    {"LITETX_SECURITY", "off", "off, ca (certificates) or psk (a pre-shared key)"},
    {"LITETX_SECURITY_CERT", "none", "ca: this rank's certificate (PEM); {rank} is replaced"},
    {"LITETX_SECURITY_KEY", "none", "ca: the certificate's private key (PEM)"},
    {"LITETX_SECURITY_CA", "none", "ca: the CA certificate(s) every rank's must chain to"},
    {"LITETX_SECURITY_PSK", "none", "psk: file with the job's key in hex (16 .. 64 bytes)"},
    /* tuning (environment only; docs/CONFIG.md, Tuning variables) */
    {"LITETX_LOCAL_SIZE", "launcher's", "ranks on this host (litetx-run sets it)"},
    {"LITETX_SPIN_US", "200 (2 ranks), 20", "how long a wait polls before sleeping (us)"},
    {"LITETX_SPIN_PAUSE_NS", "0", "pause after an empty poll (ns of CPU pause hints)"},
    {"LITETX_YIELD", "when crowded", "1: sched_yield after each poll of a wait; 0: never"},
    {"LITETX_IMM_COUNTERS", "65536", "most distinct immediates with a non-zero count"},
    {"LITETX_COLL_ALGO", "auto", "force a collective algorithm: auto, direct, rsag, pipe"},
    {"LITETX_COLL_CHUNK", "by world size", "collective pipeline chunk per peer (k/m/g suffix)"},
    {"LITETX_COLL_CHECK", "1", "1/0: verify collective arguments across ranks"},
    {"LITETX_CUDA_DRIVER", "libcuda.so.1", "path of the CUDA driver library loaded at run time"},
    {"LITETX_GPU_STAGE_CHUNK", "4194304",
     "bytes per staged segment of a device-buffer allreduce (same on every rank)"},
    /* for tests only */
    {"LITETX_TEST_CORE_RMA", "0",
     "tests only: 1 carries one-sided ops as core messages even if the backend has its own"},
    {"LITETX_TEST_SECURITY_ANY_RANK", "0",
     "tests only: 1 lets a certificate name any rank (impersonation tests)"},
    {NULL, NULL, NULL},
};

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

static int find_one(const char *owner, const struct lite_tunable *t, void *arg)
{
    struct find_arg *a = arg;
    if (strcmp(t->name, a->name))
        return 0;
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
