#!/usr/bin/env bash
# ss_kill.sh - kill the ranks' connections from outside with `ss -K` while mixed traffic flows;
# the job must end with every byte and count right (reconnect_test checks) and the links resumed.
#   ss_kill.sh LITETX_RUN RECONNECT_TEST
set -u
RUN=$1 PROG=$2
# rank 0 listens on PORT, rank 1 on PORT + 1: a random base below the kernel's ephemeral range
# (an outgoing connection of another program cannot hold it), skipped when a socket uses it
lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
[ "$lo" -gt 21000 ] 2>/dev/null || lo=32768
[[ $(id -u) -eq 0 ]] || { echo "SKIPPED: ss -K needs root"; exit 77; }
command -v ss >/dev/null || { echo "SKIPPED: no ss (iproute2)"; exit 77; }
for ((try = 0; try < 20; try++)); do
  PORT=$((20000 + (RANDOM * 2 + $$) % (lo - 20200)))
  ss -Htan "( sport = :$PORT or sport = :$((PORT + 1)) )" 2>/dev/null | grep -q . || break
done
out=$(mktemp)
LITETX_TCP_PORT=$PORT timeout 100 "$RUN" -n 2 -t 90 --transport tcp "$PROG" mixed 11 1 0 200 \
  >"$out" 2>&1 &
job=$!
killed=0
for i in $(seq 1 40); do
  sleep 0.25
  kill -0 $job 2>/dev/null || break
  # rank 0 listens on PORT, rank 1 on PORT + 1: every connection between them has one of those
  # as its source or destination port
  n=$(ss -K -t -n state established "( sport = :$PORT or dport = :$PORT )" 2>/dev/null |
      tail -n +2 | wc -l)
  killed=$((killed + n))
done
wait $job
rc=$?
cat "$out"
rm -f "$out"
echo "ss_kill: $killed connection(s) killed"
[[ $rc -eq 0 ]] || { echo "ss_kill: the job failed ($rc)"; exit 1; }
# a kernel without INET_DIAG_DESTROY lists the sockets but kills none
[[ $killed -gt 0 ]] || { echo "SKIPPED: ss -K killed nothing (a kernel without INET_DIAG_DESTROY?)"; exit 77; }
exit 0
