# The RDMA backend's tests, included from src/transports/rdma/CMakeLists.txt at the end of the
# top directory (after the library exists and testing is enabled).
#
# rdma.vm_suite boots the Soft-RoCE VM (../shared/tools/rxe-vm) once and runs the project's
# multi-process suite over LITETX_TRANSPORT=rdma on rxe0, plus the perftest comparison. Where
# qemu or the VM image cannot be had it is reported SKIPPED (exit 77) with the reason.
get_property(lite_rdma_built GLOBAL PROPERTY LITE_RDMA_BUILT)
if(NOT lite_rdma_built)
  add_test(NAME rdma.vm_suite COMMAND sh -c
    "echo 'SKIPPED: rdma.vm_suite: the rdma backend is not built (LITE_WITH_RDMA=${LITE_WITH_RDMA}; needs libibverbs-dev)'; exit 77")
  set_tests_properties(rdma.vm_suite PROPERTIES LABELS "rdma;vm" SKIP_RETURN_CODE 77)
  return()
endif()

set(LITE_RDMA_TESTS ${PROJECT_SOURCE_DIR}/tests/rdma)
set(LITE_RDMA_TESTS_BIN ${PROJECT_BINARY_DIR}/tests/rdma)

add_executable(rdma_perf ${LITE_RDMA_TESTS}/rdma_perf.c)
target_link_libraries(rdma_perf PRIVATE litetx)
set_target_properties(rdma_perf PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${LITE_RDMA_TESTS_BIN})

# the in-VM script lives in the build tree, which the VM mounts
configure_file(${LITE_RDMA_TESTS}/vm_suite.sh ${LITE_RDMA_TESTS_BIN}/vm_suite.sh COPYONLY)
# ...and so does the kill-a-peer soak's script, which the suite runs there
configure_file(${PROJECT_SOURCE_DIR}/tests/mp/kill_soak.sh ${LITE_RDMA_TESTS_BIN}/kill_soak.sh
  COPYONLY)

add_test(NAME rdma.vm_suite
  COMMAND ${LITE_RDMA_TESTS}/run_vm_suite.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(rdma.vm_suite PROPERTIES TIMEOUT 1080 LABELS "rdma;vm" SKIP_RETURN_CODE 77
  RUN_SERIAL TRUE)
if(LITE_SANITIZE)
  # Sanitized binaries run several times slower under TCG: the shorter case list, no perf.
  set_tests_properties(rdma.vm_suite PROPERTIES
    ENVIRONMENT "RDMA_SUITE_QUICK=1;RDMA_SUITE_NO_PERF=sanitizer build (${LITE_SANITIZE})")
endif()

# On a host without an RDMA device, "auto" must fall back to tcp and say so.
add_test(NAME rdma.auto_fallback
  COMMAND ${LITE_RDMA_TESTS}/auto_fallback.sh $<TARGET_FILE:litetx-run> $<TARGET_FILE:p2p_test>)
set_tests_properties(rdma.auto_fallback PROPERTIES TIMEOUT 120 LABELS "rdma"
  SKIP_RETURN_CODE 77)
