/* wire.c - the frame header that stream transports (TCP, QUIC) put before every frame. */
#include <string.h>

#include "lite_int.h"

void lite_wire_encode(const struct lite_wire_hdr *h, uint8_t out[LITE_WIRE_HDR_LEN])
{
    lite_put16(out, LITE_WIRE_MAGIC);
    out[2] = LITE_WIRE_VERSION;
    out[3] = h->type;
    out[4] = h->channel;
    out[5] = h->flags;
    lite_put16(out + 6, h->credits);
    lite_put64(out + 8, h->tag);
    lite_put64(out + 16, h->len);
    lite_put64(out + 24, h->key);
    lite_put64(out + 32, h->offset);
    lite_put32(out + 40, h->imm);
    lite_put32(out + 44, (uint32_t)h->status);
}

int lite_wire_decode(const uint8_t in[LITE_WIRE_HDR_LEN], uint64_t max_len, struct lite_wire_hdr *h,
                     const char **why)
{
    const char *w = NULL;
    if (lite_get16(in) != LITE_WIRE_MAGIC)
        w = "bad magic (not a liblitetx peer)";
    else if (in[2] != LITE_WIRE_VERSION)
        w = "unsupported wire version";
    else if (in[3] < LITE_WIRE_HELLO || in[3] > LITE_WIRE_FENCE)
        w = "unknown frame type";
    else if (in[4] >= LITE_CHAN_COUNT)
        w = "unknown channel";
    if (!w) {
        h->type = in[3];
        h->channel = in[4];
        h->flags = in[5];
        h->credits = lite_get16(in + 6);
        h->tag = lite_get64(in + 8);
        h->len = lite_get64(in + 16);
        h->key = lite_get64(in + 24);
        h->offset = lite_get64(in + 32);
        h->imm = lite_get32(in + 40);
        h->status = (int32_t)lite_get32(in + 44);
        bool control = h->type == LITE_WIRE_HELLO || h->type == LITE_WIRE_BYE ||
                       h->type == LITE_WIRE_RMA_ACK || h->type == LITE_WIRE_FENCE;
        if (control && h->len != 0)
            w = "control frame with payload";
        else if (h->len > max_len)
            w = "payload length over the limit";
        else if (h->type == LITE_WIRE_WRITE &&
                 (h->flags & ~(LITE_WIRE_F_IMM | LITE_WIRE_F_NOACK | LITE_WIRE_F_STICKY)))
            w = "unknown flags on a write";
        else if (h->type == LITE_WIRE_HELLO && (h->flags & ~LITE_WIRE_F_BULK))
            w = "unknown flags on a hello";
        else if (h->type != LITE_WIRE_WRITE && h->type != LITE_WIRE_MSG &&
                 h->type != LITE_WIRE_HELLO && h->flags)
            w = "flags on a frame that takes none"; /* MSG flags belong to the core */
        else if (h->status > 0)
            w = "positive status";
        else if (h->offset > UINT64_MAX - h->len)
            w = "offset + length overflows";
    }
    if (w) {
        if (why)
            *why = w;
        return -LITE_ERR_PROTOCOL;
    }
    return 0;
}
