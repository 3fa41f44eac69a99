#!/usr/bin/env bash
# NBD through TLS against nbdkit's file plugin with --tls=require (the
# reference), in one run, all over unix sockets in /dev/shm, one
# certificate directory (made here with openssl) for every server.
# Columns:
#   mosaic      `mosaic serve --tls-certificates DIR` of a raid5 4+1 array
#               (with its journal) on member files in /dev/shm
#   file        mosaic-nbd serving a raw file (examples/serve_file.rs,
#               SERVE_FILE_TLS=DIR): the TLS server's own ceiling
#   nbdkit      `nbdkit --tls=require --tls-certificates=DIR file FILE`
#   plain       nbdkit without TLS: what TLS costs, for context
# Workloads (nbdcopy: fio's nbd engine cannot pass libnbd a certificate
# directory, which libnbd counts as a local file it refuses by default):
#   write   nbdcopy SRC URI     the whole export (the array's capacity,
#                               ~1 GiB: BENCH_MEMBER_SIZE=256M) from /dev/shm
#   read    nbdcopy URI null:   the same bytes back
#   randread / randwrite   fio's nbd engine, 4 KiB at QD32, BENCH_SECONDS
#                          (default 5) after 1 s of ramp: fio cannot pass a
#                          certificate directory in its URI, so libnbd finds
#                          ca-cert.pem where it looks by default,
#                          $HOME/.pki/libnbd, with HOME pointed at a scratch
#                          directory for fio alone
# nbdcopy opens 4 connections (every server here advertises multi-conn)
# with 64 requests of 256 KiB in flight.  Every rep runs each workload on
# every server back to back; ratios to nbdkit are taken within the rep and
# the table shows medians of BENCH_REPS (default 3) reps.
# BENCH_TLS=psk: every TLS server with pre-shared keys instead (mosaic
# `--tls-psk`, serve_file SERVE_FILE_TLS_PSK, nbdkit `--tls-psk`), clients
# as nbds://alice@...?tls-psk-file=FILE; nbdcopy's rows only (fio's nbd
# engine cannot pass libnbd a keys file, and libnbd has no default one).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# Each member's size: the array (raid5 4+1) holds four of them.
MEMBER=${BENCH_MEMBER_SIZE:-256M}
REPS=${BENCH_REPS:-3}
SECS=${BENCH_SECONDS:-5}
# nbdcopy: libnbd-bin; openssl makes the certificates.
. scripts/bench-servers.sh
bench_setup bench-tls nbdcopy nbdkit openssl python3 fio

# A CA and a server certificate it signs, as nbdkit's and libnbd's
# directories name them (ca-cert.pem, server-cert.pem, server-key.pem).
PKI=$SHM/pki
mkdir "$PKI"
(
    cd "$PKI"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca-key.pem -out ca-cert.pem -days 2 -subj "/CN=bench CA" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout server-key.pem -out server.csr -subj "/CN=localhost" 2>/dev/null
    printf 'subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n' >ext
    openssl x509 -req -in server.csr -CA ca-cert.pem -CAkey ca-key.pem -CAcreateserial -out server-cert.pem -days 2 -extfile ext 2>/dev/null
)

# Every export is as large as the array and written whole before it is
# read: nbdcopy skips what an export reports as a hole (nbdkit's sparse
# files), so a part never written would be read by some servers only.
"$MOSAIC" create -a "$SHM/arr" --level raid5 --members 5 --member-size "$MEMBER" --stripe-unit 64K >/dev/null
BYTES=$("$MOSAIC" info -a "$SHM/arr" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["capacity"])')
for s in file nbdkit plain; do truncate -s "$BYTES" "$SHM/$s.raw"; done
head -c "$BYTES" /dev/urandom >"$SHM/src"

declare -A URI
MODE=${BENCH_TLS:-certificates}
if [ "$MODE" = psk ]; then
    printf 'alice:%s\n' "$(openssl rand -hex 32)" >"$SHM/keys.psk"
    TLSQ="tls-psk-file=$SHM/keys.psk"
    WHO="alice@"
    MOSAIC_TLS=(--tls-psk "$SHM/keys.psk")
    FILE_TLS=(SERVE_FILE_TLS_PSK="$SHM/keys.psk")
    NBDKIT_TLS=(--tls-psk="$SHM/keys.psk")
    WORKLOADS="write read"
else
    TLSQ="tls-certificates=$PKI"
    WHO=""
    MOSAIC_TLS=(--tls-certificates "$PKI")
    FILE_TLS=(SERVE_FILE_TLS="$PKI")
    NBDKIT_TLS=(--tls-certificates="$PKI")
    WORKLOADS="write read randread randwrite"
