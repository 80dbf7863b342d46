/*
 * loop_gate.h - a test hook of the loop backend: hold every message the loop backends of this
 * process send, list them, and release them one by one in an order the test chooses (the order
 * of one sender to one receiver is kept), or cut a pair of ranks as a crash would. The core's
 * scripted protocol tests (tests/unit/test_core_scripted.c) drive the rendezvous, credits and
 * failure paths with it, step by step, without sleeps. Not part of any public interface.
 */
#ifndef LITE_LOOP_GATE_H
#define LITE_LOOP_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "litetx/transport.h"

/* One held message. */
struct lite_loop_held {
    uint64_t id;  /* for lite_loop_gate_release */
    int src, dst; /* ranks */
    bool bye;     /* the sender's close (finalize): hdr is meaningless */
    struct lite_msg_hdr hdr;
};

/* Hold messages from now on (true), or let them flow again (false: every held message is
 * delivered, in order, and the cuts are forgotten). */
void lite_loop_gate(bool on);

/* Copy up to max held messages, oldest first, into out; returns how many are held. */
size_t lite_loop_gate_list(struct lite_loop_held *out, size_t max);

/* Deliver held message `id` now: 0, -EAGAIN when an older message of the same sender to the
 * same receiver is still held (release that one first), -ENOENT when there is no such id. */
int lite_loop_gate_release(uint64_t id);

/* Break the link between ranks a and b: their held messages are dropped, later ones are lost,
 * and each side's core learns that the other is lost (-LITE_ERR_PEER_LOST). Returns the number
 * of held messages dropped, or -ENOSPC (too many cuts). */
int lite_loop_gate_cut(int a, int b);

#endif
