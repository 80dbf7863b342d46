/*
 * test_gpu_fake.c - the loader's stream ordering under the named CUDA test double
 * (tests/nccl/fake/fake_cuda.c; streams are worker threads, "device" memory is host memory).
 * lite_gpu_stream_wait_user destroys its event right after cuStreamWaitEvent (legal in CUDA):
 * the wait must still order the caller's earlier work before the library stream's later work,
 * also when the wait is queued behind other work and runs after the destroy (under ASan a
 * double that frees the event too early fails here). Exits 77 without the double.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"

#define CHECK(c, ...)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #c);                  \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

int main(void)
{
    char why[256];
    if (!getenv("LITETX_CUDA_DRIVER") || lite_gpu_available(why, sizeof(why)) != 0) {
        printf("SKIPPED: needs the CUDA test double (LITETX_CUDA_DRIVER)\n");
        return 77;
    }
    const size_t n = 32u << 20;
    struct lite_gpu_stream *lib = NULL, *user = NULL;
    CHECK(lite_gpu_stream_create(0, &lib) == 0, "stream");
    CHECK(lite_gpu_stream_create(0, &user) == 0, "stream");
    uint8_t *a, *b, *c, *big1, *big2;
    CHECK(lite_gpu_mem_alloc(0, n, (void **)&a) == 0 &&
              lite_gpu_mem_alloc(0, n, (void **)&b) == 0 &&
              lite_gpu_mem_alloc(0, n, (void **)&c) == 0 &&
              lite_gpu_mem_alloc(0, n, (void **)&big1) == 0 &&
              lite_gpu_mem_alloc(0, n, (void **)&big2) == 0,
          "alloc");
    for (int round = 0; round < 8; round++) {
        memset(a, 0x11 + round, n);
        memset(b, 0, n);
        memset(c, 0, n);
        /* the library stream busy first, so its wait job runs after wait_user returned (and
         * destroyed the event); even rounds: the caller's stream busy too */
        for (int i = 0; i < 4; i++)
            CHECK(lite_gpu_copy_async(big2, big1, n, lib) == 0, "copy");
        if (round % 2 == 0)
            CHECK(lite_gpu_copy_async(b, a, n, user) == 0, "copy");
        else
            memcpy(b, a, n);
        CHECK(lite_gpu_stream_wait_user(lib, lite_gpu_stream_raw(user)) == 0, "wait_user");
        CHECK(lite_gpu_copy_async(c, b, n, lib) == 0, "copy");
        CHECK(lite_gpu_stream_sync(lib) == 0, "sync");
        for (size_t i = 0; i < n; i += 4093)
            CHECK(c[i] == (uint8_t)(0x11 + round),
                  "round %d: byte %zu copied before the caller's work", round, i);
    }
    lite_gpu_stream_destroy(lib);
    lite_gpu_stream_destroy(user);
    lite_gpu_mem_free(a);
    lite_gpu_mem_free(b);
    lite_gpu_mem_free(c);
    lite_gpu_mem_free(big1);
    lite_gpu_mem_free(big2);
    printf("stream_wait_user orders the caller's work, event destroyed early: ok\n");
    return 0;
}
