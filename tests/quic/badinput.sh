#!/bin/bash
# badinput.sh LITETX_RUN SPRAY PROGRAM RANKS KIND [PROGRAM_ARGS...]
#
# Runs a RANKS-rank job of PROGRAM on the quic transport (rank r at 127.0.0.1:P+r through
# LITETX_QUIC_PORT_BASE) while tests/quic/badinput_spray sends KIND datagrams (garbage, initial,
# reset, mixed) at every rank's port, from before the ranks bind until the job ends. Passes when
# the job passes (every byte of its traffic checked by the program), the spray was sent, and,
# when BADINPUT_LOG_REGEX is set, the ranks' output matches it (the backend's warning).
#
# Environment: BADINPUT_HAVE_QUIC=1 when the build has the quic backend (otherwise: skipped, 77);
# BADINPUT_TIMEOUT_S (default 120) bounds the job.
set -u
run=$1 spray=$2 prog=$3 np=$4 kind=$5
shift 5
if [ "${BADINPUT_HAVE_QUIC:-0}" != 1 ]; then
    echo "SKIPPED: the quic backend is not in this build"
    exit 77
fi
timeout_s=${BADINPUT_TIMEOUT_S:-120}
out=$(mktemp -d /tmp/quic_badinput.XXXXXX)
trap 'rm -rf "$out"' EXIT
pbase=$((20000 + (RANDOM * 2 + $$) % 40000))

"$spray" -p "$pbase" -n "$np" -k "$kind" -t $((timeout_s + 10)) >"$out/spray.out" 2>&1 &
spid=$!
LITETX_QUIC_PORT_BASE=$pbase LITETX_INIT_TIMEOUT_MS=${LITETX_INIT_TIMEOUT_MS:-30000} \
    "$run" -n "$np" -t "$timeout_s" -g 20 --transport "${BADINPUT_TRANSPORT:-quic}" \
    "$prog" "$@" >"$out/job.out" 2>&1
rc=$?
kill -TERM "$spid" 2>/dev/null
wait "$spid"
cat "$out/job.out" "$out/spray.out"
echo "job: exit $rc (ranks at $pbase.., spray: $kind)"
[ $rc = 77 ] && exit 77
if [ $rc != 0 ]; then
    echo "FAILED: the job failed under the spray"
    exit 1
fi
if ! grep -q "spray: sent=[1-9]" "$out/spray.out"; then
    echo "FAILED: nothing was sprayed"
    exit 1
fi
if [ -n "${BADINPUT_LOG_REGEX:-}" ] && ! grep -Eq "$BADINPUT_LOG_REGEX" "$out/job.out"; then
    echo "FAILED: no rank logged what it dropped (looked for: $BADINPUT_LOG_REGEX)"
    exit 1
fi
echo "PASSED"
