#!/usr/bin/env bash
# run_p2p_compare.sh - liblitetx's TCP transport against plain TCP on this machine, side by side.
#
#   bench/run_p2p_compare.sh [BUILD_DIR]        (default build-rel; run from the repository root)
#
# Each round runs, pinned like the peer tools (rank 0 / server on CPU 0, rank 1 / client on CPU 1):
#   bandwidth: iperf3 single stream (-t IPERF_T)   vs  litetx_bench bw at BW_SIZES (-T BW_SECS)
#   latency:   tcp_pingpong 8 B (blocking read)    vs  litetx_bench lat 8 B (LAT_ITERS round trips)
#   extra:     iperf3 -l 1M (1 MiB writes instead of the default 128 KiB: on hosts where a
#              system call is expensive, the default makes iperf3 itself CPU-bound);
#              tcp_pingpong 8 B "spin" (busy-poll) and litetx lat 8 B with LITETX_SPIN_US=0
#              (sleep at once), so polling is compared with polling and sleeping with sleeping;
#              tcp_pingpong stream at BW_SIZES (plain write/read of SIZE-byte buffers, ~STREAM_MB
#              per run): iperf3 reuses one cache-resident 128 KiB buffer, a message benchmark
#              streams from and into buffers of the message size, which costs memory bandwidth.
# Rounds alternate which side goes first (A B, B A, ...) so slow phases of the shared host hit
# both; ratios are also taken per round (paired). The summary is a markdown table of medians
# [min-max] over the clean rounds (see QUIET_PCT) with the project's target ratios:
#   litetx bw (>= 1 MiB) / iperf3 single stream >= 0.90, litetx 8 B RTT / plain C RTT <= 1.25.
#
# Knobs (environment): RUNS=5 IPERF_T=5 BW_SIZES=1M,4M,16M,64M BW_SECS=1 LAT_ITERS=20000
# STREAM_MB=2000 PORT_BASE=45200 EXTRA=1 OUT=BUILD_DIR/p2p_compare QUIET_PCT=10 QUIET_WAIT=300
# LIB_REV="what was measured" (default: git describe of the current directory).
# TRANSPORT=tcp (passed to litetx-run --transport; "auto" would probe other backends first).
# The host is shared: before each round the script samples how busy the CPUs are without it
# and waits (at most QUIET_WAIT s) for that to drop under QUIET_PCT %; the figure is recorded
# per round. Needs iperf3, jq, python3, taskset, ss.
# Every command is bounded by timeout; every server is started here and waited for or killed by
# its PID; nothing is left running.
set -euo pipefail

BUILD=${1:-build-rel}
RUNS=${RUNS:-5}
IPERF_T=${IPERF_T:-5}
BW_SIZES=${BW_SIZES:-1M,4M,16M,64M}
BW_SECS=${BW_SECS:-1}
LAT_ITERS=${LAT_ITERS:-20000}
PORT_BASE=${PORT_BASE:-45200}
EXTRA=${EXTRA:-1}
STREAM_MB=${STREAM_MB:-2000}
OUT=${OUT:-$BUILD/p2p_compare}
TRANSPORT=${TRANSPORT:-tcp}
QUIET_PCT=${QUIET_PCT:-10}
QUIET_WAIT=${QUIET_WAIT:-300}

RUN="$BUILD/litetx-run"
BENCH="$BUILD/bench/litetx_bench"
PP="$BUILD/bench/tcp_pingpong"
for f in "$RUN" "$BENCH" "$PP"; do
    [[ -x $f ]] || { echo "missing $f: build first (cmake --build $BUILD)" >&2; exit 2; }
done
for t in iperf3 jq python3 taskset timeout ss; do
    command -v "$t" >/dev/null || { echo "missing tool: $t" >&2; exit 2; }
done
[[ $(nproc) -ge 2 ]] || { echo "needs 2 CPUs for pinning" >&2; exit 2; }

