/*
 * test_gpu_cpu.c - the CPU side of GPU support, on any machine: the staging pipeline driven with
 * host memory, the loader's answers without a driver (absent, or the CUDA stub library that
 * fails cuInit), pointer queries that must not load CUDA into a host-only process, and
 * LITE_MEM_CUDA registrations refused with a clear error. Each loader case runs in a child
 * process: the loader loads once per process.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctx.h"
#include "gpu.h"
#include "gpu_stage.h"

/* ---- the pipeline with host memory ---- */

#define LOG_MAX 4096
struct hio {
    char log[LOG_MAX][8]; /* "F0", "W0", "P0", "D" ... in call order */
    int nlog;
    int fail_work_at; /* segment whose work fails, -1 none */
    int fetches, puts, drains;
    size_t esize;
};

static void note(struct hio *h, char what, size_t k)
{
    if (h->nlog < LOG_MAX)
        snprintf(h->log[h->nlog++], 8, "%c%zu", what, k);
}

static int h_fetch(void *arg, int slot, void *dst, const void *src, size_t n)
{
    struct hio *h = arg;
    h->fetches++;
    memcpy(dst, src, n);
    note(h, 'F', (size_t)slot);
    return 0;
}

static int h_fetch_wait(void *arg, int slot)
{
    (void)arg;
    (void)slot;
    return 0;
}

static int h_put(void *arg, int slot, void *dst, const void *src, size_t n)
{
    struct hio *h = arg;
    h->puts++;
    memcpy(dst, src, n);
    note(h, 'P', (size_t)slot);
    return 0;
}

static int h_drain(void *arg)
{
    struct hio *h = arg;
    h->drains++;
    note(h, 'D', 0);
    return 0;
}

struct work_state {
    struct hio *h;
    size_t next_first; /* segments must come in order, contiguous */
    size_t seg;
    size_t esize;
    int calls;
};

static int h_work(void *arg, void *host, size_t first, size_t n)
{
    struct work_state *w = arg;
    assert_int_equal(first, w->next_first);
    assert_true(n >= 1 && n <= w->seg);
    w->next_first = first + n;
    if (w->h->fail_work_at == w->calls) {
        w->calls++;
        return -EIO;
    }
    unsigned char *b = host;
    for (size_t i = 0; i < n * w->esize; i++)
        b[i] = (unsigned char)(b[i] ^ 0x5A);
    note(w->h, 'W', (size_t)w->calls);
    w->calls++;
    return 0;
}

static int run_pipe(struct hio *h, size_t count, size_t esize, size_t seg, unsigned char *dst,
                    const unsigned char *src, struct work_state *w)
{
    void *s0 = malloc(seg * esize), *s1 = malloc(seg * esize);
    void *const slots[2] = {s0, s1};
    struct lite_stage_io io = {h_fetch, h_fetch_wait, h_put, h_drain, h};
    *w = (struct work_state){.h = h, .seg = seg, .esize = esize};
    int rc = lite_stage_pipeline(&io, slots, dst, src, count, esize, seg, h_work, w);
    free(s0);
    free(s1);
    return rc;
}

static void pipeline_moves_every_byte(void **state)
{
    (void)state;
    const size_t counts[] = {0, 1, 2, 5, 17, 1000, 4099};
    const size_t segs[] = {1, 3, 7, 1000, 8192};
    const size_t esizes[] = {1, 2, 4, 8};
    for (size_t a = 0; a < LITE_ARRAY_LEN(counts); a++)
        for (size_t b = 0; b < LITE_ARRAY_LEN(segs); b++)
            for (size_t c = 0; c < LITE_ARRAY_LEN(esizes); c++) {
                size_t count = counts[a], seg = segs[b], es = esizes[c];
                size_t bytes = count * es;
                unsigned char *src = malloc(bytes + 1), *dst = malloc(bytes + 1);
                for (size_t i = 0; i < bytes; i++)
                    src[i] = (unsigned char)(i * 7 + 3);
                memset(dst, 0xEE, bytes + 1);
                struct hio h = {.fail_work_at = -1};
                struct work_state w;
                assert_int_equal(run_pipe(&h, count, es, seg, dst, src, &w), 0);
                size_t nseg = lite_stage_nseg(count, seg);
                assert_int_equal(w.calls, (int)nseg);
                assert_int_equal(h.fetches, (int)nseg);
                assert_int_equal(h.puts, (int)nseg);
                assert_int_equal(h.drains, nseg ? 1 : 0);
                assert_int_equal(w.next_first, count);
                for (size_t i = 0; i < bytes; i++)
                    assert_int_equal(dst[i], (unsigned char)(src[i] ^ 0x5A));
                assert_int_equal(dst[bytes], 0xEE); /* nothing past the end */
                free(src);
                free(dst);
            }
}

