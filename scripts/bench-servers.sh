# Sourced by the NBD benchmarks (bench-nbd.sh, bench-tls.sh): the mosaic
# binaries (built unless BENCH_MOSAIC / BENCH_SERVE_FILE name others, for
# a before/after comparison), a scratch directory in /dev/shm, and the
# servers started there (their pids in PID, by name) stopped on exit.
#   bench_setup NAME TOOL...   checks the tools, sets MOSAIC, SERVE_FILE, SHM
bench_setup() {
    local name=$1 t
    shift
    for t in "$@"; do
        command -v "$t" >/dev/null 2>&1 || { echo "$name: missing $t (apt-get install $t)"; exit 1; }
    done
    # Only what is not given is built.
    [ -n "${BENCH_MOSAIC:-}" ] || cargo build --release -p mosaic-cli >/dev/null 2>&1
    [ -n "${BENCH_SERVE_FILE:-}" ] || cargo build --release -p mosaic-nbd --example serve_file >/dev/null 2>&1
    MOSAIC=${BENCH_MOSAIC:-$ROOT/target/release/mosaic}
    SERVE_FILE=${BENCH_SERVE_FILE:-$ROOT/target/release/examples/serve_file}
    SHM=$(mktemp -d "/dev/shm/$name.XXXXXX")
    declare -gA PID
    trap bench_cleanup EXIT
}

bench_cleanup() {
    local s
    for s in "${!PID[@]}"; do
        kill -INT "${PID[$s]}" 2>/dev/null && wait "${PID[$s]}" 2>/dev/null
    done
    rm -rf "$SHM"
}
