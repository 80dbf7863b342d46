/*
 * coll_algo.c - the collectives' names, the algorithm selection function and the argument
 * header. Everything here is a pure function of its arguments (lite_init reads the environment,
 * config.c), so it is unit-tested in memory (tests/unit/test_coll_algo.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "coll.h"

const char *lite_coll_kind_name(int kind)
{
    static const char *const names[LITE_COLL_KIND_COUNT] = {
        "?",         "barrier",  "bcast",    "allgather", "reduce_scatter",
        "allreduce", "alltoall", "alltoallv"};
    return kind > 0 && kind < LITE_COLL_KIND_COUNT ? names[kind] : "?";
}

const char *lite_coll_dtype_name(int dtype)
{
    static const char *const names[LITE_DTYPE_COUNT] = {"f32", "f64", "f16", "bf16", "i8",
                                                        "u8",  "i32", "u32", "i64",  "u64"};
    return dtype >= 0 && dtype < LITE_DTYPE_COUNT ? names[dtype] : "?";
}

const char *lite_coll_op_name(int op)
{
    static const char *const names[LITE_REDOP_COUNT] = {"sum", "prod", "min", "max", "avg"};
    return op >= 0 && op < LITE_REDOP_COUNT ? names[op] : "-";
}

/* ---- selection ---- */

/* Chunk in elements for `len` elements: whole bytes rounded down to elements, at least one, and
 * large enough that there are at most 2^20 chunks. */
static size_t chunk_elems(size_t chunk_bytes, size_t esz, size_t len)
{
    size_t c = chunk_bytes / esz;
    if (c == 0)
        c = 1;
    size_t min = (len + (1u << 20) - 1) >> 20;
    return c < min ? min : c;
}

size_t lite_coll_auto_chunk(int world)
{
    size_t c = world > 1 ? LITE_COLL_SCRATCH / (2 * (size_t)(world - 1)) : LITE_COLL_SCRATCH;
    return c < LITE_COLL_CHUNK_MIN ? LITE_COLL_CHUNK_MIN : c;
}

void lite_coll_select(int kind, int world, size_t count, size_t esz,
                      const struct lite_coll_cfg *cfg, struct lite_coll_plan *out)
{
    size_t bytes = count * esz;
    size_t whole = count ? count : 1;
    int forced = cfg ? cfg->algo : LITE_COLL_ALGO_AUTO;
    size_t chunk = cfg && cfg->chunk ? cfg->chunk : 0;
    out->algo = LITE_COLL_ALGO_DIRECT;
    out->chunk_elems = whole;
    switch (kind) {
    case LITE_COLL_ALLREDUCE:
        if (forced == LITE_COLL_ALGO_DIRECT || forced == LITE_COLL_ALGO_RSAG)
            out->algo = forced;
        else
            out->algo = world > 1 && bytes > LITE_COLL_SMALL_ALLREDUCE ? LITE_COLL_ALGO_RSAG
                                                                       : LITE_COLL_ALGO_DIRECT;
        if (!chunk)
            chunk = out->algo == LITE_COLL_ALGO_DIRECT && bytes <= LITE_COLL_SMALL_ALLREDUCE
                        ? bytes
                        : lite_coll_auto_chunk(world);
        out->chunk_elems = chunk_elems(chunk, esz, count);
        break;
    case LITE_COLL_REDUCE_SCATTER: /* count = elements per rank */
        out->chunk_elems = chunk_elems(chunk ? chunk : lite_coll_auto_chunk(world), esz, count);
        break;
    case LITE_COLL_BCAST:
        if (forced == LITE_COLL_ALGO_DIRECT || forced == LITE_COLL_ALGO_PIPE)
            out->algo = forced;
        else
            out->algo = world >= 4 && bytes > LITE_COLL_PIPE_BCAST ? LITE_COLL_ALGO_PIPE
                                                                   : LITE_COLL_ALGO_DIRECT;
        if (out->algo == LITE_COLL_ALGO_PIPE)
            out->chunk_elems = chunk_elems(chunk ? chunk : LITE_COLL_CHUNK_DEFAULT, esz, count);
        break;
    default: /* barrier, allgather, alltoall(v): one direct exchange, unchunked */
        break;
    }
    if (out->chunk_elems > whole)
        out->chunk_elems = whole;
}

/* ---- the argument header ---- */

#define HDR_MAGIC 0x0143544cu /* "LTC" + version 1, little-endian */

void lite_coll_hdr_encode(const struct lite_coll_hdr *h, uint8_t out[LITE_COLL_HDR_LEN])
{
    lite_put32(out, HDR_MAGIC);
    out[4] = h->kind;
    out[5] = h->dtype;
    out[6] = h->redop;
    out[7] = h->algo;
    lite_put32(out + 8, (uint32_t)h->root);
    lite_put32(out + 12, 0);
    lite_put64(out + 16, h->chunk);
    lite_put64(out + 24, h->count);
    lite_put64(out + 32, h->pair);
}

int lite_coll_hdr_decode(const uint8_t in[LITE_COLL_HDR_LEN], struct lite_coll_hdr *h)
{
    if (lite_get32(in) != HDR_MAGIC || lite_get32(in + 12) != 0)
        return -LITE_ERR_PROTOCOL;
    h->kind = in[4];
    h->dtype = in[5];
    h->redop = in[6];
    h->algo = in[7];
    h->root = (int32_t)lite_get32(in + 8);
    h->chunk = lite_get64(in + 16);
    h->count = lite_get64(in + 24);
    h->pair = lite_get64(in + 32);
    return 0;
}

void lite_coll_hdr_describe(const struct lite_coll_hdr *h, char *buf, size_t len)
{
    char extra[64] = "";
    if (h->kind == LITE_COLL_BCAST)
        lite_fmt(extra, sizeof(extra), ", root=%d", (int)h->root);
    else if (h->kind == LITE_COLL_ALLREDUCE || h->kind == LITE_COLL_REDUCE_SCATTER)
        lite_fmt(extra, sizeof(extra), ", op=%s", lite_coll_op_name(h->redop));
    else if (h->kind == LITE_COLL_ALLTOALLV)
        lite_fmt(extra, sizeof(extra), ", sends %llu", (unsigned long long)h->pair);
    lite_fmt(buf, len, "%s(count=%llu, dtype=%s%s; algo=%s, chunk=%llu)",
             lite_coll_kind_name(h->kind), (unsigned long long)h->count,
             lite_coll_dtype_name(h->dtype), extra, lite_coll_algo_name(h->algo),
             (unsigned long long)h->chunk);
}
