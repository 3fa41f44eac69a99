#!/usr/bin/env bash
# The adaptive layout on a real remapped array over NBD (fio's nbd engine,
# members in /dev/shm), every number a ratio to a reference measured in the
# same run:
#
#   1. Zipf 64 KiB random reads (fio --random_distribution=zipf), before
#      and after `mosaic adapt` learnt from a `serve --record` trace of the
#      "before" run: IOPS after / before.
#   2. Migration throughput of that `mosaic adapt` run (MiB/s).
#   3. Client IOPS during an online migration (`serve --adapt-every`)
#      against the same workload on a twin array served without it:
#      IOPS during / without.
#
# Members in /dev/shm have no per-drive queue, so (1) shows the cost of
# the remapping, not the parallelism a disk array gains; the simulator's
# prediction for drive models is printed beside it (`adapt --dry-run`).
# BENCH_SECONDS (default 10), BENCH_REPS (default 3) pairs, interleaved.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECS=${BENCH_SECONDS:-10}
REPS=${BENCH_REPS:-3}
INNER=${BENCH_INNER:-raid5:4}
MEMBER=${BENCH_MEMBER_SIZE:-192M}
for t in fio python3; do
    command -v "$t" >/dev/null 2>&1 || { echo "bench-adapt: missing $t"; exit 1; }
done
cargo build --release -p mosaic-cli >/dev/null 2>&1
MOSAIC=${BENCH_MOSAIC:-$ROOT/target/release/mosaic}
SHM=$(mktemp -d /dev/shm/bench-adapt.XXXXXX)
PID=""
cleanup() {
    [ -n "$PID" ] && kill -INT "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    rm -rf "$SHM"
}
trap cleanup EXIT

# serve ARRAY SOCKET EXTRA... : start, wait for the socket.
serve() {
    local arr=$1 sock=$2
    shift 2
    rm -f "$sock"
    "$MOSAIC" serve -a "$arr" --socket "$sock" --quiet "$@" 2>"$SHM/serve.log" &
    PID=$!
    for _ in $(seq 100); do [ -S "$sock" ] && return; sleep 0.1; done
    echo "bench-adapt: serve did not start: $(cat "$SHM/serve.log")"
    exit 1
}
unserve() {
    kill -INT "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
    PID=""
}
# fio SOCKET NAME ARGS... -> IOPS
fio_iops() {
    local sock=$1 name=$2
    shift 2
    (cd "$SHM" && fio --name="$name" --ioengine=nbd --uri="nbd+unix:///mosaic?socket=$sock" --output-format=json \
        --output="$SHM/$name.json" "$@" >"$SHM/$name.err" 2>&1) || { echo "bench-adapt: fio $name: $(cat "$SHM/$name.err")" >&2; echo 0; return; }
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1]))["jobs"][0]; d=j["read"] if j["read"]["io_bytes"] else j["write"]; print("%.0f" % d["iops"])' "$SHM/$name.json"
}
make_array() {
    "$MOSAIC" create -a "$1" --level remap --inner "$INNER" --member-size "$MEMBER" --journal-size 32M --remap-spare 0.25 >/dev/null
    serve "$1" "$SHM/fill.sock"
    fio_iops "$SHM/fill.sock" "fill-$(basename "$1")" --rw=write --bs=1M --iodepth=8 --size="$CAP_HINT" >/dev/null
    unserve
}
ZIPF=(--rw=randread --bs=64k --iodepth=16 --random_distribution=zipf:1.1 --norandommap --randrepeat=0 --time_based --runtime="$SECS" --ramp_time=1)

"$MOSAIC" create -a "$SHM/probe" --level remap --inner "$INNER" --member-size "$MEMBER" --journal-size 32M --remap-spare 0.25 >/dev/null
CAP_HINT=$("$MOSAIC" info -a "$SHM/probe" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["volume"]["capacity"])')
rm -rf "$SHM/probe"

