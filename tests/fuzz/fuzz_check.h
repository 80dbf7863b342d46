/* fuzz_check.h - what the fuzz targets share: an invariant check that survives NDEBUG (the
 * fuzz build is RelWithDebInfo) and ends the run the way libFuzzer reports as a crash. */
#ifndef LITE_FUZZ_CHECK_H
#define LITE_FUZZ_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond);           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* Input consumed front to back; reads past the end give zeros, so every input is usable. */
struct fuzz_in {
    const uint8_t *p;
    size_t n;
};

static inline uint8_t fuzz_u8(struct fuzz_in *in)
{
    if (in->n == 0)
        return 0;
    in->n--;
    return *in->p++;
}

/* Little-endian, `bytes` bytes of the input. */
static inline uint64_t fuzz_uint(struct fuzz_in *in, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)fuzz_u8(in) << (8 * i);
    return v;
}

static inline uint64_t fuzz_u64(struct fuzz_in *in)
{
    return fuzz_uint(in, 8);
}

static inline uint32_t fuzz_u32(struct fuzz_in *in)
{
    return (uint32_t)fuzz_uint(in, 4);
}

/* The next NUL-terminated string of the input (without its NUL) copied into out[cap]. */
static inline size_t fuzz_str(struct fuzz_in *in, char *out, size_t cap)
{
    size_t k = 0;
    while (in->n > 0) {
        uint8_t c = fuzz_u8(in);
        if (c == 0)
            break;
        if (k + 1 < cap)
            out[k++] = (char)c;
    }
    out[k] = '\0';
    return k;
}

#endif /* LITE_FUZZ_CHECK_H */
