/*
 * fatbin.c - embeds the reduction kernels' fatbin (built by nvcc, cmake/LiteCuda.cmake) in the
 * library as read-only data, for cuModuleLoadData in src/core/gpu.c. Compiled only when the
 * kernels are built; LITE_CUDA_FATBIN_PATH names the file.
 */
#include <stddef.h>

__asm__(".section .rodata\n"
        ".balign 64\n"
        ".globl lite_cuda_fatbin\n"
        ".hidden lite_cuda_fatbin\n"
        ".type lite_cuda_fatbin, @object\n"
        "lite_cuda_fatbin:\n"
        ".incbin \"" LITE_CUDA_FATBIN_PATH "\"\n"
        "lite_cuda_fatbin_end:\n"
        ".byte 0\n"
        ".balign 8\n"
        ".globl lite_cuda_fatbin_len\n"
        ".hidden lite_cuda_fatbin_len\n"
        ".type lite_cuda_fatbin_len, @object\n"
        "lite_cuda_fatbin_len:\n"
        ".quad lite_cuda_fatbin_end - lite_cuda_fatbin\n"
        ".previous\n");
