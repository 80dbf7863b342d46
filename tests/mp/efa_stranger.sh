#!/bin/bash
# efa_stranger.sh LITETX_RUN COLL_TEST SUPP: a 2-rank job over the efa backend's tcp;ofi_rxm
# provider while a stranger holds a half-open connection to each rank's libfabric port, in a
# build with AddressSanitizer. The job must succeed, and exit 0 with LeakSanitizer on when the
# suppression file the library ships for libfabric's own allocation is given
# (tools/lsan-libfabric.supp). Without it the run exits 1: checked too, so the test notices
# when a libfabric update stops leaking (then the file can go).
set -u
run=$1 prog=$2 supp=$3
attempt() { # LSAN_OPTIONS value -> exit status of the job
    local log
    log=$(mktemp)
    ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS="$1" LITETX_EFA_PROVIDER=tcp \
        LITETX_INIT_TIMEOUT_MS=20000 "$run" -n 2 -t 90 --transport efa "$prog" basic > "$log" 2>&1 &
    local job=$! held=()
    # The ranks' libfabric listeners appear during init; hold one connection to each.
    for _ in $(seq 1 100); do
        mapfile -t ports < <(ss -ltnpH 2> /dev/null | grep '"coll_test"' | awk '{print $4}' |
            sed 's/.*://')
        [ ${#ports[@]} -ge 2 ] && break
        sleep 0.1
    done
    for p in "${ports[@]}"; do
        (exec 3<> "/dev/tcp/127.0.0.1/$p" && printf 'hello?!!' >&3 && sleep 30) 2> /dev/null &
        held+=($!)
    done
    wait $job
    local rc=$?
    kill "${held[@]}" 2> /dev/null
    wait 2> /dev/null
    grep -q "LeakSanitizer" "$log" && echo "(LeakSanitizer reported a leak)"
    rm -f "$log"
    echo "held ${#held[@]} stranger connection(s); job exit $rc" >&2
    return $rc
}
[ -n "$(command -v ss)" ] || { echo "SKIPPED: no ss (iproute2)"; exit 77; }
attempt "suppressions=$supp" || { echo "FAIL: the job failed with the suppressions"; exit 1; }
if attempt ""; then
    echo "NOTE: no leak without the suppressions: this libfabric no longer leaks"
else
    echo "without the suppressions the job exits non-zero, as expected of libfabric 1.17"
fi
echo PASS
