/*
 * bootstrap_test.c - the bootstrap root under load, each a mode run under litetx-run:
 *   hostile   every rank starts once undisturbed (timed); then a helper process of rank 1 holds
 *             silent, slow (a byte per 100 ms), garbage and half-open connections to the root's
 *             port (more than the root holds) before the ranks start again and keeps opening
 *             more while they do: the second start-up (init timeout 5 s) must succeed within
 *             3 s of the first
 *   crowd     init, barrier, finalize: many ranks meeting the root at once (rank 0 prints the
 *             time init took)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mp_common.h"

#define INIT_TIMEOUT_MS 5000
#define MAX_SLOWDOWN_S  3.0
#define STAGGER_US      300000 /* non-root ranks start this much later: the strangers come first */
#define HELPER_S        8.0    /* the helper gives up after this long whatever happens */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int root_port(void)
{
    const char *v = getenv("LITETX_ROOT");
    CHECK(v && strrchr(v, ':'), "LITETX_ROOT not set (run under litetx-run)");
    return atoi(strrchr(v, ':') + 1);
}

/* A connection to 127.0.0.1:port, or -1 when nothing listens yet. */
static int try_connect(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static double init_timed(lite_ctx_t **ctx)
{
    lite_config_t cfg = lite_config_default();
    cfg.init_timeout_ms = INIT_TIMEOUT_MS;
    double t0 = now_s();
    int rc = lite_init(&cfg, ctx);
    double took = now_s() - t0;
    CHECK(rc == 0, "lite_init after %.2f s: %s: %s", took, lite_strerror(rc), lite_init_error());
    mp_rank = lite_rank(*ctx);
    return took;
}

/*
 * The helper: strangers at the root's port. A bootstrap hello header starts with the magic
 * "LTBS" (docs/PROTOCOL.md); the slow ones dribble a plausible header, so the root cannot tell
 * them from a rank until the bytes run out.
 */
static void helper(int port, int world)
{
    enum { SILENT = 48, SLOW = 3, MORE = 150 };
    /* magic, type 1 (hello), a rank beyond the world, the right world size, no payload */
    uint8_t hello_start[20] = {'L', 'T', 'B', 'S',           1, 0, 0, 0, (uint8_t)(world + 5),
                               0,   0,   0,   (uint8_t)world};
    static const char http[] = "GET / HTTP/1.0\r\n\r\n";
    double start = now_s();
    int first = -1;
    for (int i = 0; i < 500 && first < 0 && now_s() - start < HELPER_S; i++) {
        first = try_connect(port); /* the root is not listening yet: wait for it */
        if (first < 0)
            usleep(10000);
    }
    if (first < 0)
        _exit(2);
    int fds[SILENT + 2 * SLOW + 4 + MORE], n = 0;
    fds[n++] = first;
    for (int i = 1; i < SILENT; i++) /* silent: connected, nothing said */
        fds[n++] = try_connect(port);
    int slow[2 * SLOW];
    for (int i = 0; i < 2 * SLOW; i++) /* slow: a byte per tick, half of them garbage */
        slow[i] = fds[n++] = try_connect(port);
    for (int i = 0; i < 2; i++) { /* garbage, then silence */
        int fd = fds[n++] = try_connect(port);
        if (fd >= 0)
            send(fd, http, sizeof(http) - 1, MSG_NOSIGNAL);
    }
    for (int i = 0; i < 2; i++) { /* half-open: we will send nothing more (one after a start) */
        int fd = fds[n++] = try_connect(port);
        if (fd >= 0 && i == 1)
            send(fd, hello_start, 6, MSG_NOSIGNAL);
        if (fd >= 0)
            shutdown(fd, SHUT_WR);
    }
    /* While the ranks start: a tick each 20 ms, another silent stranger; every fifth tick, a
     * byte from each slow one. More strangers than the root holds: the oldest give way. */
    for (int tick = 0; tick < 400 && now_s() - start < HELPER_S; tick++) {
        if (tick < MORE)
            fds[n++] = try_connect(port);
        for (int i = 0; i < 2 * SLOW && tick % 5 == 0; i++) {
            uint8_t c = i < SLOW ? hello_start[(tick / 5) % sizeof(hello_start)]
                                 : (uint8_t)http[(tick / 5) % (sizeof(http) - 1)];
            if (slow[i] >= 0 && send(slow[i], &c, 1, MSG_NOSIGNAL) != 1) {
                close(slow[i]);
                slow[i] = -1;
            }
        }
        usleep(20000);
    }
    (void)fds;
    _exit(0);
}

static void hostile(void)
{
    lite_ctx_t *ctx = NULL;
    CHECK(getenv("LITETX_RANK") && getenv("LITETX_WORLD_SIZE"), "run under litetx-run");
    int rank = atoi(getenv("LITETX_RANK"));
    if (rank != 0)
        usleep(STAGGER_US);
    double base = init_timed(&ctx);
    CHECK_RC(ctx, lite_barrier(ctx, 30000));
    CHECK_RC(ctx, lite_finalize(ctx));

    pid_t pid = -1;
    if (rank == 1) {
        pid = fork();
        CHECK(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0)
            helper(root_port(), atoi(getenv("LITETX_WORLD_SIZE")));
    }
    if (rank != 0)
        usleep(STAGGER_US);
    double molested = init_timed(&ctx);
    CHECK(molested < base + MAX_SLOWDOWN_S,
          "init took %.2f s among strangers, %.2f s without (bound: %.1f s more)", molested, base,
          MAX_SLOWDOWN_S);
    int me = lite_rank(ctx), n = lite_world_size(ctx);
    uint32_t v = (uint32_t)me, got = 0;
    lite_request_t *s;
    CHECK_RC(ctx, lite_isend(ctx, (me + 1) % n, 1, &v, sizeof(v), &s));
    CHECK_RC(ctx, lite_recv(ctx, (me + n - 1) % n, 1, &got, sizeof(got), NULL, 30000));
    CHECK_RC(ctx, lite_wait(ctx, s, 30000, NULL));
    CHECK(got == (uint32_t)((me + n - 1) % n), "ring message holds %u", got);
    CHECK_RC(ctx, lite_finalize(ctx));
    if (pid > 0) {
        int st = 0;
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    printf("rank %d: init %.3f s undisturbed, %.3f s among strangers\n", me, base, molested);
}

static void crowd(void)
{
    lite_ctx_t *ctx = NULL;
    lite_config_t cfg = lite_config_default();
    double t0 = now_s();
    int rc = lite_init(&cfg, &ctx);
    double took = now_s() - t0;
    CHECK(rc == 0, "lite_init after %.2f s: %s: %s", took, lite_strerror(rc), lite_init_error());
    mp_rank = lite_rank(ctx);
    CHECK_RC(ctx, lite_barrier(ctx, 120000));
    if (mp_rank == 0)
        printf("rank 0: %d ranks met in %.3f s\n", lite_world_size(ctx), took);
    CHECK_RC(ctx, lite_finalize(ctx));
}

int main(int argc, char **argv)
{
    CHECK(argc == 2, "usage: bootstrap_test hostile|crowd");
    if (!strcmp(argv[1], "hostile"))
        hostile();
    else if (!strcmp(argv[1], "crowd"))
        crowd();
    else
        CHECK(0, "unknown mode %s", argv[1]);
    return 0;
}
