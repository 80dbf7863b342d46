/*
 * rdma_stripe.c - how a one-sided op is cut into pieces over several rails (NICs). Large ops are
 * striped so every rail carries a near-equal share; every piece also respects the device's
 * largest message. Completion is order-free: the op is done when every piece is, and its
 * immediate (if any) is sent once, after all pieces (rdma_rma.c).
 */
#include "transports/rdma/rdma_logic.h"

static uint64_t div_up(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

size_t lite_rdma_stripe_plan(uint64_t len, uint32_t nrails, uint32_t first_rail,
                             uint64_t stripe_min, uint64_t align, uint64_t max_piece,
                             struct lite_rdma_piece *out, size_t max_out)
{
    if (nrails == 0)
        nrails = 1;
    if (align == 0)
        align = 1;
    if (max_piece == 0)
        max_piece = UINT64_MAX;
    if (stripe_min == 0)
        stripe_min = 1;
    first_rail %= nrails;
    /* Stripes: as many rails as give each at least stripe_min bytes. */
    uint64_t k = 1;
    if (nrails > 1 && len >= 2 * stripe_min) {
        k = len / stripe_min;
        if (k > nrails)
            k = nrails;
    }
    uint64_t stripe = k == 1 ? len : div_up(div_up(len, k), align) * align;
    size_t n = 0;
    uint64_t off = 0;
    for (uint64_t s = 0; s < k; s++) {
        uint64_t end = s == k - 1 ? len : off + stripe;
        if (end > len)
            end = len;
        uint32_t rail = (uint32_t)((first_rail + s) % nrails);
        /* each stripe in pieces of at most max_piece; a zero-length op is still one piece */
        do {
            uint64_t l = end - off > max_piece ? max_piece : end - off;
            if (n < max_out)
                out[n] = (struct lite_rdma_piece){.off = off, .len = l, .rail = rail};
            n++;
            off += l;
        } while (off < end);
        if (off >= len)
            break;
    }
    return n;
}
