#!/bin/sh
# shm_leftovers.sh LITETX_RUN FAULT_TEST: a rank that ends with _exit (fault_test rank_exits: the
# crash the test stages) cannot close its libfabric shm endpoints, whose regions live in
# /dev/shm/<pid>:<uid>:<index>; litetx-run removes them once the rank is gone. Fails when a region
# of a process that no longer exists appeared during the run.
set -u
run=$1
prog=$2
uid=$(id -u)
[ -d /dev/shm ] || { echo "SKIPPED: no /dev/shm"; exit 77; }
before=$(ls /dev/shm)
LITETX_EFA_PROVIDER=shm "$run" -n 3 -t 60 -g 20 --transport efa "$prog" rank_exits || exit 1
left=0
for f in $(ls /dev/shm); do
    case $f in
    *:"$uid":*) ;;
    *) continue ;;
    esac
    pid=${f%%:*}
    printf '%s\n' "$before" | grep -qx -- "$f" && continue
    [ -d "/proc/$pid" ] && continue
    echo "left behind: /dev/shm/$f (process $pid is gone)"
    left=$((left + 1))
done
[ "$left" -eq 0 ] || exit 1
echo "no shm region of an ended rank left"
