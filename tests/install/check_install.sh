#!/usr/bin/env bash
# Install the built project into a scratch prefix, then build and run a consumer against it with
# find_package(litetx) and with pkg-config. Usage: check_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
lib=$(ls "$tmp"/prefix/lib*/liblitetx.so.0 2>/dev/null || ls "$tmp"/prefix/lib/*/liblitetx.so.0)
[ -e "$lib" ] || { echo "liblitetx.so.0 (soname link) not installed"; exit 1; }
objdump -p "$lib" | grep -q 'SONAME *liblitetx.so.0' || { echo "wrong SONAME"; exit 1; }
# Only lite_* symbols are exported.
bad=$(nm -D --defined-only "$lib" | awk '$2 ~ /[TDB]/ {print $3}' | grep -v '^lite_' || true)
[ -z "$bad" ] || { echo "symbols exported outside the lite_ namespace: $bad"; exit 1; }
libdir=$(dirname "$lib")
cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
    >/dev/null
PKG_CONFIG_PATH="$libdir/pkgconfig" cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" \
    >/dev/null
cmake --build "$tmp/consumer" >/dev/null
LD_LIBRARY_PATH="$libdir" "$tmp/consumer/consumer_cmake"
LD_LIBRARY_PATH="$libdir" "$tmp/consumer/consumer_pc"
