/*
 * nccl_gate - runs one rank of a multi-process test over the nccl backend:
 *     nccl_gate program args...
 * Exits 77 (CTest: skipped) with the reason when the nccl backend is not usable on this host
 * (no CUDA device, no libnccl.so.2, not compiled in); every rank of a job decides the same way.
 * Otherwise gives the rank its own NCCL_HOSTID (unless one is set) and execs the program: NCCL
 * refuses two ranks on one GPU of one host, and different host ids make it treat the ranks as
 * separate hosts talking over its socket transport, so two ranks can share one GPU in tests.
 * NCCL's sockets stay on loopback (NCCL_SOCKET_IFNAME=lo, NCCL_IB_DISABLE=1, unless set).
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "lite_int.h"
#include "registry.h"
#include "tp_select.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: nccl_gate program [args...]\n");
        return 2;
    }
    size_t n = 0;
    const struct lite_transport_ops *const *table = lite_registry(&n);
    const struct lite_transport_ops *ops = NULL;
    char why[512];
    if (lite_transport_select(table, n, "nccl", &ops, why, sizeof(why)) != 0) {
        printf("SKIPPED: %s\n", why);
        fflush(stdout);
        return 77;
    }
    const char *rank = getenv("LITETX_RANK");
    if (!getenv("NCCL_HOSTID") && rank) {
        char id[64];
        snprintf(id, sizeof(id), "litetx-test-rank%s", rank);
        setenv("NCCL_HOSTID", id, 1);
    }
    /* Ranks of a test share one host: NCCL's sockets on loopback, no InfiniBand probing. */
    setenv("NCCL_SOCKET_IFNAME", "lo", 0);
    setenv("NCCL_IB_DISABLE", "1", 0);
    execv(argv[1], argv + 1);
    perror(argv[1]);
    return 127;
}