before=(); after=(); mig=(); during=(); without=(); pred=()
for rep in $(seq "$REPS"); do
    A=$SHM/a$rep
    B=$SHM/b$rep
    C=$SHM/c$rep
    make_array "$A"
    make_array "$B"
    make_array "$C"
    # (1)+(2): before, recorded; adapt offline; after.
    serve "$A" "$SHM/a.sock" --record "$SHM/a$rep.csv"
    before+=("$(fio_iops "$SHM/a.sock" "before$rep" "${ZIPF[@]}" --size="$CAP_HINT")")
    unserve
    p=$("$MOSAIC" adapt -a "$A" --trace "$SHM/a$rep.csv" --dry-run --json --model hdd:seagate-st91000640ss-detailed)
    pred+=("$(echo "$p" | python3 -c 'import json,sys; j=json.load(sys.stdin); t=j["plan"]["target"]; print("%+.0f%%:%d->%d" % (j["prediction"]["gain"]*100, t["conflicts_before"], t["conflicts_after"]))')")
    m=$("$MOSAIC" adapt -a "$A" --trace "$SHM/a$rep.csv" --json)
    mig+=("$(echo "$m" | python3 -c 'import json,sys; j=json.load(sys.stdin)["migrated"]; print("%.0f:%d" % (j["bytes"]/1048576/max(j["seconds"],1e-9), j["bytes"]>>20))')")
    serve "$A" "$SHM/a.sock"
    after+=("$(fio_iops "$SHM/a.sock" "after$rep" "${ZIPF[@]}" --size="$CAP_HINT")")
    unserve
    # (3): B served with the periodic job (every second, unlimited rate)
    # vs its twin C (the same static layout) without it, order alternating.
    for which in $( [ $((rep % 2)) = 1 ] && echo "with without" || echo "without with" ); do
        if [ "$which" = with ]; then
            serve "$B" "$SHM/b.sock" --adapt-every 1 --adapt-rate 0 --adapt-min-requests 500
            during+=("$(fio_iops "$SHM/b.sock" "during$rep" "${ZIPF[@]}" --size="$CAP_HINT")")
            unserve
            grep -h "adapt: moved" "$SHM/serve.log" | tail -1 >>"$SHM/moved.log" || true
        else
            serve "$C" "$SHM/c.sock"
            without+=("$(fio_iops "$SHM/c.sock" "without$rep" "${ZIPF[@]}" --size="$CAP_HINT")")
            unserve
        fi
    done
    rm -rf "$A" "$B" "$C"
done

echo "bench-adapt: $REPS reps x ${SECS}s, remapped $INNER, members $MEMBER in /dev/shm, Zipf(1.1) 64 KiB randread QD16 over NBD, load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "${before[*]}" "${after[*]}" "${mig[*]}" "${during[*]}" "${without[*]}" "${pred[*]}" <<'EOF'
import statistics, sys
b, a, m, d, w, p = (s.split() for s in sys.argv[1:7])
b, a, d, w = ([float(x) for x in v] for v in (b, a, d, w))
rate = [float(x.split(":")[0]) for x in m]
moved = [x.split(":")[1] for x in m]
med = statistics.median
print(f"{'measure':<44} {'median':>10}  per rep")
print(f"{'Zipf IOPS before adapt':<44} {med(b):>10.0f}  {' '.join(f'{x:.0f}' for x in b)}")
print(f"{'Zipf IOPS after adapt':<44} {med(a):>10.0f}  {' '.join(f'{x:.0f}' for x in a)}")
print(f"{'  ratio after / before':<44} {med([y / x for x, y in zip(b, a)]):>10.2f}  {' '.join(f'{y / x:.2f}' for x, y in zip(b, a))}")
print(f"{'  simulator (HDD models): gain, conflicts':<44} {'':>10}  {' '.join(p)}")
print(f"{'migration throughput MiB/s (MiB moved)':<44} {med(rate):>10.0f}  {' '.join(f'{r:.0f} ({mv})' for r, mv in zip(rate, moved))}")
print(f"{'client IOPS during online migration':<44} {med(d):>10.0f}  {' '.join(f'{x:.0f}' for x in d)}")
print(f"{'client IOPS without (static twin)':<44} {med(w):>10.0f}  {' '.join(f'{x:.0f}' for x in w)}")
print(f"{'  ratio during / without':<44} {med([x / y for x, y in zip(d, w)]):>10.2f}  {' '.join(f'{x / y:.2f}' for x, y in zip(d, w))}")
EOF
if [ -s "$SHM/moved.log" ]; then echo "online rounds (last line of each):"; cat "$SHM/moved.log"; fi
