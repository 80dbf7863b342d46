/* util.c - small helpers: clocks, bounded formatting, CPU lists, tuning variables. */
#include <ctype.h>
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

long lite_env_long(const char *name, long lo, long hi, long dflt)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    /* strict decimal, as the configuration's integers: no spaces, no hex, no trailing text */
    bool digits = isdigit((unsigned char)v[0]) ||
                  ((v[0] == '-' || v[0] == '+') && isdigit((unsigned char)v[1]));
    if (digits && *end == 0 && errno == 0 && n >= lo && n <= hi)
        return n;
    LITE_WARN("%s=\"%s\" ignored: must be an integer in %ld..%ld; using %ld", name, v, lo, hi,
              dflt);
    return dflt;
}
