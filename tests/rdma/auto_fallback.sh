#!/usr/bin/env bash
# auto_fallback.sh LITETX_RUN P2P_TEST - CTest rdma.auto_fallback: on a host with no RDMA
# device, "auto" must skip the rdma backend with a logged reason and run on another transport,
# while asking for "rdma" by name must fail init with that reason (never a silent fallback).
set -uo pipefail
RUN=${1:?}
P2P=${2:?}
if [ -d /sys/class/infiniband ] && [ -n "$(ls -A /sys/class/infiniband 2>/dev/null)" ]; then
    echo "SKIPPED: rdma.auto_fallback: this host has RDMA devices ($(ls /sys/class/infiniband | tr '\n' ' '))"
    exit 77
fi
out=$(LITETX_LOG_LEVEL=info "$RUN" -n 2 -t 60 --transport auto "$P2P" 2>&1)
rc=$?
echo "$out" | grep -E "not usable|: transport " | head -n 6
echo "$out" | grep -q "transport auto: using [a-z0-9_]*: .*rdma not usable" ||
    { echo "FAIL: auto did not say why rdma was skipped"; exit 1; }
# loud once per job: rank 0 at warn, the other ranks at info
[ "$(echo "$out" | grep -c "warn: transport auto: using")" = 1 ] ||
    { echo "FAIL: the fallback warning is not said exactly once"; exit 1; }
# both ranks opened another transport (whether that transport then finishes its run is the
# business of its own tests: the exit status is shown, not judged)
picked=$(echo "$out" | grep -oE "rank [0-9]+/2: transport [a-z0-9_]+" | awk '{print $4}' | sort -u)
[ "$(echo "$out" | grep -cE "rank [0-9]+/2: transport ")" = 2 ] && [ -n "$picked" ] &&
    [ "$picked" != rdma ] || { echo "FAIL: auto did not fall back (picked: $picked)"; exit 1; }
echo "auto picked: $picked (run exit status $rc)"
out=$("$RUN" -n 2 -t 30 --transport rdma "$P2P" 2>&1)
rc=$?
[ $rc -ne 0 ] || { echo "FAIL: transport rdma ran on a host without RDMA"; exit 1; }
echo "$out" | grep -q "transport rdma is not usable on this host" ||
    { echo "FAIL: asking for rdma did not fail with the reason"; echo "$out" | tail -n 3; exit 1; }
echo "PASS: auto fell back loudly; rdma by name refused: $(echo "$out" | grep -m1 -o 'transport rdma is not usable.*' | cut -c1-140)"
