#!/bin/sh
# stale_shm_region.sh PROGRAM ARGS...: one rank on the efa backend's shm provider opens although
# a region left by a killed process sits under its name. libfabric's shm provider names an
# endpoint's region "<pid>:<uid>:<index>" in /dev/shm; a process killed by SIGKILL leaves its
# file behind, and a later process that got the same pid found it "in use" and failed to open
# (fi_enable: EBUSY). A killed process has one such file per endpoint (rail): this plants three
# for this shell's pid (indices 0-2) and execs the rank in place, so the rank has that pid. The
# provider removes each file as it refuses it; the backend opens endpoints until one is fresh.
set -eu
for i in 0 1 2; do
    f="/dev/shm/$$:$(id -u):$i"
    if [ -e "$f" ]; then
        echo "SKIPPED: $f exists already"
        exit 77
    fi
done
for i in 0 1 2; do
    printf 'region of a dead process\n' >"/dev/shm/$$:$(id -u):$i"
done
exec env LITETX_TRANSPORT=efa LITETX_EFA_PROVIDER=shm LITETX_WORLD_SIZE=1 LITETX_RANK=0 "$@"
