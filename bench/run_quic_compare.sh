#!/usr/bin/env bash
# run_quic_compare.sh - the quic transport against ngtcp2 0.12.1's own example client and server
# (examples/gtlsclient, gtlsserver: GnuTLS, HTTP/3), interleaved in rounds that alternate which
# goes first (the host is shared), medians over the rounds:
#   - ngtcp2: a 256 MiB download over loopback (gtlsserver's generated response /268435456),
#     timed around gtlsclient;
#   - litetx_bench bw over quic at 1 MiB and 16 MiB messages (one connection);
#   - litetx_bench lat, 8 bytes one-way p50, over quic and over tcp;
#   - with LOSSY=1, also litetx_bench bw over quic through tests/quic/relay, dropping 1 % of the
#     datagrams and dropping none (the relay's own cost), LITETX_QUIC_PORT_BASE and
#     LITETX_QUIC_ADVERTISE_BASE putting it between the ranks.
#
#   bench/run_quic_compare.sh BUILD_DIR NGTCP2_SRC
#
# NGTCP2_SRC (or the NGTCP2_SRC environment variable) is a source tree of ngtcp2 v0.12.1, outside
# this repository, e.g. made with
#   git clone --depth 1 --branch v0.12.1 https://github.com/ngtcp2/ngtcp2 /some/dir
# Its examples are built in NGTCP2_SRC/build-gtls when not there yet (needs cmake, g++,
# libgnutls28-dev, libev-dev, libnghttp3-dev). Knobs: RUNS=5 (rounds), SECS=1 (litetx_bench
# time per size and repetition), LOSSY=0|1, QUIET_PCT=15 and QUIET_WAIT=30: before each round,
# wait up to QUIET_WAIT s until the CPUs were at most QUIET_PCT % busy over a second (the host
# is shared: the latency of a ping-pong is the scheduler's once other work runs); the busy
# share each round started at is printed with the results.
set -euo pipefail
build=$(cd "${1:?usage: run_quic_compare.sh BUILD_DIR NGTCP2_SRC}" && pwd)
src=${2:-${NGTCP2_SRC:-}}
if [ -z "$src" ] || [ ! -f "$src/examples/server.cc" ]; then
    echo "run_quic_compare.sh: give the path of an ngtcp2 v0.12.1 source tree (argument or" \
        "NGTCP2_SRC), e.g. from:" >&2
    echo "  git clone --depth 1 --branch v0.12.1 https://github.com/ngtcp2/ngtcp2 DIR" >&2
    exit 2
fi
src=$(cd "$src" && pwd)
if ! grep -q "project(ngtcp2 VERSION 0.12.1" "$src/CMakeLists.txt"; then
    echo "run_quic_compare.sh: $src is not ngtcp2 0.12.1" >&2
    exit 2
fi
runs=${RUNS:-5} secs=${SECS:-1} lossy=${LOSSY:-0} quiet_pct=${QUIET_PCT:-15} quiet_wait=${QUIET_WAIT:-30}
here=$(cd "$(dirname "$0")/.." && pwd)
ex=$src/build-gtls/examples
if [ ! -x "$ex/gtlsclient" ] || [ ! -x "$ex/gtlsserver" ]; then
    echo "building ngtcp2's gtlsclient and gtlsserver in $src/build-gtls ..."
    if ! { cmake -S "$src" -B "$src/build-gtls" -DCMAKE_BUILD_TYPE=Release -DENABLE_GNUTLS=ON \
        -DENABLE_OPENSSL=OFF -DENABLE_STATIC_LIB=OFF >/dev/null &&
        cmake --build "$src/build-gtls" -j2 --target gtlsclient gtlsserver >/dev/null; }; then
        echo "run_quic_compare.sh: building the examples failed (apt-get install -y" \
            "libgnutls28-dev libev-dev libnghttp3-dev)" >&2
        exit 2
    fi
