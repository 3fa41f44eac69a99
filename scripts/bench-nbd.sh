#!/usr/bin/env bash
# fio over NBD: mosaic raid5 4+1 on member files in /dev/shm against
# qemu-nbd serving one raw file in /dev/shm (no redundancy, the reference),
# in one run, same export size, all over unix sockets.  A third column,
# mosaic-nbd serving a raw file (crates/mosaic-nbd/examples/serve_file.rs),
# shows the NBD server's own ceiling, so a miss can be placed in the server
# or in the array.
#
#   workload                      floor (mosaic / qemu-nbd)
#   4 KiB randread  QD32          >= 0.8   (IOPS)
#   4 KiB randwrite QD32          >= 0.5   (IOPS)
#   1 MiB seq write QD8           >= 0.7   (MiB/s)
#
# Each run is time based (BENCH_SECONDS, default 10 s, after 2 s ramp);
# both exports are first filled by a sequential write so reads hit data.
# Exit status 1 when a floor is missed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECS=${BENCH_SECONDS:-10}
MEMBER=${BENCH_MEMBER_SIZE:-256M}
# Extra `mosaic serve` arguments, e.g. BENCH_SERVE_ARGS="--workers 4".
SERVE_ARGS=${BENCH_SERVE_ARGS:-}
# Another mosaic binary to measure (a before/after comparison):
#   BENCH_MOSAIC=/path/to/old/mosaic
# Extra `mosaic create` arguments, e.g. BENCH_CREATE_ARGS="--no-journal".
CREATE_ARGS=${BENCH_CREATE_ARGS:-}
# Another array in place of raid5 4+1 (the floors are raid5's), e.g. a tier:
#   BENCH_ARRAY="--level tier --fast raid1:2 --slow raid5:5 --fast-size 128M --slow-size 256M" BENCH_LABEL="tier"
ARRAY=${BENCH_ARRAY:---level raid5 --members 5 --member-size $MEMBER}
LABEL=${BENCH_LABEL:-raid5 4+1}

for t in fio qemu-nbd python3; do
    command -v "$t" >/dev/null 2>&1 || { echo "bench-nbd: missing $t"; exit 1; }
done
cargo build --release -p mosaic-cli >/dev/null 2>&1
cargo build --release -p mosaic-nbd --example serve_file >/dev/null 2>&1
MOSAIC=${BENCH_MOSAIC:-$ROOT/target/release/mosaic}
SERVE_FILE=$ROOT/target/release/examples/serve_file

SHM=$(mktemp -d /dev/shm/bench-nbd.XXXXXX)
MOSAIC_PID=""
QEMU_PID=""
FILE_PID=""
cleanup() {
    [ -n "$FILE_PID" ] && kill -INT "$FILE_PID" 2>/dev/null && wait "$FILE_PID" 2>/dev/null
    [ -n "$MOSAIC_PID" ] && kill -INT "$MOSAIC_PID" 2>/dev/null && wait "$MOSAIC_PID" 2>/dev/null
    [ -n "$QEMU_PID" ] && kill "$QEMU_PID" 2>/dev/null && wait "$QEMU_PID" 2>/dev/null
    rm -rf "$SHM"
}
trap cleanup EXIT

"$MOSAIC" create -a "$SHM/arr" $ARRAY --stripe-unit 64K $CREATE_ARGS >/dev/null
CAP=$("$MOSAIC" info -a "$SHM/arr" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["capacity"])')
truncate -s "$CAP" "$SHM/ref.raw"
truncate -s "$CAP" "$SHM/nbd.raw"

"$MOSAIC" serve -a "$SHM/arr" --socket "$SHM/mosaic.sock" --quiet $SERVE_ARGS 2>"$SHM/serve.log" &
MOSAIC_PID=$!
qemu-nbd -f raw --persistent -t -k "$SHM/qemu.sock" "$SHM/ref.raw" 2>"$SHM/qemu.log" &
QEMU_PID=$!
"$SERVE_FILE" "$SHM/nbd.raw" "$SHM/file.sock" 2>"$SHM/file.log" &
FILE_PID=$!
for _ in $(seq 100); do [ -S "$SHM/mosaic.sock" ] && [ -S "$SHM/qemu.sock" ] && break; sleep 0.1; done
[ -S "$SHM/mosaic.sock" ] || { echo "bench-nbd: mosaic serve did not start"; cat "$SHM/serve.log"; exit 1; }
[ -S "$SHM/qemu.sock" ] || { echo "bench-nbd: qemu-nbd did not start"; cat "$SHM/qemu.log"; exit 1; }
MOSAIC_URI="nbd+unix:///mosaic?socket=$SHM/mosaic.sock"
QEMU_URI="nbd+unix:///?socket=$SHM/qemu.sock"
FILE_URI="nbd+unix:///?socket=$SHM/file.sock"
for _ in $(seq 100); do [ -S "$SHM/file.sock" ] && break; sleep 0.1; done

