/*
 * kill_soak.c - one trial of the kill-a-peer soak (tests/mp/kill_soak.sh runs many): the ranks
 * loop over mixed traffic (allreduce of 1 MiB, alltoall, small and large send/recv in a ring,
 * write_imm + lite_imm_wait in a ring) until rank KILL_SOAK_VICTIM sends itself SIGKILL,
 * from a timer thread so that it dies at an arbitrary instruction (inside the provider too),
 * KILL_SOAK_DELAY_MS after the start barrier.
 *
 * Every survivor must then end each op it has pending (an error, or done where the op did not
 * need the lost rank), learn the loss (a send to the lost rank fails at once with a detail
 * naming it), finalize and exit, all within KILL_SOAK_BOUND_MS of the kill (default: the op
 * timeout + 3 s). It prints "kill_soak: rank R ok ..." when it did; the script counts those and
 * treats a survivor still running past the bound as a hang.
 *
 * Environment: KILL_SOAK_VICTIM (rank), KILL_SOAK_DELAY_MS, KILL_SOAK_BOUND_MS (optional),
 * KILL_SOAK_PIDDIR (optional: each rank writes its pid to rank.R.pid there, for the script).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "mp_common.h"

#define ALLREDUCE_FLOATS (256 * 1024) /* 1 MiB */
#define A2A_BYTES        (16 * 1024)  /* per peer */
#define SMALL_BYTES      64
#define LARGE_BYTES      (256 * 1024) /* above the rendezvous threshold */
#define WIMM_BYTES       (64 * 1024)
#define MAX_ITERS        100000 /* the loop ends long before: the victim dies within seconds */
#define MAX_ERRORS       8

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int env_or(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

static int victim_delay_ms;

static void *killer(void *arg)
{
    (void)arg;
    struct timespec ts = {.tv_sec = victim_delay_ms / 1000,
                          .tv_nsec = (long)(victim_delay_ms % 1000) * 1000000L};
    for (int i = 0; i < 1000 && nanosleep(&ts, &ts) != 0; i++) {
    }
    raise(SIGKILL);
    return NULL;
}

struct err_rec {
    const char *op;
    int peer; /* -1: a collective */
    int rc;
    char detail[240];
};

static struct err_rec errs[MAX_ERRORS];
static int nerrs;
static double first_err_at;

static void note_peer(lite_ctx_t *ctx, const char *op, int peer, int rc)
{
    if (!rc)
        return;
    if (!nerrs)
        first_err_at = now_s();
    if (nerrs < MAX_ERRORS) {
        errs[nerrs].op = op;
        errs[nerrs].peer = peer;
        errs[nerrs].rc = rc;
        snprintf(errs[nerrs].detail, sizeof(errs[nerrs].detail), "%s", lite_last_error(ctx));
    }
    nerrs++;
}

static void note(lite_ctx_t *ctx, const char *op, int rc)
{
    note_peer(ctx, op, -1, rc);
}

/* The ops of one step share one deadline (the op timeout from the step's start), so a step
 * ends within the op timeout however many of its ops wait for a rank that left. */
static double step_end;

static int ms_left(void)
{
    double left = (step_end - now_s()) * 1000.0;
    return left < 1 ? 1 : (int)left;
}

/* Wait for a request that was started (NULL: its start failed and was noted). */
static void wait_req(lite_ctx_t *ctx, const char *op, int peer, lite_request_t *r)
{
    if (!r)
        return;
    int rc = lite_wait(ctx, r, ms_left(), NULL);
    note_peer(ctx, op, peer, rc);
    if (rc == -ETIMEDOUT)
        lite_cancel(ctx, r); /* a send that moves data stays with the context (finalize) */
}

int main(void)
{
    lite_ctx_t *ctx = mp_init();
    int me = lite_rank(ctx), n = lite_world_size(ctx);
    CHECK(n >= 2, "needs at least 2 ranks");
    int victim = env_or("KILL_SOAK_VICTIM", -1);
    victim_delay_ms = env_or("KILL_SOAK_DELAY_MS", 1000);
    int op_timeout = env_or("LITETX_OP_TIMEOUT_MS", 5000);
    double bound = env_or("KILL_SOAK_BOUND_MS", op_timeout + 3000) / 1000.0;
    CHECK(victim >= 0 && victim < n, "KILL_SOAK_VICTIM=%d outside [0, %d)", victim, n);
    const char *piddir = getenv("KILL_SOAK_PIDDIR");
    if (piddir && *piddir) {
        char path[512];
        snprintf(path, sizeof(path), "%s/rank.%d.pid", piddir, me);
        FILE *f = fopen(path, "w");
        CHECK(f, "cannot write %s", path);
        fprintf(f, "%ld\n", (long)getpid());
        fclose(f);
    }

    float *ar_in = malloc(ALLREDUCE_FLOATS * sizeof(float));
    float *ar_out = malloc(ALLREDUCE_FLOATS * sizeof(float));
    uint8_t *a2a_in = malloc((size_t)n * A2A_BYTES), *a2a_out = malloc((size_t)n * A2A_BYTES);
    uint8_t *large_in = malloc(LARGE_BYTES), *large_out = malloc(LARGE_BYTES);
    uint8_t small_in[SMALL_BYTES], small_out[SMALL_BYTES];
    uint8_t *region = calloc(2, WIMM_BYTES); /* [0]: written by the left neighbour; [1]: source */
    CHECK(ar_in && ar_out && a2a_in && a2a_out && large_in && large_out && region, "oom");
    for (int i = 0; i < ALLREDUCE_FLOATS; i++)
        ar_in[i] = (float)(i % 1000);
    memset(a2a_in, me, (size_t)n * A2A_BYTES);
    memset(large_out, me, LARGE_BYTES);
    memset(small_out, me, SMALL_BYTES);
    lite_mr_t *mr;
    lite_rdesc_t *descs = calloc((size_t)n, sizeof(*descs));
    CHECK(descs, "oom");
    CHECK_RC(ctx, lite_mr_reg(ctx, region, 2 * WIMM_BYTES, LITE_MEM_HOST, LITE_ACCESS_REMOTE_WRITE,
                              &mr));
    CHECK_RC(ctx, lite_mr_exchange(ctx, mr, descs, 30000));
    CHECK_RC(ctx, lite_barrier(ctx, 30000));

    double t_kill = now_s() + victim_delay_ms / 1000.0;
    if (me == victim) {
        pthread_t th;
        CHECK(pthread_create(&th, NULL, killer, NULL) == 0, "pthread_create");
    }
    int right = (me + 1) % n, left = (me + n - 1) % n;
    uint64_t tag = 1;
    int iters = 0;
    for (; iters < MAX_ITERS && !nerrs; iters++) {
        /* Every step ends each op it started before the loop looks at errors. */
        note(ctx, "allreduce",
             lite_allreduce(ctx, ar_in, ar_out, ALLREDUCE_FLOATS, LITE_F32, LITE_SUM,
                            LITE_TIMEOUT_DEFAULT));
        if (nerrs)
            break;
        note(ctx, "alltoall",
             lite_alltoall(ctx, a2a_in, a2a_out, A2A_BYTES, LITE_U8, LITE_TIMEOUT_DEFAULT));
        if (nerrs)
            break;
        lite_request_t *rs = NULL, *rr = NULL, *ls = NULL, *lr = NULL;
        step_end = now_s() + op_timeout / 1000.0;
        note_peer(ctx, "isend small", right,
                  lite_isend(ctx, right, tag, small_out, SMALL_BYTES, &rs));
        note_peer(ctx, "irecv small", left, lite_irecv(ctx, left, tag, small_in, SMALL_BYTES, &rr));
        note_peer(ctx, "isend large", right,
                  lite_isend(ctx, right, tag + 1, large_out, LARGE_BYTES, &ls));
        note_peer(ctx, "irecv large", left,
                  lite_irecv(ctx, left, tag + 1, large_in, LARGE_BYTES, &lr));
        tag += 2;
        wait_req(ctx, "send small", right, rs);
        wait_req(ctx, "recv small", left, rr);
        wait_req(ctx, "send large", right, ls);
        wait_req(ctx, "recv large", left, lr);
        if (nerrs)
            break;
        /* One write with an immediate to the right, one awaited from the left. */
        uint32_t imm = 0x5000u + (uint32_t)(iters & 0xfff);
        lite_request_t *w = NULL;
        note(ctx, "write_imm",
             lite_write_imm(ctx, right, mr, WIMM_BYTES, &descs[right], 0, WIMM_BYTES, imm, &w));
        step_end = now_s() + op_timeout / 1000.0;
        note(ctx, "imm_wait", lite_imm_wait(ctx, imm, 1, ms_left()));
        wait_req(ctx, "write_imm", right, w);
    }
    double t_end = now_s();
    CHECK(me != victim, "the victim outlived its kill (delay %d ms)", victim_delay_ms);
    CHECK(nerrs, "no op failed in %d iterations", iters);
    double after = first_err_at - t_kill;
    for (int i = 0; i < nerrs && i < MAX_ERRORS; i++)
        printf("kill_soak: rank %d: %s: %d (%s): %s\n", me, errs[i].op, errs[i].rc,
               lite_strerror(errs[i].rc), errs[i].detail);
    CHECK(t_end - t_kill < bound, "pending ops ended %.3f s after the kill (bound %.1f s)",
          t_end - t_kill, bound);
    /* A lost peer is what ended them, or their deadline with a detail naming the killed rank
     * (a provider slower to notice: tcp;ofi_rxm on a loaded host). One more case: a collective
     * can complete on one survivor and fail on the other (it had what it needed from the victim
     * before the kill), which leaves the loop; an op of the first with it then times out. */
    char want[32];
    snprintf(want, sizeof(want), "rank %d", victim);
    for (int i = 0; i < nerrs && i < MAX_ERRORS; i++)
        CHECK(errs[i].rc == -LITE_ERR_PEER_LOST ||
                  (errs[i].rc == -ETIMEDOUT &&
                   (strstr(errs[i].detail, want) || (errs[i].peer >= 0 && errs[i].peer != victim))),
              "%s ended with %d (%s), not a lost peer: %s", errs[i].op, errs[i].rc,
              lite_strerror(errs[i].rc), errs[i].detail);
    /* The loss is learned: a send to the killed rank fails, naming it. Until the backend has
     * noticed, a small send still leaves (into the dead process's queue): retry, bounded. */
    int rc = 0;
    for (int i = 0; i < 100000 && now_s() - t_kill < bound; i++) {
        rc = lite_send(ctx, victim, tag++, small_out, 1, 1000);
        if (rc)
            break;
        usleep(1000);
    }
    CHECK(rc == -LITE_ERR_PEER_LOST, "send to the killed rank %d gave %d (%s): %s", victim, rc,
          lite_strerror(rc), lite_last_error(ctx));
    CHECK(strstr(lite_last_error(ctx), want), "the send's detail does not name %s: %s", want,
          lite_last_error(ctx));
    /* Finalize once every survivor is here (files in KILL_SOAK_PIDDIR), so that no survivor's
     * op ends because another one closed; meanwhile this rank keeps progressing. */
    if (piddir && *piddir) {
        char path[512];
        snprintf(path, sizeof(path), "%s/done.%d", piddir, me);
        FILE *f = fopen(path, "w");
        CHECK(f, "cannot write %s", path);
        fclose(f);
        for (int i = 0; i < 100000 && now_s() - t_kill < bound; i++) {
            int here = 0;
            for (int r = 0; r < n; r++) {
                snprintf(path, sizeof(path), "%s/done.%d", piddir, r);
                here += r != victim && access(path, F_OK) == 0;
            }
            if (here == n - 1)
                break;
            lite_progress(ctx);
            usleep(1000);
        }
    }
    lite_mr_dereg(ctx, mr);
    lite_finalize(ctx);
    double done = now_s() - t_kill;
    CHECK(done < bound, "finalized %.3f s after the kill (bound %.1f s)", done, bound);
    printf("kill_soak: rank %d ok: victim %d killed at +%d ms, %d iterations, first error "
           "+%.3f s, finalized +%.3f s\n",
           me, victim, victim_delay_ms, iters, after, done);
    free(ar_in);
    free(ar_out);
    free(a2a_in);
    free(a2a_out);
    free(large_in);
    free(large_out);
    free(region);
    free(descs);
    return 0;
}