fi
"$MOSAIC" serve -a "$SHM/arr" --socket "$SHM/mosaic.sock" --quiet "${MOSAIC_TLS[@]}" 2>"$SHM/mosaic.log" &
PID[mosaic]=$!
URI[mosaic]="nbds+unix://$WHO/mosaic?socket=$SHM/mosaic.sock&$TLSQ"
env "${FILE_TLS[@]}" "$SERVE_FILE" "$SHM/file.raw" "$SHM/file.sock" 2>"$SHM/file.log" &
PID[file]=$!
URI[file]="nbds+unix://$WHO/?socket=$SHM/file.sock&$TLSQ"
nbdkit -f -U "$SHM/nbdkit.sock" --tls=require "${NBDKIT_TLS[@]}" file "$SHM/nbdkit.raw" 2>"$SHM/nbdkit.log" &
PID[nbdkit]=$!
URI[nbdkit]="nbds+unix://$WHO/?socket=$SHM/nbdkit.sock&$TLSQ"
nbdkit -f -U "$SHM/plain.sock" file "$SHM/plain.raw" 2>"$SHM/plain.log" &
PID[plain]=$!
URI[plain]="nbd+unix:///?socket=$SHM/plain.sock"
SERVERS="mosaic file nbdkit plain"
# fio's HOME: libnbd's default certificate directory holds the CA.
mkdir -p "$SHM/home/.pki/libnbd"
cp "$PKI/ca-cert.pem" "$SHM/home/.pki/libnbd/"
for s in $SERVERS; do
    for _ in $(seq 100); do [ -S "$SHM/$s.sock" ] && break; sleep 0.1; done
    [ -S "$SHM/$s.sock" ] || { echo "bench-tls: $s did not start"; cat "$SHM/$s.log"; exit 1; }
done

# One copy's MiB/s.
copy() {
    local t0 t1
    t0=$(date +%s.%N)
    nbdcopy "$1" "$2" >"$SHM/copy.err" 2>&1 || { echo "bench-tls: nbdcopy $1 $2: $(cat "$SHM/copy.err")" >&2; exit 1; }
    t1=$(date +%s.%N)
    python3 -c "print($BYTES / ($t1 - $t0) / 1048576)"
}

# One fio run's IOPS: 4 KiB at QD32 through the URI without its query.
fio_iops() {
    local uri=${1%%&tls-certificates=*} rw=$2
    (cd "$SHM" && HOME="$SHM/home" fio --name=tls --ioengine=nbd --uri="$uri" --rw="$rw" --bs=4k --iodepth=32 \
        --time_based --runtime="$SECS" --ramp_time=1 --size=256M --output-format=json --output="$SHM/fio.json" >"$SHM/fio.err" 2>&1) \
        || { echo "bench-tls: fio $rw $uri: $(cat "$SHM/fio.err")" >&2; exit 1; }
    python3 -c "import json; j = json.load(open('$SHM/fio.json'))['jobs'][0]; print(j['read']['iops'] + j['write']['iops'])"
}

# Every export is written once first, so no run pays for fresh pages.
for s in $SERVERS; do copy "$SHM/src" "${URI[$s]}" >/dev/null; done
: >"$SHM/results"
for rep in $(seq "$REPS"); do
    for s in $SERVERS; do
        echo "$rep $s write $(copy "$SHM/src" "${URI[$s]}")" >>"$SHM/results"
        echo "$rep $s read $(copy "${URI[$s]}" null:)" >>"$SHM/results"
        case $WORKLOADS in *randread*)
            echo "$rep $s randread $(fio_iops "${URI[$s]}" randread)" >>"$SHM/results"
            echo "$rep $s randwrite $(fio_iops "${URI[$s]}" randwrite)" >>"$SHM/results"
        esac
    done
done

python3 - "$SHM/results" "$BYTES" "$REPS" "$MODE" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
v = {(int(r), s, w): float(x) for r, s, w, x in rows}
reps = sorted({k[0] for k in v})
servers = ["mosaic", "file", "nbdkit", "plain"]
mode = "pre-shared keys" if sys.argv[4] == "psk" else "certificates"
print(f"NBD through TLS ({mode}): nbdcopy of {int(sys.argv[2]) >> 20} MiB (4 connections, MiB/s), fio 4 KiB QD32 (IOPS); median of {sys.argv[3]} reps; ratio to nbdkit --tls=require in the same rep")
print()
print("| workload | " + " | ".join(servers) + " | mosaic / nbdkit | file / nbdkit | TLS cost (nbdkit / plain) |")
print("|---|" + "---:|" * (len(servers) + 3))
for w in [w for w in ["write", "read", "randread", "randwrite"] if (reps[0], "nbdkit", w) in v]:
    med = {s: statistics.median(v[(r, s, w)] for r in reps) for s in servers}
    ratio = lambda a, b: statistics.median(v[(r, a, w)] / v[(r, b, w)] for r in reps)
    unit = "MiB/s" if w in ("write", "read") else "IOPS"
    print(f"| {w} ({unit}) | " + " | ".join(f"{med[s]:,.0f}" for s in servers) + f" | {ratio('mosaic', 'nbdkit'):.2f} | {ratio('file', 'nbdkit'):.2f} | {ratio('nbdkit', 'plain'):.2f} |")
EOF
