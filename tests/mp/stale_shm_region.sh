#!/bin/sh
# stale_shm_region.sh PROGRAM ARGS...: one rank on the efa backend's shm provider opens although
# a region left by a killed process sits under its name. libfabric's shm provider names an
# endpoint's region "<pid>:<uid>:<index>" in /dev/shm; a process killed by SIGKILL leaves its
# file behind, and a later process that got the same pid found it "in use" and failed to open
# (fi_enable: EBUSY). This plants such a file for this shell's pid and execs the rank in place,
# so the rank has that pid. The provider removes the file when it refuses it; the backend then
# opens a fresh endpoint.
set -eu
f="/dev/shm/$$:$(id -u):0"
if [ -e "$f" ]; then
    echo "SKIPPED: $f exists already"
    exit 77
fi
printf 'region of a dead process\n' >"$f"
exec env LITETX_TRANSPORT=efa LITETX_EFA_PROVIDER=shm LITETX_WORLD_SIZE=1 LITETX_RANK=0 "$@"
