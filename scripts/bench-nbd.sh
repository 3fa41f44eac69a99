#!/usr/bin/env bash
# fio over NBD against nbdkit's file plugin serving one raw file in /dev/shm
# (multi-threaded, the server a user compares against: the reference), in
# one run, same export size, all over unix sockets.  Columns:
#   mosaic     `mosaic serve` of a raid5 4+1 array (with its journal) on
#              member files in /dev/shm
#   file       mosaic-nbd serving a raw file (crates/mosaic-nbd/examples/
#              serve_file.rs): the NBD server's own ceiling, so a miss can be
#              placed in the server or in the array
#   nbdkit     `nbdkit -U SOCK file FILE`, its default threads
#   qemu-nbd   extra column with BENCH_QEMU=1
#   remote     extra column with BENCH_REMOTE=1: `mosaic serve` of raid5 4+1
#              (with its journal) whose members are 5 nbdkit exports of
#              files in /dev/shm (remote members over unix sockets); its
#              ratio to the mosaic column (the same array on files
#              directly) is printed below the table.  BENCH_REMOTE_DELAY=1ms
#              puts nbdkit's delay filter on every member export (each read
#              and write answered that much later, as across a network)
# Every rep runs each workload on every server back to back, and the ratios
# to nbdkit are taken within the rep (load from other processes hits all
# columns alike); the table shows each column's median and the median of
# its same-rep ratios.
#
#   workload          goal (ratio to nbdkit)     mosaic   file
#   4 KiB randread  QD32  (IOPS)                  >= 1.0   >= 1.0
#   4 KiB randwrite QD32  (IOPS)                  >= 0.6   >= 1.0
#   1 MiB seq write QD8   (MiB/s)                 >= 0.9   >= 1.0
#
# BENCH_NUMJOBS="1 2 4" repeats the table with that many fio jobs (one NBD
# connection each, the queue depth per job), for the scaling table.
# Each run is time based (BENCH_SECONDS, default 10 s, after 2 s ramp);
# every export is first filled by a sequential write so reads hit data.
# Below the table: each server's CPU per operation (user + system time of
# its process over the run), and its ratio to nbdkit's in the same rep;
# last, each server's rate of connection setups (nbdinfo, one at a time),
# and of socket-activated starts and stops (mosaic serve and nbdkit).
# Exit status 1 when a goal is missed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECS=${BENCH_SECONDS:-10}
MEMBER=${BENCH_MEMBER_SIZE:-256M}
NUMJOBS=${BENCH_NUMJOBS:-1}
# Extra `mosaic serve` arguments, e.g. BENCH_SERVE_ARGS="--workers 4".
SERVE_ARGS=${BENCH_SERVE_ARGS:-}
# Another mosaic binary to measure (a before/after comparison):
#   BENCH_MOSAIC=/path/to/old/mosaic   BENCH_SERVE_FILE=/path/to/old/serve_file
# Extra `mosaic create` arguments, e.g. BENCH_CREATE_ARGS="--no-journal".
CREATE_ARGS=${BENCH_CREATE_ARGS:-}
# Another array in place of raid5 4+1 (the goals are raid5's), e.g. a tier:
#   BENCH_ARRAY="--level tier --fast raid1:2 --slow raid5:5 --fast-size 128M --slow-size 256M" BENCH_LABEL="tier"
ARRAY=${BENCH_ARRAY:---level raid5 --members 5 --member-size $MEMBER}
LABEL=${BENCH_LABEL:-raid5 4+1}
SERVERS="mosaic file nbdkit"
[ "${BENCH_QEMU:-0}" = 1 ] && SERVERS="$SERVERS qemu"
[ "${BENCH_REMOTE:-0}" = 1 ] && SERVERS="$SERVERS remote"

need=(fio python3 nbdkit nbdinfo)
[ "${BENCH_QEMU:-0}" = 1 ] && need+=(qemu-nbd)
. scripts/bench-servers.sh
bench_setup bench-nbd "${need[@]}"

"$MOSAIC" create -a "$SHM/arr" $ARRAY --stripe-unit 64K $CREATE_ARGS >/dev/null
CAP=$("$MOSAIC" info -a "$SHM/arr" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["capacity"])')
for s in file nbdkit qemu; do truncate -s "$CAP" "$SHM/$s.raw"; done

