/*
 * security.h - the context's security configuration, checked once at lite_init (security.c),
 * and the helpers every encrypting transport shares (the rank a certificate names).
 */
#ifndef LITE_SECURITY_H
#define LITE_SECURITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "litetx/transport.h"

/* The files of a security configuration as given, and where each came from (for messages). */
enum {
    LITE_SEC_F_CERT = 0,
    LITE_SEC_F_KEY = 1,
    LITE_SEC_F_CA = 2,
    LITE_SEC_F_PSK = 3,
    LITE_SEC_NF
};

/*
 * Check the credentials of sec->mode for `rank` and fill *sec: every file named by the mode is
 * readable and in its format, the key matches the certificate, the certificate is in its dates,
 * chains to the CA and (rank_check) names this rank; a PSK file holds 16..64 bytes in hex.
 * -LITE_ERR_CONFIG with a message naming the key, the path and where it came from.
 */
int lite_security_check(struct lite_security *sec, int rank, const char *const path[LITE_SEC_NF],
                        const char *const src[LITE_SEC_NF], bool rank_check, char *err,
                        size_t errlen);

/* The rank a certificate (an X509 *) names as "litetx-rank-<n>" in a DNS SAN or, without one,
 * its subject CN; -1 when it names none, or two different ones. */
int lite_security_cert_rank(const void *x509);

#endif
