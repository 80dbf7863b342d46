#!/bin/sh
# run_nccl_suite.sh BUILD_DIR [LOG] - the nccl backend's GPU suite, for a machine with a CUDA
# device (docs/NCCL.md, "Testing"): builds BUILD_DIR if it is not configured yet, prints the GPU
# and NCCL in use, runs every test labelled nccl (the backend's cases and the multi-process suite
# as the nccl variant, two to five ranks sharing the GPU, each with its own NCCL_HOSTID), then the
# allreduce comparison at 64 MiB (the deterministic allreduce over nccl against ncclAllReduce).
# Everything goes to LOG too (default BUILD_DIR/nccl_suite.log). Exit status: ctest's.
set -u
B=${1:?usage: run_nccl_suite.sh BUILD_DIR [LOG]}
LOG=${2:-$B/nccl_suite.log}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# Two ranks on one GPU talk over NCCL's socket transport: keep it on loopback, without IB.
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
export NCCL_IB_DISABLE=${NCCL_IB_DISABLE:-1}
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
if [ ! -f "$B/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLITE_WITH_NCCL=ON || exit 1
fi
cmake --build "$B" -j"$(nproc)" || exit 1
{
  echo "== $(date -u +%FT%TZ) nccl suite on $(hostname)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  ls -l "$(ldconfig -p | awk '/libnccl.so.2 /{print $NF; exit}')" 2>&1
} | tee "$LOG"
ctest --test-dir "$B" -L nccl --output-on-failure --timeout 300 >"$LOG.ctest" 2>&1
rc=$?
tee -a "$LOG" <"$LOG.ctest"
rm -f "$LOG.ctest"
echo "== bench: allreduce 64 MiB, 2 ranks on one GPU" | tee -a "$LOG"
"$B/litetx-run" -n 2 -t 600 --transport nccl "$B/tests/nccl/nccl_gate" \
  "$B/tests/nccl/nccl_allreduce_bench" 64 10 2>&1 | tee -a "$LOG"
exit $rc
