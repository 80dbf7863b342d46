#!/usr/bin/env bash
# run_tls_compare.sh - the tcp transport with security off and with TLS 1.3 (ca mode), side by
# side: 8-byte latency (one-way, p50) and streaming bandwidth at 64 KiB and 1 MiB, in rounds
# that alternate which goes first (the host is shared), medians over the rounds.
#
#   bench/run_tls_compare.sh BUILD_DIR [BASE_BUILD_DIR]
#
# BASE_BUILD_DIR (optional): another build (e.g. of the previous commit) whose plaintext 8-byte
# latency is measured in the same rounds (A/B of the plaintext path). Credentials are made with
# tests/tls/gen_certs.sh in a temporary directory. Knobs: RUNS=5 SECS=1.
set -euo pipefail
build=$1 base=${2:-}
runs=${RUNS:-5} secs=${SECS:-1}
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$here/tests/tls/gen_certs.sh" "$tmp/certs" 2 >/dev/null
tls_env=(LITETX_SECURITY=ca "LITETX_SECURITY_CA=$tmp/certs/ca.pem"
    "LITETX_SECURITY_CERT=$tmp/certs/rank{rank}.pem" "LITETX_SECURITY_KEY=$tmp/certs/rank{rank}.key")
one() { # name build-dir env... ; appends "name metric size value" lines
    local name=$1 dir=$2
    shift 2
    env "$@" timeout 120 "$dir/litetx-run" -n 2 --transport tcp "$dir/bench/litetx_bench" lat \
        -s 8 -r 3 -T "$secs" --csv "$tmp/lat.csv" >/dev/null 2>&1
    awk -F, -v n="$name" '$8=="median" && $5=="oneway_p50" {print n, "lat_us", $4, $6}' \
        "$tmp/lat.csv" >> "$tmp/all"
    [ "$name" = base ] && return 0
    env "$@" timeout 120 "$dir/litetx-run" -n 2 --transport tcp "$dir/bench/litetx_bench" bw \
        -s 64K,1M -r 3 -T "$secs" --csv "$tmp/bw.csv" >/dev/null 2>&1
    awk -F, -v n="$name" '$8=="median" && $5=="bw" {print n, "MB/s", $4, $6}' \
        "$tmp/bw.csv" >> "$tmp/all"
}
: > "$tmp/all"
for r in $(seq 1 "$runs"); do
    if [ $((r % 2)) = 1 ]; then
        one plain "$build" LITETX_SECURITY=off
        one tls "$build" "${tls_env[@]}"
        [ -n "$base" ] && one base "$base" LITETX_SECURITY=off
    else
        [ -n "$base" ] && one base "$base" LITETX_SECURITY=off
        one tls "$build" "${tls_env[@]}"
        one plain "$build" LITETX_SECURITY=off
    fi
done
echo "config metric size median [min-max] over $runs rounds"
python3 - "$tmp/all" <<'PY'
import statistics, sys
v = {}
for line in open(sys.argv[1]):
    name, metric, size, val = line.split()
    v.setdefault((name, metric, int(size)), []).append(float(val))
for k in sorted(v):
    x = v[k]
    print(k[0], k[1], k[2], "%.1f [%.1f-%.1f]" % (statistics.median(x), min(x), max(x)))
PY
