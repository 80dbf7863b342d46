/*
 * tunables.h - every LITETX_* variable the library knows: the core's own (this file's table)
 * and each compiled-in backend's (lite_transport_ops.tunables). litetx-info prints them;
 * lite_init warns about a LITETX_* variable in the environment that none of them is.
 */
#ifndef LITE_TUNABLES_H
#define LITE_TUNABLES_H

#include <stddef.h>

#include "litetx/transport.h"

/* The core's variables (lite_config_t keys, launcher and tuning variables), NULL-name ended. */
extern const struct lite_tunable lite_core_tunables[];

/* Calls fn for every known variable: the core's first, then each compiled-in backend's, with
 * `owner` "core" or the backend's name. Stops early when fn returns non-zero (and returns it). */
int lite_tunables_each(int (*fn)(const char *owner, const struct lite_tunable *t, void *arg),
                       void *arg);

/* The known variable called `name` (its owner in *owner), or NULL. */
const struct lite_tunable *lite_tunable_find(const char *name, const char **owner);

/* The known name closest to `name` (at most 3 edits away), or NULL. */
const char *lite_tunable_closest(const char *name);

/* Log one warning per LITETX_* variable of `envp` (NULL-ended, like environ) that is not
 * known, naming the closest known name; returns how many. `rank` goes in the message. */
int lite_tunables_warn_unknown(char *const *envp, int rank);

/* ---- types, ranges, and the values handed to backends ---- */

/* "int", "size", "bool", "enum", "string". */
const char *lite_tunable_type_name(int type);
/* The accepted values as text: "1..8", "0|1", "all|lazy|auto", "-" (string). */
void lite_tunable_range(const struct lite_tunable *t, char *buf, size_t len);
/* Check value v (non-empty) of t: 0 with *num (INT, SIZE, BOOL; ENUM: the word's index; STRING:
 * 0), or -LITE_ERR_CONFIG with a message naming the variable in why. */
int lite_tunable_parse(const struct lite_tunable *t, const char *v, int64_t *num, char *why,
                       size_t len);

/* A snapshot of the environment for the core's variables and backend `owner`'s (NULL: the
 * core's only), each checked against its type: what the core hands a backend (probe, open).
 * NULL: no memory. `owner` must outlive it. */
struct lite_tp_env *lite_tun_env_new(const char *owner);
/* The message of the first invalid value in the snapshot (naming the variable), or NULL. */
const char *lite_tun_env_error(const struct lite_tp_env *env);
void lite_tun_env_free(struct lite_tp_env *env);

/* The core's reader of its own numeric variables (INT, SIZE, BOOL, ENUM entries of the core's
 * table): the value when set, else dflt. Type and range are the table's, written once there; an
 * invalid value returns dflt and is recorded (lite_env_error), which fails lite_init naming it. */
long lite_tun_long(const char *name, long dflt);
/* Record msg as this thread's first invalid variable, unless one is recorded (util.c). */
void lite_env_error_note(const char *msg);

#endif