mkdir -p "$OUT/raw"
RES="$OUT/results.csv"
echo "test,metric,size,run,value,unit" >"$RES"

SERVERS=()
cleanup() {
    for pid in "${SERVERS[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
}
trap cleanup EXIT

# Wait (bounded) until something listens on 127.0.0.1:$1, without connecting to it: a probe
# connection would count as iperf3's one client.
wait_listen() {
    for _ in $(seq 100); do
        ss -Hltn "sport = :$1" 2>/dev/null | grep -q . && return 0
        sleep 0.05
    done
    echo "nothing listens on port $1" >&2
    return 1
}

# Start a server pinned to CPU 0 in the background; its PID lands in SERVERS and in $SPID.
start_server() {
    local log=$1
    shift
    taskset -c 0 timeout 60 "$@" >"$log" 2>&1 &
    SPID=$!
    SERVERS+=("$SPID")
}

# Wait for the last server; bounded by its own timeout.
reap_server() {
    wait "$SPID" || echo "warning: server exited with $? (see $OUT/raw)" >&2
}

PORT=$PORT_BASE
next_port() { PORT=$((PORT + 1)); }

# iperf3 single stream; extra arguments go to the client (the extra run uses -l 1M).
run_iperf3() {
    local i=$1 name=$2 json="$OUT/raw/$2_$1.json"
    shift 2
    next_port
    start_server "$OUT/raw/${name}_server_$i.log" iperf3 -s -B 127.0.0.1 -p "$PORT" -1
    wait_listen "$PORT"
    taskset -c 1 timeout $((IPERF_T + 20)) iperf3 -c 127.0.0.1 -B 127.0.0.1 -p "$PORT" -J \
        -t "$IPERF_T" "$@" >"$json"
    reap_server
    local v
    v=$(jq '.end.sum_received.bits_per_second / 8 / 1e6' "$json")
    echo "$name,bw,stream,$i,$v,MB/s" >>"$RES"
}

# litetx_bench under litetx-run, each rank pinned to the CPU of its rank number.
litetx() {
    local tag=$1
    shift
    # shellcheck disable=SC2016 # expanded by the rank's sh, not here
    timeout 300 "$RUN" -t 280 -n 2 --transport "$TRANSPORT" \
        sh -c 'exec taskset -c "$LITETX_RANK" "$0" "$@"' "$BENCH" "$@" \
        --csv "$OUT/raw/$tag.csv" >"$OUT/raw/$tag.txt" 2>&1 || {
        echo "litetx_bench failed, see $OUT/raw/$tag.txt:" >&2
        tail -5 "$OUT/raw/$tag.txt" >&2
        exit 1
    }
}

run_litetx_bw() {
    local i=$1
    litetx "litetx_bw_$i" bw -s "$BW_SIZES" -T "$BW_SECS" -r 1
    awk -F, -v i="$i" '$8=="median" && $5=="bw" {print "litetx_bw,bw," $4 "," i "," $6 ",MB/s"}' \
        "$OUT/raw/litetx_bw_$i.csv" >>"$RES"
}

lat_litetx() {
    local i=$1 name=$2 spin=${3:-}
    if [[ -n $spin ]]; then
        LITETX_SPIN_US=$spin litetx "${name}_$i" lat -s 8 -i "$LAT_ITERS" -r 1
    else
        litetx "${name}_$i" lat -s 8 -i "$LAT_ITERS" -r 1
    fi
    awk -F, -v i="$i" -v n="$name" \
        '$8=="median" && ($5=="rtt_p50" || $5=="rtt_p99") {print n "," $5 ",8," i "," $6 ",us"}' \
        "$OUT/raw/${name}_$i.csv" >>"$RES"
}

