//! Running the `mosaic` binary from CLI tests.

#![allow(dead_code)]

pub mod fio;
pub mod serve;

use std::process::{Command, Output};

pub fn mosaic(args: &[&str]) -> Output {
    // Hermetic: no default trace found beside the checkout.
    Command::new(env!("CARGO_BIN_EXE_mosaic")).args(args).env("MOSAIC_DEFAULT_TRACE", "").output().expect("run mosaic")
}

/// Run, expect success, return stdout.
pub fn ok(args: &[&str]) -> String {
    let o = mosaic(args);
    assert!(o.status.success(), "mosaic {args:?} failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Run, expect failure with one clear error line and no panic, return stderr.
pub fn fails(args: &[&str]) -> String {
    let o = mosaic(args);
    assert!(!o.status.success(), "mosaic {args:?} should fail; stdout: {}", String::from_utf8_lossy(&o.stdout));
    let e = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(e.starts_with("error: "), "no clear error line: {e}");
    assert!(!e.contains("panicked"), "panic: {e}");
    e
}

/// `n` bytes of a deterministic pattern, different for each `seed`.
pub fn pattern(n: usize, seed: u32) -> Vec<u8> {
    (0..n).map(|i| ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 11) as u8).collect()
}

/// A finished command's stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Run qemu-io's commands `cmds` against the NBD export `uri`; each read
/// with `-P` checks its pattern.  Fails the test when one fails.
pub fn qemu_io(uri: &str, cmds: &[&str]) {
    let mut args = vec!["-f", "raw", uri];
    for c in cmds {
        args.extend(["-c", c]);
    }
    let o = Command::new("qemu-io").args(&args).output().expect("run qemu-io");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && !out.contains("Pattern verification failed"), "qemu-io {cmds:?}: {out}{}", String::from_utf8_lossy(&o.stderr));
}

/// Parse `--json` output, naming it when it is not JSON.
pub fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("bad json ({e}): {s}"))
}

/// A seeded MSR-format test trace (see [`msr_trace`]).
pub struct TraceSpec<'a> {
    pub seed: u64,
    pub requests: usize,
    /// Offsets lie within this many bytes (so a replay never wraps).
    pub span: u64,
    pub write_pct: u64,
    /// Sizes drawn from (odd ones are widened to blocks by the replay).
    pub sizes: &'a [u64],
    /// Half the requests fall in the first this-many bytes (cache hits).
    pub hot: Option<u64>,
}

/// Write the trace `spec` describes to `path`: mixed reads and writes,
/// xorshift-seeded, timestamps 1–51 µs apart.
pub fn msr_trace(path: &std::path::Path, spec: &TraceSpec) {
    let mut x = spec.seed;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut t = 128_166_372_000_000_000u64;
    let mut out = String::new();
    for _ in 0..spec.requests {
        t += 1000 + next() % 50_000;
        let op = if next() % 100 < spec.write_pct { "Write" } else { "Read" };
        let size = spec.sizes[(next() % spec.sizes.len() as u64) as usize];
        let off = match spec.hot {
            Some(hot) if next() % 2 == 0 => next() % (hot - size),
            _ => next() % (spec.span - size),
        };
        out.push_str(&format!("{t},host,0,{op},{off},{size},100\n"));
    }
    std::fs::write(path, out).unwrap();
}

/// Per-device (reads, writes, read bytes, write bytes) of a replay report.
pub fn device_counts(r: &serde_json::Value) -> Vec<[u64; 4]> {
    r["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| ["reads", "writes", "read_bytes", "write_bytes"].map(|k| d[k].as_u64().unwrap()))
        .collect()
}