declare -A URI
"$MOSAIC" serve -a "$SHM/arr" --socket "$SHM/mosaic.sock" --quiet $SERVE_ARGS 2>"$SHM/mosaic.log" &
PID[mosaic]=$!
URI[mosaic]="nbd+unix:///mosaic?socket=$SHM/mosaic.sock"
"$SERVE_FILE" "$SHM/file.raw" "$SHM/file.sock" 2>"$SHM/file.log" &
PID[file]=$!
URI[file]="nbd+unix:///?socket=$SHM/file.sock"
nbdkit -f -U "$SHM/nbdkit.sock" file "$SHM/nbdkit.raw" 2>"$SHM/nbdkit.log" &
PID[nbdkit]=$!
URI[nbdkit]="nbd+unix:///?socket=$SHM/nbdkit.sock"
if [ "${BENCH_QEMU:-0}" = 1 ]; then
    qemu-nbd -f raw --persistent -t -k "$SHM/qemu.sock" "$SHM/qemu.raw" 2>"$SHM/qemu.log" &
    PID[qemu]=$!
    URI[qemu]="nbd+unix:///?socket=$SHM/qemu.sock"
fi
if [ "${BENCH_REMOTE:-0}" = 1 ]; then
    # raid5 4+1 over five nbdkit exports, each a member file in /dev/shm.
    members=()
    for i in 0 1 2 3 4; do
        truncate -s "$MEMBER" "$SHM/rm$i.img"
        delay=()
        [ -n "${BENCH_REMOTE_DELAY:-}" ] && delay=(--filter=delay)
        nbdkit -f -U "$SHM/rm$i.sock" "${delay[@]}" file "$SHM/rm$i.img" \
            ${BENCH_REMOTE_DELAY:+delay-read=$BENCH_REMOTE_DELAY delay-write=$BENCH_REMOTE_DELAY} 2>"$SHM/rm$i.log" &
        PID[rm$i]=$!
        members+=("nbd+unix:///?socket=$SHM/rm$i.sock")
    done
    for i in 0 1 2 3 4; do
        for _ in $(seq 100); do [ -S "$SHM/rm$i.sock" ] && break; sleep 0.1; done
    done
    RA=$(IFS=,; echo "${members[*]}")
    "$MOSAIC" create -a "$RA" --level raid5 --stripe-unit 64K --journal "$SHM/rm-journal.img" $CREATE_ARGS >/dev/null
    "$MOSAIC" serve -a "$RA" --socket "$SHM/remote.sock" --quiet $SERVE_ARGS 2>"$SHM/remote.log" &
    PID[remote]=$!
    URI[remote]="nbd+unix:///mosaic?socket=$SHM/remote.sock"
fi
for s in $SERVERS; do
    for _ in $(seq 100); do [ -S "$SHM/$s.sock" ] && break; sleep 0.1; done
    [ -S "$SHM/$s.sock" ] || { echo "bench-nbd: $s did not start"; cat "$SHM/$s.log"; exit 1; }
done

# The CPU time a process has used, in clock ticks (user + system, all threads).
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }

# run URI NAME PID fio-args... -> prints "iops MiB/s server-cpu-us-per-op"
# (all jobs together).  With a PID ("-" for none) the server's CPU over the
# run, divided by the run's wall time, is the cores it kept busy; divided by
# the I/O rate, its CPU per operation (0 without a PID).  Throughput on
# these shared 2-core hosts swings 10-30 % from run to run; CPU per
# operation much less, so it tells which server does more work.
run() {
    local uri=$1 name=$2 pid=${3:--}
    shift 3
    local c0=0 t0 c1 t1
    [ "$pid" = - ] || c0=$(ticks "$pid")
    t0=$(date +%s.%N)
    (cd "$SHM" && fio --name="$name" --ioengine=nbd --uri="$uri" --output-format=json --output="$SHM/$name.json" \
        --group_reporting "$@" >"$SHM/$name.err" 2>&1) \
        || { echo "bench-nbd: fio $name failed: $(cat "$SHM/$name.err")" >&2; echo "0 0 0"; return; }
    t1=$(date +%s.%N)
    c1=$c0
    [ "$pid" = - ] || c1=$(ticks "$pid")
    python3 - "$SHM/$name.json" "$((c1 - c0))" "$(getconf CLK_TCK)" "$t0" "$t1" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
d = j["read"] if j["read"]["io_bytes"] > 0 else j["write"]
ticks, hz, t0, t1 = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
cores = ticks / hz / max(t1 - t0, 1e-9)
us = cores / d["iops"] * 1e6 if d["iops"] > 0 else 0.0
print(f'{d["iops"]:.0f} {d["bw_bytes"] / 1048576:.1f} {us:.2f}')
EOF
}

