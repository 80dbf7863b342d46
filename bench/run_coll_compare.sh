#!/bin/bash
# run_coll_compare.sh - liblitetx collectives vs Open MPI (TCP BTL over loopback) and Gloo,
# interleaved A B A B within one run (the host is shared and noisy: docs/PERFORMANCE.md, Method).
#
#   bench/run_coll_compare.sh BUILD_DIR [RUNS] [NPS]      (default RUNS=5, NPS="2 4")
#
# Each run is one litetx_coll_bench and one mpi_coll (Open MPI's peer program mpi_coll.c, not part
# of this repository: PEERS names the directory that holds it; it is compiled into $OUT), both
# "5 0.3": a run's figure is the median of its 5 timed batches. 2 ranks are pinned one per core
# (--pin / --bind-to core); 4 ranks are oversubscribed and unpinned (--oversubscribe
# --bind-to none).
# Extra liblitetx variants: LITE_VARIANTS="SPIN0" adds a run with LITETX_SPIN_US=0 per round.
# Gloo column: GLOO_BENCH=path of Gloo's benchmark binary (built outside the repository, how:
# docs/PERFORMANCE.md, Peer tools; GLOO_BENCH=none skips it).
# Per round, after liblitetx and MPI: one process per rank (2 ranks: taskset -c r; 4: unpinned),
# tcp on lo, file rendezvous in $OUT/gloo_store, --no-verify, --iteration-time 1s (3s at 64 MiB).
# Its figure is Gloo's p50 per-op latency (not a median of batches); min/max in raw.log are Gloo's
# per-op min/max. Rows: allreduce = the faster of allreduce_ring and allreduce_ring_chunked that
# round (both also as gloo-only rows), a2a_1MiB_tot = alltoall with --elements 1MiB/(8*np) (Gloo's
# alltoall sends np*elements uint64 per rank: 1 MiB send buffer), barrier = barrier_all_to_all.
# QUIET=1: before each library's run, wait (up to QUIET_WAIT s, default 120) until both CPUs were
# less than 15 % busy over one second, so a burst of other work does not land on one library only.
# Output: raw RESULT lines in $OUT/raw.log, and a table of medians over runs on stdout.
set -u
BUILD=${1:?usage: run_coll_compare.sh BUILD_DIR [RUNS] [NPS]}
RUNS=${2:-5}
NPS=${3:-"2 4"}
VARIANTS=${LITE_VARIANTS:-""}
HERE=$(cd "$(dirname "$0")" && pwd)
PEERS=${PEERS:-}
OUT=${OUT:-${TMPDIR:-/tmp}/coll_compare.$$}
mkdir -p "$OUT"
RAW=$OUT/raw.log
: > "$RAW"

MPI=""
if command -v mpicc > /dev/null && [ -n "$PEERS" ] && [ -f "$PEERS/mpi_coll.c" ]; then
    mpicc -O2 -o "$OUT/mpi_coll" "$PEERS/mpi_coll.c" && MPI="$OUT/mpi_coll"
fi
[ -z "$MPI" ] && echo "# Open MPI column off (needs mpicc and PEERS=<dir holding mpi_coll.c>): liblitetx only" >&2

GLOO=${GLOO_BENCH:-}
if [ "$GLOO" = none ] || [ ! -x "$GLOO" ]; then
    echo "# Gloo benchmark not given or not found (GLOO_BENCH='$GLOO'): no gloo column" >&2
    GLOO=""
fi

run_lite() { # np tag [env...]
    local np=$1 tag=$2
    shift 2
    local pin=""
    [ "$np" -le 2 ] && pin="--pin"
    env "$@" timeout 600 "$BUILD/litetx-run" -n "$np" -t 590 "$BUILD/bench/litetx_coll_bench" 5 0.3 \
        $pin 2>&1 | grep '^RESULT' | sed "s/^RESULT/RESULT $tag/" >> "$RAW"
}

run_mpi() { # np
    local np=$1 bind="--bind-to core"
    [ "$np" -gt 2 ] && bind="--oversubscribe --bind-to none"
    timeout 600 mpirun --allow-run-as-root --mca pml ob1 --mca oob_tcp_if_include lo \
        --mca btl self,tcp --mca btl_tcp_if_include lo $bind -np "$np" "$MPI" 5 0.3 2>&1 \
        < /dev/null | grep '^RESULT' | sed "s/^RESULT/RESULT openmpi/" >> "$RAW"
}

