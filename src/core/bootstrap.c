/*
 * bootstrap.c - the rendezvous at rank 0: every rank's transport address is gathered there and
 * sent back to all, and a barrier ends lite_init(). Plain blocking-with-deadline TCP: it runs
 * once per context, so clarity beats speed here.
 *
 * Frame: u32 magic | u32 type | u32 rank | u32 world | u32 len, then len bytes (little-endian).
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lite_int.h"

#define BS_MAGIC         0x5342544cu /* "LTBS" */
#define BS_HDR           20
#define BS_MAX_PAYLOAD   (1u << 24)
#define BS_HELLO_WAIT_MS 2000 /* how long an accepted connection gets to introduce itself */
/* Non-root ranks wait this much past the deadline for the root's verdict, so that when a rank
 * is missing every rank hears from the root which one, rather than timing out on its own. */
#define BS_VERDICT_GRACE_NS (1500 * 1000000LL)

enum { BS_HELLO = 1, BS_TABLE = 2, BS_ABORT = 3, BS_READY = 4, BS_GO = 5 };

struct lite_bootstrap {
    int rank, world;
    int listen_fd; /* root only */
    int root_fd;   /* non-root: connection to the root */
    int *fds;      /* root: fds[r] for r >= 1 */
    char local_host[LITE_HOST_MAX];
    char root_desc[LITE_HOST_MAX + 8];
};

struct bs_frame {
    uint32_t type, rank, world, len;
    uint8_t *payload; /* malloc'd, NUL-terminated for convenience */
};

static int send_frame(int fd, uint32_t type, uint32_t rank, uint32_t world, const void *payload,
                      uint32_t len, int64_t deadline)
{
    uint8_t h[BS_HDR];
    lite_put32(h, BS_MAGIC);
    lite_put32(h + 4, type);
    lite_put32(h + 8, rank);
    lite_put32(h + 12, world);
    lite_put32(h + 16, len);
    int rc = lite_sock_write_full(fd, h, sizeof(h), deadline);
    if (rc == 0 && len)
        rc = lite_sock_write_full(fd, payload, len, deadline);
    return rc;
}

/* Read one frame; -LITE_ERR_PROTOCOL for anything that is not a bootstrap frame. */
static int recv_frame(int fd, struct bs_frame *f, int64_t deadline)
{
    uint8_t h[BS_HDR];
    memset(f, 0, sizeof(*f));
    int rc = lite_sock_read_full(fd, h, sizeof(h), deadline);
    if (rc)
        return rc;
    if (lite_get32(h) != BS_MAGIC)
        return -LITE_ERR_PROTOCOL;
    f->type = lite_get32(h + 4);
    f->rank = lite_get32(h + 8);
    f->world = lite_get32(h + 12);
    f->len = lite_get32(h + 16);
    if (f->type < BS_HELLO || f->type > BS_GO || f->len > BS_MAX_PAYLOAD)
        return -LITE_ERR_PROTOCOL;
    f->payload = malloc(f->len + 1);
    if (!f->payload)
        return -ENOMEM;
    f->payload[f->len] = 0;
    rc = f->len ? lite_sock_read_full(fd, f->payload, f->len, deadline) : 0;
    if (rc) {
        free(f->payload);
        f->payload = NULL;
    }
    return rc;
}

static int listen_root(struct lite_bootstrap *b, const struct lite_settings *s, char *why,
                       size_t why_len)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    int rc = lite_sock_resolve(s->root_host, s->root_port, &ss, &sl, why, why_len);
    if (rc)
        return rc;
    int fd = lite_sock_tcp(ss.ss_family);
    if (fd < 0)
        return fd;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&ss, sl) != 0 || listen(fd, 128) != 0) {
        rc = -errno;
        lite_fmt(why, why_len, "rank 0 cannot listen on the root address %s: %s", b->root_desc,
                 strerror(errno));
        close(fd);
        return rc;
    }
    b->listen_fd = fd;
    lite_fmt(b->local_host, sizeof(b->local_host), "%s", s->root_host);
    return 0;
}

