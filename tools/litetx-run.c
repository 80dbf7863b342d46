/*
 * litetx-run - start an N-rank liblitetx program on this machine, no external launcher needed.
 *
 *   litetx-run -n N [-t SECONDS] [-g SECONDS] [--transport NAME] [--root HOST:PORT] prog [args...]
 *
 * Each rank is a child process with LITETX_RANK, LITETX_WORLD_SIZE and LITETX_ROOT set (the root
 * defaults to a free port on 127.0.0.1). Exits 0 when every rank exited 0; otherwise with the
 * first failing rank's status (128 + signal for a signal). When one rank fails, the others get
 * -g seconds (default 30) to notice and exit before they are killed; -t bounds the whole run.
 */
#include <stdbool.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &l) != 0) {
        perror("litetx-run: cannot find a free port");
        exit(2);
    }
    close(fd);
    return ntohs(a.sin_port);
}

static void usage(void)
{
    fprintf(stderr, "usage: litetx-run -n N [-t timeout_s] [-g grace_s] [--transport NAME] "
                    "[--root HOST:PORT] program [args...]\n");
    exit(2);
}

static long parse_num(const char *s, const char *what, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) {
        fprintf(stderr, "litetx-run: %s must be an integer in [%ld, %ld], got \"%s\"\n", what, lo,
                hi, s);
        exit(2);
    }
    return v;
}

/* Sleep until a child's SIGCHLD (blocked in `set`) or the absolute time `until` (0: none). */
/* Sleep until a signal of `set` arrives or `until` passes; returns the signal, or 0. */
static int wait_child(const sigset_t *set, double until)
{
    if (!until) {
        int sig = sigwaitinfo(set, NULL);
        return sig > 0 ? sig : 0;
    }
    double left = until - now_s();
    if (left <= 0)
        return 0;
    struct timespec ts = {.tv_sec = (time_t)left,
                          .tv_nsec = (long)((left - (double)(time_t)left) * 1e9)};
    int sig = sigtimedwait(set, NULL, &ts);
    return sig > 0 ? sig : 0;
}

/*
 * What a rank cannot remove when it dies: libfabric's shm provider (the efa backend with
 * LITETX_EFA_PROVIDER=shm) keeps each endpoint's region in /dev/shm/<pid>:<uid>:<index> and
 * unlinks it when the endpoint closes; a rank killed, or ended with _exit as the fault tests'
 * crashing ranks are, leaves it behind (16 MiB each, some resident). The launcher removes those
 * of a rank that is gone but not yet reaped, so the pid cannot belong to anyone else yet.
 */
static void remove_shm_regions(pid_t pid)
{
    char prefix[48];
    int plen = snprintf(prefix, sizeof(prefix), "%ld:%ld:", (long)pid, (long)getuid());
    DIR *d = opendir("/dev/shm");
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));) {
        const char *idx = e->d_name + plen;
        if (strncmp(e->d_name, prefix, (size_t)plen) || !*idx ||
            strspn(idx, "0123456789") != strlen(idx))
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) != 0 && errno != ENOENT)
            fprintf(stderr, "litetx-run: cannot remove /dev/shm/%s: %s\n", e->d_name,
                    strerror(errno));
    }
    closedir(d);
}