/* The overlap: segment k+1's fetch is issued before segment k is worked on and put. */
static void pipeline_prefetches_next_segment(void **state)
{
    (void)state;
    unsigned char src[12], dst[12];
    memset(src, 1, sizeof(src));
    struct hio h = {.fail_work_at = -1};
    struct work_state w;
    assert_int_equal(run_pipe(&h, 12, 1, 4, dst, src, &w), 0);
    const char *want[] = {"F0", "F1", "W0", "P0", "F0", "W1", "P1", "W2", "P0", "D0"};
    assert_int_equal(h.nlog, (int)LITE_ARRAY_LEN(want));
    for (size_t i = 0; i < LITE_ARRAY_LEN(want); i++)
        assert_string_equal(h.log[i], want[i]);
}

static void pipeline_stops_at_first_error(void **state)
{
    (void)state;
    unsigned char src[40] = {0}, dst[40] = {0};
    struct hio h = {.fail_work_at = 2};
    struct work_state w;
    assert_int_equal(run_pipe(&h, 40, 1, 4, dst, src, &w), -EIO);
    assert_int_equal(w.calls, 3);  /* segments 0, 1, then 2 failed */
    assert_int_equal(h.puts, 2);   /* nothing put after the failure */
    assert_int_equal(h.drains, 1); /* but what was issued is drained */
}

static void chunk_is_whole_elements(void **state)
{
    (void)state;
    unsetenv("LITETX_GPU_STAGE_CHUNK");
    assert_int_equal(lite_stage_chunk_env(), 4u << 20);
    assert_int_equal(lite_stage_chunk(4u << 20, 4), 4u << 20);
    setenv("LITETX_GPU_STAGE_CHUNK", "10001", 1);
    assert_int_equal(lite_stage_chunk_env(), 10001);
    assert_int_equal(lite_stage_chunk(10001, 8), 10000);
    assert_int_equal(lite_stage_chunk(10001, 3), 9999);
    assert_int_equal(lite_stage_chunk(10001, 1), 10001);
    assert_int_equal(lite_stage_chunk(4, 8), 8); /* at least one element */
    /* invalid: the default, and the error lite_init turns into -LITE_ERR_CONFIG */
    lite_env_error_reset();
    setenv("LITETX_GPU_STAGE_CHUNK", "12x", 1);
    assert_int_equal(lite_stage_chunk_env(), 4u << 20);
    assert_non_null(strstr(lite_env_error(), "LITETX_GPU_STAGE_CHUNK"));
    lite_env_error_reset();
    unsetenv("LITETX_GPU_STAGE_CHUNK");
    assert_int_equal(lite_stage_nseg(0, 4), 0);
    assert_int_equal(lite_stage_nseg(9, 4), 3);
    assert_int_equal(lite_stage_nseg(8, 4), 2);
}

/* ---- the loader without a usable driver (each in a child) ---- */

static int in_child(void (*fn)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        fn();
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

#define CHILD_CHECK(c)                                                                             \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c);                                \
            _exit(1);                                                                              \
        }                                                                                          \
    } while (0)