lat_plain() {
    local i=$1 name=$2 spin=${3:-}
    next_port
    # shellcheck disable=SC2086 # $spin is empty or the single word "spin"
    start_server "$OUT/raw/${name}_server_$i.log" "$PP" server "$PORT" 8 "$LAT_ITERS" $spin
    wait_listen "$PORT"
    # shellcheck disable=SC2086
    taskset -c 1 timeout 60 "$PP" client 127.0.0.1 "$PORT" 8 "$LAT_ITERS" $spin \
        >"$OUT/raw/${name}_$i.txt"
    reap_server
    local line
    line=$(grep '^RESULT' "$OUT/raw/${name}_$i.txt")
    for m in rtt_p50 rtt_p99; do
        local v
        v=$(sed -n "s/.* ${m}_us=\([0-9.]*\).*/\1/p" <<<"$line")
        echo "$name,$m,8,$i,$v,us" >>"$RES"
    done
}

# Plain C streaming of SIZE-byte messages (same sizes as litetx bw); MB/s from the client.
stream_plain() {
    local i=$1 spec size n s v
    IFS=, read -ra spec <<<"$BW_SIZES"
    for s in "${spec[@]}"; do
        size=$(numfmt --from=iec "$s")
        n=$((STREAM_MB * 1000000 / size))
        ((n < 8)) && n=8
        next_port
        start_server "$OUT/raw/plain_stream_server_${i}_$size.log" "$PP" stream-server "$PORT" \
            "$size" "$n"
        wait_listen "$PORT"
        taskset -c 1 timeout 60 "$PP" stream-client 127.0.0.1 "$PORT" "$size" "$n" \
            >"$OUT/raw/plain_stream_${i}_$size.txt"
        reap_server
        v=$(sed -n 's/.* MBps=\([0-9.]*\).*/\1/p' "$OUT/raw/plain_stream_${i}_$size.txt")
        echo "plain_stream,bw,$size,$i,$v,MB/s" >>"$RES"
    done
}

# "total steal" from /proc/stat's cpu line: fields 2.. are jiffies, field 9 is steal.
cpu_snap() { awk '/^cpu /{s=0; for (k=2; k<=NF; k++) s+=$k; print s, $9, $5 + $6}' /proc/stat; }
# CPU busy %, both CPUs together, over a 1 s sample: what else runs on the machine right now.
busy_pct() {
    local a b
    a=$(cpu_snap)
    sleep 1
    b=$(cpu_snap)
    awk -v a="$a" -v b="$b" 'BEGIN {
        split(a, x, " "); split(b, y, " "); t = y[1] - x[1]
        printf "%.0f %%", (t > 0) ? 100 * (t - (y[3] - x[3])) / t : 0 }'
}

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p'), kernel $(uname -r)"
    rev=$(git rev-parse --short HEAD 2>/dev/null || echo '?')
    git diff --quiet 2>/dev/null || rev="$rev (dirty tree)"
    echo "library: ${LIB_REV:-$rev}"
    echo "background CPU busy before (1 s sample, 2 CPUs = 100 %): $(busy_pct)"
} >"$OUT/machine.txt"
snap0=$(cpu_snap)
start=$(date +%s)

# Wait (bounded) until the machine is quiet; record how busy it was when the round started.
wait_quiet() {
    local i=$1 waited=0 bg
    while :; do
        bg=$(busy_pct)
        bg=${bg% %}
        ((bg <= QUIET_PCT || waited >= QUIET_WAIT)) && break
        echo "  background load ${bg} %, waiting (${waited}/${QUIET_WAIT} s)" >&2
        sleep 4
        waited=$((waited + 5))
    done
    echo "background_busy,cpu,-,$i,$bg,%" >>"$RES"
}

for i in $(seq "$RUNS"); do
    echo "round $i/$RUNS" >&2
    wait_quiet "$i"
    if ((i % 2)); then
        run_iperf3 "$i" iperf3_1stream; run_litetx_bw "$i"
        lat_plain "$i" plain_c; lat_litetx "$i" litetx_lat
    else
        run_litetx_bw "$i"; run_iperf3 "$i" iperf3_1stream
        lat_litetx "$i" litetx_lat; lat_plain "$i" plain_c
    fi
    if ((EXTRA)); then
        run_iperf3 "$i" iperf3_1stream_l1M -l 1M
        stream_plain "$i"
        lat_plain "$i" plain_c_spin spin
        lat_litetx "$i" litetx_lat_nospin 0
    fi
    # Load that started during the round is seen here: a high figure flags a disturbed round.
    echo "background_busy_after,cpu,-,$i,$(busy_pct | sed 's/ %//'),%" >>"$RES"
