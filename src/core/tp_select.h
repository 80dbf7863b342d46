/*
 * tp_select.h - the choice of a transport among the compiled-in ones (tp_select.c). Not
 * installed.
 */
#ifndef LITE_TP_SELECT_H
#define LITE_TP_SELECT_H

#include "lite_int.h"

/*
 * Pick a transport from `table` by name ("auto" = the first whose probe succeeds). A named
 * transport that is absent or unusable is an error (-LITE_ERR_NO_TRANSPORT, reason in why),
 * never a silent fallback. When auto succeeds, why names the transports it passed over and
 * why ("" when none): the caller reports it once per job (lite_init: rank 0 at warn level).
 */
int lite_transport_select(const struct lite_transport_ops *const *table, size_t count,
                          const char *name, const struct lite_transport_ops **out, char *why,
                          size_t why_len);

/* lite_transport_select, among the transports that have every capability bit of `need`: a
 * named one without them is refused (-LITE_ERR_NO_TRANSPORT, saying which), "auto" skips them.
 * `need_why` says why they are needed ("security is ca"). */
int lite_transport_select_caps(const struct lite_transport_ops *const *table, size_t count,
                               const char *name, uint32_t need, const char *need_why,
                               const struct lite_transport_ops **out, char *why, size_t why_len);

#endif /* LITE_TP_SELECT_H */
