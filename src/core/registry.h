/*
 * registry.h - the compiled-in transports (registry.c); the choice among them is
 * tp_select.h.
 * Not installed.
 */
#ifndef LITE_REGISTRY_H
#define LITE_REGISTRY_H

#include "lite_int.h"

/* The compiled-in transports, in auto-selection order (most capable first). */
const struct lite_transport_ops *const *lite_registry(size_t *count);

/* Copy `ops` into `out`, filling NULL ops with -ENOSYS stubs (and checking size/ABI). */
int lite_transport_fill(const struct lite_transport_ops *ops, struct lite_transport_ops *out);

#endif /* LITE_REGISTRY_H */
