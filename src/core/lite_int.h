/*
 * lite_int.h - internal declarations shared by the core's modules. Not installed.
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

/* ---- configuration (config.c) ---- */
#define LITE_HOST_MAX 256
#define LITE_NAME_MAX 32

/* The collectives' configuration: LITETX_COLL_ALGO, LITETX_COLL_CHUNK and LITETX_COLL_CHECK as
 * read by lite_init, then whatever lite_coll_set gave the context. */
struct lite_coll_cfg {
    int algo;     /* enum lite_coll_algo; AUTO unless forced */
    size_t chunk; /* pipeline chunk in bytes; 0 = chosen by size */
    bool check;   /* exchange argument headers and refuse mismatches (default on) */
};
/* Parse the three variables' values (NULL or "" = default; coll_algo.c). -LITE_ERR_CONFIG with
 * err naming the variable and the accepted values when one is invalid. */
int lite_coll_cfg_parse(const char *algo, const char *chunk, const char *check,
                        struct lite_coll_cfg *out, char *err, size_t errlen);

/* A fully resolved configuration: every field has a concrete value. */
struct lite_settings {
    int rank;
    int world_size;
    char root_host[LITE_HOST_MAX];
    uint16_t root_port;
    char transport[LITE_NAME_MAX]; /* "auto" or a name */
    int log_level;
    int init_timeout_ms;      /* >= 0 or LITE_TIMEOUT_INFINITE */
    int op_timeout_ms;        /* >= 0 or LITE_TIMEOUT_INFINITE */
    int credits;              /* eager slots granted to each peer */
    int rndv_threshold;       /* bytes from which messages go by rendezvous */
    bool rndv_default;        /* rndv_threshold set by nobody: the backend's preference applies */
    struct lite_security sec; /* security.c: checked credentials (mode LITE_SEC_OFF: none) */
    int reconnect_timeout_ms; /* resume a broken connection for this long; 0: a break is final */
    /* The collectives': from the environment at init, then lite_coll_set's. */
    struct lite_coll_cfg coll;
};

/* Environment lookup, injectable so tests need not touch the process environment. */
typedef const char *(*lite_getenv_fn)(const char *name, void *arg);

/*
 * Resolve cfg (NULL = all unset) with the precedence documented on lite_config_t. On failure
 * returns -LITE_ERR_CONFIG and writes a message naming the key and the source into err.
 */
int lite_settings_resolve(const lite_config_t *cfg, lite_getenv_fn getenv_fn, void *getenv_arg,
                          struct lite_settings *out, char *err, size_t errlen);

/* Parse "host:port" or "[v6]:port"; -EINVAL on anything else. */
int lite_parse_hostport(const char *s, char *host, size_t hostlen, uint16_t *port);

/* ---- transport registry (registry.c) ---- */
/* The compiled-in transports, in auto-selection order (most capable first). */
const struct lite_transport_ops *const *lite_registry(size_t *count);

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

/* Copy `ops` into `out`, filling NULL ops with -ENOSYS stubs (and checking size/ABI). */
int lite_transport_fill(const struct lite_transport_ops *ops, struct lite_transport_ops *out);

/* ---- bootstrap (bootstrap.c) ---- */
struct lite_bootstrap;
/* Rank 0 starts listening at the root address; the others connect to it, retrying until the
 * deadline. With world_size 1 nothing is opened. */
int lite_bootstrap_connect(const struct lite_settings *s, int64_t deadline_ns,
                           struct lite_bootstrap **out, char *why, size_t why_len);
/* The numeric address of this host's interface toward the root (to publish to the others). */
int lite_bootstrap_local_host(struct lite_bootstrap *b, char *host, size_t len);
/* What each rank publishes in the bootstrap: the settings every rank must share (wire.c-style
 * header, context.c), then the transport's address blob. */
#define LITE_BOOT_HDR_LEN  16
#define LITE_BOOT_BLOB_MAX (LITE_TRANSPORT_ADDR_MAX + LITE_BOOT_HDR_LEN)
/* Gather every rank's blob (at most LITE_BOOT_BLOB_MAX bytes) at the root and send the
 * table to all. On success blobs[r]/lens[r] hold rank r's blob (free with
 * lite_bootstrap_free_blobs). A rank that does not arrive in time gives every rank -ETIMEDOUT
 * with the missing ranks named in why. */
int lite_bootstrap_allgather(struct lite_bootstrap *b, const void *blob, size_t len,
                             int64_t deadline_ns, void ***blobs, size_t **lens, char *why,
                             size_t why_len);
/* A barrier over the bootstrap connections (ends init). */
int lite_bootstrap_barrier(struct lite_bootstrap *b, int64_t deadline_ns, char *why,
                           size_t why_len);
void lite_bootstrap_close(struct lite_bootstrap *b);
/* The decoders of the bootstrap's frames (bytes off the network; tests/fuzz/fuzz_bootstrap.c).
 * A frame starts with a 20-byte header: u32 magic | u32 type | u32 rank | u32 world | u32 len. */
#define LITE_BOOT_FRAME_HDR 20
struct lite_boot_frame {
    uint32_t type, rank, world, len;
};
/* 0, or -LITE_ERR_PROTOCOL for a wrong magic, an unknown type or a payload over 16 MiB. */
int lite_bootstrap_frame_decode(const uint8_t *h, struct lite_boot_frame *f);
/* The root's check of a header a joining rank sent first: 0, or -LITE_ERR_PROTOCOL with why. */
int lite_bootstrap_hello_check(const uint8_t *h, const char **bad);
/* A TABLE payload of `len` bytes: per rank u32 length | bytes. blobs[r]/lens[r] for r < world
 * (malloc'd; on failure those set so far stay for the caller to free), or -LITE_ERR_PROTOCOL. */
int lite_bootstrap_table_parse(const uint8_t *p, uint32_t len, int world, void **blobs,
                               size_t *lens);
/* The code an ABORT frame carries in its rank field (or, from an older root, in its reason). */
int lite_bootstrap_abort_code(uint32_t code, const char *reason);
void lite_bootstrap_free_blobs(void **blobs, size_t *lens, int n);

#endif /* LITE_INT_H */