fi
run=$build/litetx-run bench=$build/bench/litetx_bench relay=$build/tests/quic/quic_relay
tmp=$(mktemp -d)
spid=
cleanup() {
    [ -n "$spid" ] && kill "$spid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tmp/key.pem" -out "$tmp/cert.pem" -days 1 \
    -subj /CN=localhost >/dev/null 2>&1
port=$((20000 + (RANDOM + $$) % 40000))
(cd "$tmp" && exec "$ex/gtlsserver" -q --no-quic-dump --no-http-dump --max-dyn-length=1G \
    127.0.0.1 "$port" "$tmp/key.pem" "$tmp/cert.pem" >/dev/null 2>&1) &
spid=$!
sleep 0.5
size=$((256 << 20))

: >"$tmp/all"
ngtcp2() {
    local t0 t1
    t0=$(date +%s%N)
    timeout 120 "$ex/gtlsclient" -q --no-quic-dump --no-http-dump --exit-on-all-streams-close \
        127.0.0.1 "$port" "https://127.0.0.1:$port/$size" >/dev/null 2>&1
    t1=$(date +%s%N)
    awk -v b=$size -v ns=$((t1 - t0)) 'BEGIN {printf "ngtcp2_256M MB/s 268435456 %.1f\n", b / (ns / 1e3)}' \
        >>"$tmp/all"
}
bw() { # name transport [env...]
    local name=$1 tr=$2
    shift 2
    env "$@" timeout 180 "$run" -n 2 --transport "$tr" "$bench" bw -s 1M,16M -r 3 -T "$secs" \
        --csv "$tmp/bw.csv" >/dev/null 2>&1 || { echo "$name: litetx_bench bw failed" >&2; return 0; }
    awk -F, -v n="$name" '$8=="median" && $5=="bw" {print n, "MB/s", $4, $6}' "$tmp/bw.csv" \
        >>"$tmp/all"
}
lat() { # name transport
    timeout 120 "$run" -n 2 --transport "$2" "$bench" lat -s 8 -r 3 -T "$secs" \
        --csv "$tmp/lat.csv" >/dev/null 2>&1 || { echo "$1: litetx_bench lat failed" >&2; return 0; }
    awk -F, -v n="$1" '$8=="median" && $5=="oneway_p50" {print n, "lat_us", $4, $6}' \
        "$tmp/lat.csv" >>"$tmp/all"
}
lossy_bw() { # name drop-percent
    local pb=$((20000 + (RANDOM * 2 + $$) % 40000)) rp
    "$relay" -n 2 -p "$pb" -a $((pb + 64)) -t 300 -d "$2" -s "$RANDOM" >"$tmp/relay.out" 2>&1 &
    rp=$!
    sleep 0.2
    bw "$1" quic LITETX_QUIC_PORT_BASE=$pb LITETX_QUIC_ADVERTISE_BASE=$((pb + 64))
    kill "$rp" 2>/dev/null
    wait "$rp" 2>/dev/null || true
    grep "relay: seen" "$tmp/relay.out" | sed 's/^/  /' >&2 || true
}

# CPU busy %, all CPUs together, over a 1 s sample (from /proc/stat: idle + iowait vs total).
busy_pct() {
    local a b
    a=$(awk '/^cpu /{s=0; for (k=2; k<=NF; k++) s+=$k; print s, $5 + $6}' /proc/stat)
    sleep 1
    b=$(awk '/^cpu /{s=0; for (k=2; k<=NF; k++) s+=$k; print s, $5 + $6}' /proc/stat)
    awk -v a="$a" -v b="$b" 'BEGIN {split(a, x, " "); split(b, y, " "); t = y[1] - x[1]
        printf "%.0f", (t > 0) ? 100 * (t - (y[2] - x[2])) / t : 0}'
}
busy=()
for r in $(seq 1 "$runs"); do
    waited=0
    while bg=$(busy_pct) && [ "$bg" -gt "$quiet_pct" ] && [ "$waited" -lt "$quiet_wait" ]; do
        waited=$((waited + 1))
    done
    busy+=("$bg")
    echo "round $r/$runs (CPUs ${bg} % busy before it)" >&2
    if [ $((r % 2)) = 1 ]; then
        ngtcp2
        bw quic quic
        lat quic quic
        lat tcp tcp
        [ "$lossy" = 1 ] && lossy_bw quic_relay 0 && lossy_bw quic_loss1 1
    else
        [ "$lossy" = 1 ] && lossy_bw quic_loss1 1 && lossy_bw quic_relay 0
        lat tcp tcp
        lat quic quic
        bw quic quic
        ngtcp2
    fi
done
echo "config metric size median [min-max] over $runs rounds (MB = 10^6 bytes);" \
    "CPUs busy before each round: ${busy[*]} %"
python3 - "$tmp/all" <<'PY'
import statistics, sys
v = {}
for line in open(sys.argv[1]):
    name, metric, size, val = line.split()
    v.setdefault((name, metric, int(size)), []).append(float(val))
med = {}
for k in sorted(v):
    x = v[k]
    med[k] = statistics.median(x)
    print(k[0], k[1], k[2], "%.1f [%.1f-%.1f] (%d)" % (med[k], min(x), max(x), len(x)))
ng = med.get(("ngtcp2_256M", "MB/s", 268435456))
for s in (1 << 20, 16 << 20):
    q = med.get(("quic", "MB/s", s))
    if q and ng:
        print("ratio quic bw %d MiB / ngtcp2 256 MiB download: %.2fx" % (s >> 20, q / ng))
    l, r0 = med.get(("quic_loss1", "MB/s", s)), med.get(("quic_relay", "MB/s", s))
    if l and q:
        print("ratio quic bw %d MiB with 1%% loss / lossless: %.2f" % (s >> 20, l / q))
    if l and r0:
        print("ratio quic bw %d MiB with 1%% loss / the relay without loss: %.2f" % (s >> 20, l / r0))
lq, lt = med.get(("quic", "lat_us", 8)), med.get(("tcp", "lat_us", 8))
if lq and lt:
    print("ratio quic / tcp 8 B one-way latency: %.2fx" % (lq / lt))
PY
