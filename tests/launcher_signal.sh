#!/bin/bash
# launcher_signal.sh LITETX_RUN: a launcher stopped with SIGTERM passes it on, so no rank is
# left running after it (they would be reparented to init and run on).
set -u
run=$1
tmp=$(mktemp -d)
trap 'pkill -KILL -f "$tmp/rank_sleep" 2> /dev/null; rm -rf "$tmp"' EXIT
cp "$(command -v sleep)" "$tmp/rank_sleep"
"$run" -n 3 -t 60 -g 5 "$tmp/rank_sleep" 30 &
launcher=$!
for _ in $(seq 1 50); do
    [ "$(pgrep -c -f "$tmp/rank_sleep")" -ge 3 ] && break
    sleep 0.1
done
kill -TERM "$launcher"
wait "$launcher"
rc=$?
[ "$rc" -eq 143 ] || { echo "FAIL: launcher exit $rc, expected 143 (128 + SIGTERM)"; exit 1; }
for _ in $(seq 1 50); do
    left=$(pgrep -c -f "$tmp/rank_sleep")
    [ "$left" -eq 0 ] && { echo "PASS: the ranks ended with the launcher"; exit 0; }
    sleep 0.1
done
echo "FAIL: $left rank(s) still running after the launcher ended"
exit 1
