#!/usr/bin/env bash
# run_bw_sweep.sh - bandwidth against message size for one backend and its peer tools, as CSV
# rows for bench/plot_bw.sh.
#
#   bench/run_bw_sweep.sh BUILD_DIR BACKEND OUT.csv      BACKEND: tcp | efa_shm | efa_tcp
#
# Series (the CSV's columns are litetx_bench --csv's: mode,transport,ranks,size,metric,value,
# unit,rep; mode says streaming or ping-pong, transport names the program, rep the round):
#   stream   litetx_bench bw (0 -> 1, 64 sends in flight)        metric bw, MB/s
#   stream   tcp: tcp_pingpong stream (plain blocking sockets, buffers of the message size);
#            with FABTESTS_BIN also fi_msg_bw -p tcp (fabtests; docs/PERFORMANCE.md, Peer tools)
#   pingpong litetx_bench lat: size / one-way time over the whole run (as fi_pingpong counts)
#   pingpong fi_pingpong (Debian libfabric-bin) on the same provider: tcp (msg endpoint) for tcp,
#            shm or tcp;ofi_rxm (rdm endpoint) for efa_shm / efa_tcp
# ROUNDS rounds (default 4, rounded up to an even number), the order of the programs reversed
# every round; rank 1 / servers on CPU 0, rank 0 / clients on CPU 1. Knobs: SIZES (default
# 4K,16K,64K,256K,1M,4M,16M), ROUNDS, SECS (litetx_bench -T per size, default 0.5), PORT_BASE
# (default 45600).
# Every program runs under timeout; servers are waited for. Run under the host's benchmark lock
# if it has one: a busy CPU shows as a dip in whichever program it hits.
set -euo pipefail
BUILD=${1:?usage: run_bw_sweep.sh BUILD_DIR tcp|efa_shm|efa_tcp OUT.csv}
BACKEND=${2:?usage: run_bw_sweep.sh BUILD_DIR tcp|efa_shm|efa_tcp OUT.csv}
OUT=${3:?usage: run_bw_sweep.sh BUILD_DIR tcp|efa_shm|efa_tcp OUT.csv}
SIZES=${SIZES:-4K,16K,64K,256K,1M,4M,16M}
ROUNDS=${ROUNDS:-4}
ROUNDS=$(((ROUNDS + 1) / 2 * 2))
SECS=${SECS:-0.5}
PORT=${PORT_BASE:-45600}
FAB=${FABTESTS_BIN:-}

case $BACKEND in
tcp) transport=tcp prov=tcp ep=msg ;;
efa_shm) transport=efa prov=shm ep=rdm ;;
efa_tcp) transport=efa prov="tcp;ofi_rxm" ep=rdm ;;
*) echo "unknown backend $BACKEND (tcp, efa_shm, efa_tcp)" >&2; exit 2 ;;
esac
for f in "$BUILD/litetx-run" "$BUILD/bench/litetx_bench" "$BUILD/bench/tcp_pingpong"; do
    [ -x "$f" ] || { echo "missing $f: build first" >&2; exit 2; }
done
for t in fi_pingpong taskset timeout; do
    command -v $t > /dev/null || { echo "missing tool: $t (Debian: libfabric-bin, util-linux, coreutils)" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bytes() { # 4K -> 4096
    local s=$1 n=${1%[KkMm]}
    case $s in *[Kk]) echo $((n << 10)) ;; *[Mm]) echo $((n << 20)) ;; *) echo "$n" ;; esac
}
clamp() { local v=$1; [ "$v" -lt "$2" ] && v=$2; [ "$v" -gt "$3" ] && v=$3; echo "$v"; }
row() { echo "$1,$2,2,$3,bw,$4,MB/s,$round" >> "$OUT"; } # mode series size MBps

lite() { # litetx_bench MODE: rank r on CPU 1 - r, its CSV rows into $tmp/MODE.csv
    local mode=$1
    LITETX_EFA_PROVIDER=$prov timeout 300 "$BUILD/litetx-run" -n 2 -t 290 --transport "$transport" \
        sh -c 'exec taskset -c $((1 - LITETX_RANK)) "$0" "$@"' \
        "$BUILD/bench/litetx_bench" "$mode" -s "$SIZES" -T "$SECS" -r 1 --csv "$tmp/$mode.csv" \
        > "$tmp/$mode.txt" 2>&1 || { echo "litetx_bench $mode failed:" >&2; tail -5 "$tmp/$mode.txt" >&2; return 1; }
}

