#!/usr/bin/env bash
# Real NBD clients against `mosaic serve`: nbdinfo, qemu-io, nbdcopy, fio
# (nbd engine, crc32c verify), a recorded trace that `mosaic trace stats` and
# `mosaic replay` read, a full server refusing a client visibly, mkfs.ext4
# with its defaults (1 KiB blocks) and an ext4 filesystem through nbdfuse +
# fuse2fs with postmark, both on a server with default options (skipped with
# a reason when FUSE mounts are refused), a crash loop (kill -9 during
# writes, restart, flushed data intact, scrub clean), and a hybrid tier
# array through all of it: fio verify past its fast tier, ext4 + postmark,
# and the crash loop while demotion runs (NBD_TIER_CRASH_ITERS=8).
#
# Prints `nbd-clients: <name> ok|FAIL|SKIP ...` per check and ends with one
# line `N passed, M failed`.  Exit status 1 if any check failed.
#
#   scripts/nbd-clients.sh [--release]      (NBD_CRASH_ITERS=20 by default;
#                                            NBD_KEEP=1 keeps the work directory)
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

PROFILE=debug
[ "${1:-}" = "--release" ] && PROFILE=release
for t in nbdinfo nbdcopy nbdfuse qemu-io fio; do
    command -v "$t" >/dev/null 2>&1 || { echo "nbd-clients: missing $t (scripts/test.sh installs it)"; echo "0 passed, 1 failed"; exit 1; }
done
if [ "$PROFILE" = release ]; then
    cargo build --release -p mosaic-cli >/dev/null 2>&1 || { echo "nbd-clients: cargo build failed"; echo "0 passed, 1 failed"; exit 1; }
else
    # test.sh's own build command, so under test.sh it has nothing to do:
    # `-p mosaic-cli` alone resolves dependency features differently and
    # compiles most of the workspace a second time.
    cargo build --workspace --all-targets >/dev/null 2>&1 || { echo "nbd-clients: cargo build failed"; echo "0 passed, 1 failed"; exit 1; }
fi
MOSAIC=$ROOT/target/$PROFILE/mosaic
CRASH_ITERS=${NBD_CRASH_ITERS:-20}

WORK=$(mktemp -d /tmp/nbd-clients.XXXXXX)
# fio leaves verify state files in its working directory.
FIO="fio --verify_state_save=0"
PASS=0
FAIL=0
SERVER_PID=""
URI=""
FUSE_MNT=""
FS_MNT=""

