#!/usr/bin/env bash
# run_vm_suite.sh BUILD_DIR [SOURCE_DIR] - CTest rdma.vm_suite: boot the Soft-RoCE VM once
# (with the Soft-RoCE VM tools, RXE_VM_TOOLS; docs/RDMA.md) with BUILD_DIR shared, and run
# tests/rdma/vm_suite.sh inside: the multi-process suite over LITETX_TRANSPORT=rdma on rxe0,
# two-rail runs, and perftest vs liblitetx. Builds nothing of the project; builds the VM image
# (build-image.sh) if it is missing.
#
# Exit: 0 passed; 1 failed; 77 skipped (printed reason: RXE_VM_TOOLS unset or without the
# tools, no qemu, no image, no libibverbs-built tests). Environment: RXE_VM_TOOLS (the folder
# holding rxe-vm-run.sh and build-image.sh; required), RXE_VM_DIR (image), RDMA_SUITE_QUICK=1
# (fewer cases), RDMA_SUITE_ONLY=perf (only the perftest comparison, 5 rounds),
# RDMA_SUITE_ONLY=kill_soak (only the kill-a-peer soak, RDMA_KILL_TRIALS trials, default 30),
# RDMA_SUITE_ONLY=cm (the cases with LITETX_RDMA_CM=1), RDMA_SUITE_ONLY=qp_error (forced breaks:
# resumed, budget, reconnection off, mixed traffic) or =reconnect (mixed traffic only),
# RDMA_RECONNECT_REPEAT=N (those: N more mixed runs), RDMA_PERF_CM=1 (perf: also rdma_cm),
# RDMA_PERF_BASE_LIB=DIR (perf: also another build's liblitetx.so, DIR inside BUILD_DIR),
# RDMA_PERF_ROUNDS (default 1 in the full run), RDMA_VM_TIMEOUT (seconds, default 1000).
set -uo pipefail
BUILD=${1:?usage: run_vm_suite.sh BUILD_DIR [SOURCE_DIR]}
SRC=${2:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=$(cd "$BUILD" && pwd)
skip() { echo "SKIPPED: rdma.vm_suite: $*"; exit 77; }

[ -n "${RXE_VM_TOOLS:-}" ] ||
    skip "RXE_VM_TOOLS is not set (the folder of the Soft-RoCE VM tools rxe-vm-run.sh and build-image.sh; docs/RDMA.md)"
TOOLS=$RXE_VM_TOOLS
[ -x "$TOOLS/rxe-vm-run.sh" ] || skip "RXE_VM_TOOLS=$TOOLS holds no executable rxe-vm-run.sh"
command -v qemu-system-x86_64 > /dev/null || skip "qemu-system-x86_64 not installed (apt-get install qemu-system-x86)"
[ -x "$BUILD/tests/rdma/vm_suite.sh" ] || [ -f "$BUILD/tests/rdma/vm_suite.sh" ] ||
    skip "$BUILD/tests/rdma/vm_suite.sh missing (configure with libibverbs-dev installed)"
for b in litetx-run tests/mp/p2p_test tests/mp/rma_test tests/rdma/rdma_perf; do
    [ -x "$BUILD/$b" ] || skip "$BUILD/$b not built"
done
IMAGE=${RXE_VM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rxe-vm}
if ! [ -f "$IMAGE/initramfs.cpio" ]; then
    echo "rdma.vm_suite: building the VM image in $IMAGE (kernel .deb download, ~30 s)"
    "$TOOLS/build-image.sh" --out "$IMAGE" > "$BUILD/tests/rdma/build-image.log" 2>&1 ||
        skip "cannot build the VM image (see $BUILD/tests/rdma/build-image.log): $(tail -n 2 "$BUILD/tests/rdma/build-image.log" | tr '\n' ' ')"
fi
chmod +x "$BUILD/tests/rdma/vm_suite.sh"
# perftest for the comparison (optional: without it the perf section is skipped)
FILES=()
for p in ib_write_bw ib_write_lat; do
    c=$(command -v "$p" || true)
    [ -n "$c" ] && FILES+=(--file "$c")
done
# bash for the kill-a-peer soak's script (the image has busybox sh only)
c=$(command -v bash || true)
[ -n "$c" ] && FILES+=(--file "$c")
LOG="$BUILD/tests/rdma/vm-console.log"
cd "$BUILD"
"$TOOLS/rxe-vm-run.sh" --image "$IMAGE" --share "$BUILD" --mem 2048 \
    --timeout "${RDMA_VM_TIMEOUT:-1000}" --log "$LOG" ${FILES[@]+"${FILES[@]}"} \
    --env "RDMA_SUITE_QUICK=${RDMA_SUITE_QUICK:-0}" --env "RDMA_SUITE_ONLY=${RDMA_SUITE_ONLY:-}" \
    --env "RDMA_SCALE_NS=${RDMA_SCALE_NS:-4,8,16}" \
    --env "RDMA_SUITE_NO_PERF=${RDMA_SUITE_NO_PERF:-}" \
    --env "RDMA_PERF_CM=${RDMA_PERF_CM:-}" --env "RDMA_PERF_BASE_LIB=${RDMA_PERF_BASE_LIB:-}" \
    --env "RDMA_CM_KILL_TRIALS=${RDMA_CM_KILL_TRIALS:-}" \
    --env "RDMA_KILL_TRIALS=${RDMA_KILL_TRIALS:-}" --env "RDMA_RECONNECT_REPEAT=${RDMA_RECONNECT_REPEAT:-}" --env "RDMA_KILL_SEED=${RDMA_KILL_SEED:-}" \
    --env "ASAN_OPTIONS=${ASAN_OPTIONS:-}" --env "UBSAN_OPTIONS=${UBSAN_OPTIONS:-}" \
    --env "RDMA_PERF_ROUNDS=${RDMA_PERF_ROUNDS:-$([ "${RDMA_SUITE_ONLY:-}" = perf ] && echo 5 || echo 1)}" \
    "$BUILD/tests/rdma/vm_suite.sh"
rc=$?
case $rc in
    0) exit 0 ;;
    125|126|124)
        # The VM did not run the suite: a broken VM setup is a failure, not a skip, unless the
        # accelerator/emulator itself is missing (caught above).
        echo "rdma.vm_suite: the VM did not complete (rxe-vm-run exit $rc); console: $LOG"
        exit 1 ;;
    *) exit 1 ;;
esac
