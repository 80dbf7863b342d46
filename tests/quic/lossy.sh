#!/bin/bash
# lossy.sh LITETX_RUN RELAY PROGRAM RANKS COUNTER [RELAY_ARGS...] -- [PROGRAM_ARGS...]
#
# Runs a RANKS-rank job of PROGRAM on the quic transport with tests/quic/relay between every pair
# of ranks: rank r binds 127.0.0.1:P+r (LITETX_QUIC_PORT_BASE) and advertises the relay's
# 127.0.0.1:A+r (LITETX_QUIC_ADVERTISE_BASE), the relay applies RELAY_ARGS (its impairments).
# Passes when the job passes, the relay carried the job's datagrams, and its counter COUNTER
# (dropped, burst_dropped, reordered, duplicated, corrupted, blackholed; "none" for no check)
# is above 0: an impairment that never happened tested nothing.
#
# Environment: LOSSY_HAVE_QUIC=1 when the build has the quic backend (otherwise: skipped, 77);
# LOSSY_TIMEOUT_S (default 120) bounds the job; LOSSY_SEED (default 1) seeds the relay;
# LOSSY_LOST_BOUND_MS (default 20000) is passed on to the program (lossy_test lost);
# LOSSY_TRANSPORT (default quic) names the transport, for checking the script itself. The
# relay's pid reaches the program as LOSSY_RELAY_PID.
set -u
run=$1 relay=$2 prog=$3 np=$4 counter=$5
shift 5
rargs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    rargs+=("$1")
    shift
done
[ $# -gt 0 ] && shift
pargs=("$@")

if [ "${LOSSY_HAVE_QUIC:-0}" != 1 ]; then
    echo "SKIPPED: the quic backend is not in this build"
    exit 77
fi
timeout_s=${LOSSY_TIMEOUT_S:-120}
export LOSSY_LOST_BOUND_MS=${LOSSY_LOST_BOUND_MS:-20000}
out=$(mktemp -d /tmp/quic_lossy.XXXXXX)
trap 'rm -rf "$out"' EXIT

# Ports: random bases (ranks at P.., relay at P+64..); the relay's bind failing means taken.
relay_pid=
for ((try = 0; try < 20; try++)); do
    pbase=$((20000 + (RANDOM * 2 + $$) % 40000))
    abase=$((pbase + 64))
    "$relay" -n "$np" -p "$pbase" -a "$abase" -t $((timeout_s + 30)) -s "${LOSSY_SEED:-1}" \
        "${rargs[@]}" >"$out/relay.out" 2>"$out/relay.err" &
    relay_pid=$!
    # Bounded: 50 polls of 0.1 s for its "ready" line.
    for ((i = 0; i < 50; i++)); do
        grep -q "relay: ready" "$out/relay.out" 2>/dev/null && break
        kill -0 "$relay_pid" 2>/dev/null || break
        sleep 0.1
    done
    grep -q "relay: ready" "$out/relay.out" && break
    wait "$relay_pid" 2>/dev/null
    relay_pid=
done
if [ -z "$relay_pid" ]; then
    echo "FAILED: the relay did not start:"
    cat "$out/relay.err"
    exit 1
fi
echo "relay: pid $relay_pid, ranks at $pbase.., relay at $abase.., impairments: ${rargs[*]:-none}"

start=$(date +%s%N)
LITETX_QUIC_PORT_BASE=$pbase LITETX_QUIC_ADVERTISE_BASE=$abase LOSSY_RELAY_PID=$relay_pid \
    LITETX_INIT_TIMEOUT_MS=${LITETX_INIT_TIMEOUT_MS:-30000} \
    "$run" -n "$np" -t "$timeout_s" -g 20 --transport "${LOSSY_TRANSPORT:-quic}" "$prog" "${pargs[@]}" 2>&1
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
kill -TERM "$relay_pid" 2>/dev/null
wait "$relay_pid"
cat "$out/relay.err" "$out/relay.out" | grep -v "relay: ready"
echo "job: exit $rc after $ms ms"
[ $rc = 77 ] && exit 77
if [ $rc != 0 ]; then
    echo "FAILED: the job failed (exit $rc)"
    exit 1
fi
line=$(grep "relay: seen=" "$out/relay.out")
get() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<"$line"; }
if [ -z "$line" ] || [ "$(get forwarded)" = 0 ]; then
    echo "FAILED: no datagram went through the relay (does the backend honour" \
        "LITETX_QUIC_PORT_BASE and LITETX_QUIC_ADVERTISE_BASE?)"
    exit 1
fi
if [ "$(get strays)" != 0 ]; then
    echo "FAILED: the relay got datagrams from addresses that are no rank's port"
    exit 1
fi
if [ "$counter" != none ] && [ "$(get "$counter")" = 0 ]; then
    echo "FAILED: the relay's $counter counter is 0: the impairment never happened"
    exit 1
fi
echo "PASSED"
