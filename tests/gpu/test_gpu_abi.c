/*
 * test_gpu_abi.c - the loader's own CUDA declarations (src/core/gpu_cu.h, and the entry-point
 * names gpu.c looks up) against the installed cuda.h: the library builds without cuda.h, so this
 * is where a mismatch would show. Built where cuda.h is installed; needs no GPU.
 */
#include <cuda.h>
#include <stdio.h>
#include <string.h>

#include "gpu_cu.h"

#define SAME(ours, theirs) _Static_assert((int)(ours) == (int)(theirs), #ours " != " #theirs)

SAME(LCU_SUCCESS, CUDA_SUCCESS);
SAME(LCU_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_VALUE);
SAME(LCU_ERROR_OUT_OF_MEMORY, CUDA_ERROR_OUT_OF_MEMORY);
SAME(LCU_ERROR_NO_DEVICE, CUDA_ERROR_NO_DEVICE);
SAME(LCU_ERROR_NOT_READY, CUDA_ERROR_NOT_READY);
SAME(LCU_ERROR_HOST_MEMORY_ALREADY_REGISTERED, CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
SAME(LCU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_MEMORY_TYPE);
SAME(LCU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_IS_MANAGED);
SAME(LCU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL);
SAME(LCU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_DEVICE);
SAME(LCU_STREAM_NON_BLOCKING, CU_STREAM_NON_BLOCKING);
SAME(LCU_EVENT_DISABLE_TIMING, CU_EVENT_DISABLE_TIMING);
SAME(LCU_MEMHOSTALLOC_PORTABLE, CU_MEMHOSTALLOC_PORTABLE);
SAME(LCU_MEMHOSTREGISTER_PORTABLE, CU_MEMHOSTREGISTER_PORTABLE);
SAME(LCU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD);
SAME(LCU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
_Static_assert(sizeof(CUdeviceptr) == sizeof(unsigned long long), "CUdeviceptr is 64-bit");
_Static_assert(sizeof(CUresult) == sizeof(int), "CUresult is an int-sized enum");

/* The symbol cuda.h binds an API name to: gpu.c must dlsym exactly that one. */
#define XSTR(x)    #x
#define BOUND(api) XSTR(api)

int main(void)
{
    static const struct {
        const char *bound, *ours;
    } names[] = {
        {BOUND(cuCtxPushCurrent), "cuCtxPushCurrent_v2"},
        {BOUND(cuCtxPopCurrent), "cuCtxPopCurrent_v2"},
        {BOUND(cuStreamDestroy), "cuStreamDestroy_v2"},
        {BOUND(cuEventDestroy), "cuEventDestroy_v2"},
        {BOUND(cuMemsetD8), "cuMemsetD8_v2"},
        {BOUND(cuMemHostRegister), "cuMemHostRegister_v2"},
        {BOUND(cuMemAlloc), "cuMemAlloc_v2"},
        {BOUND(cuMemFree), "cuMemFree_v2"},
        {BOUND(cuMemcpyAsync), "cuMemcpyAsync"},
        {BOUND(cuMemcpy), "cuMemcpy"},
        {BOUND(cuStreamQuery), "cuStreamQuery"},
        {BOUND(cuStreamSynchronize), "cuStreamSynchronize"},
        {BOUND(cuStreamWaitEvent), "cuStreamWaitEvent"},
        {BOUND(cuEventRecord), "cuEventRecord"},
        {BOUND(cuLaunchKernel), "cuLaunchKernel"},
        {BOUND(cuPointerGetAttributes), "cuPointerGetAttributes"},
        {BOUND(cuDevicePrimaryCtxRetain), "cuDevicePrimaryCtxRetain"},
        {BOUND(cuMemHostAlloc), "cuMemHostAlloc"},
        {BOUND(cuModuleLoadData), "cuModuleLoadData"},
        {BOUND(cuMemGetHandleForAddressRange), "cuMemGetHandleForAddressRange"},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(names[i].bound, names[i].ours) != 0) {
            fprintf(stderr, "cuda.h binds to %s, gpu.c looks up %s\n", names[i].bound,
                    names[i].ours);
            bad = 1;
        }
    printf("%zu driver constants and %zu entry-point names match cuda.h (CUDA_VERSION %d)\n",
           (size_t)16, sizeof(names) / sizeof(names[0]), CUDA_VERSION);
    return bad;
}
