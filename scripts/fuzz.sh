#!/usr/bin/env bash
# Coverage-guided fuzzing of every target in fuzz/ (libFuzzer through
# cargo-fuzz), each seeded with the valid encodings of
# crates/mosaic-fuzzing (`seed_corpora`): a fuzzer starting from nothing
# rarely gets a checksum right.
#
#   ./scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default 60 s, every target)
#
# The corpora grow in fuzz/corpus/TARGET and crashes land in
# fuzz/artifacts/TARGET (both ignored by git).  Exits 1 when a target
# crashed, naming the input.  The toolchain here is stable, so
# RUSTC_BOOTSTRAP=1 stands in for nightly; cargo-fuzz is installed from
# crates.io when missing.  Not part of scripts/test.sh (it is a search,
# not a test; the bodies' own tests run there).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECS=${1:-60}
shift || true
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
    TARGETS=(superblock journal dvs_meta dvs_paths zoned_header block_map mapped_policies request handshake trace bitmap psk_keys)
fi
export CARGO_INCREMENTAL=0 ZSTD_SYS_USE_PKG_CONFIG=1
command -v cargo-fuzz >/dev/null 2>&1 || cargo install --locked cargo-fuzz
# The workspace's own build (RUSTC_BOOTSTRAP would make it compile anew).
MOSAIC_FUZZ_CORPUS="$ROOT/fuzz/corpus" cargo test -q -p mosaic-fuzzing -- --ignored seed_corpora >/dev/null
(cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz build -O)
BIN=$ROOT/fuzz/target/x86_64-unknown-linux-gnu/release
crashed=0
for t in "${TARGETS[@]}"; do
    mkdir -p "fuzz/artifacts/$t"
    log=$(mktemp)
    if "$BIN/$t" "fuzz/corpus/$t" -max_total_time="$SECS" -rss_limit_mb=4096 -timeout=20 \
        -artifact_prefix="fuzz/artifacts/$t/" -print_final_stats=1 >"$log" 2>&1; then
        runs=$(grep -a 'stat::number_of_executed_units' "$log" | awk '{print $2}')
        cov=$(grep -a -o 'cov: [0-9]*' "$log" | tail -1)
        echo "fuzz: $t: ${runs:-?} runs in ${SECS} s, ${cov:-cov: ?} edges, no crash"
    else
        crashed=1
        echo "fuzz: $t CRASHED:"
        grep -a -E 'panicked|ERROR|SUMMARY|Test unit written' "$log" | head -8
    fi
    rm -f "$log"
done
exit $crashed
