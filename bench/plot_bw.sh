#!/usr/bin/env bash
# plot_bw.sh - bandwidth against message size, one line per program, from CSV rows in
# litetx_bench --csv's columns (mode,transport,ranks,size,metric,value,unit,rep): the MB/s rows
# of bench/run_bw_sweep.sh, or litetx_bench's own --csv files. A point is the median of a
# program's rows at that size (the rounds of a sweep; litetx_bench's 'median' rows when it wrote
# them); streaming series are solid lines, ping-pong series dashed. Needs gnuplot (Debian:
# gnuplot-nox) and python3.
#
#   bench/plot_bw.sh OUT.png "TITLE" results1.csv [results2.csv ...]
set -eu
out=${1:?usage: plot_bw.sh OUT.png TITLE CSV...}
title=${2:?usage: plot_bw.sh OUT.png TITLE CSV...}
shift 2
[ $# -gt 0 ] || { echo "usage: plot_bw.sh OUT.png TITLE CSV..." >&2; exit 2; }
command -v gnuplot > /dev/null || { echo "gnuplot not found (Debian: gnuplot-nox)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# One whitespace-separated file per (mode, program): size, median MB/s, min, max.
python3 - "$tmp" "$@" <<'PY'
import csv, statistics, sys
d, files = sys.argv[1], sys.argv[2:]
series = {}
for f in files:
    rows = [r for r in csv.DictReader(open(f)) if r.get("unit") == "MB/s"]
    has_median = {(r["mode"], r["transport"]) for r in rows if r["rep"] == "median"}
    for r in rows:
        key = (r["mode"], r["transport"])
        if key in has_median and r["rep"] != "median":
            continue
        series.setdefault(key, {}).setdefault(int(r["size"]), []).append(float(r["value"]))
for (mode, prog), pts in sorted(series.items()):
    with open(f"{d}/{mode}@{prog}.dat", "w") as o:
        for size in sorted(pts):
            v = pts[size]
            o.write(f"{size} {statistics.median(v)} {min(v)} {max(v)}\n")
PY
plots=""
for f in "$tmp"/*.dat; do
    name=$(basename "$f" .dat)
    mode=${name%%@*} prog=${name#*@}
    dash=1
    [ "$mode" = pingpong ] && dash=2
    plots+="'$f' using 1:2:3:4 with yerrorlines dashtype $dash title '$prog ($mode)',"
done
[ -n "$plots" ] || { echo "no MB/s rows in $*" >&2; exit 1; }
gnuplot <<GP
set terminal pngcairo noenhanced size 900,520 font ",10"
set output '$out'
set title '$title'
set grid
set logscale x 2
set format x '%.0b%BB'
set xlabel 'message size'
set ylabel 'MB/s (10^6 bytes/s; median over rounds, bars min-max)'
set key top left
plot ${plots%,}
GP
echo "wrote $out"
