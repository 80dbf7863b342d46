#!/usr/bin/env bash
# run_mpirun.sh NP PROGRAM [ARGS...] - run a liblitetx program under Open MPI's mpirun, so rank and
# world size come from OMPI_COMM_WORLD_* (the library reads them itself); only the root address
# is given. Exits 77 (CTest: skipped) when mpirun is not installed.
set -u
np=$1
shift
if ! command -v mpirun >/dev/null 2>&1; then
    echo "SKIPPED: mpirun (Open MPI) is not installed"
    exit 77
fi
# A root port unlikely to be taken: derived from this shell's pid, in 20000..59999.
port=$((20000 + $$ % 40000))
exec timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$np" \
    --mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
    -x LITETX_ROOT=127.0.0.1:$port -x LITETX_TRANSPORT=tcp "$@"
