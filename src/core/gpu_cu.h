/*
 * gpu_cu.h - the CUDA driver-API values gpu.c uses, declared here so the library builds without
 * cuda.h (LCU_X is cuda.h's CU_X / CUDA_X). tests/gpu/test_gpu_abi.c checks every one against
 * cuda.h where it is installed. Not installed.
 */
#ifndef LITE_GPU_CU_H
#define LITE_GPU_CU_H

enum lite_cu_values {
    LCU_SUCCESS = 0,
    LCU_ERROR_INVALID_VALUE = 1,
    LCU_ERROR_OUT_OF_MEMORY = 2,
    LCU_ERROR_NO_DEVICE = 100,
    LCU_ERROR_NOT_READY = 600,
    LCU_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
    LCU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
    LCU_POINTER_ATTRIBUTE_IS_MANAGED = 8,
    LCU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
    LCU_MEMORYTYPE_DEVICE = 2,
    LCU_STREAM_NON_BLOCKING = 1,
    LCU_EVENT_DISABLE_TIMING = 2,
    LCU_MEMHOSTALLOC_PORTABLE = 1,
    LCU_MEMHOSTREGISTER_PORTABLE = 1,
    LCU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD = 1,
    LCU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
};

#endif /* LITE_GPU_CU_H */
