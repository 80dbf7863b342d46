#!/bin/bash
# run_coll_compare.sh - liblitetx collectives vs Open MPI (TCP BTL over loopback), interleaved
# A B A B in the same session, as ../shared/peers/README.md asks (the machine is shared and noisy).
#
#   bench/run_coll_compare.sh BUILD_DIR [RUNS] [NPS]      (default RUNS=5, NPS="2 4")
#
# Each run is one litetx_coll_bench and one mpi_coll (the peer program ../shared/peers/mpi_coll.c,
# compiled into $TMPDIR, never into the repository), both "5 0.3": a run's figure is the median of
# its 5 timed batches. 2 ranks are pinned one per core (--pin / --bind-to core); 4 ranks are
# oversubscribed and unpinned (--oversubscribe --bind-to none), as in the peers' 05_mpi.sh.
# Extra liblitetx variants: LITE_VARIANTS="SPIN0" adds a run with LITETX_SPIN_US=0 per round.
# Output: raw RESULT lines in $OUT/raw.log, and a table of medians over runs on stdout.
set -u
BUILD=${1:?usage: run_coll_compare.sh BUILD_DIR [RUNS] [NPS]}
RUNS=${2:-5}
NPS=${3:-"2 4"}
VARIANTS=${LITE_VARIANTS:-""}
HERE=$(cd "$(dirname "$0")" && pwd)
PEERS=${PEERS:-$HERE/../../shared/peers}
OUT=${OUT:-${TMPDIR:-/tmp}/coll_compare.$$}
mkdir -p "$OUT"
RAW=$OUT/raw.log
: > "$RAW"

MPI=""
if command -v mpicc > /dev/null && [ -f "$PEERS/mpi_coll.c" ]; then
    mpicc -O2 -o "$OUT/mpi_coll" "$PEERS/mpi_coll.c" && MPI="$OUT/mpi_coll"
fi
[ -z "$MPI" ] && echo "# Open MPI not available: liblitetx only" >&2

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

for np in $NPS; do
    for i in $(seq "$RUNS"); do
        echo "# np=$np run $i/$RUNS (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
        run_lite "$np" liblitetx
        [ -n "$MPI" ] && run_mpi "$np"
        for v in $VARIANTS; do
            [ "$v" = SPIN0 ] && run_lite "$np" liblitetx_spin0 LITETX_SPIN_US=0
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