static int connect_root(struct lite_bootstrap *b, const struct lite_settings *s, int64_t deadline,
                        char *why, size_t why_len)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    int rc = lite_sock_resolve(s->root_host, s->root_port, &ss, &sl, why, why_len);
    if (rc)
        return rc;
    /* The root may not listen yet (ranks start in any order): lite_sock_connect retries. */
    int last_err = 0;
    int fd = lite_sock_connect(&ss, sl, deadline, &last_err);
    if (fd < 0) {
        char lb[96];
        if (fd == -ETIMEDOUT)
            lite_fmt(why, why_len, "rank %d could not reach the root (rank 0) at %s in time%s",
                     b->rank, b->root_desc, lite_sock_last_err(last_err, lb, sizeof(lb)));
        else
            lite_fmt(why, why_len, "rank %d: no socket for the root (rank 0) at %s: %s", b->rank,
                     b->root_desc, lite_strerror(fd));
        return fd;
    }
    struct sockaddr_storage me;
    socklen_t ml = sizeof(me);
    uint16_t port;
    getsockname(fd, (struct sockaddr *)&me, &ml);
    lite_sock_name(&me, b->local_host, sizeof(b->local_host), &port);
    b->root_fd = fd;
    return 0;
}

int lite_bootstrap_connect(const struct lite_settings *s, int64_t deadline_ns,
                           struct lite_bootstrap **out, char *why, size_t why_len)
{
    struct lite_bootstrap *b = calloc(1, sizeof(*b));
    if (!b)
        return -ENOMEM;
    b->rank = s->rank;
    b->world = s->world_size;
    b->listen_fd = b->root_fd = -1;
    lite_fmt(b->root_desc, sizeof(b->root_desc), "%s:%u", s->root_host, s->root_port);
    lite_fmt(b->local_host, sizeof(b->local_host), "%s", s->root_host);
    int rc = 0;
    if (b->world > 1) {
        if (b->rank == 0) {
            b->fds = malloc(sizeof(int) * (size_t)b->world);
            if (!b->fds)
                rc = -ENOMEM;
            for (int r = 0; b->fds && r < b->world; r++)
                b->fds[r] = -1;
            if (!rc)
                rc = listen_root(b, s, why, why_len);
        } else {
            rc = connect_root(b, s, deadline_ns, why, why_len);
        }
    }
    if (rc) {
        lite_bootstrap_close(b);
        return rc;
    }
    *out = b;
    return 0;
}

int lite_bootstrap_local_host(struct lite_bootstrap *b, char *host, size_t len)
{
    lite_fmt(host, len, "%s", b->local_host);
    return 0;
}

/* Root: tell every connected rank why init failed, so they fail with the same reason. */
static void root_abort(struct lite_bootstrap *b, const char *why)
{
    int64_t dl = lite_deadline_ns(500);
    for (int r = 1; r < b->world; r++)
        if (b->fds[r] >= 0)
            send_frame(b->fds[r], BS_ABORT, 0, (uint32_t)b->world, why, (uint32_t)strlen(why), dl);
}

static void list_ranks(char *out, size_t len, const int *fds, int world, bool want_missing)
{
    size_t used = 0;
    int shown = 0;
    out[0] = 0;
    for (int r = 1; r < world && used + 16 < len; r++) {
        if ((fds[r] < 0) != want_missing)
            continue;
        if (shown++ == 8) {
            used += (size_t)snprintf(out + used, len - used, ", ...");
            break;
        }
        used += (size_t)snprintf(out + used, len - used, "%s%d", shown > 1 ? ", " : "", r);
    }
}