run_lite() {
    lite bw
    awk -F, -v r="$round" -v b="$BACKEND" '$5 == "bw" && $8 == "median" {
        printf "stream,litetx-%s,2,%s,bw,%s,MB/s,%s\n", b, $4, $6, r }' "$tmp/bw.csv" >> "$OUT"
    lite lat
    awk -F, -v r="$round" -v b="$BACKEND" '$5 == "oneway_run" && $8 == "median" && $6 > 0 {
        printf "pingpong,litetx-%s,2,%s,bw,%.1f,MB/s,%s\n", b, $4, $4 / $6, r }' "$tmp/lat.csv" >> "$OUT"
}

run_fi_pingpong() { # per size: server on CPU 0, client on CPU 1; its MB/sec column
    local s n v
    for s in ${SIZES//,/ }; do
        n=$(bytes "$s")
        local it
        it=$(clamp $(((256 << 20) / n)) 20 20000)
        timeout 120 taskset -c 0 fi_pingpong -p "$prov" -e $ep -B $PORT -S "$n" -I "$it" > "$tmp/srv" 2>&1 &
        local srv=$!
        sleep 0.5
        v=$(timeout 120 taskset -c 1 fi_pingpong -p "$prov" -e $ep -P $PORT -S "$n" -I "$it" 127.0.0.1 2> /dev/null |
            awk '$1 ~ /^[0-9]/ && NF >= 8 { v = $6 } END { print v }')
        wait $srv || true
        [ -n "$v" ] && row pingpong "fi_pingpong-$BACKEND" "$n" "$v" || echo "fi_pingpong $prov $s: no result" >&2
    done
}

run_plain_stream() { # tcp_pingpong stream, ~256 MiB per size
    local s n v it
    for s in ${SIZES//,/ }; do
        n=$(bytes "$s")
        it=$(clamp $(((256 << 20) / n)) 16 65536)
        timeout 120 taskset -c 0 "$BUILD/bench/tcp_pingpong" stream-server $PORT "$n" "$it" > "$tmp/srv" 2>&1 &
        local srv=$!
        sleep 0.3
        v=$(timeout 120 taskset -c 1 "$BUILD/bench/tcp_pingpong" stream-client 127.0.0.1 $PORT "$n" "$it" |
            sed -n 's/.*MBps=\([0-9.]*\).*/\1/p')
        wait $srv || true
        [ -n "$v" ] && row stream tcp_pingpong "$n" "$v" || echo "tcp_pingpong stream $s: no result" >&2
    done
}

run_fi_msg_bw() { # fabtests' streaming bandwidth, when FABTESTS_BIN names them
    local s n v it
    for s in ${SIZES//,/ }; do
        n=$(bytes "$s")
        it=$(clamp $(((256 << 20) / n)) 20 20000)
        timeout 120 taskset -c 0 "$FAB/fi_msg_bw" -p tcp -S "$n" -I "$it" -W 64 -s 127.0.0.1 > "$tmp/srv" 2>&1 &
        local srv=$!
        sleep 0.5
        v=$(timeout 120 taskset -c 1 "$FAB/fi_msg_bw" -p tcp -S "$n" -I "$it" -W 64 -s 127.0.0.1 127.0.0.1 2> /dev/null |
            awk 'NF == 7 && $1 !~ /bytes/ { v = $6 } END { print v }')
        wait $srv || true
        [ -n "$v" ] && row stream fi_msg_bw "$n" "$v" || echo "fi_msg_bw $s: no result" >&2
    done
}

peers() {
    run_fi_pingpong
    if [ "$BACKEND" = tcp ]; then
        run_plain_stream
        [ -n "$FAB" ] && [ -x "$FAB/fi_msg_bw" ] && run_fi_msg_bw
    fi
    return 0
}

echo "mode,transport,ranks,size,metric,value,unit,rep" > "$OUT"
for round in $(seq "$ROUNDS"); do
    echo "round $round/$ROUNDS" >&2
    if [ $((round % 2)) = 1 ]; then run_lite; peers; else peers; run_lite; fi
done
echo "wrote $OUT ($(($(wc -l < "$OUT") - 1)) rows)" >&2
