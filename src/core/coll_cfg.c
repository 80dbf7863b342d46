/*
 * coll_cfg.c - the collectives' variables: LITETX_COLL_ALGO, LITETX_COLL_CHUNK and
 * LITETX_COLL_CHECK as lite_init reads them (config.c) and lite_coll_set changes them.
 * Pure functions, unit-tested in memory (tests/unit/test_coll_algo.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "coll_cfg.h"

static const char *const algo_names[LITE_COLL_ALGO_COUNT] = {"auto", "direct", "rsag", "pipe"};

const char *lite_coll_algo_name(int algo)
{
    return algo >= 0 && algo < LITE_COLL_ALGO_COUNT ? algo_names[algo] : "?";
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *s == '-')
        return -1;
    unsigned long long mul = 1;
    if (*end == 'k' || *end == 'K')
        mul = 1024ull, end++;
    else if (*end == 'm' || *end == 'M')
        mul = 1024ull * 1024, end++;
    else if (*end == 'g' || *end == 'G')
        mul = 1024ull * 1024 * 1024, end++;
    if (*end || v == 0 || v > (1ull << 40) / mul)
        return -1;
    *out = (size_t)(v * mul);
    return 0;
}

int lite_coll_cfg_parse(const char *algo, const char *chunk, const char *check,
                        struct lite_coll_cfg *out, char *err, size_t errlen)
{
    struct lite_coll_cfg c = {.algo = LITE_COLL_ALGO_AUTO, .chunk = 0, .check = true};
    if (algo && *algo) {
        int found = -1;
        for (int i = 0; i < LITE_COLL_ALGO_COUNT; i++)
            if (!strcasecmp(algo, algo_names[i]))
                found = i;
        if (found < 0) {
            lite_fmt(err, errlen, "LITETX_COLL_ALGO=\"%s\": expected auto, direct, rsag or pipe",
                     algo);
            return -LITE_ERR_CONFIG;
        }
        c.algo = found;
    }
    if (chunk && *chunk && strcasecmp(chunk, "auto") != 0) {
        if (parse_size(chunk, &c.chunk)) {
            lite_fmt(err, errlen,
                     "LITETX_COLL_CHUNK=\"%s\": expected auto or a byte count in [1, 2^40] "
                     "with an optional k, m or g suffix",
                     chunk);
            return -LITE_ERR_CONFIG;
        }
    }
    if (check && *check) {
        if (!strcmp(check, "1") || !strcasecmp(check, "on") || !strcasecmp(check, "true")) {
            c.check = true;
        } else if (!strcmp(check, "0") || !strcasecmp(check, "off") ||
                   !strcasecmp(check, "false")) {
            c.check = false;
        } else {
            lite_fmt(err, errlen, "LITETX_COLL_CHECK=\"%s\": expected 1 or 0", check);
            return -LITE_ERR_CONFIG;
        }
    }
    *out = c;
    return 0;
}
