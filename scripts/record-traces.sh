#!/usr/bin/env bash
# Record real file-system block traces through `mosaic serve --record`, for
# `mosaic eval ppc` and the tests that check the partial-parity cache paper
# against them.  Each trace is a real program on a real file system (fuse2fs
# over nbdfuse over NBD), recorded at the block device in MSR format:
#
#   postmark-ext2.csv   postmark (1,000 files of 0.5-10 KB, 5,000 transactions) on ext2
#   postmark-ext4.csv   the same on ext4
#   iozone-fio.csv      IOzone-like: fio writes a 32 MiB file sequentially in
#                       8 KiB records with fsync after each, then rewrites it
#                       twice, on ext4
#
# The three are recorded at once, each with its own array, servers and
# mounts.  mkfs and the first mount are not recorded: a second server, with
# --record, serves the formatted array to the benchmark alone.  The servers
# advertise a 1-byte minimum block (--min-block 1) because libext2fs updates
# superblock fields in place with writes of a few bytes, which libnbd under
# nbdfuse refuses when they are below the advertised minimum; the trace keeps
# them as the file system issued them.  fuse2fs does not write ext4's
# journal, so the ext4 trace has ext4's layout (extents, flex groups) but no
# journal writes.
#
#   scripts/record-traces.sh [OUTDIR]     (default target/traces; existing
#                                          traces are kept unless
#                                          RECORD_AGAIN=1)
#
# Needs /dev/fuse, nbdfuse (libnbd-bin), fuse2fs, fusermount3 (fuse3),
# postmark and fio; scripts/test.sh installs them.  Exit status 1 with the
# reason when a trace cannot be recorded.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${1:-$ROOT/target/traces}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

want=()
for t in postmark-ext2 postmark-ext4 iozone-fio; do
    [ -s "$OUT/$t.csv" ] && [ -z "${RECORD_AGAIN:-}" ] || want+=("$t")
