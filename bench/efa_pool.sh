#!/bin/bash
# efa_pool.sh - pool the rounds of several runs of run_efa_compare.sh.
#
#   bench/run_efa_compare.sh build-rel 8 > run1.txt 2>&1     (and run2.txt, ...)
#   bench/efa_pool.sh run1.txt run2.txt ...
#
# One run of 8 rounds gives a median ratio whose noise on this host is about the size of the
# margins of issue 5's targets (a row moves 0.05-0.10 between two runs of the same build), so a
# single run can pass or miss by luck. This reads the per-round lines ("ROUND PROV TEST FABTESTS
# LITETX") of every file given, and prints per row:
#   - the median of all per-round ratios liblitetx / fabtests;
#   - the median of the per-pair geometric means (a pair = an odd round, where fabtests went
#     first, and the next round, where liblitetx did; so the order effect cancels within a pair);
#   - a 95 % bootstrap interval for that median (resampling whole pairs, 2000 times, fixed seed:
#     the same files give the same figures).
# Bandwidth rows meet issue 5's target when the interval lies at or above 0.90; the latency row
# when it lies at or below 1.10.
set -eu
[ $# -ge 1 ] || { echo "usage: efa_pool.sh RUN_OUTPUT..." >&2; exit 2; }
for f in "$@"; do
    [ -r "$f" ] || { echo "efa_pool.sh: cannot read $f" >&2; exit 2; }
done
awk '
function sort(a, n,    i, j, v) { # insertion sort of a[1..n]
    for (i = 2; i <= n; i++) {
        v = a[i]
        for (j = i - 1; j >= 1 && a[j] > v; j--)
            a[j + 1] = a[j]
        a[j + 1] = v
    }
}
function median(a, n) {
    sort(a, n)
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
FNR == 1 { file++ }
# per-round lines only: the table and comments that follow them have other shapes
NF == 5 && $1 ~ /^[0-9]+$/ && $4 + 0 > 0 && $5 + 0 > 0 {
    key = $2 " " $3
    if (!(key in seen)) { seen[key] = 1; order[++nkeys] = key }
    ratio[key, file, $1 + 0] = $5 / $4
    nround[key]++
    if ($1 + 0 > maxround[file]) maxround[file] = $1 + 0
}
END {
    srand(1)
    printf "| provider | test | rounds | ratio, rounds | pairs | ratio, pairs | 95%% interval (pairs) |\n"
    printf "|---|---|---|---|---|---|---|\n"
    for (k = 1; k <= nkeys; k++) {
        key = order[k]
        n = 0; np = 0
        for (f = 1; f <= file; f++)
            for (r = 1; r <= maxround[f]; r++) {
                if ((key, f, r) in ratio) all[++n] = ratio[key, f, r]
                if (r % 2 == 1 && (key, f, r) in ratio && (key, f, r + 1) in ratio)
                    pair[++np] = sqrt(ratio[key, f, r] * ratio[key, f, r + 1])
            }
        for (i = 1; i <= np; i++) keep[i] = pair[i]
        med_pairs = np ? median(keep, np) : 0
        for (b = 1; b <= 2000; b++) {
            for (i = 1; i <= np; i++) draw[i] = pair[1 + int(rand() * np)]
            boot[b] = median(draw, np)
        }
        sort(boot, 2000)
        split(key, kp, " ")
        printf "| %s | %s | %d | %.3f | %d | %.3f | %.3f-%.3f |\n", kp[1], kp[2], n,
               median(all, n), np, med_pairs, boot[50], boot[1950]
    }
}' "$@"
