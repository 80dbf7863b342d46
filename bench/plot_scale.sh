#!/usr/bin/env bash
# plot_scale.sh - turn run_scale.sh's CSV rows (any number of files, any variants) into one PNG:
# init time (slowest rank) and resident memory per rank after init and at the end, against the
# number of ranks, one line per variant. Needs gnuplot (Debian: gnuplot-nox).
#
#   bench/plot_scale.sh OUT.png results1.csv [results2.csv ...]
set -eu
out=${1:?usage: plot_scale.sh OUT.png CSV...}
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# one whitespace-separated file per variant, successful rows only
cat "$@" | awk -F, -v d="$tmp" 'NR > 0 && $1 != "variant" && $3 ~ /^[0-9]+$/ {
    print $2, $3, $6 / 1024, $8 / 1024 > (d "/" $1 ".dat") }'
variants=$(cd "$tmp" && ls *.dat | sed 's/\.dat$//')
init="" rss=""
for v in $variants; do
    sort -n -o "$tmp/$v.dat" "$tmp/$v.dat"
    init+="'$tmp/$v.dat' using 1:(\$2/1000) with linespoints title '$v',"
    rss+="'$tmp/$v.dat' using 1:3 with linespoints title '$v after init',"
    rss+="'$tmp/$v.dat' using 1:4 with linespoints dashtype 2 title '$v at end',"
done
gnuplot <<GP
set terminal pngcairo noenhanced size 1100,450 font ",10"
set output '$out'
set multiplot layout 1,2
set grid
set logscale x 2
set key top left
set xlabel 'ranks on one 2-core host'
set ylabel 'init time of the slowest rank (s)'
set title 'lite\_init time'
plot ${init%,}
set ylabel 'resident memory per rank (MiB, mean)'
set title 'memory per rank'
plot ${rss%,}
unset multiplot
GP
echo "wrote $out"