static void absent_driver_child(void)
{
    setenv("LITETX_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
    char why[256] = "x";
    CHILD_CHECK(lite_gpu_available(why, sizeof(why)) == -ENOSYS);
    CHILD_CHECK(strstr(why, "no CUDA driver") && strstr(why, "/nonexistent/libcuda.so.1"));
    CHILD_CHECK(lite_gpu_device_count() == 0);
    int x = 0, dev = 7;
    CHILD_CHECK(lite_gpu_ptr_kind(&x, &dev) == LITE_MEM_HOST && dev == 7);
    CHILD_CHECK(!lite_stage_is_dev(&x));
    struct lite_gpu_stream *s = (void *)1;
    CHILD_CHECK(lite_gpu_stream_create(0, &s) == -ENOSYS && s == NULL);
    void *p = (void *)1;
    CHILD_CHECK(lite_gpu_host_alloc(4096, &p) == -ENOSYS && p == NULL);
    CHILD_CHECK(lite_gpu_mem_alloc(0, 4096, &p) == -ENOSYS && p == NULL);
    int fd = -1;
    uint64_t off = 0;
    CHILD_CHECK(lite_gpu_dmabuf(&x, 4, &fd, &off) == -ENOSYS);
    CHILD_CHECK(lite_stage_get(100, &p) == -ENOSYS);
    lite_gpu_host_free(NULL);
    lite_gpu_stream_destroy(NULL);
}

static void loader_without_driver(void **state)
{
    (void)state;
    assert_int_equal(in_child(absent_driver_child), 0);
}

static const char *stub_path(void)
{
    static const char *const paths[] = {
        "/usr/local/cuda/lib64/stubs/libcuda.so",
        "/usr/local/cuda/targets/x86_64-linux/lib/stubs/libcuda.so"};
    for (size_t i = 0; i < LITE_ARRAY_LEN(paths); i++)
        if (access(paths[i], R_OK) == 0)
            return paths[i];
    return NULL;
}

static void stub_driver_child(void)
{
    setenv("LITETX_CUDA_DRIVER", stub_path(), 1);
    char why[256] = "";
    CHILD_CHECK(lite_gpu_available(why, sizeof(why)) == -ENODEV);
    CHILD_CHECK(strstr(why, "cuInit failed") != NULL);
    int x = 0;
    CHILD_CHECK(lite_gpu_ptr_kind(&x, NULL) == LITE_MEM_HOST);
    struct lite_gpu_stream *s = NULL;
    CHILD_CHECK(lite_gpu_stream_create(0, &s) == -ENODEV);
}

/* The CUDA toolkit's stub libcuda has every entry point and fails cuInit: a driver that loads
 * but cannot run, as on a host with the toolkit and no GPU. */
static void loader_with_stub_driver(void **state)
{
    (void)state;
    if (!stub_path())
        skip();
    assert_int_equal(in_child(stub_driver_child), 0);
}

static void query_does_not_load_cuda_child(void)
{
    int x = 0;
    CHILD_CHECK(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) == NULL);
    for (int i = 0; i < 1000; i++)
        CHILD_CHECK(lite_gpu_ptr_kind(&x, NULL) == LITE_MEM_HOST);
    CHILD_CHECK(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) == NULL);
}

/* A host-only process asking about its pointers never gets CUDA loaded into it. */
static void pointer_query_keeps_cuda_out(void **state)
{
    (void)state;
    assert_int_equal(in_child(query_does_not_load_cuda_child), 0);
}

/* ---- LITE_MEM_CUDA registrations without a GPU ---- */

static void mr_child(void)
{
    setenv("LITETX_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
    lite_config_t cfg = lite_config_default();
    cfg.rank = 0;
    cfg.world_size = 1;
    cfg.transport = "loop";
    cfg.log_level = LITE_LOG_ERROR;
    lite_ctx_t *ctx = NULL;
    int rc = lite_init(&cfg, &ctx);
    if (rc) {
        fprintf(stderr, "lite_init: %d %s\n", rc, lite_init_error());
        _exit(2);
    }
    static char buf[4096];
    lite_mr_t *mr = NULL;
    rc = lite_mr_reg(ctx, buf, sizeof(buf), LITE_MEM_CUDA, 0, &mr);
    CHILD_CHECK(rc == -ENOSYS && mr == NULL);
    CHILD_CHECK(strstr(lite_last_error(ctx), "LITE_MEM_CUDA needs a CUDA device") != NULL);
    CHILD_CHECK(strstr(lite_last_error(ctx), "no CUDA driver") != NULL);
    CHILD_CHECK(lite_mr_reg(ctx, buf, sizeof(buf), LITE_MEM_HOST, 0, &mr) == 0);
    CHILD_CHECK(lite_mr_dereg(ctx, mr) == 0);
    /* host buffers on the message path are not staged, and go through */
    CHILD_CHECK(lite_finalize(ctx) == 0);
}

static void mr_cuda_refused_without_gpu(void **state)
{
    (void)state;
    assert_int_equal(in_child(mr_child), 0);
}

static void kernels_embedded(void **state)
{
    (void)state;
#ifdef LITE_TEST_EXPECT_KERNELS
    assert_int_equal(lite_gpu_have_kernels(), 1);
#else
    assert_int_equal(lite_gpu_have_kernels(), 0);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pipeline_moves_every_byte),
        cmocka_unit_test(pipeline_prefetches_next_segment),
        cmocka_unit_test(pipeline_stops_at_first_error),
        cmocka_unit_test(chunk_is_whole_elements),
        cmocka_unit_test(loader_without_driver),
        cmocka_unit_test(loader_with_stub_driver),
        cmocka_unit_test(pointer_query_keeps_cuda_out),
        cmocka_unit_test(mr_cuda_refused_without_gpu),
        cmocka_unit_test(kernels_embedded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
