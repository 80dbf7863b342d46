#!/bin/bash
# run_rma_compare.sh - one-sided write_imm bandwidth of liblitetx's TCP transport side by side
# with fabtests' `fi_rma_bw -o writedata -p "tcp;ofi_rxm"` on loopback, plus the paged KV shape
# (bench_rma -P PAGE) against plain writes of the same size; interleaved (the host is shared
# and noisy: docs/PERFORMANCE.md, Method).
#
#   bench/run_rma_compare.sh BUILD_DIR [ROUNDS] [SIZES] [PAGE]   (default 6, "1M 16M", 16K)
#
# FABTESTS_BIN: directory with fi_rma_bw (fabtests from libfabric v1.17.0, built outside the
# repository: docs/PERFORMANCE.md, Peer tools); without it only liblitetx runs.
# Each round runs, per size: fi_rma_bw (server pinned to CPU 0, client to CPU 1), bench_rma
# (write target = rank 1 on CPU 0, initiator = rank 0 on CPU 1), bench_rma -P PAGE; odd rounds
# start with fabtests, even rounds with liblitetx; ROUNDS is rounded up to an even number, since
# the program that runs first in a round is often the faster (docs/EFA.md, Performance). Iterations/window as the peers' runs:
# 2000/64 at 1 MiB, 200/16 at 16 MiB. Prints per-round MB/s and the medians of the per-round
# ratios. MB/s are decimal.
set -u
BUILD=${1:?usage: run_rma_compare.sh BUILD_DIR [ROUNDS] [SIZES] [PAGE]}
ROUNDS=${2:-6}
ROUNDS=$(((ROUNDS + 1) / 2 * 2))
SIZES=${3:-"1M 16M"}
PAGE=${4:-16K}
FAB=${FABTESTS_BIN:-}
[ -x "$FAB/fi_rma_bw" ] || { echo "# fi_rma_bw not found in $FAB: liblitetx only" >&2; FAB=""; }
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

bytes() { case $1 in *K) echo $((${1%K} * 1024)) ;; *M) echo $((${1%M} * 1048576)) ;; *) echo "$1" ;; esac; }

fab() { # size iters window -> MB/s
    local w=$(($2 / 10 + 1))
    timeout 120 taskset -c 0 "$FAB/fi_rma_bw" -o writedata -p "tcp;ofi_rxm" -S "$1" -I "$2" \
        -W "$3" -w $w -s 127.0.0.1 > "$OUT/srv" 2>&1 &
    local srv=$!
    sleep 0.3
    timeout 120 taskset -c 1 "$FAB/fi_rma_bw" -o writedata -p "tcp;ofi_rxm" -S "$1" -I "$2" \
        -W "$3" -w $w -s 127.0.0.1 127.0.0.1 2> /dev/null | awk 'NR == 2 { print $5 }'
    wait $srv
}

lite() { # size iters window [bench_rma options] -> MB/s (median of its 3 reps)
    local s=$1 i=$2 w=$3
    shift 3
    timeout 300 "$BUILD/litetx-run" -n 2 --transport tcp \
        sh -c 'exec taskset -c $((1 - LITETX_RANK)) "$0" "$@"' \
        "$BUILD/bench/bench_rma" -s "$s" -I "$i" -W "$w" -r 3 "$@" 2> /dev/null |
        awk '$1 ~ /^[0-9]+$/ { print $4 }'
}

for r in $(seq "$ROUNDS"); do
    for s in $SIZES; do
        b=$(bytes "$s")
        if [ "$b" -ge $((16 << 20)) ]; then it=200 win=16; else it=2000 win=64; fi
        f=- l=- p=-
        if [ $((r % 2)) = 1 ] && [ -n "$FAB" ]; then f=$(fab "$b" $it $win); fi
        l=$(lite "$s" $it $win)
        p=$(lite "$s" $it $win -P "$PAGE")
        if [ $((r % 2)) = 0 ] && [ -n "$FAB" ]; then f=$(fab "$b" $it $win); fi
        echo "$r $s ${f:--} ${l:--} ${p:--}" | tee -a "$OUT/rows" >&2
    done
done

python3 - "$OUT/rows" "$PAGE" << 'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    r, s, f, l, p = line.split()
    rows.setdefault(s, []).append(tuple(None if v == "-" else float(v) for v in (f, l, p)))
def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else float("nan")
print("| size | fi_rma_bw tcp;ofi_rxm MB/s | liblitetx write_imm MB/s | liblitetx paged %s MB/s "
      "| write_imm / fi_rma_bw | paged / write_imm |" % sys.argv[2])
print("|---|---|---|---|---|---|")
for s, v in rows.items():
    r1 = [l / f for f, l, p in v if f and l]
    r2 = [p / l for f, l, p in v if p and l]
    print("| %s | %.0f | %.0f | %.0f | %.2f | %.2f |" % (
        s, med([x[0] for x in v]), med([x[1] for x in v]), med([x[2] for x in v]), med(r1), med(r2)))
EOF
