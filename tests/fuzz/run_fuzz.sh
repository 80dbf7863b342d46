#!/usr/bin/env bash
# run_fuzz.sh BUILD_DIR SECONDS [TARGET...] - run each libFuzzer target of a LITE_BUILD_FUZZ
# build for SECONDS, one after the other, each over a scratch copy of its checked-in corpus
# (tests/fuzz/corpus/<target>, which is never written to). Prints the executions each reached;
# fails when a target crashes, leaks, breaks an invariant, times out on an input, or is missing.
# Inputs that failed are kept in BUILD_DIR/fuzz-artifacts/.
set -uo pipefail

if [ $# -lt 2 ]; then
    sed -n '2,6p' "$0"
    exit 2
fi
build=$1
secs=$2
shift 2
here="$(cd "$(dirname "$0")" && pwd)"
bindir="$build/tests/fuzz"

if [ $# -gt 0 ]; then
    targets=("$@")
else
    targets=()
    for src in "$here"/fuzz_*.c; do
        name=$(basename "$src" .c)
        targets+=("${name#fuzz_}")
    done
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/litetx-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
artifacts="$build/fuzz-artifacts"
failed=()
printf '%-12s %12s %10s  %s\n' target executions exec/s result
for t in "${targets[@]}"; do
    bin="$bindir/fuzz_$t"
    if [ ! -x "$bin" ]; then
        printf '%-12s %12s %10s  %s\n' "$t" - - "MISSING ($bin)"
        failed+=("$t")
        continue
    fi
    corpus="$scratch/corpus-$t"
    mkdir -p "$corpus" "$scratch/art-$t"
    if [ -d "$here/corpus/$t" ]; then
        cp "$here/corpus/$t"/* "$corpus"/ 2>/dev/null || true
    fi
    log="$scratch/$t.log"
    # One process, one input at a time (the host is shared); leaks are errors; a single input
    # that runs 10 s is a hang. The checked-in seeds run first, as regression inputs. A failure
    # exits 1, not libFuzzer's 77, which test drivers read as "skipped".
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$bin" "$corpus" -max_total_time="$secs" -print_final_stats=1 -timeout=10 \
        -rss_limit_mb=2048 -error_exitcode=1 -artifact_prefix="$scratch/art-$t/" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    if [ $rc -ne 0 ] || [ -n "$(ls -A "$scratch/art-$t")" ]; then
        printf '%-12s %12s %10s  %s\n' "$t" "${execs:--}" "${rate:--}" "FAILED (exit $rc)"
        failed+=("$t")
        mkdir -p "$artifacts"
        cp "$scratch/art-$t"/* "$artifacts"/ 2>/dev/null || true
        echo "---- fuzz_$t: end of its log"
        grep -v '^#[0-9]' "$log" | tail -40
        echo "---- inputs kept in $artifacts; reproduce with: $bin <input>"
    else
        printf '%-12s %12s %10s  %s\n' "$t" "${execs:--}" "${rate:--}" ok
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "run_fuzz: failed: ${failed[*]}" >&2
    exit 1
fi
echo "run_fuzz: ${#targets[@]} targets, ${secs} s each, no failure"