cleanup() {
    [ -n "$FS_MNT" ] && { fusermount3 -u "$FS_MNT" 2>/dev/null || umount -l "$FS_MNT" 2>/dev/null; }
    if [ -n "$FUSE_MNT" ]; then
        for _ in $(seq 50); do fusermount3 -u "$FUSE_MNT" 2>/dev/null && break; sleep 0.1; done
        mountpoint -q "$FUSE_MNT" 2>/dev/null && umount -l "$FUSE_MNT" 2>/dev/null
    fi
    [ -n "$SERVER_PID" ] && kill -9 "$SERVER_PID" 2>/dev/null
    if [ -n "${NBD_KEEP:-}" ]; then echo "nbd-clients: kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

ok() { echo "nbd-clients: $1 ok${2:+ ($2)}"; PASS=$((PASS + 1)); }
fail() { echo "nbd-clients: $1 FAIL: $2"; FAIL=$((FAIL + 1)); }
skip() { echo "nbd-clients: $1 SKIP: $2"; }

# start_server DIR LOG [serve args...]: start `mosaic serve` on a free port,
# wait (at most 30 s) for its "listening on" line, set SERVER_PID and URI.
start_server() {
    local dir=$1 log=$2
    shift 2
    # Removed first: the background shell truncates it only later, and a
    # stale URI from the previous server must never be read.
    rm -f "$log"
    "$MOSAIC" serve -a "$dir" --listen 127.0.0.1:0 "$@" 2>"$log" &
    SERVER_PID=$!
    URI=""
    for _ in $(seq 300); do
        URI=$(grep -o 'nbd://[^ ]*' "$log" 2>/dev/null | head -1)
        [ -n "$URI" ] && return 0
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.1
    done
    echo "nbd-clients: server did not start:"; sed 's/^/    /' "$log"
    return 1
}

# stop_server: SIGINT (clean stop), wait at most 60 s; returns its exit code.
stop_server() {
    local pid=$SERVER_PID rc
    SERVER_PID=""
    kill -INT "$pid" 2>/dev/null
    for _ in $(seq 600); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -9 "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        return 124
    fi
    wait "$pid"
    rc=$?
    return $rc
}

ARR=$WORK/arr
"$MOSAIC" create -a "$ARR" --level raid5 --members 5 --member-size 96M --stripe-unit 64K >/dev/null

start_server "$ARR" "$WORK/serve.log" --record "$WORK/served.csv" || { echo "0 passed, 1 failed"; exit 1; }
PORT=${URI#nbd://127.0.0.1:}
PORT=${PORT%%/*}

# --- nbdinfo -----------------------------------------------------------------
if out=$(timeout 30 nbdinfo "$URI" 2>&1) && grep -q 'export-size: ' <<<"$out" \
    && grep -q 'block_size_minimum: 512' <<<"$out" && grep -q 'can_multi_conn: true' <<<"$out" \
    && timeout 30 nbdinfo --list "nbd://127.0.0.1:$PORT" 2>&1 | grep -q 'export="mosaic"'; then
    ok nbdinfo "$(grep -o 'export-size: [0-9]*' <<<"$out")"
else
    fail nbdinfo "$out"
fi

# --- qemu-io -----------------------------------------------------------------
if out=$(timeout 60 qemu-io -f raw "$URI" \
    -c 'write -P 0xab 0 1M' -c 'read -P 0xab 0 1M' \
    -c 'write -P 0x5c 3M 256k' -c 'write -z 3M 64k' -c 'read -P 0 3M 64k' -c 'read -P 0x5c 3136k 192k' \
    -c 'write -P 0xcd 1000 3000' -c 'read -P 0xcd 1000 3000' -c 'read -P 0xab 4000 4096' \
    -c 'write -f -P 0x11 8M 128k' -c 'flush' -c 'read -P 0x11 8M 128k' 2>&1) \
    && ! grep -qiE 'fail|error|mismatch' <<<"$out"; then
    ok qemu-io "patterns, zeroes, sub-block, FUA"
else
    fail qemu-io "$out"
fi

# --- nbdcopy 256 MiB in and out ----------------------------------------------
head -c 256M /dev/urandom >"$WORK/rand.bin"
if timeout 120 nbdcopy "$WORK/rand.bin" "$URI" 2>"$WORK/copy.err" \
    && timeout 120 nbdcopy "$URI" "$WORK/out.bin" 2>>"$WORK/copy.err" \
    && [ "$(sha256sum <"$WORK/rand.bin" | cut -d' ' -f1)" = "$(head -c 256M "$WORK/out.bin" | sha256sum | cut -d' ' -f1)" ]; then
    ok nbdcopy "256 MiB in and out, sha256 equal"
else
    fail nbdcopy "$(cat "$WORK/copy.err") checksums differ or copy failed"
fi
rm -f "$WORK/rand.bin" "$WORK/out.bin"

# --- fio, nbd engine, crc32c verify -------------------------------------------
fio_check() {
    local name=$1
    shift
    if (cd "$WORK" && timeout 120 $FIO --name="$name" --ioengine=nbd --uri="$URI" --verify=crc32c --do_verify=1 \
        --verify_fatal=1 --output-format=terse "$@" >"$WORK/fio-$name.out" 2>&1) \
        && ! grep -qiE 'verify: bad|error' "$WORK/fio-$name.out"; then
        ok "fio-$name"
    else
        fail "fio-$name" "$(tail -5 "$WORK/fio-$name.out")"
    fi
}
fio_check randwrite-4k --rw=randwrite --bs=4k --iodepth=32 --offset=0 --size=48M
fio_check seqwrite-1m --rw=write --bs=1M --iodepth=8 --offset=64M --size=96M
fio_check randrw-mix --rw=randrw --rwmixread=40 --bsrange=4k-128k --iodepth=16 --offset=192M --size=64M
fio_check seq-mix --rw=rw --bs=64k --iodepth=4 --numjobs=2 --offset=256M --size=32M --offset_increment=48M

# --- a full server refuses visibly, then serves -------------------------------
busy_check() {
    local d=$WORK/busy out
    "$MOSAIC" create -a "$d" --level raid5 --members 4 --member-size 8M --stripe-unit 16K >/dev/null 2>&1 \
        || { fail busy-refusal "create failed"; return; }
    start_server "$d" "$WORK/busy.log" --max-connections 1 --handshake-timeout 2 || { fail busy-refusal "server did not start"; return; }
    local port=${URI#nbd://127.0.0.1:}
    port=${port%%/*}
    # One connection that never handshakes fills the only slot.
    exec 7<>"/dev/tcp/127.0.0.1/$port"
    sleep 0.3
    out=$(timeout 30 qemu-io -f raw "$URI" -c 'read 0 4k' 2>&1)
    exec 7>&-
    if ! grep -q 'server busy: 1 connections (the limit); try again later' <<<"$out"; then
        fail busy-refusal "qemu-io did not show the refusal: $out"; stop_server >/dev/null; return
    fi
    sleep 0.3
    local again
    again=$(timeout 30 qemu-io -f raw "$URI" -c 'read -P 0 0 4k' 2>&1)
    if ! stop_server || grep -qiE 'fail|error|denied' <<<"$again"; then
        fail busy-refusal "after the idle one left: $again $(tail -3 "$WORK/busy.log")"; return
    fi
    ok busy-refusal "qemu-io shows: $(grep -o 'server busy[^;]*' <<<"$out" | head -1); served once the slot was free"
}

# --- filesystem: nbdfuse + ext4 + fuse2fs + postmark ---------------------------
# mount_nbdfuse: mount the export at $FUSE_MNT (10 s); false if FUSE is refused.
mount_nbdfuse() {
    FUSE_MNT=$WORK/nbdfuse
    mkdir -p "$FUSE_MNT"
    nbdfuse "$FUSE_MNT" "$URI" >"$WORK/nbdfuse.log" 2>&1 &
    for _ in $(seq 100); do
        [ -e "$FUSE_MNT/nbd" ] && return 0
        sleep 0.1
    done
    FUSE_MNT=""
    return 1
}

unmount_nbdfuse() {
    for _ in $(seq 100); do fusermount3 -u "$FUSE_MNT" 2>/dev/null && break; sleep 0.1; done
    FUSE_MNT=""
}

# mkfs.ext4 with its own defaults (1 KiB blocks on a device this small, so
# 1 KiB writes) over nbdfuse, on a server with default options; e2fsck clean.
mkfs_default_check() {
    if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then skip mkfs-default "no /dev/fuse or fusermount3"; return; fi
    if ! mount_nbdfuse; then skip mkfs-default "FUSE mount refused in this sandbox: $(tr '\n' ' ' <"$WORK/nbdfuse.log")"; return; fi
    local img=$FUSE_MNT/nbd
    if ! timeout 300 mkfs.ext4 -q -F "$img" >"$WORK/mkfs-default.log" 2>&1; then
        fail mkfs-default "mkfs.ext4: $(tr '\n' ' ' <"$WORK/mkfs-default.log")"; unmount_nbdfuse; return
    fi
    if ! timeout 300 e2fsck -fn "$img" >"$WORK/fsck-default.log" 2>&1; then
        fail mkfs-default "e2fsck: $(tail -5 "$WORK/fsck-default.log")"; unmount_nbdfuse; return
    fi
    unmount_nbdfuse
    ok mkfs-default "mkfs.ext4 defaults ($(grep -oE '[0-9]+/[0-9]+ blocks' "$WORK/fsck-default.log")), e2fsck -fn clean, default serve options"
}

# wait_mounted DIR PID: DIR becomes a mount point while PID lives (10 s).
wait_mounted() {
    for _ in $(seq 100); do
        mountpoint -q "$1" && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

fs_check() {
    local name=${1:-filesystem} why=""
    if [ ! -c /dev/fuse ]; then why="no /dev/fuse"
    elif ! command -v fuse2fs >/dev/null || ! command -v postmark >/dev/null || ! command -v fusermount3 >/dev/null; then
        why="fuse2fs, postmark or fusermount3 missing"
    fi
    if [ -n "$why" ]; then skip "$name" "$why"; return; fi
    FS_MNT=$WORK/fs
    mkdir -p "$FS_MNT"
    if ! mount_nbdfuse; then
        skip "$name" "FUSE mount refused in this sandbox: $(tr '\n' ' ' <"$WORK/nbdfuse.log")"
        FS_MNT=""
        return
    fi
    local img=$FUSE_MNT/nbd
    if ! mkfs.ext4 -q -F -b 4096 "$img" >"$WORK/mkfs.log" 2>&1; then fail "$name" "mkfs.ext4: $(cat "$WORK/mkfs.log")"; return; fi
    # fuse2fs runs in the foreground (-f) in the background, so the check
    # can wait for it to finish writing after an unmount, before e2fsck.
    fuse2fs "$img" "$FS_MNT" -o fakeroot -f >"$WORK/fuse2fs.log" 2>&1 &
    local fs_pid=$!
    if ! wait_mounted "$FS_MNT" "$fs_pid"; then
        fail "$name" "fuse2fs mount: $(cat "$WORK/fuse2fs.log")"; return
    fi
    mkdir -p "$FS_MNT/keep" "$FS_MNT/pm"
    for i in $(seq 20); do head -c $((i * 37 * 1024)) /dev/urandom >"$FS_MNT/keep/f$i"; done
    (cd "$FS_MNT/keep" && sha256sum f* >"$WORK/keep.sha")
    if ! printf 'set location %s\nset number 500\nset transactions 2000\nrun\nquit\n' "$FS_MNT/pm" \
        | timeout 180 postmark >"$WORK/postmark.log" 2>&1; then
        fail "$name" "postmark: $(tail -5 "$WORK/postmark.log")"; return
    fi
    fusermount3 -u "$FS_MNT" || { fail "$name" "unmount"; return; }
    wait "$fs_pid"
    if ! e2fsck -fn "$img" >"$WORK/fsck.log" 2>&1; then fail "$name" "e2fsck: $(tail -5 "$WORK/fsck.log")"; return; fi
    fuse2fs "$img" "$FS_MNT" -o fakeroot -f >>"$WORK/fuse2fs.log" 2>&1 &
    fs_pid=$!
    wait_mounted "$FS_MNT" "$fs_pid" || { fail "$name" "remount: $(cat "$WORK/fuse2fs.log")"; return; }
    if ! (cd "$FS_MNT/keep" && sha256sum -c --quiet "$WORK/keep.sha") >"$WORK/sha.log" 2>&1; then
        fail "$name" "checksums after remount: $(cat "$WORK/sha.log")"; return
    fi
    fusermount3 -u "$FS_MNT"
    wait "$fs_pid"
    FS_MNT=""
    # fuse2fs exits (closing the image) shortly after its unmount.
    unmount_nbdfuse
    ok "$name" "mkfs.ext4, postmark 2000 transactions at $(grep -oE 'transactions \([0-9]+ per second' "$WORK/postmark.log" | grep -oE '[0-9]+' | head -1)/s, e2fsck clean, checksums equal"
}

# --- clean stop and the recorded trace ----------------------------------------
if stop_server && grep -q 'closed clean' "$WORK/serve.log"; then
    ok clean-stop "$(grep -o '[0-9]* requests, [0-9]* errors' "$WORK/serve.log")"
else
    fail clean-stop "$(tail -5 "$WORK/serve.log")"
fi
recorded=$(grep -o 'recorded [0-9]*' "$WORK/serve.log" | grep -o '[0-9]*')
stats=$("$MOSAIC" trace stats "$WORK/served.csv" 2>&1)
counted=$(awk '/^requests/ {print $2}' <<<"$stats")
if [ -n "$recorded" ] && [ "$recorded" -gt 1000 ] && [ "$counted" = "$recorded" ] && grep -q '(msr)' <<<"$stats" \
    && "$MOSAIC" replay --trace "$WORK/served.csv" --format auto --layout raid5 --drives 5 \
        --device ssd:generic-sata --stripe-unit 64K >"$WORK/replay.out" 2>&1; then
    ok record-replay "$counted requests recorded, counted and replayed"
else
    fail record-replay "recorded=$recorded counted=$counted $(tail -3 "$WORK/replay.out" 2>/dev/null)"
fi
if "$MOSAIC" scrub -a "$ARR" >"$WORK/scrub.log" 2>&1; then
    ok scrub-after-clients
else
    fail scrub-after-clients "$(tail -3 "$WORK/scrub.log")"
fi

# The filesystems run on a server of their own with default options: it
# advertises a 512-byte minimum block (libnbd under nbdfuse refuses requests
# smaller than the advertised minimum, and ext4 writes 1 KiB pieces) and
# read-modify-writes what is smaller than the array's block.
if start_server "$ARR" "$WORK/fs-serve.log"; then
    mkfs_default_check
    fs_check
    stop_server >/dev/null || fail filesystem-server-stop "$(tail -3 "$WORK/fs-serve.log")"
else
    fail filesystem "server did not start"
fi

busy_check

# --- unix socket and read-only ------------------------------------------------
printf '\x77%.0s' $(seq 4096) >"$WORK/x77.bin"
"$MOSAIC" write -a "$ARR" --offset 0 --input "$WORK/x77.bin" >/dev/null
"$MOSAIC" serve -a "$ARR" --socket "$WORK/nbd.sock" --read-only 2>"$WORK/unix.log" &
SERVER_PID=$!
for _ in $(seq 100); do [ -S "$WORK/nbd.sock" ] && break; sleep 0.1; done
if out=$(timeout 30 qemu-io -f raw -r "nbd+unix:///mosaic?socket=$WORK/nbd.sock" -c 'read -P 0x77 0 4k' 2>&1) \
    && ! grep -qiE 'fail|error' <<<"$out" \
    && timeout 30 nbdinfo "nbd+unix:///mosaic?socket=$WORK/nbd.sock" | grep -q 'is_read_only: true' \
    && ! timeout 30 qemu-io -f raw "nbd+unix:///mosaic?socket=$WORK/nbd.sock" -c 'write 0 4k' 2>/dev/null | grep -q '^wrote'; then
    ok unix-socket-read-only
else
    fail unix-socket-read-only "$out"
fi
stop_server >/dev/null

# --- extended headers: qemu asks for them; 64-bit lengths --------------------
# qemu-io's session on the main server negotiated them; on an 8 GiB raid0
# (sparse members) qemu-img map asks BLOCK_STATUS for the whole export in
# one request, longer than a 32-bit length holds, and gets 64-bit
# descriptors (reply type 6); the map covers the export.
ext_check() {
    local big=$WORK/big out size total
    if ! grep -q 'transmission (extended headers)' "$WORK/serve.log"; then
        fail extended-headers "qemu-io's sessions did not negotiate extended headers: $(grep -m3 transmission "$WORK/serve.log")"
        return
    fi
    "$MOSAIC" create -a "$big" --level raid0 --members 4 --member-size 2G --assume-clean >/dev/null || { fail extended-headers "create"; return; }
    start_server "$big" "$WORK/big-serve.log" || { fail extended-headers "server did not start"; return; }
    out=$(timeout 60 qemu-io -f raw "$URI" -c 'write -P 0x44 6G 64k' -c 'read -P 0x44 6G 64k' 2>&1)
    if grep -qiE 'fail|error|mismatch' <<<"$out"; then
        fail extended-headers "qemu-io past 4 GiB: $out"; stop_server >/dev/null; return
    fi
    out=$(timeout 60 qemu-img --trace 'nbd_send_request' --trace 'nbd_receive_reply_chunk_header' map -f raw --output=json "$URI" 2>&1)
    stop_server >/dev/null
    size=$(grep -o '([0-9]* bytes)' "$WORK/big-serve.log" | head -1 | grep -o '[0-9]*')
    total=$(grep -o '"length": [0-9]*' <<<"$out" | awk '{ t += $2 } END { printf "%.0f\n", t }')
    if grep -qE 'len = [0-9]{10,}, .*type = 7 \(block status\)' <<<"$out" \
        && awk '/len = [0-9]+,.*block status/ { gsub(/[^0-9]/, " ", $0); split($0, f); if (f[2] > 4294967295) n++ } END { exit n ? 0 : 1 }' <<<"$out" \
        && grep -q 'type = 6 (block status (64-bit))' <<<"$out" \
        && grep -q 'transmission (extended headers)' "$WORK/big-serve.log" \
        && [ -n "$size" ] && [ "$size" -gt 4294967296 ] && [ "$total" = "$size" ]; then
        ok extended-headers "qemu-io and qemu-img negotiated them; one BLOCK_STATUS of $(grep -o 'len = [0-9]*' <<<"$out" | head -1 | grep -o '[0-9]*') bytes, 64-bit descriptors, map of $total bytes"
    else
        fail extended-headers "$(grep -m4 -E 'block status|transmission' <<<"$out$(cat "$WORK/big-serve.log")") total=$total size=$size"
    fi
    rm -rf "$big"
}
ext_check

# --- serve --demo: creates ./mosaic-data once, reuses it ----------------------
demo_check() {
    local d=$WORK/demo pid uri out
    mkdir -p "$d"
    for step in write read; do
        (cd "$d" && exec "$MOSAIC" serve --demo --listen 127.0.0.1:0 2>"$d/$step.log") &
        pid=$!
        uri=""
        for _ in $(seq 300); do
            uri=$(grep -o 'nbd://[^ ]*' "$d/$step.log" 2>/dev/null | head -1)
            [ -n "$uri" ] && break
            sleep 0.1
        done
        if [ "$step" = write ]; then
            out=$(timeout 30 qemu-io -f raw "$uri" -c 'write -P 0x42 1M 1M' 2>&1)
        else
            out=$(timeout 30 qemu-io -f raw "$uri" -c 'read -P 0x42 1M 1M' 2>&1)
        fi
        kill -INT "$pid"
        wait "$pid"
        if [ $? -ne 0 ] || grep -qiE 'error|fail' <<<"$out"; then
            fail serve-demo "$step: $out $(tail -3 "$d/$step.log")"; return
        fi
    done
    if grep -q 'created a raid5 demo array' "$d/write.log" && grep -q 'reusing the demo array' "$d/read.log" \
        && grep -q 'closed clean' "$d/read.log"; then
        ok serve-demo "created ./mosaic-data, reused it, data kept, closed clean"
    else
        fail serve-demo "$(cat "$d/write.log" "$d/read.log" | grep -v conn)"
    fi
    rm -rf "$d"
}
demo_check

# --- a DVS array over NBD: fio verify, rewrites make garbage, idle GC ---------
dvs_check() {
    local d=$WORK/dvs
    "$MOSAIC" create -a "$d" --level dvs --members 5 --member-size 64M --zoned --stripe-unit 64K --zone-size 4M >/dev/null 2>&1 \
        || { fail dvs-serve "create failed"; return; }
    start_server "$d" "$WORK/dvs.log" || { fail dvs-serve "server did not start"; return; }
    # base:allocation: a fresh DVS array is holes but for what was written,
    # and nbdcopy copies it out sparse with the written bytes in place.
    local out map alloc
    if out=$(timeout 60 qemu-io -f raw "$URI" -c 'write -P 0x5a 1M 256k' 2>&1) \
        && map=$(timeout 30 nbdinfo --map "$URI" 2>&1) \
        && grep -qE '^ +0 +1048576 +3 +hole,zero$' <<<"$map" && grep -qE '^ +1048576 +262144 +0 +data$' <<<"$map" \
        && timeout 60 nbdcopy "$URI" "$WORK/dvs-copy.img" 2>&1 \
        && alloc=$(du -k "$WORK/dvs-copy.img" | cut -f1) && [ "$alloc" -lt 4096 ] \
        && cmp -s <(tail -c +1048577 "$WORK/dvs-copy.img" | head -c 262144) <(head -c 262144 /dev/zero | tr '\0' '\132'); then
        ok dvs-block-status "nbdinfo --map: holes around 256 KiB of data; nbdcopy out: ${alloc} KiB allocated, bytes equal"
    else
        fail dvs-block-status "$out ${map:-} alloc=${alloc:-?}"
    fi
    rm -f "$WORK/dvs-copy.img"
    # Rewrite the same 16 MiB three times (garbage for GC), then verify it.
    if ! out=$(cd "$WORK" && $FIO --name=dvs --ioengine=nbd --uri="$URI" --rw=randwrite --bs=64k --iodepth=8 --size=16M \
            --loops=3 --verify=crc32c --do_verify=1 2>&1); then
        fail dvs-serve "fio: $(tail -3 <<<"$out")"; stop_server >/dev/null; return
    fi
    sleep 2  # idle: background GC runs in steps
    stop_server >/dev/null
    local gc
    gc=$(grep -o '[0-9]* background steps' "$WORK/dvs.log" | grep -o '^[0-9]*')
    if [ "${gc:-0}" -gt 0 ] && grep -q 'closed clean' "$WORK/dvs.log"; then
        ok dvs-serve "fio crc32c verify over 3 rewrites, $gc background GC steps while idle"
    else
        fail dvs-serve "expected idle GC steps: $(grep -E 'stopping|error' "$WORK/dvs.log" | head -3)"
    fi
}
dvs_check

# --- the small-write caches in front of an array over NBD --------------------
cache_check() {
    local d=$WORK/cached pol out bad=""
    "$MOSAIC" create -a "$d" --level raid5 --members 5 --member-size 32M --stripe-unit 4K >/dev/null 2>&1 \
        || { fail cache-serve "create failed"; return; }
    for pol in fpc ppc+data; do
        start_server "$d" "$WORK/cache.log" --cache "$pol" --cache-size 1M || { bad="$pol: server did not start"; break; }
        if ! out=$(cd "$WORK" && $FIO --name=cache --ioengine=nbd --uri="$URI" --rw=randwrite --bs=4k --iodepth=16 --size=8M \
                --number_ios=6000 --verify=crc32c --do_verify=1 2>&1); then
            bad="$pol: fio: $(tail -3 <<<"$out")"; stop_server >/dev/null; break
        fi
        stop_server >/dev/null
        "$MOSAIC" scrub -a "$d" >"$WORK/cache-scrub.log" 2>&1 || { bad="$pol: scrub after close: $(tail -2 "$WORK/cache-scrub.log")"; break; }
    done
    if [ -z "$bad" ]; then ok cache-serve "fpc and ppc+data write-back caches: fio crc32c verify, scrub clean after close"; else fail cache-serve "$bad"; fi
}
cache_check

# --- a hybrid tier array: fio verify past the fast tier, ext4 + postmark -------
tier_check() {
    local d=$WORK/tier
    "$MOSAIC" create -a "$d" --level tier --fast raid1:2 --slow raid5:5 --fast-size 24M --slow-size 64M --stripe-unit 64K >/dev/null 2>"$WORK/tier-create.log" \
        || { fail tier-serve "create failed: $(tail -3 "$WORK/tier-create.log")"; return; }
    start_server "$d" "$WORK/tier.log" || { fail tier-serve "server did not start"; return; }
    # 64 MiB of random writes through a fast tier of about 16 MiB: demotion
    # runs while fio writes, and its verify reads back from both tiers.
    local out
    if ! out=$(cd "$WORK" && $FIO --name=tier --ioengine=nbd --uri="$URI" --rw=randwrite --bsrange=4k-64k --iodepth=8 --size=64M \
        --verify=crc32c --do_verify=1 2>&1); then
        fail tier-serve "fio: $(tail -3 <<<"$out")"; stop_server >/dev/null; return
    fi
    fs_check tier-filesystem
    stop_server >/dev/null
    local slow
    # Blocks on the slow tier, as the map says: demotion moved them there.
    slow=$("$MOSAIC" info -a "$d" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["stats"]["blocks_slow"])' 2>/dev/null)
    if [ "${slow:-0}" -gt 0 ] && grep -q 'closed clean' "$WORK/tier.log" && "$MOSAIC" scrub -a "$d" >"$WORK/tier-scrub.log" 2>&1; then
        ok tier-serve "fio crc32c verify of 64 MiB through a 16 MiB fast tier, $((slow * 4 >> 10)) MiB on the slow tier, scrub clean"
    else
        fail tier-serve "demoted=${slow:-?} $(tail -3 "$WORK/tier.log") $(tail -2 "$WORK/tier-scrub.log")"
    fi
    "$MOSAIC" create -a "$WORK/tier-crash" --level tier --fast raid1:2 --slow raid5:5 --fast-size 16M --slow-size 64M --stripe-unit 16K >/dev/null 2>&1 \
        || { fail tier-crash-loop "create failed"; return; }
    crash_loop tier-crash-loop "$WORK/tier-crash" "fast tier full: demotion in the foreground" "${NBD_TIER_CRASH_ITERS:-8}"
}

# --- crash loop -----------------------------------------------------------------
# crash_loop NAME DIR [NOTE] [ITERS]: kill -9 the server of the array in DIR
# while fio writes, ITERS (default CRASH_ITERS) times; flushed data must
# survive and scrub be clean.
crash_loop() {
local name=$1 CR=$2 iters=${4:-$CRASH_ITERS}
local crash_bad="" scrub_bad=0 dirty=0 prev="" i pat region out fio_pid wchar checks
for i in $(seq "$iters"); do
    pat=$(printf '0x%02x' $(((i * 37) % 255 + 1)))
    region=$(((i % 8) * 1024))  # KiB: 8 regions of 512 KiB in the first 8 MiB
    if ! start_server "$CR" "$WORK/crash.log"; then crash_bad="iteration $i: server did not start: $(tail -3 "$WORK/crash.log")"; break; fi
    # Known content, flushed before the crash.
    if ! out=$(timeout 30 qemu-io -f raw "$URI" -c "write -P $pat ${region}k 512k" -c flush 2>&1) || grep -qi error <<<"$out"; then
        crash_bad="iteration $i: qemu-io write: $out; server log: $(tail -3 "$WORK/crash.log")"; break
    fi
    # Writes in flight (beyond the first 8 MiB) when the server dies.
    (cd "$WORK" && exec $FIO --name=crash --ioengine=nbd --uri="$URI" --rw=randwrite --bs=4k-64k --iodepth=16 --offset=8M \
        --size=100M --verify=crc32c --time_based --runtime=10 >/dev/null 2>&1) &
    fio_pid=$!
    sleep "$(awk -v s="$RANDOM" 'BEGIN { srand(s); printf "%.2f", 0.5 + 1.5 * rand() }')"
    # Bytes the server had written (members, journal) when it died.
    wchar=$(awk '/^wchar/ { print $2 }' "/proc/$SERVER_PID/io" 2>/dev/null)
    [ "${wchar:-0}" -gt $((8 << 20)) ] && dirty=$((dirty + 1))
    kill -9 "$SERVER_PID"
    wait "$SERVER_PID" 2>/dev/null
    SERVER_PID=""
    wait "$fio_pid" 2>/dev/null
    if ! start_server "$CR" "$WORK/crash.log"; then crash_bad="iteration $i: restart failed: $(cat "$WORK/crash.log")"; break; fi
    checks=(-c "read -P $pat ${region}k 512k")
    [ -n "$prev" ] && checks+=(-c "read -P ${prev% *} ${prev#* }k 512k")
    if ! out=$(timeout 30 qemu-io -f raw -r "$URI" "${checks[@]}" 2>&1) || grep -qiE 'error|fail|mismatch' <<<"$out"; then
        crash_bad="iteration $i: flushed data lost: $out; server log: $(tail -3 "$WORK/crash.log")"; stop_server >/dev/null; break
    fi
    prev="$pat $region"
    stop_server >/dev/null
    if ! "$MOSAIC" scrub -a "$CR" >"$WORK/crash-scrub.log" 2>&1; then
        scrub_bad=$((scrub_bad + 1))
        echo "nbd-clients: $name iteration $i: scrub: $(grep -iE 'mismatch|stripe' "$WORK/crash-scrub.log" | head -2 | tr '\n' ' ')"
        "$MOSAIC" scrub -a "$CR" --repair >/dev/null 2>&1
    fi
done
if [ -z "$crash_bad" ]; then
    ok "$name" "$iters kill -9 cycles ($dirty killed after writing > 8 MiB), flushed data intact${3:+, $3}"
else
    fail "$name" "$crash_bad"
fi
if [ -z "$crash_bad" ] && [ "$scrub_bad" -eq 0 ]; then
    ok "$name-scrub" "scrub exit 0 after every crash"
else
    fail "$name-scrub" "scrub failed after $scrub_bad of $iters crashes${crash_bad:+ (crash loop stopped early)}"
fi
}

# NBD_CRASH_CREATE_ARGS=--no-journal shows the write hole without the journal.
"$MOSAIC" create -a "$WORK/crash" --level raid5 --members 5 --member-size 32M --stripe-unit 16K ${NBD_CRASH_CREATE_ARGS:-} >/dev/null 2>&1
crash_loop crash-loop "$WORK/crash"
tier_check

echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
