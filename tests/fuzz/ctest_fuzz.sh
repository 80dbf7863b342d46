#!/usr/bin/env bash
# ctest_fuzz.sh SOURCE_DIR FUZZ_BUILD_DIR SECONDS - the test suite's fuzz pass: configure and
# build the libFuzzer targets with clang in FUZZ_BUILD_DIR (LITE_BUILD_FUZZ=ON: ASan + UBSan +
# coverage), then run_fuzz.sh each for SECONDS. Exit 77 (SKIPPED) only when there is no clang.
set -euo pipefail
src=${1:?usage: ctest_fuzz.sh SOURCE_DIR FUZZ_BUILD_DIR SECONDS}
build=${2:?usage: ctest_fuzz.sh SOURCE_DIR FUZZ_BUILD_DIR SECONDS}
secs=${3:?usage: ctest_fuzz.sh SOURCE_DIR FUZZ_BUILD_DIR SECONDS}

cc=$(command -v clang || true)
if [ -z "$cc" ]; then
    echo "SKIPPED: clang not found (Debian: apt-get install clang libclang-rt-14-dev)"
    exit 77
fi
mkdir -p "$build"
log="$build/fuzz-build.log"
# -Werror stays with the dev build (gcc): clang warns about other things, and a warning in code
# under edit must not hide what the fuzzers find.
if ! { cmake -S "$src" -B "$build" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DLITE_BUILD_FUZZ=ON -DLITE_SANITIZE=address,undefined -DLITE_WERROR=OFF \
    -DLITE_BUILD_TESTS=OFF -DLITE_BUILD_BENCH=OFF -DLITE_BUILD_EXAMPLES=OFF &&
    cmake --build "$build" -j "${JOBS:-2}" --target fuzz_all; } >"$log" 2>&1; then
    tail -40 "$log"
    echo "FAIL: the fuzz build failed with $cc (is libclang-rt-14-dev, the libFuzzer runtime, there?)"
    exit 1
fi
exec "$src/tests/fuzz/run_fuzz.sh" "$build" "$secs"