int main(int argc, char **argv)
{
    int n = 0, i = 1;
    double timeout = 0, grace = 30;
    const char *transport = NULL, *root = NULL;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc)
            n = (int)parse_num(argv[++i], "-n", 1, 1024);
        else if (!strcmp(argv[i], "-t") && i + 1 < argc)
            timeout = (double)parse_num(argv[++i], "-t", 0, 86400);
        else if (!strcmp(argv[i], "-g") && i + 1 < argc)
            grace = (double)parse_num(argv[++i], "-g", 0, 3600);
        else if (!strcmp(argv[i], "--transport") && i + 1 < argc)
            transport = argv[++i];
        else if (!strcmp(argv[i], "--root") && i + 1 < argc)
            root = argv[++i];
        else if (!strcmp(argv[i], "--")) {
            i++;
            break;
        } else
            usage();
    }
    if (n < 1 || i >= argc)
        usage();

    char rootbuf[64], nbuf[16], rbuf[16];
    if (!root) {
        snprintf(rootbuf, sizeof(rootbuf), "127.0.0.1:%d", free_port());
        root = rootbuf;
    }
    snprintf(nbuf, sizeof(nbuf), "%d", n);
    pid_t *pids = calloc((size_t)n, sizeof(pid_t));
    if (!pids)
        return 2;
    /* SIGCHLD stays blocked here and is taken with sigtimedwait: the launcher sleeps until a
     * rank exits or a deadline passes. (It used to poll every 2 ms, which preempted a spinning
     * rank 500 times a second on a host with as many ranks as CPUs.) */
    sigset_t chld, old_mask;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    /* A launcher stopped by a signal (kill, ^C, a batch system's SIGTERM) passes it on to
     * the ranks and gives them the grace period before SIGKILL: left running, they would
     * outlive it, reparented to init. */
    static const int fwd[] = {SIGTERM, SIGINT, SIGHUP};
    for (size_t k = 0; k < sizeof(fwd) / sizeof(fwd[0]); k++)
        sigaddset(&chld, fwd[k]);
    sigprocmask(SIG_BLOCK, &chld, &old_mask);
    for (int r = 0; r < n; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("litetx-run: fork");
            for (int k = 0; k < r; k++)
                kill(pids[k], SIGKILL);
            return 2;
        }
        if (pid == 0) {
            sigprocmask(SIG_SETMASK, &old_mask, NULL);
            snprintf(rbuf, sizeof(rbuf), "%d", r);
            setenv("LITETX_RANK", rbuf, 1);
            setenv("LITETX_WORLD_SIZE", nbuf, 1);
            setenv("LITETX_LOCAL_SIZE", nbuf, 1); /* every rank runs on this host */
            setenv("LITETX_ROOT", root, 1);
            if (transport)
                setenv("LITETX_TRANSPORT", transport, 1);
            execvp(argv[i], argv + i);
            fprintf(stderr, "litetx-run: cannot run %s: %s\n", argv[i], strerror(errno));
            _exit(127);
        }
        pids[r] = pid;
    }

    int live = n, result = 0;
    double start = now_s(), kill_at = timeout > 0 ? start + timeout : 0;
    bool killed = false;
    while (live > 0) {
        /* Seen first without reaping: the rank's leftovers go while its pid is still its own. */
        siginfo_t si = {0};
        if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 && errno == ECHILD)
            break; /* nothing left to wait for (cannot happen while live > 0) */
        pid_t pid = si.si_pid;
        int status = 0;
        if (pid > 0) {
            remove_shm_regions(pid);
            waitpid(pid, &status, 0);
            int r = 0;
            while (r < n && pids[r] != pid)
                r++;
            if (r == n)
                continue;
            pids[r] = 0;
            live--;
            int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            if (code != 0) {
                if (!killed)
                    fprintf(stderr, "litetx-run: rank %d exited with status %d\n", r, code);
                if (result == 0)
                    result = code;
                double k = now_s() + grace;
                if (!kill_at || k < kill_at)
                    kill_at = k;
            }
            continue;
        }
        if (kill_at && now_s() >= kill_at && !killed) {
            fprintf(stderr, "litetx-run: %s; killing %d remaining rank(s)\n",
                    result ? "grace period over" : "timeout", live);
            for (int r = 0; r < n; r++)
                if (pids[r] > 0)
                    kill(pids[r], SIGKILL);
            killed = true;
            if (!result)
                result = 124;
        }
        int sig = wait_child(&chld, killed ? 0 : kill_at);
        if (sig && sig != SIGCHLD && !killed) {
            fprintf(stderr, "litetx-run: %s: passing it on to %d rank(s)\n", strsignal(sig), live);
            for (int r = 0; r < n; r++)
                if (pids[r] > 0)
                    kill(pids[r], sig);
            if (!result)
                result = 128 + sig;
            double k = now_s() + grace;
            if (!kill_at || k < kill_at)
                kill_at = k;
        }
    }
    free(pids);
    return result;
}