gloo_case() { # np bench elements iteration_time -> rank 0's "min p50 p99 max iterations" in us
    local np=$1 bench=$2 el=$3 it=$4 store=$OUT/gloo_store pids="" r p rc=0 pin
    rm -rf "$store" && mkdir -p "$store"
    for r in $(seq $((np - 1)) -1 0); do
        pin=""
        [ "$np" -le 2 ] && pin="taskset -c $r"
        timeout 180 $pin "$GLOO" --size "$np" --rank "$r" --shared-path "$store" --prefix "$bench-$el-$$" \
            --transport tcp --tcp-device lo --no-verify --nanos --elements "$el" --iteration-time "$it" \
            "$bench" > "$OUT/gloo_r$r.out" 2>&1 < /dev/null &
        pids="$pids $!"
    done
    for p in $pids; do wait "$p" || rc=$?; done
    rm -rf "$store"
    { echo "== np=$np $bench elements=$el rc=$rc"; cat "$OUT/gloo_r0.out"; } >> "$OUT/gloo.log"
    # result row: size elements min p50 p99 max bandwidth iterations (--nanos: times in ns)
    local row=$(awk 'NF == 8 && $1 ~ /^[0-9]+$/ {l = $0} END {print l}' "$OUT/gloo_r0.out")
    if [ "$rc" -ne 0 ] || [ -z "$row" ]; then
        echo "# gloo $bench np=$np elements=$el failed (rc=$rc), see $OUT/gloo.log" >&2
        return
    fi
    echo "$row" | awk '{printf "%.2f %.2f %.2f %.2f %d\n", $3 / 1e3, $4 / 1e3, $5 / 1e3, $6 / 1e3, $8}'
}

gloo_row() { # name np bytes "min p50 p99 max iterations" [extra]
    [ -z "$4" ] && return
    set -- "$1" "$2" "$3" $4 "${5:-}"
    echo "RESULT gloo $1 np=$2 bytes=$3 iters=$8 gloo_p50_us min=$4 med=$5 max=$7 p99=$6${9:+ $9}" >> "$RAW"
}

run_gloo() { # np
    local np=$1 bytes el it ring chunked el_a2a=$(((1 << 20) / ($1 * 8)))
    for bytes in 4096 1048576 67108864; do
        el=$((bytes / 4)) it=1s
        [ "$bytes" -ge 67108864 ] && it=3s
        ring=$(gloo_case "$np" allreduce_ring $el $it)
        chunked=$(gloo_case "$np" allreduce_ring_chunked $el $it)
        gloo_row allreduce_ring "$np" $bytes "$ring"
        gloo_row allreduce_ring_chunked "$np" $bytes "$chunked"
        if [ -n "$ring" ] && { [ -z "$chunked" ] || awk "BEGIN {exit !($(echo $ring | cut -d' ' -f2) <= $(echo $chunked | cut -d' ' -f2))}"; }; then
            gloo_row allreduce "$np" $bytes "$ring" algo=ring
        else
            gloo_row allreduce "$np" $bytes "$chunked" algo=ring_chunked
        fi
    done
    gloo_row a2a_1MiB_tot "$np" $((el_a2a * 8 * np)) "$(gloo_case "$np" alltoall $el_a2a 1s)"
    gloo_row barrier "$np" 0 "$(gloo_case "$np" barrier_all_to_all 1 1s)"
}

# Busy share of both CPUs over one second, in percent (from /proc/stat).
cpu_busy() {
    local a b c d e f g h t1 i1
    read -r _ a b c d e f g h _ < /proc/stat
    t1=$((a + b + c + d + e + f + g + h)) i1=$((d + e))
    sleep 1
    read -r _ a b c d e f g h _ < /proc/stat
    echo $((100 - 100 * (d + e - i1) / (a + b + c + d + e + f + g + h - t1)))
}

settle() {
    [ "${QUIET:-0}" = 1 ] || return 0
    local end=$(($(date +%s) + ${QUIET_WAIT:-120})) busy
    while busy=$(cpu_busy) && [ "$busy" -ge 15 ]; do
        [ "$(date +%s)" -ge "$end" ] && echo "#   still ${busy}% busy: running anyway" >&2 && return 0
    done
    return 0
}

for np in $NPS; do
    for i in $(seq "$RUNS"); do
        echo "# np=$np run $i/$RUNS (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
        settle && run_lite "$np" liblitetx
        [ -n "$MPI" ] && settle && run_mpi "$np"
        [ -n "$GLOO" ] && settle && run_gloo "$np"
        for v in $VARIANTS; do
            [ "$v" = SPIN0 ] && settle && run_lite "$np" liblitetx_spin0 LITETX_SPIN_US=0
        done
    done
done

# RESULT <lib> <name> np=N bytes=B iters=I batches=5 us_per_op min=.. med=M max=..
python3 - "$RAW" << 'EOF'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    lib, name = f[1], f[2]
    np_ = int(f[3].split('=')[1]); b = int(f[4].split('=')[1])
    med = float(re.search(r'med=([0-9.]+)', line).group(1))
    rows.setdefault((name, b, np_), {}).setdefault(lib, []).append(med)
libs = sorted({l for v in rows.values() for l in v})
print('| case | bytes | np | ' + ' | '.join(f'{l} us (median [min-max], runs)' for l in libs) + ' |')
print('|---|---|---|' + '---|' * len(libs))
for (name, b, np_), v in sorted(rows.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])):
    cells = []
    for l in libs:
        x = v.get(l)
        cells.append(f'{statistics.median(x):.1f} [{min(x):.1f}-{max(x):.1f}] ({len(x)})' if x else '-')
    print(f'| {name} | {b} | {np_} | ' + ' | '.join(cells) + ' |')
EOF
echo "# raw: $RAW" >&2
