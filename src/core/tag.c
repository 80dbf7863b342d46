/* tag.c - compose and split 64-bit tags: step | layer | level | seq, most significant first. */
#include <errno.h>

#include "lite_int.h"

#define SEQ_SHIFT   0
#define LEVEL_SHIFT (SEQ_SHIFT + LITE_TAG_SEQ_BITS)
#define LAYER_SHIFT (LEVEL_SHIFT + LITE_TAG_LEVEL_BITS)
#define STEP_SHIFT  (LAYER_SHIFT + LITE_TAG_LAYER_BITS)

_Static_assert(STEP_SHIFT + LITE_TAG_STEP_BITS == 64, "tag fields must fill 64 bits");

#define MASK(bits) ((1ull << (bits)) - 1)

LITE_API int lite_tag_compose(const lite_tag_parts_t *p, uint64_t *tag)
{
    if (!p || !tag)
        return -EINVAL;
    if (p->step > MASK(LITE_TAG_STEP_BITS) || p->layer > MASK(LITE_TAG_LAYER_BITS) ||
        p->level > MASK(LITE_TAG_LEVEL_BITS) || p->seq > MASK(LITE_TAG_SEQ_BITS))
        return -EINVAL;
    *tag = ((uint64_t)p->step << STEP_SHIFT) | ((uint64_t)p->layer << LAYER_SHIFT) |
           ((uint64_t)p->level << LEVEL_SHIFT) | ((uint64_t)p->seq << SEQ_SHIFT);
    return 0;
}

LITE_API int lite_tag_split(uint64_t tag, lite_tag_parts_t *p)
{
    if (!p)
        return -EINVAL;
    p->step = (uint32_t)((tag >> STEP_SHIFT) & MASK(LITE_TAG_STEP_BITS));
    p->layer = (uint32_t)((tag >> LAYER_SHIFT) & MASK(LITE_TAG_LAYER_BITS));
    p->level = (uint32_t)((tag >> LEVEL_SHIFT) & MASK(LITE_TAG_LEVEL_BITS));
    p->seq = (uint32_t)((tag >> SEQ_SHIFT) & MASK(LITE_TAG_SEQ_BITS));
    return 0;
}
