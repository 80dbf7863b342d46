#!/bin/sh
# boot_check.sh LITETX_RUN TLS_BOOT_TEST CERTDIR ca|psk: strangers against the bootstrap root of a
# 3-rank job with security on, before ranks 1 and 2 start (tls_boot_test.c waits for a file):
#   ca:  a plaintext hello frame; openssl s_client with no certificate and no CA; one with a
#        certificate from another CA; one with rank 2's certificate saying it is rank 1
#   psk: a plaintext hello frame; s_client with another PSK; s_client with no PSK
# Each must be refused, with the root's log saying so, none may read an address table (no
# bootstrap frame of type TABLE in what it got back), and the job must then start and run.
set -u
run=$1 prog=$2 certs=$3 mode=$4
for t in openssl python3; do
    command -v $t >/dev/null || { echo "SKIPPED: $t not installed"; exit 77; }
done
out=$(mktemp -d)
job=
trap '[ -n "$job" ] && kill $job 2>/dev/null; rm -rf "$out"' EXIT
fail() { echo "FAILED: $*"; echo "--- job log"; cat "$out/job.log"; exit 1; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# A bootstrap hello (magic "LTBS", type 1, rank 1, world 3, then an address of the attacker's).
python3 - "$out/hello" <<'PY'
import struct, sys
blob = b"EVIL-ADDRESS-127.0.0.1:1"
open(sys.argv[1], "wb").write(struct.pack("<IIIII", 0x5342544C, 1, 1, 3, len(blob)) + blob)
PY
TLS_BOOT_GO=$out/go LITETX_INIT_TIMEOUT_MS=40000 \
    "$run" -n 3 -t 90 -g 10 --transport tcp --root "127.0.0.1:$port" "$prog" >"$out/job.log" 2>&1 &
job=$!
# Wait for the root to listen (a connection that closes at once is no news to it).
python3 - "$port" <<'PY' || fail "the root never listened"
import socket, sys, time
for _ in range(200):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.5).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit(1)
PY
# What came back to a stranger: no TABLE frame ("LTBS" then type 2), whatever else it holds.
no_table() { # name file
    python3 -c 'import sys; d=open(sys.argv[1],"rb").read(); sys.exit(b"LTBS\x02\x00\x00\x00" in d)' \
        "$2" || fail "$1: an address table came back"
    echo "$1: refused, no address table in the $(wc -c <"$2") bytes it got back"
}
plain() {
    python3 - "$port" "$out/hello" "$out/plain.out" <<'PY' || fail "plaintext client: not closed"
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5)
s.sendall(open(sys.argv[2], "rb").read())
got, end = b"", time.time() + 8
while time.time() < end:
    try:
        b = s.recv(65536)
    except (ConnectionResetError, socket.timeout):
        break
    if not b:
        break
    got += b
open(sys.argv[3], "wb").write(got)
sys.exit(0 if time.time() < end else 1)
PY
    no_table "plaintext hello" "$out/plain.out"
}
client() { # name, s_client options...
    name=$1
    shift
    timeout 15 openssl s_client -connect "127.0.0.1:$port" -tls1_3 -quiet -ign_eof "$@" \
        <"$out/hello" >"$out/client.out" 2>"$out/client.err"
    no_table "$name" "$out/client.out"
}
plain
if [ "$mode" = ca ]; then
    client "s_client without certificate or CA"
    client "s_client with another CA's certificate" -cert "$certs/other2.pem" \
        -key "$certs/other2.key" -CAfile "$certs/both_ca.pem"
    client "s_client with rank 2's certificate as rank 1" -cert "$certs/rank2.pem" \
        -key "$certs/rank2.key" -CAfile "$certs/ca.pem"
    grep -q "refused this connection: it says it is rank 1" "$out/client.out" ||
        fail "the rank-2 certificate was not told why it was refused"
    want="refused a connection from [^ ]*: TLS handshake failed
refused a connection from [^ ]*: TLS handshake failed: .*certificate verify failed
refused a connection from [^ ]*: it says it is rank 1, but its certificate is rank 2's"
    nref=4
else
    other=$(python3 -c 'print("ab" * 32)')
    client "s_client with another PSK" -psk "$other" -psk_identity litetx-job-psk \
        -ciphersuites TLS_AES_128_GCM_SHA256
    client "s_client without a PSK"
    want="refused a connection from [^ ]*: TLS handshake failed"
    nref=3
fi
touch "$out/go"
wait $job
rc=$?
job=
[ $rc -eq 0 ] || fail "the job failed after the strangers (rc $rc)"
[ "$(grep -c 'ring ok' "$out/job.log")" -eq 3 ] || fail "not every rank ran"
echo "$want" | while read -r re; do
    grep -q "$re" "$out/job.log" || fail "the root's log lacks: $re"
done || exit 1
n=$(grep -c "bootstrap root .*: refused a connection from" "$out/job.log")
[ "$n" -ge $nref ] || fail "the root logged $n refusals, expected $nref"
grep "bootstrap root" "$out/job.log" | sed 's/^/  /'
echo "$mode: every stranger refused, the job ran"
