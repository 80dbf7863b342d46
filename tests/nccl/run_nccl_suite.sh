#!/bin/sh
# run_nccl_suite.sh BUILD_DIR [LOG] - the nccl backend's GPU suite, for a machine with a CUDA
# device (docs/NCCL.md, "Testing"): builds BUILD_DIR if it is not configured yet, prints the GPU
# and NCCL in use, then, most telling first (a run cut short keeps what matters):
#   1. the backend's own cases (tests named nccl.*: device buffers point to point, one-sided,
#      collectives, a lost peer, a stalled partner; two ranks sharing the GPU, each with its own
#      NCCL_HOSTID, set by tests/nccl/nccl_gate),
#   2. the allreduce comparison at 64 MiB (the deterministic allreduce over nccl against
#      ncclAllReduce, interleaved, medians),
#   3. the multi-process suite as the nccl variant (mp.nccl.*, 1 to 16 ranks on the GPU).
# Everything goes to LOG too (default BUILD_DIR/nccl_suite.log). Exit status: 0 when both ctest
# runs passed.
set -u
B=${1:?usage: run_nccl_suite.sh BUILD_DIR [LOG]}
LOG=${2:-$B/nccl_suite.log}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
if [ ! -f "$B/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLITE_WITH_NCCL=ON || exit 1
fi
cmake --build "$B" -j"$(nproc)" || exit 1
{
  echo "== $(date -u +%FT%TZ) nccl suite on $(hostname)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  ldconfig -p | grep 'libnccl.so.2 ' 2>&1
} | tee "$LOG"
run_ctest() {
  echo "== ctest $*" | tee -a "$LOG"
  ctest --test-dir "$B" --output-on-failure --timeout 300 "$@" >"$LOG.part" 2>&1
  r=$?
  tee -a "$LOG" <"$LOG.part"
  rm -f "$LOG.part"
  return $r
}
run_ctest -R '^nccl\.'
rc1=$?
echo "== bench: allreduce 64 MiB, 2 ranks on one GPU" | tee -a "$LOG"
"$B/litetx-run" -n 2 -t 300 --transport nccl "$B/tests/nccl/nccl_gate" \
  "$B/tests/nccl/nccl_allreduce_bench" 64 10 2>&1 | tee -a "$LOG"
run_ctest -R '^mp\.nccl\.'
rc2=$?
[ "$rc1" = 0 ] && [ "$rc2" = 0 ]
