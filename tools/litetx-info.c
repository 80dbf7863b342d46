/*
 * litetx-info - what this build of liblitetx has and what this host lets it use: what fi_info
 * and ucx_info are to their libraries.
 *
 *   litetx-info              the backends, then every tunable
 *   litetx-info --backends   each compiled-in backend in "auto" order: usable here or why not,
 *                            and its capabilities
 *   litetx-info --config     every LITETX_* variable: its value in this environment (or the
 *                            default) and where it came from, the part of the library that
 *                            reads it, its type and accepted values, what it does (an invalid
 *                            value is flagged); LITETX_* variables no part knows are listed last
 *   litetx-info --names      the variable names only, one per line (for scripts)
 *   litetx-info --table      name, owner, type, accepted values, default, doc: tab-separated,
 *                            one variable per line (tests/tunables_check.sh checks
 *                            docs/CONFIG.md's table of every variable against it)
 *   litetx-info --version
 *
 * Exit status: 0, or 2 for a usage error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lite_int.h"
#include "registry.h"
#include "tunables.h"

static const struct {
    uint32_t bit;
    const char *name;
} cap_names[] = {
    {LITE_CAP_WRITE, "write"},
    {LITE_CAP_WRITE_IMM, "write_imm"},
    {LITE_CAP_READ, "read"},
    {LITE_CAP_DEVICE_MEM, "device_mem"},
    {LITE_CAP_ENCRYPTED, "encrypted"},
    {LITE_CAP_MULTI_RAIL, "multi_rail"},
    {LITE_CAP_EMULATED_RMA, "emulated_rma"},
    {LITE_CAP_ORDERED_WRITE_MSG, "ordered_write_msg"},
    {LITE_CAP_REVOCABLE_RMA, "revocable_rma"},
    {LITE_CAP_NO_AUTO, "no_auto"},
    {LITE_CAP_DEVICE_MSG, "device_msg"},
};

static void print_backends(void)
{
    size_t n;
    const struct lite_transport_ops *const *tab = lite_registry(&n);
    printf("# backends compiled in, in \"auto\" order (LITETX_TRANSPORT=auto takes the first "
           "usable one without no_auto)\n");
    for (size_t i = 0; i < n; i++) {
        char why[256] = "";
        int rc = 0;
        if (tab[i]->probe) {
            struct lite_tp_env *env = lite_tun_env_new(tab[i]->name);
            rc = env ? tab[i]->probe(env, why, sizeof(why)) : -ENOMEM;
            lite_tun_env_free(env);
        }
        printf("%-6s %s%s%s\n", tab[i]->name, rc ? "not usable: " : "usable", rc ? why : "",
               rc && !why[0] ? "(no reason given)" : "");
        printf("       caps:");
        for (size_t c = 0; c < sizeof(cap_names) / sizeof(cap_names[0]); c++)
            if (tab[i]->caps & cap_names[c].bit)
                printf(" %s", cap_names[c].name);
        printf("\n");
        if (!tab[i]->mr_reg || !tab[i]->rma_post)
            printf("       one-sided ops: emulated by the core over messages\n");
    }
}

struct print_arg {
    int mode; /* 0: for people, 1: names only, 2: the table (tab-separated) */
};

static int print_one(const char *owner, const struct lite_tunable *t, void *arg)
{
    const struct print_arg *a = arg;
    const char *v = getenv(t->name);
    if (v && !*v)
        v = NULL; /* empty is unset */
    char range[160];
    lite_tunable_range(t, range, sizeof(range));
    if (a->mode == 1) {
        printf("%s\n", t->name);
        return 0;
    }
    if (a->mode == 2) {
        printf("%s\t%s\t%s\t%s\t%s\t%s\n", t->name, owner, lite_tunable_type_name(t->type), range,
               t->def, t->doc);
        return 0;
    }
    const char *source = "default";
    char why[192] = "";
    if (v) {
        int64_t num;
        source = lite_tunable_parse(t, v, &num, why, sizeof(why)) ? "environment, INVALID"
                                                                  : "environment";
    }
    printf("%-30s %-5s %s  (%s)\n", t->name, owner, v ? v : t->def, source);
    printf("%-36s %s %s: %s\n", "", lite_tunable_type_name(t->type), range, t->doc);
    if (why[0])
        printf("%-36s %s (lite_init fails)\n", "", why);
    return 0;
}

static void print_config(int mode)
{
    if (mode == 0)
        printf("# LITETX_* variables: name, part that reads it, value (source); type, accepted "
               "values: what it does\n");
    struct print_arg a = {.mode = mode};
    lite_tunables_each(print_one, &a);
    if (mode)
        return;
    /* Unknown ones here rather than through the log: this is the place a user looks. */
    for (char **e = environ; *e; e++) {
        if (strncmp(*e, "LITETX_", 7))
            continue;
        char name[64];
        size_t len = strcspn(*e, "=");
        if (len >= sizeof(name))
            len = sizeof(name) - 1;
        memcpy(name, *e, len);
        name[len] = 0;
        if (lite_tunable_find(name, NULL))
            continue;
        const char *near = lite_tunable_closest(name);
        printf("%-30s UNKNOWN: no part of this build reads it%s%s%s\n", name,
               near ? " (did you mean " : "", near ? near : "", near ? "?)" : "");
    }
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "";
    if (argc > 2 ||
        (argc == 2 && strcmp(what, "--backends") && strcmp(what, "--config") &&
         strcmp(what, "--names") && strcmp(what, "--table") && strcmp(what, "--version"))) {
        fprintf(stderr,
                "usage: litetx-info [--backends | --config | --names | --table | --version]\n");
        return 2;
    }
    if (!strcmp(what, "--version")) {
        printf("liblitetx %d.%d.%d\n", LITE_VERSION_MAJOR, LITE_VERSION_MINOR, LITE_VERSION_PATCH);
        return 0;
    }
    if (!*what || !strcmp(what, "--backends"))
        print_backends();
    if (!*what)
        printf("\n");
    if (!*what || !strcmp(what, "--config") || !strcmp(what, "--names") || !strcmp(what, "--table"))
        print_config(!strcmp(what, "--names") ? 1 : !strcmp(what, "--table") ? 2 : 0);
    return 0;
}