/* Root: accept connections until every rank said hello or the deadline passed. */
static int root_gather(struct lite_bootstrap *b, void **blobs, size_t *lens, int64_t deadline,
                       char *why, size_t why_len)
{
    int arrived = 1, rc = 0;
    struct pollfd *pfd = malloc(sizeof(*pfd) * (size_t)b->world);
    int *map = malloc(sizeof(int) * (size_t)b->world);
    if (!pfd || !map) {
        free(pfd);
        free(map);
        return -ENOMEM;
    }
    while (arrived < b->world && !rc) {
        /* Watch the listener and the ranks already in: one leaving early fails init at once. */
        int n = 0;
        pfd[n] = (struct pollfd){.fd = b->listen_fd, .events = POLLIN};
        map[n++] = -1;
        for (int r = 1; r < b->world; r++)
            if (b->fds[r] >= 0) {
                pfd[n] = (struct pollfd){.fd = b->fds[r], .events = POLLIN};
                map[n++] = r;
            }
        int ms = lite_ms_left(deadline, 1000);
        if (ms == 0 && lite_now_ns() >= deadline) {
            char missing[200];
            list_ranks(missing, sizeof(missing), b->fds, b->world, true);
            lite_fmt(why, why_len, "rank(s) %s did not arrive at the root %s before the deadline",
                     missing, b->root_desc);
            root_abort(b, why);
            rc = -ETIMEDOUT;
            break;
        }
        if (poll(pfd, (nfds_t)n, ms) <= 0)
            continue;
        for (int i = 1; i < n && !rc; i++) {
            if (pfd[i].revents) {
                lite_fmt(why, why_len, "rank %d left during the bootstrap", map[i]);
                root_abort(b, why);
                rc = -LITE_ERR_PEER_LOST;
            }
        }
        if (rc || !(pfd[0].revents & POLLIN))
            continue;
        int fd = accept4(b->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        struct bs_frame f;
        int64_t hello_dl = lite_deadline_ns(BS_HELLO_WAIT_MS);
        int frc = recv_frame(fd, &f, hello_dl < deadline ? hello_dl : deadline);
        const char *bad = NULL;
        if (frc)
            bad =
                frc == -LITE_ERR_PROTOCOL ? "not a liblitetx bootstrap frame" : lite_strerror(frc);
        else if (f.type != BS_HELLO)
            bad = "first frame is not a hello";
        else if (f.world != (uint32_t)b->world)
            bad = "world size differs from the root's";
        else if (f.rank == 0 || f.rank >= (uint32_t)b->world)
            bad = "rank out of range";
        else if (b->fds[f.rank] >= 0)
            bad = "rank already connected";
        else if (f.len > LITE_BOOT_BLOB_MAX)
            bad = "address blob too long";
        if (bad) {
            LITE_WARN("bootstrap root %s: refused a connection: %s", b->root_desc, bad);
            if (!frc && f.type == BS_HELLO && f.world != (uint32_t)b->world) {
                char m[160];
                lite_fmt(m, sizeof(m), "the root runs world size %d, you said %u", b->world,
                         f.world);
                send_frame(fd, BS_ABORT, 0, (uint32_t)b->world, m, (uint32_t)strlen(m),
                           lite_deadline_ns(200));
            }
            free(f.payload);
            close(fd);
            continue;
        }
        b->fds[f.rank] = fd;
        blobs[f.rank] = f.payload;
        lens[f.rank] = f.len;
        arrived++;
    }
    free(pfd);
    free(map);
    return rc;
}

int lite_bootstrap_allgather(struct lite_bootstrap *b, const void *blob, size_t len,
                             int64_t deadline_ns, void ***blobs_out, size_t **lens_out, char *why,
                             size_t why_len)
{
    if (len > LITE_BOOT_BLOB_MAX)
        return -EINVAL;
    void **blobs = calloc((size_t)b->world, sizeof(void *));
    size_t *lens = calloc((size_t)b->world, sizeof(size_t));
    uint8_t *table = NULL;
    int rc = 0;
    if (!blobs || !lens) {
        rc = -ENOMEM;
        goto out;
    }
    if (b->rank == 0) {
        blobs[0] = malloc(len + 1);
        if (!blobs[0]) {
            rc = -ENOMEM;
            goto out;
        }
        memcpy(blobs[0], blob, len);
        lens[0] = len;
        if (b->world > 1) {
            rc = root_gather(b, blobs, lens, deadline_ns, why, why_len);
            if (rc)
                goto out;
            /* The table: for each rank, u32 length then the blob. */
            size_t tlen = 0;
            for (int r = 0; r < b->world; r++)
                tlen += 4 + lens[r];
            table = malloc(tlen);
            if (!table) {
                rc = -ENOMEM;
                goto out;
            }
            size_t off = 0;
            for (int r = 0; r < b->world; r++) {
                lite_put32(table + off, (uint32_t)lens[r]);
                memcpy(table + off + 4, blobs[r], lens[r]);
                off += 4 + lens[r];
            }
            for (int r = 1; r < b->world && !rc; r++) {
                rc = send_frame(b->fds[r], BS_TABLE, 0, (uint32_t)b->world, table, (uint32_t)tlen,
                                deadline_ns);
                if (rc)
                    lite_fmt(why, why_len, "root could not send the address table to rank %d: %s",
                             r, lite_strerror(rc));
            }
        }
    } else {
        rc = send_frame(b->root_fd, BS_HELLO, (uint32_t)b->rank, (uint32_t)b->world, blob,
                        (uint32_t)len, deadline_ns);
        struct bs_frame f = {0};
        int64_t verdict_dl = deadline_ns > INT64_MAX - BS_VERDICT_GRACE_NS
                                 ? INT64_MAX
                                 : deadline_ns + BS_VERDICT_GRACE_NS;
        if (!rc)
            rc = recv_frame(b->root_fd, &f, verdict_dl);
        if (rc) {
            lite_fmt(why, why_len, "rank %d: no address table from the root %s: %s", b->rank,
                     b->root_desc,
                     rc == -ETIMEDOUT ? "timed out (some rank did not arrive?)"
                                      : lite_strerror(rc));
            goto out;
        }
        if (f.type == BS_ABORT) {
            lite_fmt(why, why_len, "root aborted the bootstrap: %s", (char *)f.payload);
            rc = strstr((char *)f.payload, "did not arrive") ? -ETIMEDOUT : -LITE_ERR_PEER_LOST;
            free(f.payload);
            goto out;
        }
        size_t off = 0;
        for (int r = 0; r < b->world && !rc; r++) {
            uint32_t l = 0;
            if (f.type != BS_TABLE || off + 4 > f.len ||
                (l = lite_get32(f.payload + off)) > f.len - off - 4)
                rc = -LITE_ERR_PROTOCOL;
            else if (!(blobs[r] = malloc(l + 1)))
                rc = -ENOMEM;
            else {
                memcpy(blobs[r], f.payload + off + 4, l);
                lens[r] = l;
                off += 4 + l;
            }
        }
        free(f.payload);
        if (rc)
            lite_fmt(why, why_len, "rank %d: malformed address table from the root", b->rank);
    }
out:
    free(table);
    if (rc) {
        lite_bootstrap_free_blobs(blobs, lens, b->world);
        return rc;
    }
    *blobs_out = blobs;
    *lens_out = lens;
    return 0;
}

int lite_bootstrap_barrier(struct lite_bootstrap *b, int64_t deadline_ns, char *why, size_t why_len)
{
    if (b->world == 1)
        return 0;
    struct bs_frame f;
    if (b->rank != 0) {
        int rc = send_frame(b->root_fd, BS_READY, (uint32_t)b->rank, (uint32_t)b->world, NULL, 0,
                            deadline_ns);
        if (!rc)
            rc = recv_frame(b->root_fd, &f, deadline_ns);
        if (rc) {
            lite_fmt(why, why_len, "rank %d: init barrier with the root failed: %s", b->rank,
                     lite_strerror(rc));
            return rc;
        }
        if (f.type != BS_GO) {
            lite_fmt(why, why_len, "root aborted init: %s", (char *)f.payload);
            rc = -LITE_ERR_PEER_LOST;
        }
        free(f.payload);
        return rc;
    }
    for (int r = 1; r < b->world; r++) {
        int rc = recv_frame(b->fds[r], &f, deadline_ns);
        if (!rc && f.type != BS_READY)
            rc = -LITE_ERR_PROTOCOL;
        free(f.payload);
        if (rc) {
            lite_fmt(why, why_len, "init barrier: rank %d did not get ready: %s", r,
                     lite_strerror(rc));
            root_abort(b, why);
            return rc;
        }
    }
    for (int r = 1; r < b->world; r++) {
        int rc = send_frame(b->fds[r], BS_GO, 0, (uint32_t)b->world, NULL, 0, deadline_ns);
        if (rc) {
            lite_fmt(why, why_len, "init barrier: rank %d lost: %s", r, lite_strerror(rc));
            return rc;
        }
    }
    return 0;
}

void lite_bootstrap_close(struct lite_bootstrap *b)
{
    if (!b)
        return;
    if (b->listen_fd >= 0)
        close(b->listen_fd);
    if (b->root_fd >= 0)
        close(b->root_fd);
    for (int r = 0; b->fds && r < b->world; r++)
        if (b->fds[r] >= 0)
            close(b->fds[r]);
    free(b->fds);
    free(b);
}

void lite_bootstrap_free_blobs(void **blobs, size_t *lens, int n)
{
    for (int r = 0; blobs && r < n; r++)
        free(blobs[r]);
    free(blobs);
    free(lens);
}
