#!/bin/bash
# badinput.sh LITETX_RUN TOOL PROGRAM RANKS KIND [PROGRAM_ARGS...]
#
# Runs a RANKS-rank job of PROGRAM on the quic transport (rank r at 127.0.0.1:P+r through
# LITETX_QUIC_PORT_BASE) while hostile traffic reaches every rank's port:
#   KIND garbage|initial|reset|mixed: TOOL is tests/quic/badinput_spray, sending that kind from
#     before the ranks bind until the job ends;
#   KIND client: TOOL is tests/quic/badinput_client, run against each rank's port once it is bound
#     with the arguments in BADINPUT_CLIENT_ARGS (it checks it was refused, or accepted with -a);
#     the job's traffic goes on until the clients are done (LOSSY_UNTIL_FILE).
# Passes when the job passes (every byte of its traffic checked by the program), the hostile
# side did its part, when BADINPUT_LOG_REGEX (and BADINPUT_LOG_REGEX2) is set, the ranks' output
# matches it (the backend's warning), and the refusals were rate-limited: at most RANKS x
# (seconds the job ran + 3) lines about refused connections (the first of each spell in full, then
# one summary a second and one at close).
#
# Environment: BADINPUT_HAVE_QUIC=1 when the build has the quic backend (otherwise: skipped, 77);
# BADINPUT_TIMEOUT_S (default 120) bounds the job; BADINPUT_TRANSPORT (default quic) names the
# transport, for checking the script itself.
set -u
run=$1 tool=$2 prog=$3 np=$4 kind=$5
shift 5
if [ "${BADINPUT_HAVE_QUIC:-0}" != 1 ]; then
    echo "SKIPPED: the quic backend is not in this build"
    exit 77
fi
timeout_s=${BADINPUT_TIMEOUT_S:-120}
out=$(mktemp -d /tmp/quic_badinput.XXXXXX)
trap 'rm -rf "$out"' EXIT
pbase=$((20000 + (RANDOM * 2 + $$) % 40000))

# Is 127.0.0.1:$1 (or any address at that port) bound by a UDP socket?
udp_bound() { ss -Hunl "sport = :$1" 2>/dev/null | grep -q .; }

tool_ok=1
started=$SECONDS
if [ "$kind" = client ]; then
    export LOSSY_UNTIL_FILE=$out/clients_done
    LITETX_QUIC_PORT_BASE=$pbase LITETX_INIT_TIMEOUT_MS=${LITETX_INIT_TIMEOUT_MS:-30000} \
        "$run" -n "$np" -t "$timeout_s" -g 20 --transport "${BADINPUT_TRANSPORT:-quic}" \
        "$prog" "$@" >"$out/job.out" 2>&1 &
    jpid=$!
    for ((r = 0; r < np; r++)); do
        # Bounded: 300 polls of 0.1 s for the rank's port, while the job lives.
        for ((i = 0; i < 300; i++)); do
            udp_bound $((pbase + r)) && break
            kill -0 "$jpid" 2>/dev/null || break
            sleep 0.1
        done
        # shellcheck disable=SC2086 # the arguments are a list on purpose
        if ! "$tool" $((pbase + r)) ${BADINPUT_CLIENT_ARGS:-nocert} >>"$out/tool.out" 2>&1; then
            tool_ok=0
        fi
    done
    touch "$LOSSY_UNTIL_FILE"
    wait "$jpid"
    rc=$?
else
    "$tool" -p "$pbase" -n "$np" -k "$kind" -t $((timeout_s + 10)) >"$out/tool.out" 2>&1 &
    spid=$!
    LITETX_QUIC_PORT_BASE=$pbase LITETX_INIT_TIMEOUT_MS=${LITETX_INIT_TIMEOUT_MS:-30000} \
        "$run" -n "$np" -t "$timeout_s" -g 20 --transport "${BADINPUT_TRANSPORT:-quic}" \
        "$prog" "$@" >"$out/job.out" 2>&1
    rc=$?
    kill -TERM "$spid" 2>/dev/null
    wait "$spid"
    grep -q "spray: sent=[1-9]" "$out/tool.out" || tool_ok=0
fi
elapsed=$((SECONDS - started))
cat "$out/job.out" "$out/tool.out"
echo "job: exit $rc (ranks at $pbase.., $kind)"
lines=$(grep -Ec "refused (a connection from|[0-9]+ more connection)" "$out/job.out")
limit=$((np * (elapsed + 3)))
echo "lines about refused connections: $lines (limit $limit for $np ranks over ${elapsed} s)"
[ $rc = 77 ] && exit 77
if [ $rc != 0 ]; then
    echo "FAILED: the job failed"
    exit 1
fi
if [ $tool_ok != 1 ]; then
    echo "FAILED: $(basename "$tool") did not do or see what it should (above)"
    exit 1
fi
for re in "${BADINPUT_LOG_REGEX:-}" "${BADINPUT_LOG_REGEX2:-}"; do
    if [ -n "$re" ] && ! grep -Eq "$re" "$out/job.out"; then
        echo "FAILED: no rank logged what it refused (looked for: $re)"
        exit 1
    fi
done
if [ "$lines" -gt "$limit" ]; then
    echo "FAILED: $lines lines about refused connections, more than $limit: not rate-limited"
    exit 1
fi
echo "PASSED"
