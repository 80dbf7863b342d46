/*
 * tp_select.c - the choice of a transport: by name, or the first usable one ("auto"), each
 * probed with its variables as the environment has them (tunables.c). Above the registry,
 * whose table the tunables list, and above the tunables.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lite_int.h"
#include "tp_select.h"
#include "tunables.h"

static int probe_one(const struct lite_transport_ops *ops, char *why, size_t why_len)
{
    if (!ops->probe)
        return 0;
    why[0] = '\0';
    /* The backend's variables as the environment has them now (lite_init hands open its own
     * snapshot, checked; an invalid value makes the probe say so). */
    struct lite_tp_env *env = lite_tun_env_new(ops->name);
    if (!env)
        return -ENOMEM;
    int rc = ops->probe(env, why, why_len);
    lite_tun_env_free(env);
    return rc;
}

int lite_transport_select(const struct lite_transport_ops *const *table, size_t count,
                          const char *name, const struct lite_transport_ops **out, char *why,
                          size_t why_len)
{
    char reason[256];
    *out = NULL;
    if (why_len)
        why[0] = '\0';
    if (!name || strcmp(name, "auto") == 0) {
        size_t used = 0;
        for (size_t i = 0; i < count; i++) {
            if (table[i]->caps & LITE_CAP_NO_AUTO)
                continue; /* test and in-process backends: by name only */
            int rc = probe_one(table[i], reason, sizeof(reason));
            if (rc == 0) {
                *out = table[i];
                return 0; /* why: the ones passed over, for the caller to report once */
            }
            LITE_DEBUG("transport auto: %s not usable (%s)", table[i]->name,
                       reason[0] ? reason : lite_strerror(rc));
            if (used < why_len)
                used += (size_t)snprintf(why + used, why_len - used, "%s%s not usable (%s)",
                                         used ? "; " : "", table[i]->name,
                                         reason[0] ? reason : lite_strerror(rc));
        }
        char tried[512];
        lite_fmt(tried, sizeof(tried), "%s", why_len ? why : "");
        lite_fmt(why, why_len,
                 "transport auto: no compiled-in transport is usable on this host%s%s",
                 tried[0] ? ": " : "", tried);
        return -LITE_ERR_NO_TRANSPORT;
    }
    for (size_t i = 0; i < count; i++) {
        if (strcmp(table[i]->name, name) != 0)
            continue;
        int rc = probe_one(table[i], reason, sizeof(reason));
        if (rc != 0) {
            lite_fmt(why, why_len, "transport %s is not usable on this host: %s", name,
                     reason[0] ? reason : lite_strerror(rc));
            return -LITE_ERR_NO_TRANSPORT;
        }
        *out = table[i];
        return 0;
    }
    char list[128] = "";
    size_t used = 0;
    for (size_t i = 0; i < count && used < sizeof(list); i++)
        used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "",
                                 table[i]->name);
    lite_fmt(why, why_len, "transport %s is not compiled into this liblitetx (built with: %s)",
             name, count ? list : "none");
    return -LITE_ERR_NO_TRANSPORT;
}

/* Transports that cannot give what `need` asks are refused by name and skipped by "auto",
 * never used with the need silently dropped (security: no plaintext fallback). */
int lite_transport_select_caps(const struct lite_transport_ops *const *table, size_t count,
                               const char *name, uint32_t need, const char *need_why,
                               const struct lite_transport_ops **out, char *why, size_t why_len)
{
    if (!need)
        return lite_transport_select(table, count, name, out, why, why_len);
    *out = NULL;
    if (name && strcmp(name, "auto") != 0) {
        for (size_t i = 0; i < count; i++) {
            if (strcmp(table[i]->name, name) == 0 && (table[i]->caps & need) != need) {
                lite_fmt(why, why_len,
                         "transport %s refuses to start: %s, which it cannot do (no fallback "
                         "to plaintext)",
                         name, need_why);
                return -LITE_ERR_NO_TRANSPORT;
            }
        }
        return lite_transport_select(table, count, name, out, why, why_len);
    }
    const struct lite_transport_ops *fit[32];
    size_t n = 0;
    for (size_t i = 0; i < count && n < LITE_ARRAY_LEN(fit); i++) {
        if ((table[i]->caps & need) == need)
            fit[n++] = table[i];
        else
            LITE_INFO("transport auto: %s skipped (%s; it cannot)", table[i]->name, need_why);
    }
    if (n == 0) {
        lite_fmt(why, why_len, "transport auto: %s, and no compiled-in transport can", need_why);
        return -LITE_ERR_NO_TRANSPORT;
    }
    return lite_transport_select(fit, n, "auto", out, why, why_len);
}
