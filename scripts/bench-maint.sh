#!/usr/bin/env bash
# Online maintenance against client I/O, in one run: mosaic raid5 4+1 on
# member files in /dev/shm, served over a unix socket, fio 4 KiB random
# read/write (50/50, QD32) as the client.
#
#   client IOPS during an online rebuild / without     (serve's default --maint-rate)
#   client IOPS during an online scrub   / without
#   rebuild MiB/s with client load and without          (default rate, and unlimited)
#
# Each client run is time based (BENCH_SECONDS, default 6 s); members are
# BENCH_MEMBER_SIZE (default 1G) so a rebuild at the default 128 MiB/s
# outlasts the client run.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECS=${BENCH_SECONDS:-6}
MEMBER=${BENCH_MEMBER_SIZE:-1G}

for t in fio python3; do
    command -v "$t" >/dev/null 2>&1 || { echo "bench-maint: missing $t"; exit 1; }
done
if [ -z "${BENCH_MOSAIC:-}" ]; then
    cargo build --release -p mosaic-cli >/dev/null 2>&1
fi
MOSAIC=${BENCH_MOSAIC:-$ROOT/target/release/mosaic}

SHM=$(mktemp -d /dev/shm/bench-maint.XXXXXX)
PID=""
stop_server() {
    if [ -n "$PID" ]; then
        kill -INT "$PID" 2>/dev/null || true
        wait "$PID" 2>/dev/null || true
        PID=""
    fi
}
cleanup() {
    stop_server
    rm -rf "$SHM"
}
trap cleanup EXIT

serve() {
    "$MOSAIC" serve -a "$SHM/arr" --socket "$SHM/s.sock" --quiet "$@" 2>>"$SHM/serve.log" &
    PID=$!
    for _ in $(seq 100); do [ -S "$SHM/s.sock" ] && return 0; sleep 0.1; done
    echo "bench-maint: serve did not start"; cat "$SHM/serve.log"; exit 1
}

# IOPS of a time-based 4 KiB random 50/50 run at QD32 (for $1 seconds,
# default BENCH_SECONDS).
client() {
    fio --name=c --ioengine=nbd --uri="nbd+unix:///mosaic?socket=$SHM/s.sock" \
        --rw=randrw --rwmixread=50 --bs=4k --iodepth=32 --time_based --runtime="${1:-$SECS}" \
        --output-format=json 2>/dev/null |
        python3 -c 'import json,sys; t=sys.stdin.read(); j=json.loads(t[t.index("{"):])["jobs"][0]; print(round(j["read"]["iops"]+j["write"]["iops"]))'
}

# Fail member 2 and replace it with a new file; the rebuild's MiB/s
# written to the new member (the rate limit paces the array's logical
# bytes, so a 4+1 member is written at a quarter of it).
rebuild() {
    local n=$1
    "$MOSAIC" fail -a "$SHM/arr" --member 2 >/dev/null
    "$MOSAIC" replace -a "$SHM/arr" --member 2 --drive "$SHM/new-$n.img" --json |
        python3 -c 'import json,sys; r=json.load(sys.stdin); print(round(r["bytes_written"]/r["seconds"]/1048576,1))'
}

"$MOSAIC" create -a "$SHM/arr" --level raid5 --members 5 --member-size "$MEMBER" >/dev/null
serve
fio --name=fill --ioengine=nbd --uri="nbd+unix:///mosaic?socket=$SHM/s.sock" --rw=write --bs=1M --iodepth=8 >/dev/null 2>&1

# A rebuild under load: it and a client run of $2 seconds start together.
# Prints "client-IOPS rebuild-MiB/s".
loaded_rebuild() {
    rebuild "$1" >"$SHM/rb$1" &
    local rb=$! iops
    sleep 0.3
    iops=$(client "$2")
    wait $rb
    echo "$iops $(cat "$SHM/rb$1")"
}

# The first random run after the fill is slower (measured: ~15 %); warm up.
client 3 >/dev/null
base=$(client)
read -r during_rebuild rebuild_loaded < <(loaded_rebuild 1 "$SECS")

"$MOSAIC" scrub -a "$SHM/arr" >/dev/null &
SC=$!
sleep 0.3
during_scrub=$(client)
wait $SC || true

rebuild_idle=$(rebuild 2)
stop_server

# The same without the rate limit: a 1 GiB member rebuilds in about 3 s,
# so the client run is 2 s to stay inside it.
serve --maint-rate 0
base_short=$(client 2)
read -r during_rebuild_unl rebuild_loaded_unl < <(loaded_rebuild 3 2)
rebuild_idle_unl=$(rebuild 4)
stop_server

python3 - "$base" "$during_rebuild" "$during_scrub" "$rebuild_loaded" "$rebuild_idle" "$during_rebuild_unl" "$rebuild_loaded_unl" "$rebuild_idle_unl" "$base_short" <<'EOF'
import sys
base, dr, ds, rl, ri, dru, rlu, riu, bs = map(float, sys.argv[1:])
print("bench-maint: raid5 4+1 in /dev/shm, fio 4 KiB randrw 50/50 QD32 over NBD")
print(f"  client IOPS without maintenance        {base:>10.0f}")
print(f"  during online rebuild (128M/s default) {dr:>10.0f}   ratio {dr/base:.2f}")
print(f"  during online scrub   (128M/s default) {ds:>10.0f}   ratio {ds/base:.2f}")
print(f"  without, 2 s run (reference for below)  {bs:>10.0f}")
print(f"  during online rebuild (unlimited), 2 s {dru:>10.0f}   ratio {dru/bs:.2f}")
print(f"  rebuild MiB/s, default rate: loaded {rl:.1f}, idle {ri:.1f} (ratio {rl/ri:.2f})")
print(f"  rebuild MiB/s, unlimited:    loaded {rlu:.1f}, idle {riu:.1f} (ratio {rlu/riu:.2f})")
EOF
