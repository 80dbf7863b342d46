#!/bin/sh
# wire_check.sh LITETX_RUN TEST_PROGRAM: every byte the two ranks hand to the kernel (write,
# sendmsg, ... as strace records them) is searched for the test's plaintext pattern and for the
# bootstrap's frames. Security off must show both (the check works); security on (the
# environment's LITETX_SECURITY*) must show neither.
set -u
run=$1 prog=$2
command -v strace >/dev/null || { echo "SKIPPED: strace not installed"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
trace() { # name, then env assignments
    name=$1
    shift
    # LeakSanitizer cannot run under ptrace (sanitizer builds): the other tests check leaks.
    env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$@" \
        strace -f -qq -s 70000 -e trace=write,writev,sendmsg,sendto,sendmmsg \
        -o "$out/$name" "$run" -n 2 -t 60 --transport tcp "$prog" pattern || {
        echo "FAILED: the $name run failed"
        exit 1
    }
}
trace plain LITETX_SECURITY=off
trace secure
# the pattern as the programs write it: "LITETX-PLAINTEXT-<12 digits>|"
plain=$(grep -c 'LITETX-PLAINTEXT-' "$out/plain")
secure=$(grep -c 'LITETX-PLAINTEXT-' "$out/secure")
echo "syscalls carrying the pattern: security off $plain, security $LITETX_SECURITY $secure"
[ "$plain" -gt 0 ] || { echo "FAILED: the check sees nothing even in plaintext"; exit 1; }
[ "$secure" -eq 0 ] || { echo "FAILED: plaintext on the wire with security on"; exit 1; }
# the bootstrap's frames begin with the magic "LTBS" (its address table and hellos)
bplain=$(grep -c 'LTBS' "$out/plain")
bsecure=$(grep -c 'LTBS' "$out/secure")
echo "syscalls carrying a bootstrap frame: security off $bplain, security $LITETX_SECURITY $bsecure"
[ "$bplain" -gt 0 ] || { echo "FAILED: the check sees no bootstrap frame in plaintext"; exit 1; }
[ "$bsecure" -eq 0 ] || { echo "FAILED: a plaintext bootstrap frame with security on"; exit 1; }
echo "no plaintext on the wire"
