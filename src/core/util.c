/* util.c - small helpers: clocks, bounded formatting, CPU lists, tuning variables. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
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

/* Far beyond any kernel's CPU numbers (NR_CPUS is at most 8192): a larger one is no cpulist,
 * and a range up to LONG_MAX would overflow the count. */
#define CPULIST_MAX (1L << 22)

long lite_cpulist_count(const char *s)
{
    long n = 0;
    while (*s && *s != '\n') {
        char *end;
        long a = strtol(s, &end, 10), b = a;
        if (end == s || a < 0 || a > CPULIST_MAX)
            return 0;
        if (*end == '-') {
            s = end + 1;
            b = strtol(s, &end, 10);
            if (end == s || b < a || b > CPULIST_MAX)
                return 0;
        }
        if (*end != ',' && *end != '\n' && *end)
            return 0;
        n += b - a + 1;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

/* The first invalid tuning variable this thread read since lite_env_error_reset(): lite_init
 * resets it, lets the core and the backend read theirs, and fails naming it. Per thread, since
 * contexts are started on several threads at once (ranks as threads). */
static _Thread_local char env_error[256];

void lite_env_error_reset(void)
{
    env_error[0] = 0;
}

const char *lite_env_error(void)
{
    return env_error;
}

void lite_env_error_note(const char *msg)
{
    if (!env_error[0])
        lite_fmt(env_error, sizeof(env_error), "%s", msg);
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
    if (!env_error[0])
        lite_fmt(env_error, sizeof(env_error), "%s=\"%s\": must be an integer in %ld..%ld", name, v,
                 lo, hi);
    return dflt;
}

/* Descriptors open in this process now (the entries of /proc/self/fd less the one reading it),
 * or 64 where /proc is not mounted. */
static long fds_open(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 64;
    long n = -1; /* the directory's own descriptor */
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

int lite_fd_reserve(long more, char *why, size_t why_len)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 0; /* nothing known: the calls that open descriptors will say */
    /* a margin for what the application and the libraries under us open meanwhile */
    long want = fds_open() + more + 64;
    if (rl.rlim_cur == RLIM_INFINITY || (long)rl.rlim_cur >= want)
        return 0;
    if (rl.rlim_max == RLIM_INFINITY || (long)rl.rlim_max >= want) {
        long was = (long)rl.rlim_cur;
        rl.rlim_cur = (rlim_t)want;
        if (setrlimit(RLIMIT_NOFILE, &rl) == 0) {
            LITE_INFO("raised the soft file descriptor limit (RLIMIT_NOFILE) from %ld to %ld", was,
                      want);
            return 0;
        }
    }
    lite_fmt(why, why_len,
             "needs about %ld file descriptors, but the limit (RLIMIT_NOFILE) is %ld with a hard "
             "limit of %ld; raise it (ulimit -n %ld)",
             want, (long)rl.rlim_cur, rl.rlim_max == RLIM_INFINITY ? -1L : (long)rl.rlim_max, want);
    return -EMFILE;
}
