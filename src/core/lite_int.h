/*
 * lite_int.h - the core's base: the environment and machine helpers, wait loops and logging
 * that every module uses (util.c, log.c, errors.c, wire.c, tag.c; the rest in tp_support.h).
 * Not installed. Each module above declares what it offers in a header of its own.
 */
#ifndef LITE_INT_H
#define LITE_INT_H

#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "litetx/litetx.h"
#include "litetx/transport.h"
#include "tp_support.h"

/* ---- environment and machine (util.c, time.c; the rest in tp_support.h) ---- */
/* lite_env_long's verdict: "" or the first invalid variable this thread read since the reset
 * ("LITETX_SPIN_US=\"abc\": must be an integer in 0..10000000"). lite_init fails with it. */
void lite_env_error_reset(void);
const char *lite_env_error(void);
/* CPUs in a kernel cpulist such as "0-3,8,10-11\n" (cpuset files), or 0 if it does not parse. */
long lite_cpulist_count(const char *s);

#define LITE_HIDDEN       __attribute__((visibility("hidden")))
#define LITE_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/*
 * The clock of one wait loop: its deadline and its spin phase (poll with timeout 0, then let
 * the backend sleep), read as seldom as a poll loop allows. A clock read costs ~45 ns in a VM
 * (kvm-clock), about as much as the library's own work per message in a shared-memory
 * ping-pong; most waits end within a few polls. So the first LITE_WAIT_UNTIMED polls read no
 * clock at all (the timeout and the spin start after them, a microsecond or so late), then one
 * poll in 16 reads it while spinning, every poll once the backend may sleep.
 *
 *   struct lite_waiter w;
 *   lite_waiter_start(&w, deadline_ns, 0, ctx->spin_ns);  // or (0, timeout_ms, ...)
 *   while (!done) {
 *       int ms = lite_waiter_next(&w);  // -ETIMEDOUT, else the backend's timeout
 *       if (ms < 0) return timed_out();
 *       progress(ms);
 *   }
 */
#define LITE_WAIT_UNTIMED 16

struct lite_waiter {
    int64_t deadline;   /* absolute (CLOCK_MONOTONIC ns); INT64_MAX: none */
    int64_t spin_until; /* backend timeout 0 until then */
    int64_t now;        /* last clock read */
    int64_t spin_ns;
    int timeout_ms; /* deadline not yet known: this many ms from the first timed poll */
    unsigned polls;
};

/* deadline_ns > 0: an absolute deadline; else timeout_ms from now (< 0: none). */
static inline void lite_waiter_start(struct lite_waiter *w, int64_t deadline_ns, int timeout_ms,
                                     int64_t spin_ns)
{
    *w = (struct lite_waiter){.deadline = deadline_ns,
                              .spin_until = INT64_MAX,
                              .spin_ns = spin_ns,
                              .timeout_ms = timeout_ms};
}

static inline int lite_waiter_next(struct lite_waiter *w)
{
    unsigned p = w->polls++;
    if (p < LITE_WAIT_UNTIMED)
        return 0;
    if (p == LITE_WAIT_UNTIMED) {
        w->now = lite_now_ns();
        if (w->deadline <= 0)
            w->deadline =
                w->timeout_ms < 0 ? INT64_MAX : w->now + (int64_t)w->timeout_ms * 1000000LL;
        w->spin_until = w->now + w->spin_ns;
    } else if (p % 16 == 0 || w->now >= w->spin_until) {
        w->now = lite_now_ns();
    }
    if (w->now >= w->deadline)
        return -ETIMEDOUT;
    return w->now < w->spin_until ? 0 : lite_ms_left(w->deadline, 100);
}

/* A spinning wait's pause hint: it tells the CPU that this is a wait loop, which frees the
 * core's pipeline for its other hardware thread (on an SMT sibling that may be the very peer we
 * wait for) and lowers the loop's power draw. x86 `pause`, arm64 `yield`. */
static inline void lite_cpu_relax(unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        __asm__ __volatile__("yield" ::: "memory");
#else
        __asm__ __volatile__("" ::: "memory");
#endif
    }
}

/* Something moved: spin again (imm_wait while writes keep arriving). */
static inline void lite_waiter_respin(struct lite_waiter *w)
{
    if (w->polls > LITE_WAIT_UNTIMED)
        w->spin_until = w->now + w->spin_ns;
}

/* ---- logging (log.c; lite_log and its macros: tp_support.h) ---- */
/* The calling thread's level (lite_init: the level of the context it creates). */
void lite_log_set_level(int level);
/* A context with this level starts (delta 1) or ends (-1): threads without a level of their
 * own log at the most verbose level of the live contexts. */
void lite_log_ctx_add(int level, int delta);
int lite_log_get_level(void);

#endif /* LITE_INT_H */
