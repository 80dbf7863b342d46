#!/bin/bash
# proxy.sh LITETX_RUN PROXY PROGRAM COUNTER [PROXY_ARGS...] -- [PROGRAM_ARGS...]
#
# Runs a 2-rank tcp job of PROGRAM with tests/reconnect/tcp_proxy between the ranks: rank r
# listens on 127.0.0.1:P+r (LITETX_TCP_PORT) and advertises the proxy's A+r
# (LITETX_TCP_ADVERTISE_BASE), so every connection, redials included, goes through the proxy,
# which applies PROXY_ARGS (-f: flip a byte, -b: blackhole). Passes when the job passes, the
# proxy forwarded bytes, and its counter COUNTER (flipped, blackholes) is above 0: a fault that
# never happened tested nothing.
#
# Environment: PROXY_TIMEOUT_S (default 60) bounds the job; PROXY_GREP, an extended regular
# expression (case-insensitive) the job's output must match (the logged reason); PROXY_ALIVE=1:
# the proxy must still run when the job ended (the job ended by itself, not by the proxy's exit
# closing its connections).
set -u
run=$1 proxy=$2 prog=$3 counter=$4
shift 4
pxargs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    pxargs+=("$1")
    shift
done
[ $# -gt 0 ] && shift
pargs=("$@")

timeout_s=${PROXY_TIMEOUT_S:-60}
out=$(mktemp -d /tmp/tcp_proxy.XXXXXX)
trap 'rm -rf "$out"' EXIT

# Ports: random bases below the kernel's ephemeral range (ranks at P, P+1; the proxy at P+64,
# P+65); the proxy's bind failing means taken. A job whose rank found its port taken anyway
# (another test's socket) is run once more on other ports.
lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
[ "$lo" -gt 21000 ] 2>/dev/null || lo=32768
start_proxy() {
    proxy_pid=
    for ((try = 0; try < 20; try++)); do
        pbase=$((20000 + (RANDOM * 2 + $$) % (lo - 20200)))
        abase=$((pbase + 64))
        # the ranks bind P and P+1 themselves: skip a base with a socket there already
        if command -v ss >/dev/null &&
            ss -Htan "( sport = :$pbase or sport = :$((pbase + 1)) )" 2>/dev/null | grep -q .; then
            continue
        fi
        "$proxy" -n 2 -p "$pbase" -a "$abase" -t $((timeout_s + 30)) "${pxargs[@]}" \
            >"$out/proxy.out" 2>"$out/proxy.err" &
        proxy_pid=$!
        for ((i = 0; i < 50; i++)); do # bounded: 50 polls of 0.1 s for its "ready" line
            grep -q "proxy: ready" "$out/proxy.out" 2>/dev/null && break
            kill -0 "$proxy_pid" 2>/dev/null || break
            sleep 0.1
        done
        grep -q "proxy: ready" "$out/proxy.out" && return 0
        wait "$proxy_pid" 2>/dev/null
        proxy_pid=
    done
    echo "FAILED: the proxy did not start:"
    cat "$out/proxy.err"
    exit 1
}

for ((attempt = 0; attempt < 2; attempt++)); do
    start_proxy
    echo "proxy: pid $proxy_pid, ranks at $pbase.., proxy at $abase.., faults: ${pxargs[*]:-none}"
    start=$(date +%s%N)
    LITETX_TCP_PORT=$pbase LITETX_TCP_ADVERTISE_BASE=$abase \
        "$run" -n 2 -t "$timeout_s" -g 20 --transport tcp "$prog" "${pargs[@]}" >"$out/job.out" 2>&1
    rc=$?
    ms=$((($(date +%s%N) - start) / 1000000))
    alive=0
    kill -0 "$proxy_pid" 2>/dev/null && alive=1
    kill -TERM "$proxy_pid" 2>/dev/null
    wait "$proxy_pid"
    grep -q "cannot listen on .*Address already in use" "$out/job.out" || break
    echo "a rank's port was taken: again on other ports"
done
cat "$out/job.out" "$out/proxy.err" "$out/proxy.out" | grep -v "proxy: ready"
echo "job: exit $rc after $ms ms"
[ $rc = 77 ] && exit 77
if [ $rc != 0 ]; then
    echo "FAILED: the job failed (exit $rc)"
    exit 1
fi
line=$(grep "proxy: accepted=" "$out/proxy.out")
get() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<"$line"; }
if [ -z "$line" ] || [ "$(get forwarded)" = 0 ]; then
    echo "FAILED: nothing went through the proxy (is LITETX_TCP_ADVERTISE_BASE honoured?)"
    exit 1
fi
if [ "$(get "$counter")" = 0 ] || [ -z "$(get "$counter")" ]; then
    echo "FAILED: the proxy's counter $counter is 0: the fault never happened"
    exit 1
fi
if [ -n "${PROXY_GREP:-}" ] && ! grep -Eqi -- "$PROXY_GREP" "$out/job.out"; then
    echo "FAILED: the job's output does not match /$PROXY_GREP/"
    exit 1
fi
if [ "${PROXY_ALIVE:-0}" = 1 ] && [ $alive != 1 ]; then
    echo "FAILED: the proxy had exited before the job ended (its exit, not the library, ended it)"
    exit 1
fi
echo "PASSED"
