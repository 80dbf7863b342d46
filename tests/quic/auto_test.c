/*
 * auto_test.c - transport "auto" never prefers quic to tcp (docs/QUIC.md, "Selection"): quic
 * comes after tcp in the registry's preference order, and auto picks something other than quic
 * here, with and without security on (tcp encrypts too where it has TLS).
 */
#include <stdio.h>
#include <string.h>

#include "lite_int.h"
#include "registry.h"
#include "tp_select.h"

static int fail(const char *what)
{
    printf("FAILED: %s\n", what);
    return 1;
}

int main(void)
{
    size_t n;
    const struct lite_transport_ops *const *tab = lite_registry(&n);
    long tcp = -1, quic = -1;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(tab[i]->name, "tcp"))
            tcp = (long)i;
        if (!strcmp(tab[i]->name, "quic"))
            quic = (long)i;
    }
    if (quic < 0) {
        printf("quic is not compiled in: nothing to check\n");
        return 77;
    }
    if (tcp < 0 || quic < tcp)
        return fail("quic is listed before tcp in the auto preference order");
    const struct lite_transport_ops *pick = NULL;
    char why[512];
    if (lite_transport_select(tab, n, "auto", &pick, why, sizeof(why)) != 0 || !pick)
        return fail("auto picked nothing");
    printf("auto picks %s\n", pick->name);
    if (!strcmp(pick->name, "quic"))
        return fail("auto picked quic while tcp is usable");
    bool tcp_encrypts = (tab[tcp]->caps & LITE_CAP_ENCRYPTED) != 0;
    if (lite_transport_select_caps(tab, n, "auto", LITE_CAP_ENCRYPTED, "security is ca", &pick, why,
                                   sizeof(why)) != 0 ||
        !pick)
        return fail("auto with security on picked nothing (quic always encrypts)");
    printf("auto with security on picks %s\n", pick->name);
    if (tcp_encrypts && !strcmp(pick->name, "quic"))
        return fail("auto with security on picked quic while tcp has TLS");
    /* By name it is there. */
    if (lite_transport_select(tab, n, "quic", &pick, why, sizeof(why)) != 0 ||
        strcmp(pick->name, "quic"))
        return fail("quic is not selectable by name");
    printf("ok\n");
    return 0;
}
