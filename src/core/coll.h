/*
 * coll.h - shared pieces of the collectives.
 */
#ifndef LITE_COLL_H
#define LITE_COLL_H

#include "ctx.h"

/* Collective tags: the collective's sequence number (identical on every rank, since all ranks
 * start collectives in the same order) in the high bits, the step within it in the low 24, so
 * tags on the collective channel strictly increase per peer. */
static inline uint64_t lite_coll_tag(uint64_t seq, uint32_t step)
{
    return (seq << 24) | (step & 0xffffffu);
}

#endif /* LITE_COLL_H */
