#!/bin/sh
# shm_clean.sh PROGRAM: a rank that opens libfabric's shm provider removes the regions that
# processes of this user which no longer exist left in /dev/shm (a rank killed under a launcher
# other than litetx-run leaves them), and nothing else. PROGRAM runs as a job of one rank,
# started without litetx-run.
set -u
prog=$1
uid=$(id -u)
[ -d /dev/shm ] && [ -w /dev/shm ] || { echo "SKIPPED: no writable /dev/shm"; exit 77; }
# A pid that no longer exists: a child that has ended and been reaped.
sh -c 'exit 0' &
gone=$!
wait $gone
kill -0 "$gone" 2>/dev/null && { echo "SKIPPED: pid $gone was reused at once"; exit 77; }
stale=/dev/shm/$gone:$uid:0 live=/dev/shm/$$:$uid:0 odd=/dev/shm/$gone:$uid:x
other=/dev/shm/$gone:$((uid + 1)):0
trap 'rm -f "$stale" "$live" "$odd" "$other"' EXIT
for f in "$stale" "$live" "$odd" "$other"; do : > "$f"; done
LITETX_RANK=0 LITETX_WORLD_SIZE=1 LITETX_TRANSPORT=efa LITETX_EFA_PROVIDER=shm \
    LITETX_INIT_TIMEOUT_MS=20000 "$prog" basic > /dev/null || { echo "FAIL: the job failed"; exit 1; }
fail=0
[ -e "$stale" ] && { echo "FAIL: $stale (process $gone is gone) was left"; fail=1; }
for f in "$live" "$odd" "$other"; do
    [ -e "$f" ] || { echo "FAIL: $f was removed"; fail=1; }
done
[ $fail -eq 0 ] && echo "PASS: the dead process's region went, the others stayed"
exit $fail
