# The CUDA reduction kernels (src/cuda/*.cu), compiled by nvcc into one fatbin that is embedded
# in liblitetx (src/cuda/fatbin.c, .incbin) and loaded at run time by src/core/gpu.c through the
# CUDA driver. Nothing here links against CUDA: the library still loads without a driver.
#
# LITE_WITH_CUDA = AUTO (build the kernels when nvcc is found) | ON (fail without nvcc) | OFF.
# LITE_CUDA_ARCHS: the SASS targets; PTX of the last one is embedded too, so newer GPUs JIT it.
set(LITE_WITH_CUDA AUTO CACHE STRING "CUDA reduction kernels, built with nvcc (AUTO|ON|OFF)")
set_property(CACHE LITE_WITH_CUDA PROPERTY STRINGS AUTO ON OFF)
set(LITE_CUDA_ARCHS "80;90;100" CACHE STRING "GPU architectures (sm_XX) of the embedded kernels")
set(LITE_HAVE_CUDA_KERNELS FALSE)
if(NOT LITE_WITH_CUDA STREQUAL "OFF")
  find_program(LITE_NVCC nvcc HINTS ENV CUDA_HOME ENV CUDA_PATH /usr/local/cuda
    PATH_SUFFIXES bin)
  if(LITE_NVCC)
    set(LITE_HAVE_CUDA_KERNELS TRUE)
  elseif(LITE_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "LITE_WITH_CUDA=ON but nvcc was not found (set CUDA_HOME)")
  endif()
endif()

if(LITE_HAVE_CUDA_KERNELS)
  file(GLOB LITE_CUDA_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/cuda/*.cu)
  file(GLOB LITE_CUDA_HEADERS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/cuda/*.cuh)
  # Bit-identity with the CPU path: no FMA contraction, denormals kept, IEEE division; the
  # kernels also use the _rn intrinsics, and check_ptx.cmake refuses a PTX with fma/.ftz/approx.
  set(LITE_NVCC_FLAGS -std=c++17 -O3 -fmad=false -ftz=false -prec-div=true -prec-sqrt=true
    -Werror all-warnings)
  set(gencode "")
  foreach(a ${LITE_CUDA_ARCHS})
    list(APPEND gencode -gencode arch=compute_${a},code=sm_${a})
    set(last ${a})
  endforeach()
  list(APPEND gencode -gencode arch=compute_${last},code=compute_${last})
  list(GET LITE_CUDA_ARCHS 0 first)
  set(fatbin ${PROJECT_BINARY_DIR}/cuda/litetx_kernels.fatbin)
  set(ptx ${PROJECT_BINARY_DIR}/cuda/litetx_kernels.ptx)
  add_custom_command(OUTPUT ${ptx}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/cuda
    COMMAND ${LITE_NVCC} ${LITE_NVCC_FLAGS} -arch=compute_${first} -ptx -o ${ptx}
            ${LITE_CUDA_SOURCES}
    COMMAND ${CMAKE_COMMAND} -DPTX=${ptx} -P ${PROJECT_SOURCE_DIR}/cmake/check_ptx.cmake
    DEPENDS ${LITE_CUDA_SOURCES} ${LITE_CUDA_HEADERS} ${PROJECT_SOURCE_DIR}/cmake/check_ptx.cmake
    COMMENT "nvcc: PTX of the reduction kernels, checked for fma/.ftz/approx" VERBATIM)
  add_custom_command(OUTPUT ${fatbin}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/cuda
    COMMAND ${LITE_NVCC} ${LITE_NVCC_FLAGS} ${gencode} --fatbin -Xfatbin -compress-all
            -o ${fatbin} ${LITE_CUDA_SOURCES}
    DEPENDS ${LITE_CUDA_SOURCES} ${LITE_CUDA_HEADERS} ${ptx}
    COMMENT "nvcc: fatbin of the reduction kernels" VERBATIM)
  add_custom_target(litetx_cuda_kernels DEPENDS ${fatbin} ${ptx})
  set(embed ${PROJECT_SOURCE_DIR}/src/cuda/fatbin.c)
  set_source_files_properties(${embed} PROPERTIES
    OBJECT_DEPENDS ${fatbin}
    COMPILE_DEFINITIONS "LITE_CUDA_FATBIN_PATH=\"${fatbin}\"")
  list(APPEND LITE_BACKEND_SOURCES ${embed})
  list(APPEND LITE_BACKEND_DEFS LITE_HAVE_CUDA_KERNELS=1)
  string(REPLACE ";" ", sm_" archs "${LITE_CUDA_ARCHS}")
  message(STATUS "CUDA kernels: yes (${LITE_NVCC}; sm_${archs} + PTX compute_${last})")
else()
  message(STATUS "CUDA kernels: no (LITE_WITH_CUDA=${LITE_WITH_CUDA}; nvcc not found or OFF)")
endif()
