/*
 * log.c - leveled logging to stderr, prefixed with the process id so ranks can be told apart.
 *
 * Each context has its own level, and several contexts may live in one process (one per thread:
 * the loop backend's ranks). A message has no context to ask, so the level is looked up by
 * thread: a thread that initialized a context uses that context's level (the last one it
 * initialized); any other thread (a context handed to another thread, a backend's helper) uses
 * the most verbose level among the live contexts, or warn when there are none. No context
 * overwrites another's level.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "lite_int.h"

#define LEVEL_UNSET (-2)

static _Thread_local int tl_level = LEVEL_UNSET;
static atomic_int g_live[LITE_LOG_DEBUG + 1]; /* live contexts per level */

void lite_log_set_level(int level)
{
    tl_level = level;
}

void lite_log_ctx_add(int level, int delta)
{
    if (level >= 0 && level <= LITE_LOG_DEBUG)
        atomic_fetch_add_explicit(&g_live[level], delta, memory_order_relaxed);
}

int lite_log_get_level(void)
{
    if (tl_level != LEVEL_UNSET)
        return tl_level;
    for (int l = LITE_LOG_DEBUG; l >= LITE_LOG_ERROR; l--)
        if (atomic_load_explicit(&g_live[l], memory_order_relaxed) > 0)
            return l;
    return LITE_LOG_WARN;
}

void lite_log(int level, const char *fmt, ...)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    if (level > lite_log_get_level() || level < 0 || level > LITE_LOG_DEBUG)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "litetx[%d] %s: %s\n", (int)getpid(), names[level], line);
}