for s in $SERVERS; do
    run "${URI[$s]}" "precondition-$s" - --rw=write --bs=1M --iodepth=8 --size="$CAP" >/dev/null
done

# One table per job count: REPS (BENCH_REPS, default 3) rounds, each running
# every workload on every server back to back.
REPS=${BENCH_REPS:-3}
missed=0
for jobs in $NUMJOBS; do
    declare -A R=()
    for rep in $(seq "$REPS"); do
        for w in randread randwrite seqwrite; do
            case $w in
                randread) args=(--rw=randread --bs=4k --iodepth=32) ;;
                randwrite) args=(--rw=randwrite --bs=4k --iodepth=32) ;;
                seqwrite) args=(--rw=write --bs=1M --iodepth=8) ;;
            esac
            for s in $SERVERS; do
                R[$w-$s]+="$(run "${URI[$s]}" "$w-$s" "${PID[$s]}" "${args[@]}" --size="$CAP" --numjobs="$jobs" --time_based \
                    --runtime="$SECS" --ramp_time=2 --norandommap --randrepeat=0);"
            done
        done
    done
    echo "bench-nbd: $REPS x ${SECS}s per workload and server, numjobs $jobs, mosaic = $LABEL (64 KiB unit)," \
        "export $((CAP >> 20)) MiB in /dev/shm, load $(cut -d' ' -f1-3 /proc/loadavg)"
    args=()
    for w in randread randwrite seqwrite; do
        for s in mosaic file nbdkit qemu remote; do args+=("$w-$s=${R[$w-$s]:-}"); done
    done
    BENCH_LABEL=$LABEL python3 - "${args[@]}" <<'EOF' || missed=1
import os, statistics, sys
R = dict(a.split("=", 1) for a in sys.argv[1:])
def vals(key, idx):
    return [float(x.split()[idx]) for x in R[key].split(";") if x.strip()]
def med(v):
    return statistics.median(v) if v else 0.0
# (row, workload, unit, value index, goal for mosaic, goal for file)
rows = [("4K randread QD32", "randread", "IOPS", 0, 1.0, 1.0),
        ("4K randwrite QD32", "randwrite", "IOPS", 0, 0.6, 1.0),
        ("1M seqwrite QD8", "seqwrite", "MiB/s", 1, 0.9, 1.0)]
qemu = bool(R["randread-qemu"])
remote = bool(R["randread-remote"])
print(f'{"workload":<18} {"unit":>5} {"nbdkit":>8} {"mosaic":>8} {"ratio":>6} {"goal":>5} '
      f'{"file":>8} {"ratio":>6} {"goal":>5}' + (f' {"qemu-nbd":>8} {"ratio":>6}' if qemu else '')
      + (f' {"remote":>8} {"ratio":>6}' if remote else ''))
missed, lines = 0, []
for name, w, unit, idx, gm, gf in rows:
    ref = vals(f"{w}-nbdkit", idx)
    out = f"{name:<18} {unit:>5} {med(ref):>8.0f}"
    for s, goal in (("mosaic", gm), ("file", gf), ("qemu", None), ("remote", None)):
        if (s == "qemu" and not qemu) or (s == "remote" and not remote):
            continue
        v = vals(f"{w}-{s}", idx)
        # Same-rep ratios: each rep's servers ran back to back.
        ratio = med([a / b for a, b in zip(v, ref) if b > 0])
        # Three decimals: a miss never prints as the goal it missed.
        out += f" {med(v):>8.0f} {ratio:>6.3f}"
        if goal is not None:
            ok = ratio >= goal
            missed += not ok
            out += f" {goal:>4.1f}{' ' if ok else '!'}"
        lines.append(f"  {w}-{s}: " + " ".join(f"{x:.0f}" for x in v) + " (ratios "
                     + " ".join(f"{a / b:.2f}" for a, b in zip(v, ref) if b > 0) + ")")
    print(out)
print("runs per rep:\n" + "\n".join(lines) + f"\n  nbdkit: " + " | ".join(
    " ".join(f"{x:.0f}" for x in vals(f"{w}-nbdkit", i)) for _, w, _, i, _, _ in rows))
