#!/bin/bash
# efa_pool.sh - pool the rounds of several runs of run_efa_compare.sh.
#
#   bench/run_efa_compare.sh build-rel 8 > run1.txt 2>&1     (and run2.txt, ...)
#   bench/efa_pool.sh run1.txt run2.txt ...
#
# One run of 8 rounds gives a median ratio whose noise on this host is about the size of the
# margins of the targets (a row moves 0.05-0.10 between two runs of the same build), so a
# single run can pass or miss by luck. This reads the per-round lines ("ROUND PROV TEST FABTESTS
# LITETX") of every file given, and prints per row the median of all per-round ratios
# liblitetx / fabtests, the median of the per-pair geometric means (pairs as in
# run_efa_compare.sh: the order effect cancels within a pair), and a 95 % bootstrap interval of
# that median (resampling whole pairs, 2000 times, fixed seed: the same files give the same
# figures). Bandwidth rows meet the target (docs/PERFORMANCE.md) when the interval lies at or above 0.90; the
# latency row when it lies at or below 1.10.
set -eu
[ $# -ge 1 ] || { echo "usage: efa_pool.sh RUN_OUTPUT..." >&2; exit 2; }
for f in "$@"; do
    [ -r "$f" ] || { echo "efa_pool.sh: cannot read $f" >&2; exit 2; }
done
python3 - "$@" << 'PY'
import math, random, re, statistics, sys
rows = {}  # (prov, test) -> {(file, round): ratio}
for i, name in enumerate(sys.argv[1:]):
    for line in open(name):
        m = re.fullmatch(r"(\d+) (\S+) (\S+) ([\d.]+) ([\d.]+)", line.strip())
        if m and float(m[4]) > 0:
            rows.setdefault((m[2], m[3]), {})[(i, int(m[1]))] = float(m[5]) / float(m[4])
rng = random.Random(1)
print("| provider | test | rounds | ratio, rounds | pairs | ratio, pairs | 95% interval (pairs) |")
print("|---|---|---|---|---|---|---|")
for (p, t), ratio in rows.items():
    pairs = [math.sqrt(v * ratio[(f, r + 1)]) for (f, r), v in ratio.items()
             if r % 2 == 1 and (f, r + 1) in ratio]
    boot = sorted(statistics.median(rng.choices(pairs, k=len(pairs))) for _ in range(2000))
    print("| %s | %s | %d | %.3f | %d | %.3f | %.3f-%.3f |" % (
        p, t, len(ratio), statistics.median(ratio.values()), len(pairs),
        statistics.median(pairs), boot[49], boot[1949]))
PY
