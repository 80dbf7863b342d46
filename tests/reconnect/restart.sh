#!/bin/bash
# restart.sh LITETX_RUN PROGRAM VICTIM [TRANSPORT]
#
# Runs `PROGRAM restart VICTIM` as a 2-rank job (tcp, or quic) whose ranks listen on fixed ports (the
# stand-in for the restarted rank finds the victim's listening socket by its port): a random
# base below the kernel's ephemeral range, so an outgoing connection of another program cannot
# hold it, skipped when a socket uses it already; a job whose rank found its port taken anyway
# is run once more on other ports.
set -u
run=$1 prog=$2 victim=$3 tp=${4:-tcp}
if [ "$tp" = quic ]; then
    portvar=LITETX_QUIC_PORT_BASE ssopt=-Huan taken="cannot bind UDP .*Address already in use"
else
    portvar=LITETX_TCP_PORT ssopt=-Htan taken="cannot listen on .*Address already in use"
fi
out=$(mktemp /tmp/reconnect_restart.XXXXXX)
trap 'rm -f "$out"' EXIT
lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
[ "$lo" -gt 21000 ] 2>/dev/null || lo=32768
rc=1
for ((attempt = 0; attempt < 2; attempt++)); do
    for ((try = 0; try < 20; try++)); do
        pbase=$((20000 + (RANDOM * 2 + $$ + attempt * 7919) % (lo - 20200)))
        if command -v ss >/dev/null &&
            ss "$ssopt" "( sport = :$pbase or sport = :$((pbase + 1)) )" 2>/dev/null | grep -q .; then
            continue
        fi
        break
    done
    echo "ranks at 127.0.0.1:$pbase.."
    env "$portvar=$pbase" "$run" -n 2 -t 50 -g 20 --transport "$tp" "$prog" restart "$victim" \
        >"$out" 2>&1
    rc=$?
    cat "$out"
    grep -q "$taken" "$out" || break
    echo "a rank's port was taken: again on other ports"
done
exit $rc
