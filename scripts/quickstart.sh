#!/usr/bin/env bash
# quickstart.sh - the two commands of README.md, on a fresh Debian 12 machine.
#
#   scripts/quickstart.sh demo [N]   install what is missing, build, run the ring demo on N ranks
#   scripts/quickstart.sh test       install what is missing, build, run the whole test suite:
#                                    the dev build, then an ASan+UBSan build of the same suite
#
# Environment: BUILD_DIR (default build), JOBS (default 2), SKIP_SANITIZERS=1 to skip the
# sanitizer pass of `test`.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-2}

# Debian packages the build needs; the test suite adds what its real peers and launchers need.
PACKAGES=(build-essential cmake pkg-config libjson-c-dev libcmocka-dev)
# The test suite builds every backend that can run here and runs each against real components:
#   rdma: libibverbs, and a Soft-RoCE qemu VM (../shared/tools/rxe-vm) with perftest as the peer;
#   efa:  libfabric with its tcp;ofi_rxm and shm providers;
#   mpirun: the same test binary launched by Open MPI.
TEST_PACKAGES=(openmpi-bin libibverbs-dev libfabric-dev libfabric-bin
    qemu-system-x86 kmod cpio busybox-static libibverbs1 ibverbs-providers librdmacm1
    ibverbs-utils rdmacm-utils iproute2 xz-utils binutils perftest)

install_missing() {
    local missing=()
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "== installing: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

build() { # build DIR [cmake args...]
    local dir=$1
    shift
    cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
    cmake --build "$dir" -j "$JOBS"
}

case "$mode" in
demo)
    n=${2:-4}
    install_missing
    build "$BUILD_DIR" -DLITE_BUILD_TESTS=OFF
    "$BUILD_DIR"/litetx-run -n "$n" -t 120 "$BUILD_DIR"/examples/ring_demo
    ;;
test)
    PACKAGES+=("${TEST_PACKAGES[@]}")
    install_missing
    echo "== dev build and test suite ($BUILD_DIR)"
    build "$BUILD_DIR"
    ctest --test-dir "$BUILD_DIR" --output-on-failure -j 1 --timeout 600
    if [ "${SKIP_SANITIZERS:-0}" != 1 ]; then
        echo "== ASan + UBSan build and test suite (${BUILD_DIR}-asan)"
        build "${BUILD_DIR}-asan" -DLITE_SANITIZE=address,undefined -DLITE_BUILD_BENCH=OFF
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
            ctest --test-dir "${BUILD_DIR}-asan" --output-on-failure -j 1 --timeout 900
    fi
    ;;
*)
    sed -n '2,10p' "$0"
    exit 2
    ;;
esac