done
if ((${#want[@]} == 0)); then
    echo "record-traces: all traces present in $OUT"
    exit 0
fi
for t in nbdfuse fuse2fs fusermount3 postmark fio mkfs.ext2 mkfs.ext4; do
    command -v "$t" >/dev/null || { echo "record-traces: missing $t (scripts/test.sh installs it)" >&2; exit 1; }
done
[ -c /dev/fuse ] || { echo "record-traces: no /dev/fuse: FUSE mounts are needed to run a file system over NBD" >&2; exit 1; }
# test.sh's own build (the same command, so the same artifacts: `-p
# mosaic-cli` alone resolves features differently and compiles most of it again).
[ -x "$ROOT/target/debug/mosaic" ] || cargo build -q --workspace --all-targets
MOSAIC=$ROOT/target/debug/mosaic

# Each trace is recorded in its own subshell and work directory
# (record_apart), all at once: the FUSE round trips leave the cores idle
# much of the time (on one 2-core host: 1m18s at once, 2m06s one by one).
BASE=$(mktemp -d /tmp/record-traces.XXXXXX)
WORK=""
SERVER_PID=""
NBD_MNT=""
FS_MNT=""
FS_PID=""
cleanup() {
    [ -n "$FS_MNT" ] && { fusermount3 -u "$FS_MNT" 2>/dev/null || true; }
    [ -n "$NBD_MNT" ] && { for _ in $(seq 50); do fusermount3 -u "$NBD_MNT" 2>/dev/null && break; sleep 0.1; done; }
    [ -n "$SERVER_PID" ] && kill -9 "$SERVER_PID" 2>/dev/null
    [ -n "${RECORD_KEEP:-}" ] || rm -rf "$WORK"
}
die() { echo "record-traces: $*" >&2; exit 1; }

# serve ARRAY LOG [args...]: start a server, wait for its URI.
serve() {
    local arr=$1 log=$2
    shift 2
    "$MOSAIC" serve -a "$arr" --listen 127.0.0.1:0 "$@" 2>"$log" &
    SERVER_PID=$!
    for _ in $(seq 300); do
        URI=$(grep -o 'nbd://[^ ]*' "$log" 2>/dev/null | head -1 || true)
        [ -n "$URI" ] && return 0
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.1
    done
    die "server did not start: $(cat "$log")"
}

unserve() {
    kill -INT "$SERVER_PID"
    wait "$SERVER_PID" || die "server did not stop cleanly"
    SERVER_PID=""
}

# mount_fs: nbdfuse exposes the export as a file; fuse2fs mounts it.
mount_fs() {
    NBD_MNT=$WORK/nbd
    FS_MNT=$WORK/fs
    mkdir -p "$NBD_MNT" "$FS_MNT"
    nbdfuse "$NBD_MNT" "$URI" >"$WORK/nbdfuse.log" 2>&1 &
    for _ in $(seq 100); do [ -e "$NBD_MNT/nbd" ] && break; sleep 0.1; done
    [ -e "$NBD_MNT/nbd" ] || die "nbdfuse mount refused: $(cat "$WORK/nbdfuse.log")"
    [ -z "${1:-}" ] || "$1" "$NBD_MNT/nbd"
    fuse2fs "$NBD_MNT/nbd" "$FS_MNT" -o fakeroot -f >"$WORK/fuse2fs.log" 2>&1 &
    FS_PID=$!
    for _ in $(seq 100); do mountpoint -q "$FS_MNT" && return 0; sleep 0.1; done
    die "fuse2fs mount: $(cat "$WORK/fuse2fs.log")"
}

unmount_fs() {
    fusermount3 -u "$FS_MNT"
    wait "$FS_PID"
    FS_MNT=""
    for _ in $(seq 100); do fusermount3 -u "$NBD_MNT" 2>/dev/null && break; sleep 0.1; done
    NBD_MNT=""
}

mkfs_ext2() { mkfs.ext2 -q -F -b 4096 "$1"; }
mkfs_ext4() { mkfs.ext4 -q -F -b 4096 "$1"; }

postmark_run() {
    mkdir -p "$FS_MNT/pm"
    printf 'set location %s\nset number 1000\nset transactions 5000\nset seed 42\nrun\nquit\n' "$FS_MNT/pm" \
        | timeout 600 postmark >"$WORK/postmark.log" 2>&1 || die "postmark: $(tail -5 "$WORK/postmark.log")"
}

fio_run() {
    (cd "$FS_MNT" && timeout 600 fio --name=iozone --filename=iozone.dat --rw=write --bs=8k --size=32m \
        --fsync=1 --loops=3 --ioengine=psync --verify_state_save=0 >"$WORK/fio.log" 2>&1) \
        || die "fio: $(tail -5 "$WORK/fio.log")"
}

# record NAME MKFS WORKLOAD: a fresh raid0 array, formatted unrecorded,
# then served with --record while WORKLOAD runs on the mounted file system.
record() {
    local name=$1 mkfs=$2 workload=$3 arr=$WORK/$1
    "$MOSAIC" create -a "$arr" --level raid0 --members 2 --member-size 512M --stripe-unit 64K >/dev/null
    serve "$arr" "$WORK/$name-mkfs.log" --min-block 1
    mount_fs "$mkfs"
    unmount_fs
    unserve
    serve "$arr" "$WORK/$name.log" --min-block 1 --record "$WORK/$name.csv"
    mount_fs
    "$workload"
    unmount_fs
    unserve
    mv "$WORK/$name.csv" "$OUT/$name.csv"
    echo "record-traces: $OUT/$name.csv ($(wc -l <"$OUT/$name.csv") requests)"
    rm -rf "$arr"
}

# record_apart NAME MKFS WORKLOAD: `record` in a subshell of its own (its
# own work directory, server and mounts, cleaned up when it ends), in the
# background, its output in $BASE/NAME.out.
record_apart() {
    (
        WORK=$BASE/$1
        mkdir -p "$WORK"
        trap cleanup EXIT
        record "$@"
    ) >"$BASE/$1.out" 2>&1 &
    PIDS+=("$!")
}

PIDS=()
# Recorders still running when this script ends (an error, ^C) are stopped;
# each one's EXIT trap unmounts and stops its server.
trap '((${#PIDS[@]} == 0)) || kill "${PIDS[@]}" 2>/dev/null || true; wait || true; [ -n "${RECORD_KEEP:-}" ] || rm -rf "$BASE"' EXIT
for t in "${want[@]}"; do
    case $t in
    postmark-ext2) record_apart postmark-ext2 mkfs_ext2 postmark_run ;;
    postmark-ext4) record_apart postmark-ext4 mkfs_ext4 postmark_run ;;
    iozone-fio) record_apart iozone-fio mkfs_ext4 fio_run ;;
    esac
done
failed=0
for i in "${!PIDS[@]}"; do
    wait "${PIDS[$i]}" || failed=1
    cat "$BASE/${want[$i]}.out"
done
PIDS=()
exit "$failed"
