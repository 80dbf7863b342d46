#!/usr/bin/env bash
# run_tls_compare.sh - the tcp transport with security off and with TLS 1.3 (ca mode), side by
# side, in rounds that alternate which goes first (the host is shared), medians over the rounds:
# 8-byte latency (one-way, p50), streaming send/recv bandwidth at 64 KiB, 1 MiB and 16 MiB
# (litetx_bench bw), and one-sided write_imm at 1 MiB in the same sliding-window shape
# (bench_rma -S), the CPU time per byte of a fixed 16 MiB stream (both ranks, user + system), then
# the ratios the security section of docs/TCP.md quotes, of the medians and round by round.
#
#   bench/run_tls_compare.sh BUILD_DIR [BASE_BUILD_DIR]
#
# BASE_BUILD_DIR (optional): another build (e.g. of an earlier commit) measured with TLS in the
# same rounds ("base_tls": A/B of the TLS path). Credentials are made with tests/tls/gen_certs.sh
# in a temporary directory. Knobs: RUNS=5 SECS=1 SIZES=64K,1M,16M.
set -euo pipefail
build=$1 base=${2:-}
runs=${RUNS:-5} secs=${SECS:-1} sizes=${SIZES:-64K,1M,16M}
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$here/tests/tls/gen_certs.sh" "$tmp/certs" 2 >/dev/null
tls_env=(LITETX_SECURITY=ca "LITETX_SECURITY_CA=$tmp/certs/ca.pem"
    "LITETX_SECURITY_CERT=$tmp/certs/rank{rank}.pem" "LITETX_SECURITY_KEY=$tmp/certs/rank{rank}.key")
one() { # name build-dir env... ; appends "name metric size value" lines
    local name=$1 dir=$2
    shift 2
    local run=(timeout 300 "$dir/litetx-run" -n 2 --transport tcp)
    env "$@" "${run[@]}" "$dir/bench/litetx_bench" lat -s 8 -r 3 -T "$secs" \
        --csv "$tmp/lat.csv" >/dev/null 2>&1
    awk -F, -v n="$name" -v r="$r" '$8=="median" && $5=="oneway_p50" {print n, "lat_us", $4, $6, r}' \
        "$tmp/lat.csv" >> "$tmp/all"
    env "$@" "${run[@]}" "$dir/bench/litetx_bench" bw -s "$sizes" -r 3 -T "$secs" \
        --csv "$tmp/bw.csv" >/dev/null 2>&1
    awk -F, -v n="$name" -v r="$r" '$8=="median" && $5=="bw" {print n, "MB/s", $4, $6, r}' \
        "$tmp/bw.csv" >> "$tmp/all"
    env "$@" "${run[@]}" "$dir/bench/bench_rma" -S -s 1M -r 3 -I 1000 2>/dev/null |
        awk -v n="$name" -v r="$r" '$1 ~ /^[0-9]+$/ {print n, "write_imm_MB/s", $1, $4, r}' >> "$tmp/all"
    # CPU time of both ranks (user + system) per byte for a fixed 42 x 16 MiB stream: the cost,
    # which a shared host's load does not change the way it changes MB/s.
    if [ -x /usr/bin/time ]; then
        env "$@" /usr/bin/time -f "%U %S" -o "$tmp/cpu" "${run[@]}" "$dir/bench/litetx_bench" bw \
            -s 16M -i 40 --warmup 2 -r 1 >/dev/null 2>&1 &&
            awk -v n="$name" -v r="$r" '{printf "%s cpu_ns_per_byte 16777216 %.3f %s\n", n,
                ($1 + $2) * 1e9 / (42 * 16777216), r}' "$tmp/cpu" >> "$tmp/all"
    fi
}
: > "$tmp/all"
for r in $(seq 1 "$runs"); do
    if [ $((r % 2)) = 1 ]; then
        one plain "$build" LITETX_SECURITY=off
        one tls "$build" "${tls_env[@]}"
        [ -n "$base" ] && one base_tls "$base" "${tls_env[@]}"
    else
        [ -n "$base" ] && one base_tls "$base" "${tls_env[@]}"
        one tls "$build" "${tls_env[@]}"
        one plain "$build" LITETX_SECURITY=off
    fi
done
echo "config metric size median [min-max] over $runs rounds"
python3 - "$tmp/all" <<'PY'
import statistics, sys
v, per = {}, {}
for line in open(sys.argv[1]):
    name, metric, size, val, rnd = line.split()
    v.setdefault((name, metric, int(size)), []).append(float(val))
    per[(name, metric, int(size), int(rnd))] = float(val)
for k in sorted(v):
    x = v[k]
    print(k[0], k[1], k[2], "%.1f [%.1f-%.1f]" % (statistics.median(x), min(x), max(x)))
med = {k: statistics.median(x) for k, x in v.items()}
print("ratios (medians)")
for k in sorted(med):
    name, metric, size = k
    if name == "tls" and ("plain", metric, size) in med and med[("plain", metric, size)]:
        rr = [per[(name, metric, size, r)] / per[("plain", metric, size, r)]
              for r in sorted({k2[3] for k2 in per})
              if (name, metric, size, r) in per and per.get(("plain", metric, size, r))]
        print("tls/plain", metric, size, "%.2f" % (med[k] / med[("plain", metric, size)]),
              "rounds:", " ".join("%.2f" % x for x in rr))
wi, bw = med.get(("tls", "write_imm_MB/s", 1048576)), med.get(("tls", "MB/s", 1048576))
if wi and bw:
    print("tls write_imm/send 1048576 %.2f" % (wi / bw))
PY
