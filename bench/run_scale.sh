#!/usr/bin/env bash
# run_scale.sh - init time and resident memory per rank against the number of ranks, on one
# host: runs tests/mp/scale_test (init, barrier, allreduce 4 KiB and 1 MiB, alltoall 4 KiB per
# peer, a p2p ring; every byte checked) under litetx-run for each N and prints one CSV row each.
#
#   bench/run_scale.sh BUILD_DIR VARIANT "N1 N2 ..." > results.csv
#
# VARIANT: tcp, tcp_lazy (connections on first use) or efa_shm (libfabric's shm provider).
# Columns: variant, ranks, init ms (max and mean over the ranks), resident KiB per rank after
# init (max, mean), at the end (max, mean), peak (max), and the wall time of the whole job in
# seconds. A job that fails prints a row with its exit status in the ms columns' place.
set -u
BUILD=${1:?usage: run_scale.sh BUILD_DIR VARIANT "N..."}
VARIANT=${2:?variant}
NS=${3:?rank counts}
case $VARIANT in
tcp) env=(LITETX_TCP_CONNECT=all) tr=tcp ;;
tcp_lazy) env=(LITETX_TCP_CONNECT=lazy) tr=tcp ;;
efa_shm) env=(LITETX_EFA_PROVIDER=shm LITETX_EFA_IMM=cq32) tr=efa ;;
*) echo "unknown variant $VARIANT" >&2; exit 2 ;;
esac
echo "variant,ranks,init_ms_max,init_ms_mean,rss_init_kib_max,rss_init_kib_mean,rss_end_kib_max,rss_end_kib_mean,rss_peak_kib_max,wall_s"
for n in $NS; do
    log=$(mktemp)
    t0=$(date +%s.%N)
    env "${env[@]}" LITETX_INIT_TIMEOUT_MS=600000 timeout 900 "$BUILD"/litetx-run -n "$n" -t 880 \
        --transport "$tr" "$BUILD"/tests/mp/scale_test > "$log" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    line=$(grep '^scale:' "$log")
    if [ $rc -ne 0 ] || [ -z "$line" ]; then
        echo "$VARIANT,$n,failed (exit $rc),,,,,,,$wall"
        grep -v "not usable" "$log" | head -5 >&2
    else
        # scale: ranks N transport T init_ms max A mean B rss_kib after init max C mean D, at
        # end max E mean F, peak max G; ...
        awk -v v="$VARIANT" -v w="$wall" '{
            for (i = 1; i <= NF; i++) {
                if ($i == "ranks") n = $(i + 1)
                if ($i == "init_ms") { a = $(i + 2); b = $(i + 4) }
                if ($i == "init" && $(i - 1) == "after") { c = $(i + 2); d = $(i + 4) }
                if ($i == "end") { e = $(i + 2); f = $(i + 4); sub(",", "", f) }
                if ($i == "peak") { g = $(i + 2); sub(";", "", g) }
            }
            sub(",", "", d)
            printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", v, n, a, b, c, d, e, f, g, w
        }' <<< "$line"
    fi
    rm -f "$log"
done
