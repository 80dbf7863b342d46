/* log.c - leveled logging to stderr, prefixed with the process id so ranks can be told apart. */
#include <stdio.h>
#include <unistd.h>

#include "lite_int.h"

static int g_level = LITE_LOG_WARN;

void lite_log_set_level(int level)
{
    g_level = level;
}

int lite_log_get_level(void)
{
    return g_level;
}

void lite_log(int level, const char *fmt, ...)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    if (level > g_level || level < 0 || level > LITE_LOG_DEBUG)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "litetx[%d] %s: %s\n", (int)getpid(), names[level], line);
}