# Server CPU per operation, and its same-rep ratio to nbdkit's (below 1:
# less work than nbdkit for the same operation).
print("server CPU per operation, microseconds (ratio to nbdkit):")
for name, w, _, _, _, _ in rows:
    ref = vals(f"{w}-nbdkit", 2)
    out = f"  {name:<18} nbdkit {med(ref):7.2f}"
    for s in ("mosaic", "file", "qemu", "remote"):
        v = vals(f"{w}-{s}", 2)
        if v:
            out += f"   {s} {med(v):7.2f} ({med([a / b for a, b in zip(v, ref) if b > 0]):.2f})"
    print(out)
if remote:
    for name, w, unit, idx, _, _ in rows:
        v, d = vals(f"{w}-remote", idx), vals(f"{w}-mosaic", idx)
        print(f"remote members vs the same array on files, {name}: {med([a / b for a, b in zip(v, d) if b > 0]):.2f}")
print(f"bench-nbd: {6 - missed} of 6 goals met ('!' marks a miss)")
sys.exit(1 if missed else 0)
EOF
done

# Connection setup: BENCH_CONNECTS (default 100) clients one after another,
# each `nbdinfo --size` (connect, handshake, disconnect), per server, in
# rounds alternating the servers; connections a second and the ratio to
# nbdkit's.  The client's own start is in every number alike.
CONNECTS=${BENCH_CONNECTS:-100}
declare -A C=()
for rep in $(seq "$REPS"); do
    for s in $SERVERS; do
        t0=$(date +%s.%N)
        for _ in $(seq "$CONNECTS"); do nbdinfo --size "${URI[$s]}" >/dev/null; done
        C[$s]+="$(python3 -c "print(f'{$CONNECTS / ($(date +%s.%N) - $t0):.1f}')") "
    done
done
args=()
for s in $SERVERS; do args+=("$s=${C[$s]}"); done
python3 - "$CONNECTS" "${args[@]}" <<'EOF'
import statistics, sys
n, C = sys.argv[1], dict(a.split("=", 1) for a in sys.argv[2:])
v = {s: [float(x) for x in r.split()] for s, r in C.items()}
ref = v["nbdkit"]
out = f"connections a second ({n} nbdinfo --size, one after another): nbdkit {statistics.median(ref):.0f}"
for s in (s for s in v if s != "nbdkit"):
    out += f"   {s} {statistics.median(v[s]):.0f} ({statistics.median([a / b for a, b in zip(v[s], ref)]):.2f})"
print(out)
EOF

# Socket activation: BENCH_ACTIVATIONS (default 20) times one after another,
# libnbd starts the server on a socket of its own, asks the size, and
# stops it (SIGTERM): `mosaic serve` of a small raid5 4+1 array (opened,
# flushed and closed each time) against `nbdkit file`, in rounds.
ACTIVATIONS=${BENCH_ACTIVATIONS:-20}
"$MOSAIC" create -a "$SHM/sa-arr" --level raid5 --members 5 --member-size 16M >/dev/null
truncate -s 64M "$SHM/sa.raw"
declare -A SA=()
for rep in $(seq "$REPS"); do
    for s in mosaic nbdkit; do
        case $s in
            mosaic) cmd=("$MOSAIC" serve -a "$SHM/sa-arr" --quiet) ;;
            nbdkit) cmd=(nbdkit file "$SHM/sa.raw") ;;
        esac
        t0=$(date +%s.%N)
        for _ in $(seq "$ACTIVATIONS"); do
            nbdinfo --size -- [ "${cmd[@]}" ] >/dev/null 2>"$SHM/sa.err" \
                || { echo "bench-nbd: nbdinfo -- [ ${cmd[*]} ] failed: $(cat "$SHM/sa.err")" >&2; exit 1; }
        done
        SA[$s]+="$(python3 -c "print(f'{$ACTIVATIONS / ($(date +%s.%N) - $t0):.1f}')") "
    done
done
python3 - "$ACTIVATIONS" "${SA[mosaic]}" "${SA[nbdkit]}" <<'EOF'
import statistics, sys
m, k = ([float(x) for x in a.split()] for a in sys.argv[2:4])
print(f"socket-activated servers a second ({sys.argv[1]} x nbdinfo --size -- [ server ]: start, one request, stop): "
      f"nbdkit {statistics.median(k):.1f}   mosaic {statistics.median(m):.1f} ({statistics.median([a / b for a, b in zip(m, k)]):.2f})")
EOF
exit $missed
