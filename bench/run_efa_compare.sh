#!/bin/bash
# run_efa_compare.sh - the EFA backend against fabtests on the same libfabric provider: write_imm
# bandwidth (bench_rma vs `fi_rma_bw -o writedata`) at 64 KiB / 1 MiB / 16 MiB and 8-byte
# ping-pong latency (litetx_bench lat vs fi_rdm_pingpong), for tcp;ofi_rxm and shm.
#
#   bench/run_efa_compare.sh BUILD_DIR [ROUNDS] [PROVIDERS]     (default 8, "tcp shm")
#
# FABTESTS_BIN: directory with fi_rma_bw and fi_rdm_pingpong (fabtests from libfabric v1.17.0,
# built outside the repository: docs/PERFORMANCE.md, Peer tools). Required: this script compares.
#
# Method (the host is shared and noisy, see docs/EFA.md "Performance"):
#   - before every single run, wait (up to QUIET_WAIT s, default 30) until both CPUs were less
#     than 15 % busy over one second;
#   - odd rounds run fabtests first, even rounds liblitetx first, and ROUNDS is rounded up to an
#     even number. Whichever program runs first after the gate is often faster (shm 16 MiB: the
#     first one won 7 rounds of 8 in one run), so with an odd number of rounds the
#     median ratio leans towards the program that went first more often;
#   - pinned like the peers' runs: the passive side (fabtests server; liblitetx rank 1 = write
#     target / ping-pong responder) on CPU 0, the active side on CPU 1.
# Iterations/window as the peers' runs: 10000/64 at 64 KiB, 2000/64 at 1 MiB, 200/16 at 16 MiB;
# 20000 round trips for latency. Bandwidth in MB/s (decimal); latency is one-way us over the whole
# run (fi_rdm_pingpong's figure; litetx_bench's ow_run column, no clock read inside the loop).
# Output: per-round lines on stderr, then a table: medians, and the ratio liblitetx / fabtests
# (the targets: >= 0.9 for bandwidth, <= 1.1 for latency) as the median of the per-round
# ratios, with the median of the per-pair geometric means (a pair = a round where fabtests went
# first and the next, where liblitetx did) beside it.
# Save whole outputs (`> runN.txt 2>&1`): bench/efa_pool.sh pools the rounds of several runs.
set -u
BUILD=${1:?usage: run_efa_compare.sh BUILD_DIR [ROUNDS] [PROVIDERS]}
ROUNDS=${2:-8}
PROVS=${3:-"tcp shm"}
ROUNDS=$(((ROUNDS + 1) / 2 * 2))
FAB=${FABTESTS_BIN:-}
QUIET_WAIT=${QUIET_WAIT:-30}
for f in fi_rma_bw fi_rdm_pingpong; do
    [ -x "$FAB/$f" ] || { echo "$FAB/$f not found (set FABTESTS_BIN)" >&2; exit 2; }
done
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# Wait until both CPUs were < 15 % busy over one second, at most QUIET_WAIT seconds.
quiet() {
    local end=$(($(date +%s) + QUIET_WAIT)) a b c d e f g h t1 i1 t2 i2
    while :; do
        read -r _ a b c d e f g h _ < /proc/stat
        t1=$((a + b + c + d + e + f + g + h)) i1=$((d + e))
        sleep 1
        read -r _ a b c d e f g h _ < /proc/stat
        t2=$((a + b + c + d + e + f + g + h)) i2=$((d + e))
        [ $((100 - 100 * (i2 - i1) / (t2 - t1))) -lt 15 ] && return
        [ "$(date +%s)" -ge $end ] && return
    done
}

# fabtests server on CPU 0, client on CPU 1; prints the client's figure (column $2 of its row).
fab() { # prov col program args...
    local prov=$1 col=$2 prog=$3
    shift 3
    timeout 120 taskset -c 0 "$FAB/$prog" -p "$prov" "$@" -s 127.0.0.1 > "$OUT/srv" 2>&1 &
    local srv=$!
    sleep 0.5
    timeout 120 taskset -c 1 "$FAB/$prog" -p "$prov" "$@" -s 127.0.0.1 127.0.0.1 2> /dev/null |
        awk -v c="$col" 'NF == 7 && $1 !~ /bytes/ { v = $c } END { print v }'
    wait $srv
}

lite() { # provider program args... ; rank r on CPU 1 - r
    local prov=$1
    shift
    LITETX_EFA_PROVIDER=$prov timeout 300 "$BUILD/litetx-run" -n 2 --transport efa \
        sh -c 'exec taskset -c $((1 - LITETX_RANK)) "$0" "$@"' "$@" 2> /dev/null
}

run() { # who prov test
    local who=$1 prov=$2 test=$3 fprov=$2 s i w
    [ "$prov" = tcp ] && fprov="tcp;ofi_rxm"
    if [ "$test" = lat ]; then
        if [ "$who" = fab ]; then
            fab "$fprov" 6 fi_rdm_pingpong -S 8 -I 20000 -w 2001
        else
            lite "$prov" "$BUILD/bench/litetx_bench" lat -s 8 -i 20000 -r 1 |
                awk '$1 == "8" { print $4 }'
        fi
        return
    fi
    case $test in
    64K) s=65536 i=10000 w=64 ;;
    1M) s=1048576 i=2000 w=64 ;;
    16M) s=16777216 i=200 w=16 ;;
    esac
    if [ "$who" = fab ]; then
        fab "$fprov" 5 fi_rma_bw -o writedata -S $s -I $i -W $w -w $((i / 10 + 1))
    else
        lite "$prov" "$BUILD/bench/bench_rma" -s $s -I $i -W $w -r 1 | awk '$1 ~ /^[0-9]+$/ { print $4 }'
    fi
}

for r in $(seq "$ROUNDS"); do
    for p in $PROVS; do
        for t in 64K 1M 16M lat; do
            if [ $((r % 2)) = 1 ]; then order="fab lite"; else order="lite fab"; fi
            for who in $order; do
                quiet
                v=$(run $who $p $t)
                eval "res_$who=\${v:--}"
            done
            echo "$r $p $t $res_fab $res_lite" | tee -a "$OUT/rows" >&2
        done
    done
done

python3 - "$OUT/rows" << 'EOF'
import math, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    r, p, t, f, l = line.split()
    if f != "-" and l != "-":
        rows.setdefault((p, t), []).append((int(r), float(f), float(l)))
print("| provider | test | fabtests | liblitetx | ratio (median of rounds) [min-max] | ratio (median of pairs) |")
print("|---|---|---|---|---|---|")
for (p, t), v in rows.items():
    ratio = {r: l / f for r, f, l in v}
    pairs = [math.sqrt(ratio[r] * ratio[r + 1]) for r in ratio if r % 2 == 1 and r + 1 in ratio]
    unit = "us" if t == "lat" else "MB/s"
    rs = list(ratio.values())
    fmt = "%.2f" if t == "lat" else "%.0f"
    print("| %s | %s (%s) | %s | %s | %.2f [%.2f-%.2f] | %s |" % (
        p, t, unit, fmt % statistics.median(f for _, f, _ in v),
        fmt % statistics.median(l for _, _, l in v),
        statistics.median(rs), min(rs), max(rs),
        "%.2f" % statistics.median(pairs) if pairs else "-"))
EOF
