#!/bin/sh
# gen_certs.sh DIR [RANKS]: throwaway credentials for the TLS tests, made with the openssl CLI:
#   ca.pem                        the job's CA
#   rank<N>.pem / rank<N>.key     rank N's certificate (CN and DNS SAN litetx-rank-<N>), N < RANKS
#   expired.pem / expired.key     rank 0's name, signed by the CA, expired in 2020
#   other_ca.pem                  another CA; other<N>.pem / other<N>.key signed by it
#   both_ca.pem                   ca.pem and other_ca.pem
#   mismatch.key                  a key that matches no certificate
#   norank.pem / norank.key       signed by the CA, but naming no rank
#   garbage.pem                   not PEM at all
#   psk.hex                       a 32-byte pre-shared key in hex; psk_short.hex: too short
set -eu
dir=$1
ranks=${2:-8}
rm -rf "$dir"
mkdir -p "$dir"
cd "$dir"
ossl() { openssl "$@" 2>/dev/null >/dev/null; }
# EC P-256 keys: fast to make and to use.
newkey() { ossl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }
mkca() { # name subject
    newkey "$1.key"
    ossl req -x509 -new -key "$1.key" -subj "/CN=$2" -days 3650 -sha256 -out "$1.pem" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign"
}
sign() { # out-base ca-base cn [extra x509 args...]
    out=$1 ca=$2 cn=$3
    shift 3
    newkey "$out.key"
    ossl req -new -key "$out.key" -subj "/CN=$cn" -out "$out.csr"
    printf 'subjectAltName=DNS:%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$cn" > "$out.ext"
    ossl x509 -req -in "$out.csr" -CA "$ca.pem" -CAkey "$ca.key" -CAcreateserial -sha256 \
        -extfile "$out.ext" -out "$out.pem" "$@"
    rm -f "$out.csr" "$out.ext"
}
mkca ca "litetx test CA"
mkca other_ca "another CA"
i=0
while [ "$i" -lt "$ranks" ]; do
    sign "rank$i" ca "litetx-rank-$i" -days 3650
    sign "other$i" other_ca "litetx-rank-$i" -days 3650
    i=$((i + 1))
done
sign norank ca "some-host" -days 3650
# Expired: `openssl ca` is the CLI that takes explicit dates (x509 -days cannot go back).
mkdir -p expired_db
: > expired_db/index.txt
echo 1000 > expired_db/serial
cat > expired_db/ca.cnf <<CNF
[ca]
default_ca = d
[d]
database = expired_db/index.txt
serial = expired_db/serial
new_certs_dir = expired_db
default_md = sha256
policy = p
copy_extensions = copy
[p]
commonName = supplied
CNF
newkey expired.key
ossl req -new -key expired.key -subj "/CN=litetx-rank-0" -addext "subjectAltName=DNS:litetx-rank-0" \
    -out expired.csr
ossl ca -batch -config expired_db/ca.cnf -cert ca.pem -keyfile ca.key -in expired.csr \
    -startdate 20200101000000Z -enddate 20200102000000Z -out expired.pem -notext
rm -f expired.csr
# Trusts both CAs: an impostor with other2.pem that accepts our ranks' certificates.
cat ca.pem other_ca.pem > both_ca.pem
newkey mismatch.key
printf 'this is not a certificate\n' > garbage.pem
openssl rand -hex 32 > psk.hex
openssl rand -hex 8 > psk_short.hex
chmod 600 ./*.key psk.hex psk_short.hex
