/*
 * tp_log.c - the backends' side of logging: LITE_ERROR .. LITE_DEBUG in a backend format the
 * line here and hand it to the sink the core gave (lite_tp_env.log), so a backend never reads
 * or writes the core's log state. Compiled with the backends (LITE_IN_BACKEND). The core hands
 * every backend the same two functions, so one process-wide copy of them serves all; the level
 * is asked of the sink at each line (it is the calling thread's context's).
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "tp_support.h"

typedef void (*sink_fn)(int level, const char *msg);
typedef int (*level_fn)(void);

/* Until a probe or open attaches the core's sink: warnings and errors to stderr. */
static void fallback_log(int level, const char *msg)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    fprintf(stderr, "litetx[%d] %s: %s\n", (int)getpid(), names[level], msg);
}

static int fallback_level(void)
{
    return LITE_LOG_WARN;
}

static _Atomic(sink_fn) g_sink = fallback_log;
static _Atomic(level_fn) g_level = fallback_level;

void lite_tp_env_attach(const struct lite_tp_env *env)
{
    if (!env || env->size < offsetof(struct lite_tp_env, core) || !env->log || !env->log_level)
        return;
    atomic_store_explicit(&g_sink, env->log, memory_order_relaxed);
    atomic_store_explicit(&g_level, env->log_level, memory_order_relaxed);
}

void lite_tp_log(int level, const char *fmt, ...)
{
    if (level < LITE_LOG_ERROR || level > LITE_LOG_DEBUG)
        return;
    if (level > atomic_load_explicit(&g_level, memory_order_relaxed)())
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    atomic_load_explicit(&g_sink, memory_order_relaxed)(level, line);
}