done

snap1=$(cpu_snap)
{
    echo "duration: $(($(date +%s) - start)) s"
    echo "cpu steal during the run: $(awk -v a="$snap0" -v b="$snap1" 'BEGIN {
        split(a, x, " "); split(b, y, " "); t = y[1] - x[1]
        printf "%.2f %%", (t > 0) ? 100 * (y[2] - x[2]) / t : 0 }')"
    echo "background CPU busy after (1 s sample): $(busy_pct)"
} >>"$OUT/machine.txt"

python3 - "$RES" "$OUT/machine.txt" "$QUIET_PCT" "$TRANSPORT" <<'EOF' | tee "$OUT/summary.md"
import csv, statistics, sys
from collections import defaultdict

rows = list(csv.DictReader(open(sys.argv[1])))
vals = defaultdict(dict)  # (test, metric, size) -> {run: value}
for r in rows:
    vals[(r["test"], r["metric"], r["size"])][int(r["run"])] = float(r["value"])

def fmt(x):
    return f"{x:.0f}" if x >= 100 else f"{x:.3g}" if x < 10 else f"{x:.1f}"

def cell(key):
    v = list(vals.get(key, {}).values())
    if not v:
        return "n/a", None
    return f"{fmt(statistics.median(v))} [{fmt(min(v))}–{fmt(max(v))}]", statistics.median(v)

def paired(num, den):
    a, b = vals.get(num, {}), vals.get(den, {})
    r = [a[k] / b[k] for k in a if k in b and b[k] > 0]
    return (min(r), max(r)) if r else (float("nan"), float("nan"))

def size_key(s):
    return int(s) if s.isdigit() else 0

runs = max((int(r["run"]) for r in rows), default=0)
tp = sys.argv[4]
print(open(sys.argv[2]).read().strip().replace("\n", "  \n") + "  ")
bg = vals.get(("background_busy", "cpu", "-"), {})
bga = vals.get(("background_busy_after", "cpu", "-"), {})
print("background CPU busy (% of both CPUs, 1 s sample) before / after each round: "
      + ", ".join(f"{bg.get(k, float('nan')):.0f}/{bga.get(k, float('nan')):.0f}"
                  for k in sorted(set(bg) | set(bga))))
# Rounds that other work disturbed (load seen before or after) are left out of the tables when
# at least 3 clean rounds remain; results.csv keeps every round.
quiet = float(sys.argv[3])
clean = [k for k in sorted(bg) if bg[k] <= quiet and bga.get(k, 0) <= quiet]
if len(clean) >= 3 and len(clean) < len(bg):
    for key in vals:
        vals[key] = {k: v for k, v in vals[key].items() if k in clean}
    print(f"  \nTables use the {len(clean)} clean rounds {clean} (background ≤ {quiet:.0f} % "
          f"before and after) of {runs}.")
    runs = len(clean)
elif len(clean) < len(bg):
    print(f"  \nOnly {len(clean)} of {runs} rounds were clean: tables use every round.")
print()
print(f"### Bandwidth, MB/s (decimal): median [min–max] over {runs} interleaved rounds\n")
print("| test | size | MB/s | litetx / iperf3 (ratio of medians) "
      "| per-run paired ratio [min–max] | target ≥ 0.90 | litetx / iperf3 -l 1M |")
