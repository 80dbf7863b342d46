/*
 * coll_cfg.h - the collectives' variables (LITETX_COLL_ALGO, _CHUNK, _CHECK) and
 * their parser (coll_cfg.c). Not installed.
 */
#ifndef LITE_COLL_CFG_H
#define LITE_COLL_CFG_H

#include "lite_int.h"

#define LITE_COLL_ALGO_COUNT 4 /* enum lite_coll_algo's values */

/* The collectives' configuration: LITETX_COLL_ALGO, LITETX_COLL_CHUNK and LITETX_COLL_CHECK as
 * read by lite_init, then whatever lite_coll_set gave the context. */
struct lite_coll_cfg {
    int algo;     /* enum lite_coll_algo; AUTO unless forced */
    size_t chunk; /* pipeline chunk in bytes; 0 = chosen by size */
    bool check;   /* exchange argument headers and refuse mismatches (default on) */
};
/* Parse the three variables' values (NULL or "" = default). -LITE_ERR_CONFIG with
 * err naming the variable and the accepted values when one is invalid. */
int lite_coll_cfg_parse(const char *algo, const char *chunk, const char *check,
                        struct lite_coll_cfg *out, char *err, size_t errlen);

/* The name of an enum lite_coll_algo value ("?" when out of range). */
const char *lite_coll_algo_name(int algo);

#endif /* LITE_COLL_CFG_H */
