/* util.c - small helpers: clocks, bounded formatting, CPU lists. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "lite_int.h"

int64_t lite_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t lite_deadline_ns(int timeout_ms)
{
    if (timeout_ms < 0)
        return INT64_MAX;
    return lite_now_ns() + (int64_t)timeout_ms * 1000000LL;
}

int lite_ms_left(int64_t deadline_ns, int cap_ms)
{
    if (deadline_ns == INT64_MAX)
        return cap_ms;
    int64_t left = (deadline_ns - lite_now_ns() + 999999) / 1000000;
    if (left < 0)
        return 0;
    return left > cap_ms ? cap_ms : (int)left;
}

void lite_fmt(char *buf, size_t len, const char *fmt, ...)
{
    if (!buf || len == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

long lite_cpulist_count(const char *s)
{
    long n = 0;
    while (*s && *s != '\n') {
        char *end;
        long a = strtol(s, &end, 10), b = a;
        if (end == s || a < 0)
            return 0;
        if (*end == '-') {
            s = end + 1;
            b = strtol(s, &end, 10);
            if (end == s || b < a)
                return 0;
        }
        if (*end != ',' && *end != '\n' && *end)
            return 0;
        n += b - a + 1;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}