# run URI NAME fio-args... -> prints "iops MiB/s"
run() {
    local uri=$1 name=$2
    shift 2
    (cd "$SHM" && fio --name="$name" --ioengine=nbd --uri="$uri" --output-format=json --output="$SHM/$name.json" "$@" >"$SHM/$name.err" 2>&1) \
        || { echo "bench-nbd: fio $name failed: $(cat "$SHM/$name.err")" >&2; echo "0 0"; return; }
    python3 - "$SHM/$name.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
d = j["read"] if j["read"]["io_bytes"] > 0 else j["write"]
print(f'{d["iops"]:.0f} {d["bw_bytes"] / 1048576:.1f}')
EOF
}

for which in mosaic qemu file; do
    uri=$MOSAIC_URI
    [ "$which" = qemu ] && uri=$QEMU_URI
    [ "$which" = file ] && uri=$FILE_URI
    run "$uri" "precondition-$which" --rw=write --bs=1M --iodepth=8 --size="$CAP" >/dev/null
done

# Runs alternate between the two servers and repeat (BENCH_REPS, default 3);
# each side's median counts, so load from other processes hits both alike.
REPS=${BENCH_REPS:-3}
declare -A R
for rep in $(seq "$REPS"); do
    for w in randread randwrite seqwrite; do
        case $w in
            randread) args=(--rw=randread --bs=4k --iodepth=32) ;;
            randwrite) args=(--rw=randwrite --bs=4k --iodepth=32) ;;
            seqwrite) args=(--rw=write --bs=1M --iodepth=8) ;;
        esac
        for which in mosaic qemu file; do
            uri=$MOSAIC_URI
            [ "$which" = qemu ] && uri=$QEMU_URI
            [ "$which" = file ] && uri=$FILE_URI
            R[$w-$which]+="$(run "$uri" "$w-$which" "${args[@]}" --size="$CAP" --time_based --runtime="$SECS" \
                --ramp_time=2 --norandommap --randrepeat=0);"
        done
    done
done

echo "bench-nbd: $REPS x ${SECS}s per workload and server, $LABEL (64 KiB unit) vs qemu-nbd raw, export $((CAP >> 20)) MiB in /dev/shm, load $(cut -d' ' -f1-3 /proc/loadavg)"
BENCH_LABEL=$LABEL python3 - "${R[randread-mosaic]}" "${R[randread-qemu]}" "${R[randwrite-mosaic]}" "${R[randwrite-qemu]}" \
    "${R[seqwrite-mosaic]}" "${R[seqwrite-qemu]}" "${R[randread-file]}" "${R[randwrite-file]}" "${R[seqwrite-file]}" <<'EOF'
import os, statistics, sys
a = sys.argv[1:]
label = "mosaic " + os.environ.get("BENCH_LABEL", "raid5 4+1")
def vals(s, idx):
    return [float(x.split()[idx]) for x in s.split(";") if x.strip()]
rows = [("4K randread QD32", a[0], a[1], a[6], 0.8, "IOPS", 0),
        ("4K randwrite QD32", a[2], a[3], a[7], 0.5, "IOPS", 0),
        ("1M seqwrite QD8", a[4], a[5], a[8], 0.7, "MiB/s", 1)]
print(f'{"workload":<18} {"metric":>6} {label:>17} {"qemu-nbd raw":>13} {"ratio":>6} {"floor":>6}  {"result":<7}  {"mosaic-nbd raw":>14}  (runs: mosaic | qemu-nbd)')
missed = 0
for name, m, q, f, floor, unit, idx in rows:
    mv, qv = vals(m, idx), vals(q, idx)
    mm, qm = statistics.median(mv), statistics.median(qv)
    fm = statistics.median(vals(f, idx))
    ratio = mm / qm if qm > 0 else 0.0
    ok = ratio >= floor
    missed += not ok
    runs = " ".join(f"{v:.0f}" for v in mv) + " | " + " ".join(f"{v:.0f}" for v in qv)
    print(f'{name:<18} {unit:>6} {mm:>17.0f} {qm:>13.0f} {ratio:>6.2f} {floor:>6.2f}  {"ok" if ok else "MISSED":<7}  {fm:>14.0f}  ({runs})')
print(f'bench-nbd: {3 - missed} of 3 floors met')
sys.exit(1 if missed else 0)
EOF
