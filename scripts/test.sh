#!/usr/bin/env bash
# Run every test of mosaic. Installs what the tests need from Debian's
# packages when it is missing, so it works on a fresh machine and in CI.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
dpkg -s libisal-dev >/dev/null 2>&1 || need+=(libisal-dev)
if ((${#need[@]})); then
    echo "test.sh: installing ${need[*]}"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

export CARGO_TERM_COLOR=never
cargo build --workspace --all-targets
cargo test --workspace 2>&1 | tee target/test-output.txt

# The main job must run end to end on its built-in default.
./target/debug/mosaic demo --member-size 16M >/dev/null
echo "test.sh: mosaic demo ok"

# One summary line that CI reads: totals over every test binary.
awk '/^test result:/ { p += $4; f += $6; i += $8 } END { printf "%d passed, %d failed, %d skipped\n", p, f, i }' target/test-output.txt