print("|---|---|---|---|---|---|---|")
ic, im = cell(("iperf3_1stream", "bw", "stream"))
print(f"| iperf3, 1 stream (the target's baseline) | stream | {ic} | | | | |")
lc, lm = cell(("iperf3_1stream_l1M", "bw", "stream"))
if lm:
    print(f"| iperf3, 1 stream, -l 1M | stream | {lc} | | | | |")
bw_sizes = sorted({k[2] for k in vals if k[0] == "litetx_bw"}, key=size_key)
worst = None
for s in bw_sizes:
    c, m = cell(("litetx_bw", "bw", s))
    ratio = m / im if m and im else float("nan")
    lo, hi = paired(("litetx_bw", "bw", s), ("iperf3_1stream", "bw", "stream"))
    ok = "met" if ratio >= 0.90 else "**missed**"
    worst = ratio if worst is None or ratio < worst else worst
    n = int(s)
    label = f"{n >> 20} MiB" if n >= 1 << 20 else f"{n} B"
    r1m = f"{m / lm:.2f}" if m and lm else ""
    print(f"| litetx_bench bw ({tp}, window 64) | {label} | {c} | {ratio:.2f} "
          f"| {lo:.2f}–{hi:.2f} | {ok} | {r1m} |")
for s in bw_sizes:
    if ("plain_stream", "bw", s) not in vals:
        continue
    c, m = cell(("plain_stream", "bw", s))
    n = int(s)
    label = f"{n >> 20} MiB" if n >= 1 << 20 else f"{n} B"
    lt = cell(("litetx_bw", "bw", s))[1]
    r = f"litetx / plain = {lt / m:.2f}" if lt and m else ""
    print(f"| plain C stream, SIZE-byte write/read | {label} | {c} "
          f"| {m / im:.2f} (plain / iperf3) | {r} | | |")
print()
print(f"### Latency, 8 B, round trip µs: median [min–max] over {runs} interleaved rounds\n")
print("| test | RTT p50 | RTT p99 | one-way p50 | ratio to plain C (blocking) "
      "| ratio to plain C (spin) |")
print("|---|---|---|---|---|---|")
base = {}
for t in ("plain_c", "plain_c_spin"):
    base[t] = cell((t, "rtt_p50", "8"))[1]
names = {
    "plain_c": "plain C tcp_pingpong (blocking read)",
    "plain_c_spin": "plain C tcp_pingpong spin (MSG_DONTWAIT poll)",
    "litetx_lat": f"litetx_bench lat ({tp}, default spin)",
    "litetx_lat_nospin": f"litetx_bench lat ({tp}), LITETX_SPIN_US=0",
}
for t in ("plain_c", "plain_c_spin", "litetx_lat", "litetx_lat_nospin"):
    if (t, "rtt_p50", "8") not in vals:
        continue
    c50, m50 = cell((t, "rtt_p50", "8"))
    c99, _ = cell((t, "rtt_p99", "8"))
    r1 = f"{m50 / base['plain_c']:.2f}" if base.get("plain_c") else ""
    r2 = f"{m50 / base['plain_c_spin']:.2f}" if base.get("plain_c_spin") else ""
    print(f"| {names[t]} | {c50} | {c99} | {fmt(m50 / 2)} | {r1} | {r2} |")
print()
lat = cell(("litetx_lat", "rtt_p50", "8"))[1]
if lat and base.get("plain_c"):
    r = lat / base["plain_c"]
    line = (f"Targets: litetx bw / iperf3 ≥ 0.90 at every size ≥ 1 MiB: worst {worst:.2f} "
            f"({'met' if worst >= 0.90 else 'MISSED'}); litetx 8 B RTT / plain C RTT ≤ 1.25: "
            f"{r:.2f} against the blocking plain C ({'met' if r <= 1.25 else 'MISSED'})")
    if base.get("plain_c_spin"):
        r2 = lat / base["plain_c_spin"]
        line += f", {r2:.2f} against the busy-polling one ({'met' if r2 <= 1.25 else 'MISSED'})"
    print(line + ".")
EOF
echo "raw output: $OUT/raw, rows: $RES" >&2
