#!/usr/bin/env bash
# quickstart.sh - the two commands of README.md, on a fresh Debian 12 machine.
#
#   scripts/quickstart.sh demo [N]   install what is missing, build, run the ring demo on N ranks
#   scripts/quickstart.sh test       install what is missing, build, run the whole test suite:
#                                    the dev build, then an ASan+UBSan build of the same suite
#
# Environment: BUILD_DIR (default build), JOBS (default 2), SKIP_SANITIZERS=1 to skip the
# sanitizer pass of `test`, RXE_VM_TOOLS (the Soft-RoCE VM tools for rdma.vm_suite, which is
# skipped without them; docs/RDMA.md; default: CI's copy when present). Each mode sets every build option it relies on, so the two modes can
# share BUILD_DIR in either order (CMake would otherwise keep the other mode's cached values).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-2}

# Debian packages the build needs; the test suite adds what its real peers and launchers need.
PACKAGES=(build-essential cmake pkg-config libjson-c-dev libcmocka-dev)
# The test suite builds every backend that can run here and runs each against real components:
#   rdma: libibverbs, and a Soft-RoCE qemu VM (the Soft-RoCE VM tools, RXE_VM_TOOLS) with
#         perftest as the peer;
#   efa:  libfabric with its tcp;ofi_rxm and shm providers;
#   mpirun: the same test binary launched by Open MPI;
#   man.check: groff formats every man page with its warnings on;
#   quic: ngtcp2 with its GnuTLS crypto helper.
TEST_PACKAGES=(openmpi-bin libibverbs-dev librdmacm-dev libfabric-dev libfabric-bin
    qemu-system-x86 kmod cpio busybox-static libibverbs1 ibverbs-providers librdmacm1
    ibverbs-utils rdmacm-utils iproute2 xz-utils binutils perftest clang libclang-rt-14-dev
    groff-base libngtcp2-dev libngtcp2-crypto-gnutls-dev libgnutls28-dev)

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

# The options of the test suite's builds, all of them, whatever an earlier configure cached.
TEST_OPTIONS=(-DLITE_BUILD_TESTS=ON -DLITE_BUILD_BENCH=ON -DLITE_BUILD_EXAMPLES=ON -DLITE_WERROR=ON)

# run_suite DIR MIN_TESTS TIMEOUT [EXCLUDE]: run every test of DIR (but those whose name matches
# the regex EXCLUDE); fail when none ran, when fewer than MIN_TESTS are selected (a build that
# lost its tests), or when ctest ran fewer than it listed.
run_suite() {
    local dir=$1 min=$2 timeout=$3 exclude=${4:-}
    local sel=()
    [ -n "$exclude" ] && sel=(-E "$exclude")
    local listed
    listed=$(ctest --test-dir "$dir" -N "${sel[@]}" | sed -n 's/^Total Tests: //p')
    if [ "${listed:-0}" -lt "$min" ]; then
        echo "quickstart: $dir lists ${listed:-0} tests, expected at least $min" >&2
        return 1
    fi
    local log="$dir/quickstart-ctest.log" rc=0
    ctest --test-dir "$dir" --output-on-failure --no-tests=error -j 1 --timeout "$timeout" \
        "${sel[@]}" 2>&1 | tee "$log" || rc=$?
    [ "$rc" -eq 0 ] || return "$rc"
    local ran
    ran=$(sed -n 's/.*tests passed, [0-9]* tests failed out of \([0-9]*\)$/\1/p' "$log" | tail -1)
    if [ "${ran:-0}" != "$listed" ]; then
        echo "quickstart: ctest ran ${ran:-0} of the $listed tests listed in $dir" >&2
        return 1
    fi
}

# The sanitizer pass runs every test once per code path, not once per configuration of the same
# path: the variants that only re-run tcp or efa's code with another setting (one bulk
# connection, lazy connects, two rails) and the longest soaks of efa run in the plain pass only.
ASAN_EXCLUDE='^mp\.(tcp_bulk1|tcp_lazy|efa_tcp_2rails)\.|^mp\.efa_(tcp|shm)\.kill_soak$'

# Fewer tests than this in a build means it lost some (the dev build has ~470, the sanitizer
# pass selects ~360).
MIN_TESTS=300

case "$mode" in
demo)
    n=${2:-4}
    install_missing
    build "$BUILD_DIR" -DLITE_BUILD_TESTS=OFF -DLITE_BUILD_BENCH=OFF -DLITE_BUILD_EXAMPLES=ON \
        -DLITE_SANITIZE=
    "$BUILD_DIR"/litetx-run -n "$n" -t 120 "$BUILD_DIR"/examples/ring_demo
    ;;
test)
    PACKAGES+=("${TEST_PACKAGES[@]}")
    install_missing
    # CI keeps the Soft-RoCE VM tools next to its checkout; anywhere else RXE_VM_TOOLS names them.
    if [ -z "${RXE_VM_TOOLS:-}" ] && [ -x ../shared/tools/rxe-vm/rxe-vm-run.sh ]; then
        RXE_VM_TOOLS=$(cd ../shared/tools/rxe-vm && pwd)
    fi
    if [ -n "${RXE_VM_TOOLS:-}" ]; then
        export RXE_VM_TOOLS
        echo "== Soft-RoCE VM tools: RXE_VM_TOOLS=$RXE_VM_TOOLS"
    else
        echo "== RXE_VM_TOOLS not set: rdma.vm_suite will be skipped (docs/RDMA.md)"
    fi
    echo "== dev build and test suite ($BUILD_DIR)"
    if [ "${QUICKSTART_LIST_ONLY:-0}" = 1 ]; then # configure and list only: tests/quickstart_order.sh
        cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${TEST_OPTIONS[@]}" \
            -DLITE_SANITIZE= >/dev/null
        ctest --test-dir "$BUILD_DIR" -N | tail -1
        exit 0
    fi
    build "$BUILD_DIR" "${TEST_OPTIONS[@]}" -DLITE_SANITIZE=
    run_suite "$BUILD_DIR" "$MIN_TESTS" 600
    if [ "${SKIP_SANITIZERS:-0}" != 1 ]; then
        echo "== ASan + UBSan build and test suite (${BUILD_DIR}-asan)"
        build "${BUILD_DIR}-asan" "${TEST_OPTIONS[@]}" -DLITE_SANITIZE=address,undefined \
            -DLITE_BUILD_BENCH=OFF
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
            run_suite "${BUILD_DIR}-asan" "$MIN_TESTS" 900 "$ASAN_EXCLUDE"
    fi
    ;;
*)
    sed -n '2,10p' "$0"
    exit 2
    ;;
esac
