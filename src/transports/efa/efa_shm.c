/*
 * efa_shm.c - regions that libfabric's shm provider left in /dev/shm.
 *
 * The provider keeps each endpoint's region in /dev/shm/<pid>:<uid>:<index> and unlinks it when
 * the endpoint closes or the process catches a fatal signal. A process killed with SIGKILL, or
 * ended with _exit, leaves its regions behind (16 MiB each, partly resident) until the host
 * reboots. litetx-run removes those of its own ranks; under any other launcher nothing did, and
 * a host running many short jobs filled /dev/shm. So a rank that opens the shm provider first
 * removes the regions of this user whose process no longer exists.
 *
 * Only a file whose name has exactly that form, whose uid field and owner are this user, and
 * whose pid answers ESRCH to kill(pid, 0) is removed: a region of a live process, of a zombie
 * (its pid is still taken), or of another user is left alone. In a container whose pid
 * namespace differs from that of another container sharing the same /dev/shm, a live process
 * there looks gone from here: LITETX_EFA_SHM_CLEAN=0 turns the clean-up off for such hosts.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "efa.h"

/* The pid of a region name "<pid>:<uid>:<index>" of this user, or 0 for any other name. */
static pid_t region_pid(const char *name, uid_t uid)
{
    char *end;
    errno = 0;
    long pid = strtol(name, &end, 10);
    if (errno || end == name || *end != ':' || pid <= 0 || name[0] < '0' || name[0] > '9')
        return 0;
    const char *u = end + 1;
    long owner = strtol(u, &end, 10);
    if (errno || end == u || *end != ':' || owner != (long)uid || u[0] < '0' || u[0] > '9')
        return 0;
    const char *idx = end + 1;
    if (!*idx || strspn(idx, "0123456789") != strlen(idx))
        return 0;
    return (pid_t)pid;
}

int lite_efa_shm_clean(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    uid_t uid = getuid();
    int removed = 0;
    for (struct dirent *e; (e = readdir(d));) {
        pid_t pid = region_pid(e->d_name, uid);
        if (pid <= 0 || pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH)
            continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
            st.st_uid != uid)
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0)
            removed++;
    }
    closedir(d);
    if (removed)
        LITE_INFO("%s: removed %d shm region(s) of processes that no longer exist from %s", EFA_LOG,
                  removed, dir);
    return removed;
}
