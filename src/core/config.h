/*
 * config.h - a context's resolved configuration and its resolver (config.c).
 * Not installed.
 */
#ifndef LITE_CONFIG_H
#define LITE_CONFIG_H

#include "coll_cfg.h"
#include "lite_int.h"

#define LITE_HOST_MAX 256
#define LITE_NAME_MAX 32

/* A fully resolved configuration: every field has a concrete value. */
struct lite_settings {
    int rank;
    int world_size;
    char root_host[LITE_HOST_MAX];
    uint16_t root_port;
    char transport[LITE_NAME_MAX]; /* "auto" or a name */
    int log_level;
    int init_timeout_ms;      /* >= 0 or LITE_TIMEOUT_INFINITE */
    int op_timeout_ms;        /* >= 0 or LITE_TIMEOUT_INFINITE */
    int credits;              /* eager slots granted to each peer */
    int rndv_threshold;       /* bytes from which messages go by rendezvous */
    bool rndv_default;        /* rndv_threshold set by nobody: the backend's preference applies */
    struct lite_security sec; /* security.c: checked credentials (mode LITE_SEC_OFF: none) */
    int reconnect_timeout_ms; /* resume a broken connection for this long; 0: a break is final */
    /* The collectives': from the environment at init, then lite_coll_set's. */
    struct lite_coll_cfg coll;
};

/* Environment lookup, injectable so tests need not touch the process environment. */
typedef const char *(*lite_getenv_fn)(const char *name, void *arg);

/*
 * Resolve cfg (NULL = all unset) with the precedence documented on lite_config_t. On failure
 * returns -LITE_ERR_CONFIG and writes a message naming the key and the source into err.
 */
int lite_settings_resolve(const lite_config_t *cfg, lite_getenv_fn getenv_fn, void *getenv_arg,
                          struct lite_settings *out, char *err, size_t errlen);

/* Parse "host:port" or "[v6]:port"; -EINVAL on anything else. */
int lite_parse_hostport(const char *s, char *host, size_t hostlen, uint16_t *port);

#endif /* LITE_CONFIG_H */
