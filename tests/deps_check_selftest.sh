#!/usr/bin/env bash
# deps_check_selftest.sh - tests/deps_check.sh catches what the includes cannot show: a copy of
# the sources in which a low module (util.c, in the base) calls the public lite_send must fail
# the check, naming that call; the unmodified copy must pass.
#
#   tests/deps_check_selftest.sh SOURCE_DIR
set -u
SRC=${1:?usage: deps_check_selftest.sh SOURCE_DIR}
CHECK="$(cd "$(dirname "$0")" && pwd)/deps_check.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/docs" "$tmp/include/litetx" "$tmp/src"
cp "$SRC/docs/HACKING.md" "$tmp/docs/"
cp "$SRC/include/litetx/litetx.h" "$tmp/include/litetx/"
cp -r "$SRC/src/core" "$SRC/src/support" "$tmp/src/"
if ! out=$(bash "$CHECK" "$tmp" 2>&1); then
    echo "FAIL: the unmodified copy fails the check:"; echo "$out"; exit 1
fi
printf '\nint lite_util_selftest_call(void *ctx)\n{\n    return lite_send(ctx, 0, 0, 0, 0, 0);\n}\n' \
    >> "$tmp/src/core/util.c"
if out=$(bash "$CHECK" "$tmp" 2>&1); then
    echo "FAIL: util.c calling lite_send passes the check:"; echo "$out"; exit 1
fi
if ! grep -q 'util.c calls lite_send() of the public API' <<<"$out"; then
    echo "FAIL: the check failed without naming the call:"; echo "$out"; exit 1
fi
echo "ok: a public call from a low module fails the check:"
echo "$out"
