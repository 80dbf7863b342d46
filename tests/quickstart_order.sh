#!/usr/bin/env bash
# The README's two commands in the order a new user runs them: `quickstart.sh demo` configures a
# build without tests; `quickstart.sh test` on the same build directory must still get the whole
# suite (CMake keeps cached options, so the test mode has to set every one it relies on).
#   quickstart_order.sh MIN_TESTS
set -euo pipefail
min=${1:?usage: quickstart_order.sh MIN_TESTS}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
BUILD_DIR=$tmp/build "$root"/scripts/quickstart.sh demo 2 >"$tmp/demo.log" 2>&1 || {
    cat "$tmp/demo.log"
    echo "FAIL: quickstart.sh demo failed"
    exit 1
}
grep -q "all ranks received intact data" "$tmp/demo.log" || {
    cat "$tmp/demo.log"
    echo "FAIL: the demo did not report intact data"
    exit 1
}
out=$(BUILD_DIR=$tmp/build QUICKSTART_LIST_ONLY=1 "$root"/scripts/quickstart.sh test)
n=$(sed -n 's/^Total Tests: //p' <<<"$out")
echo "after demo, the test mode lists ${n:-0} tests"
if [ "${n:-0}" -lt "$min" ]; then
    echo "FAIL: expected at least $min"
    exit 1
fi
echo "PASS"
