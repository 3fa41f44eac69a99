#!/usr/bin/env bash
# Run every test of mosaic. Installs what the tests need from Debian's
# packages when it is missing, so it works on a fresh machine and in CI.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
dpkg -s libisal-dev >/dev/null 2>&1 || need+=(libisal-dev)
# libnbd, the NBD client library behind remote members (nbd:// URIs).
dpkg -s libnbd-dev >/dev/null 2>&1 || need+=(libnbd-dev)
# libzstd for .zst traces: linked from Debian rather than compiled (below).
dpkg -s libzstd-dev >/dev/null 2>&1 || need+=(libzstd-dev)
# libssl for TLS with pre-shared keys (`serve --tls-psk`; rustls has none).
dpkg -s libssl-dev >/dev/null 2>&1 || need+=(libssl-dev)
# Real NBD clients for scripts/nbd-clients.sh: fio (nbd engine), nbdinfo /
# nbdcopy / nbdfuse (libnbd-bin), qemu-io / qemu-nbd (qemu-utils), ext4 tools,
# fuse2fs + fusermount3 (fuse3), postmark.  rsvg-convert (librsvg2-bin) for
# the test that renders every plot to PNG and looks at its pixels.  nbdkit
# (file plugin, delay filter) serves remote members in tests and is the
# reference server in scripts/bench-nbd.sh.
for p in fio libnbd-bin qemu-utils e2fsprogs fuse2fs fuse3 postmark librsvg2-bin nbdkit; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if ((${#need[@]})); then
    echo "test.sh: installing ${need[*]}"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

export CARGO_TERM_COLOR=never
# One-shot build: incremental state would only use disk (see Cargo.toml).
export CARGO_INCREMENTAL=0
# zstd-sys links the system libzstd instead of compiling its own copy.
export ZSTD_SYS_USE_PKG_CONFIG=1
cargo build --workspace --all-targets
# Real file-system traces (postmark on ext2 and ext4, IOzone-like fio),
# recorded through `mosaic serve --record`; the partial-parity cache tests
# replay them.  Kept in target/traces between runs.  They are recorded while
# the real NBD clients run against `mosaic serve` (both wait on FUSE and
# socket round trips much of the time: 2m54s together on one 2-core host,
# against 2m43s + 2m14s one after the other), before the tests that replay
# them.  The clients end with "N passed, M failed".
export MOSAIC_TRACES=$PWD/target/traces
./scripts/record-traces.sh "$MOSAIC_TRACES" >target/record-traces-output.txt 2>&1 &
record_pid=$!
nbd_rc=0
./scripts/nbd-clients.sh 2>&1 | tee target/nbd-clients-output.txt || nbd_rc=$?
record_rc=0
wait "$record_pid" || record_rc=$?
cat target/record-traces-output.txt
((record_rc == 0)) || echo "test.sh: record-traces.sh failed; the tests that replay its traces will fail"

test_rc=0
cargo test --workspace --no-fail-fast 2>&1 | tee target/test-output.txt || test_rc=$?

# The main job must run end to end on its built-in default.
./target/debug/mosaic demo --member-size 16M >/dev/null
echo "test.sh: mosaic demo ok"

# One summary line that CI reads, failures or not: totals over every test
# binary and the NBD client checks.
awk 'FILENAME ~ /test-output/ && /^test result:/ { p += $4; f += $6; i += $8 }
     FILENAME ~ /nbd-clients-output/ && /^[0-9]+ passed, [0-9]+ failed$/ { np = $1; nf = $3 }
     END { printf "%d passed, %d failed, %d skipped\n", p + np, f + nf, i }' \
    target/test-output.txt target/nbd-clients-output.txt
((test_rc == 0)) || exit "$test_rc"
exit "$nbd_rc"
